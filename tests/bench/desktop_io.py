"""Desktop input and output through the X11 controller, on real sandboxed local desktops.

Each desktop is started by the local provider, as the pool starts them (bubblewrap, its own
user, its X server reached through its socket), and measured through the controller the
platform uses. The screen is busy on purpose: a wallpaper of gradients, panels and coloured text
(``tests.support.desktops.busy_wallpaper``) under terminals full of coloured file listings.

``click_ms``: one ``click`` action executed and synced with the server, median.
``click_speedup_vs_xdotool``: ``xdotool click 1`` (the tool most agent environments shell out
to; it holds the button for 100 ms) median time in the same run, divided by ``click_ms``.
``screenshot_ms_800p``, ``screenshot_ms_1080p``: grab with the cursor + lossless PNG, median.
``settle_static_ms``: settle detection right after a click on a screen that does not change,
median; ``settle_speedup_vs_fixed_2s`` is 2000 ms divided by it.
"""

import secrets
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.support.desktops import XDesktop, busy_wallpaper
from vm_pool.actions import Action, ActionType, Point, ScreenSize
from vm_pool.x11.controller import X11Controller

DISPLAYS = (598, 599)  # apart from the pool benchmark's
CLICKS = 500
XDOTOOL_CLICKS = 30
SCREENSHOTS = 60
SETTLES = 15
WARMUP = 5

GOALS = {
    "click_ms": "≤ 5",
    "click_speedup_vs_xdotool": "≥ 20",
    "screenshot_ms_800p": "≤ 25",
    "screenshot_ms_1080p": "≤ 40",
    "settle_static_ms": "≤ 300",
    "settle_speedup_vs_fixed_2s": "≥ 6",
}


def _median_ms(action: Callable[[], object], repetitions: int) -> float:
    for _ in range(WARMUP):
        action()
    times = []
    for _ in range(repetitions):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


@contextmanager
def _sandboxed_desktop(width: int, height: int, display: int) -> Iterator[tuple[XDesktop, Any]]:
    """A sandboxed local desktop, and its control, for the block's duration."""
    from Xlib.display import Display

    from vm_pool.desktop import DesktopSpec
    from vm_pool.providers.local import LocalProvider, desktop_dir

    desktop_id = 900_000 + display
    spec = DesktopSpec(
        desktop_id=desktop_id,
        screen=ScreenSize(width, height),
        agent_key=secrets.token_hex(16),
        display=display,
    )
    provider = LocalProvider()
    endpoint = provider.start(spec)
    connection = None
    try:
        control = provider.control(spec, endpoint)
        connection = Display(endpoint.display)
        home = desktop_dir(desktop_id) / "home"
        # Programs start through the agent, inside the sandbox: the host side has no group there.
        yield XDesktop(connection, spec.screen, home, group=0), control
        control.close()
    finally:
        if connection is not None:
            connection.close()
        provider.stop(replace(spec, instance_id=endpoint.instance_id))


def _make_busy(desktop: XDesktop, control: Any) -> None:
    """The busy wallpaper, and terminals with coloured listings over the left half, started
    inside the desktop's sandbox."""
    desktop.set_wallpaper(busy_wallpaper(desktop.size))
    columns = desktop.size.width // 2 // 7
    rows = desktop.size.height // 2 // 16
    for left, top in ((0, 0), (0, desktop.size.height // 2)):
        argv = [
            "xterm",
            *("-fa", "DejaVu Sans Mono", "-fs", "9", "-bg", "#202830", "-fg", "#d0d0d0"),
            *("-geometry", f"{columns}x{rows}+{left}+{top}"),
            *("-e", "sh", "-c", "ls -l --color=always /usr/bin /usr/lib; sleep 600"),
        ]
        if not control.launch(argv, window_timeout=10).window:
            raise RuntimeError("the benchmark's terminal did not open")


def _measure_actions(desktop: XDesktop, controller: X11Controller) -> dict[str, float]:
    # The right half shows the bare wallpaper: clicks there change nothing on the screen.
    spot = Point(desktop.size.width * 3 // 4, desktop.size.height // 2)
    click = Action(ActionType.CLICK, spot)
    controller.execute(click)
    controller.settle()

    click_ms = _median_ms(lambda: controller.execute(click), CLICKS)
    xdotool_ms = _median_ms(
        lambda: subprocess.run(["xdotool", "click", "1"], env=desktop.env, check=True),
        XDOTOOL_CLICKS,
    )
    settles = []
    for _ in range(SETTLES):
        controller.execute(click)
        started = time.perf_counter()
        result = controller.settle()
        settles.append((time.perf_counter() - started) * 1000)
        if not result.settled:
            raise RuntimeError("the benchmark's screen did not settle")
    settle_ms = statistics.median(settles)
    return {
        "click_ms": click_ms,
        "click_speedup_vs_xdotool": xdotool_ms / click_ms,
        "settle_static_ms": settle_ms,
        "settle_speedup_vs_fixed_2s": 2000 / settle_ms,
    }


def run() -> dict[str, float]:
    from tests.bench import setup_django

    setup_django()
    from django.conf import settings

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tandem-bench-desktop-io-") as tmp:
        settings.TANDEM_DESKTOP_ROOT = Path(tmp)
        with _sandboxed_desktop(1280, 800, DISPLAYS[0]) as (desktop, control):
            _make_busy(desktop, control)
            with X11Controller(desktop.display) as controller:
                controller.settle()
                figures["screenshot_ms_800p"] = _median_ms(controller.screenshot, SCREENSHOTS)
                figures.update(_measure_actions(desktop, controller))
        with _sandboxed_desktop(1920, 1080, DISPLAYS[1]) as (desktop, control):
            _make_busy(desktop, control)
            with X11Controller(desktop.display) as controller:
                controller.settle()
                figures["screenshot_ms_1080p"] = _median_ms(controller.screenshot, SCREENSHOTS)
    return figures
