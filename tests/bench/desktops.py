"""Desktop pool benchmarks on real sandboxed local desktops: start, lease, reset, how many at
once, memory.

``desktop_start_ms``: a new sandboxed desktop from the start call to its first screenshot
(sandbox, Xvfb, window manager, VNC, agent healthy, then one grab through the executor), median
over the desktops of the concurrency run. ``lease_*``: taking a ready desktop from the warm pool
(the row lock and update), many times. ``reset_local_s``: release → the desktop is ready again
(stop, fresh HOME, start), median. ``concurrent_desktops``: desktops started and all answering
their health check at once (capped at ``MAX_DESKTOPS`` so the run stays short).
``desktop_rss_mb``: resident memory of one idle desktop's processes (everything its user runs:
the sandbox, agent, Xvfb, window manager, x11vnc), median.
"""

import statistics
import tempfile
import time
import uuid
from pathlib import Path

LEASES = 300
RESETS = 5
MAX_DESKTOPS = 24

GOALS = {
    "desktop_start_ms": "≤ 1500",
    "lease_p95_ms": "≤ 50",
    "reset_local_s": "≤ 1.5",
    "concurrent_desktops": "≥ 16",
    "desktop_rss_mb": "≤ 150",
}


def _desktop_rss_mb(display: int) -> float:
    """Resident memory of every process of one desktop's user."""
    from tests.support.desktops import desktop_user_processes

    total_kb = 0
    for proc in desktop_user_processes(display):
        try:
            for line in (proc / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total_kb / 1024


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run() -> dict[str, float | int]:
    from tests.bench import fresh_database, setup_django

    setup_django()
    from django.conf import settings

    settings.TANDEM_DISPLAY_RANGE = (560, 599)
    settings.TANDEM_DESKTOP_ROOT = Path(tempfile.mkdtemp(prefix="tandem-bench-desktops-"))
    from backend.accounts.models import User
    from vm_pool import pool
    from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate
    from vm_pool.providers.registry import get_provider

    host = f"bench-{uuid.uuid4().hex[:6]}"
    results: dict[str, float | int] = {}
    with fresh_database():
        template = DesktopTemplate.objects.create(name="bench", width=1280, height=800)
        user = User.objects.create_user("bench-annotator")
        try:
            started, start_ms = [], []
            provider = get_provider("local")
            for _ in range(MAX_DESKTOPS):
                t0 = time.perf_counter()
                desktop = pool.start_desktop(pool.create_desktop(template, host).pk)
                if desktop.status != DesktopStatus.READY:
                    break
                control = provider.control(pool.spec_for(desktop), pool.endpoint_of(desktop))
                control.observe(settle=False)
                start_ms.append((time.perf_counter() - t0) * 1000)
                control.close()
                started.append(desktop)
            results["desktop_start_ms"] = round(statistics.median(start_ms), 1)
            healthy = [d for d in started if provider.health(pool.spec_for(d)).ok]
            results["concurrent_desktops"] = len(healthy)
            time.sleep(1.0)  # let them go idle
            rss = [_desktop_rss_mb(d.display) for d in healthy if d.display is not None]
            results["desktop_rss_mb"] = round(statistics.median(rss), 1)

            lease_ms = []
            for _ in range(LEASES):
                t0 = time.perf_counter()
                leased = pool.lease_desktop(template, user, "bench", 60)
                lease_ms.append((time.perf_counter() - t0) * 1000)
                Desktop.objects.filter(pk=leased.pk).update(
                    status=DesktopStatus.READY, leased_by=None, lease_expires_at=None
                )
            results["lease_p50_ms"] = round(statistics.median(lease_ms), 2)
            results["lease_p95_ms"] = round(_percentile(lease_ms, 0.95), 2)

            reset_s = []
            for _ in range(RESETS):
                leased = pool.lease_desktop(template, user, "bench", 60)
                t0 = time.perf_counter()
                Desktop.objects.filter(pk=leased.pk).update(status=DesktopStatus.RESETTING)
                done = pool.reset_desktop(leased.pk)
                reset_s.append(time.perf_counter() - t0)
                assert done.status == DesktopStatus.READY, done.broken_reason
            results["reset_local_s"] = round(statistics.median(reset_s), 3)
        finally:
            for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
                pool.stop_desktop(desktop.pk)
    return results
