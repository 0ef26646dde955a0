"""What watching idle desktops between an observation and its decision costs.

``DESKTOPS`` real sandboxed local desktops are started, each observed once, and each watched by
the process's screen watch (``vm_pool.screen.watch``) as the live loop watches a step waiting
for its decision, for ``WATCHED_S`` seconds; nothing happens on the desktops but their panel
clocks and carets. The watch thread's CPU time (its ``/proc`` schedstat) over that time is
``watch_cpu_pct_per_desktop``, in percent of one core per watched desktop, with the frames it
grabbed (``watch_grabs_per_desktop_per_s``). The same desktops are then watched the polling way
(no damage reports: a frame of each every ``POLL_S``), measured in the same run as the anchor:
``watch_cpu_pct_per_desktop_polling``.

``idle_watched_desktops``: how many idle desktops can be kept leased and watched at once while
another one steps, its step time unchanged within ``SLOWER_AT_MOST`` (10 %). One desktop steps
the environment's way (a click on an empty spot, then the settled observation), ``STEP_REPEATS``
times, median, first with nothing watched (``idle_watched_step_ms_alone``), then with each
count of ``LADDER`` idle desktops watched by the same watch; the figure is the largest count
whose median step stayed within the bound (``idle_watched_step_ms`` is the step time at it).
"""

import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

DESKTOPS = 8
WATCHED_S = 10.0
DISPLAYS = (2480, 2499)  # no test, demo or other benchmark desktop uses these

IDLE_DISPLAYS = (2500, 2599)  # likewise: one stepping desktop and the ladder's idle ones
LADDER = (16, 32, 64)
STEP_REPEATS = 20
SLOWER_AT_MOST = 1.10

GOALS = {"watch_cpu_pct_per_desktop": "≤ 0.5", "idle_watched_desktops": "≥ 64"}


def _thread_cpu_s(thread: threading.Thread) -> float:
    """A thread's CPU time so far, from the kernel's schedstat (nanoseconds)."""
    stat = Path(f"/proc/self/task/{thread.native_id}/schedstat").read_text()
    return int(stat.split()[0]) / 1e9


def _watching(controls: list[Any], damage: bool = True) -> Any:
    """A screen watch over ``controls``, each observed once first, as the live loop watches a
    step waiting for its decision: by damage reports, or (``damage`` False) by polling frames."""
    from vm_pool.screen import watch as screen_watch

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
    return watcher


def _watched_cpu(controls: list[Any], damage: bool) -> tuple[float, float]:
    """Watch every desktop for ``WATCHED_S``; the watch thread's CPU in percent of one core per
    desktop, and the frames grabbed per desktop per second."""
    from vm_pool.screen.capture import ScreenGrabber

    watcher = _watching(controls, damage)
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


def _step_ms(control: Any) -> float:
    """The median environment step of ``control``: a click on an empty spot, then the settled
    observation."""
    from vm_pool.actions import Action, ActionType, Point

    times = []
    for i in range(STEP_REPEATS):
        started = time.perf_counter()
        control.execute(Action(ActionType.CLICK, Point(1200, 700 + i % 50)))
        control.observe(settle=True)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _idle_watched(template: Any, host: str) -> dict[str, float | int]:
    """``idle_watched_desktops`` (the module docstring)."""
    from tests.bench.step import _start_desktops
    from vm_pool import pool

    desktops = _start_desktops(template, host, 1 + max(LADDER))
    stepper = pool.control_for(desktops[0])
    idle = [pool.control_for(desktop) for desktop in desktops[1:]]
    alone = _step_ms(stepper)
    kept, at_kept = 0, alone
    for count in LADDER:
        watcher = _watching(idle[:count])
        try:
            stepped = _step_ms(stepper)
        finally:
            for key in watcher.watching():
                watcher.stop(key)
        print(f"watch: {count} idle desktops watched, a step {stepped:.0f} ms", flush=True)
        if stepped > alone * SLOWER_AT_MOST:
            break
        kept, at_kept = count, stepped
    return {
        "idle_watched_desktops": kept,
        "idle_watched_step_ms_alone": round(alone, 1),
        "idle_watched_step_ms": round(at_kept, 1),
    }


@contextmanager
def _desktop_session(displays: tuple[int, int], host: str) -> Iterator[Any]:
    """A fresh bench database, displays and desktop folder of their own, and a desktop
    template; every desktop started in the block is stopped after it."""
    from django.test import override_settings

    from tests.bench import fresh_database
    from vm_pool import pool
    from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate

    root = Path(tempfile.mkdtemp(prefix="tandem-bench-watch-"))
    local = override_settings(
        TANDEM_DISPLAY_RANGE=displays, TANDEM_DESKTOP_ROOT=root, TANDEM_HOST=host
    )
    try:
        with local, fresh_database():
            template = DesktopTemplate.objects.create(name="bench-watch", width=1280, height=800)
            try:
                yield template
            finally:
                for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
                    pool.stop_desktop(desktop.pk)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run() -> dict[str, float | int]:
    from tests.bench import setup_django

    setup_django()
    from tests.bench.step import _start_desktops
    from vm_pool import pool

    host = f"bench-watch-idle-{uuid.uuid4().hex[:6]}"
    with _desktop_session(DISPLAYS, host) as template:
        desktops = _start_desktops(template, host, DESKTOPS)
        controls = [pool.control_for(desktop) for desktop in desktops]
        damage_pct, damage_grabs = _watched_cpu(controls, damage=True)
        polling_pct, polling_grabs = _watched_cpu(controls, damage=False)
    with _desktop_session(IDLE_DISPLAYS, host) as template:
        ladder = _idle_watched(template, host)
    figures = {
        "watch_cpu_pct_per_desktop": round(damage_pct, 3),
        "watch_grabs_per_desktop_per_s": round(damage_grabs, 3),
        "watch_cpu_pct_per_desktop_polling": round(polling_pct, 3),
        "watch_grabs_per_desktop_per_s_polling": round(polling_grabs, 3),
        **ladder,
    }
    print(f"watch, {DESKTOPS} idle desktops: {figures}", flush=True)
    return figures
