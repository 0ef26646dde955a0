"""What watching idle desktops between an observation and its decision costs.

``DESKTOPS`` real sandboxed local desktops are started, each observed once, and each watched by
the process's screen watch (``vm_pool.screen.watch``) as the live loop watches a step waiting
for its decision, for ``WATCHED_S`` seconds; nothing happens on the desktops but their panel
clocks and carets. The watch thread's CPU time (its ``/proc`` schedstat) over that time is
``watch_cpu_pct_per_desktop``, in percent of one core per watched desktop, with the frames it
grabbed (``watch_grabs_per_desktop_per_s``). The same desktops are then watched the polling way
(no damage reports: a frame of each every ``POLL_S``), measured in the same run as the anchor:
``watch_cpu_pct_per_desktop_polling``.
"""

import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

DESKTOPS = 8
WATCHED_S = 10.0
DISPLAYS = (2480, 2499)  # no test, demo or other benchmark desktop uses these

GOALS = {"watch_cpu_pct_per_desktop": "≤ 0.5"}


def _thread_cpu_s(thread: threading.Thread) -> float:
    """A thread's CPU time so far, from the kernel's schedstat (nanoseconds)."""
    stat = Path(f"/proc/self/task/{thread.native_id}/schedstat").read_text()
    return int(stat.split()[0]) / 1e9


def _watched_cpu(controls: list[Any], damage: bool) -> tuple[float, float]:
    """Watch every desktop for ``WATCHED_S``; the watch thread's CPU in percent of one core per
    desktop, and the frames grabbed per desktop per second."""
    from vm_pool.screen import watch as screen_watch
    from vm_pool.screen.capture import ScreenGrabber

    watcher = screen_watch.ScreenWatcher()
    for n, control in enumerate(controls):
        observation = control.observe(settle=True)
        reports = control.damage_reports() if damage else None
        watcher.watch(
            screen_watch.Watch(
                ("bench", n), control.grab_frame, observation.frame,
                lambda png, ms: True, lambda: True, reports=reports,
            )
        )  # fmt: skip
    thread = watcher._thread
    if thread is None:
        raise RuntimeError("the watch did not start")
    time.sleep(1.0)  # the first looks after registering are not the idle cost
    cpu, grabs = _thread_cpu_s(thread), ScreenGrabber.grabbed
    time.sleep(WATCHED_S)
    cpu, grabs = _thread_cpu_s(thread) - cpu, ScreenGrabber.grabbed - grabs
    for key in watcher.watching():
        watcher.stop(key)
    per_desktop = len(controls) * WATCHED_S
    return cpu / per_desktop * 100, grabs / per_desktop


def run() -> dict[str, float | int]:
    from tests.bench import fresh_database, setup_django

    setup_django()
    from django.test import override_settings

    from tests.bench.step import _start_desktops
    from vm_pool import pool
    from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate

    host = f"bench-watch-idle-{uuid.uuid4().hex[:6]}"
    desktop_root = Path(tempfile.mkdtemp(prefix="tandem-bench-watch-idle-"))
    local = override_settings(
        TANDEM_DISPLAY_RANGE=DISPLAYS, TANDEM_DESKTOP_ROOT=desktop_root, TANDEM_HOST=host
    )
    try:
        with local, fresh_database():
            template = DesktopTemplate.objects.create(name="bench-watch", width=1280, height=800)
            try:
                desktops = _start_desktops(template, host, DESKTOPS)
                controls = [pool.control_for(desktop) for desktop in desktops]
                damage_pct, damage_grabs = _watched_cpu(controls, damage=True)
                polling_pct, polling_grabs = _watched_cpu(controls, damage=False)
            finally:
                for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
                    pool.stop_desktop(desktop.pk)
    finally:
        shutil.rmtree(desktop_root, ignore_errors=True)
    figures = {
        "watch_cpu_pct_per_desktop": round(damage_pct, 3),
        "watch_grabs_per_desktop_per_s": round(damage_grabs, 3),
        "watch_cpu_pct_per_desktop_polling": round(polling_pct, 3),
        "watch_grabs_per_desktop_per_s_polling": round(polling_grabs, 3),
    }
    print(f"watch, {DESKTOPS} idle desktops: {figures}", flush=True)
    return figures
