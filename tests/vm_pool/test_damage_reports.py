"""The X server's damage reports on a real Xvfb: a drawing the size of a caret is a change but no
program's reaction; a larger one is both."""

from Xlib.display import Display

from tests.support import desktops
from vm_pool.screen.compare import MIN_EXTENT_PX
from vm_pool.screen.damage import DamageReports
from vm_pool.screen.settle import wait_until_quiet

desktop_factory = desktops.desktop_factory
x_desktop = desktops.x_desktop


def test_a_caret_sized_drawing_is_a_change_but_not_a_reaction(x_desktop):
    program = Display(x_desktop.display)
    reports = DamageReports(x_desktop.display)
    try:
        screen = program.screen()
        window = screen.root.create_window(
            50, 50, 300, 200, 0, screen.root_depth,
            override_redirect=True, background_pixel=screen.white_pixel,
        )  # fmt: skip
        window.map()
        program.sync()
        # Whatever the window manager or the new window still draws is over before the test's
        # drawings: the screen stayed unchanged for 300 ms, however busy the machine.
        quiet = wait_until_quiet(reports, lambda: None, window_ms=300, min_ms=0, max_ms=10_000)
        assert quiet.settled
        pen = window.create_gc(foreground=screen.black_pixel)

        def draw(width: int, height: int) -> tuple[float, float]:
            """Draw a rectangle; the reports' (changed_at, drawn_at) once read."""
            window.fill_rectangle(pen, 10, 10, width, height)
            program.sync()
            reports.read(sync=True)
            return reports.changed_at, reports.drawn_at

        before = reports.drawn_at
        changed_at, drawn_at = draw(2, 16)  # a caret: thinner than MIN_EXTENT_PX
        assert changed_at > before and drawn_at == before
        assert reports.take_box() is not None  # the watch still looks at it

        changed_at, drawn_at = draw(MIN_EXTENT_PX * 4, MIN_EXTENT_PX * 4)
        assert drawn_at == changed_at > before
        window.destroy()
        program.sync()
    finally:
        reports.close()
        program.close()
