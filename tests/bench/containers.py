"""Container desktop benchmarks on the real engine (podman's Docker API here), beside the
local figures of ``tests.bench.desktops``.

``container_start_s``: a new container desktop from the create call to its first screenshot,
median over the desktops of the density run. ``container_desktops``: container desktops
started one after another and all answering their health check at once (capped at
``MAX_DESKTOPS``). ``container_rss_mb``: resident memory of one idle container desktop's
processes (everything its uid runs), median. ``container_reset_s``: release → ready again (the
container removed, a new one from the image, a fresh HOME), median. ``container_click_ms`` and
``container_screenshot_ms``: a click and a 1280×800 grab and PNG encode through the container
path (the platform's executor on the container's X socket), medians.
"""

import statistics
import tempfile
import time
import uuid
from pathlib import Path

MAX_DESKTOPS = 16
RESETS = 3
CLICKS = 200
SCREENSHOTS = 30

GOALS = {
    "container_start_s": "≤ 5",
    "container_reset_s": "≤ 5",
    "container_desktops": "≥ 16",
    "container_rss_mb": "≤ 200",
}


def run() -> dict[str, float | int]:
    from tests.bench import fresh_database, setup_django

    setup_django()
    from django.conf import settings

    from tests.bench.desktops import _desktop_rss_mb
    from tests.support.engine import container_engine
    from vm_pool import pool
    from vm_pool.actions import Action, ActionType, Point
    from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate
    from vm_pool.providers.registry import get_provider

    settings.TANDEM_DISPLAY_RANGE = (600, 639)
    root = Path(tempfile.mkdtemp(prefix="tandem-bench-containers-"))
    root.chmod(0o711)
    settings.TANDEM_DESKTOP_ROOT = root
    host = f"bench-{uuid.uuid4().hex[:6]}"
    results: dict[str, float | int] = {}
    with container_engine() as url, fresh_database():
        settings.TANDEM_DOCKER_URL = url
        template = DesktopTemplate.objects.create(
            name="bench-containers", provider="docker", width=1280, height=800
        )
        provider = get_provider("docker")
        try:
            started, start_s = [], []
            for _ in range(MAX_DESKTOPS):
                t0 = time.perf_counter()
                desktop = pool.start_desktop(pool.create_desktop(template, host).pk)
                if desktop.status != DesktopStatus.READY:
                    print(f"containers: stopped at {len(started)}: {desktop.broken_reason}")
                    break
                pool.control_for(desktop).observe(settle=False)
                start_s.append(time.perf_counter() - t0)
                started.append(desktop)
            results["container_start_s"] = round(statistics.median(start_s), 2)
            healthy = [d for d in started if provider.health(pool.spec_for(d)).ok]
            results["container_desktops"] = len(healthy)
            time.sleep(1.0)  # let them go idle
            rss = [_desktop_rss_mb(d.display) for d in healthy if d.display is not None]
            results["container_rss_mb"] = round(statistics.median(rss), 1)

            control = pool.control_for(started[0])
            clicks = []
            for i in range(CLICKS):
                t0 = time.perf_counter()
                control.execute(Action(ActionType.CLICK, Point(1200, 700 + i % 50)))
                clicks.append((time.perf_counter() - t0) * 1000)
            results["container_click_ms"] = round(statistics.median(clicks), 3)
            grabs = []
            for _ in range(SCREENSHOTS):
                t0 = time.perf_counter()
                control.observe(settle=False)
                grabs.append((time.perf_counter() - t0) * 1000)
            results["container_screenshot_ms"] = round(statistics.median(grabs), 1)

            reset_s = []
            for desktop in started[:RESETS]:
                Desktop.objects.filter(pk=desktop.pk).update(status=DesktopStatus.RESETTING)
                t0 = time.perf_counter()
                done = pool.reset_desktop(desktop.pk)
                reset_s.append(time.perf_counter() - t0)
                assert done.status == DesktopStatus.READY, done.broken_reason
            results["container_reset_s"] = round(statistics.median(reset_s), 2)
        finally:
            for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
                pool.forget_control(desktop.pk)
                pool.stop_desktop(desktop.pk)
    return results
