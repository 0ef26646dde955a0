"""The X11 controller on real Xvfb desktops: every action has an effect that is checked in a real
program (xterm, mousepad, xmessage), screenshots have the desktop's size and show the cursor,
and settle detection returns on a static screen and waits out an animation."""

import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageChops
from Xlib import XK, X
from Xlib.display import Display

from tests.support import desktops
from tests.support.desktops import Window, XDesktop
from vm_pool.actions import (
    ACTION_TIMEOUT_S,
    KEY_NAMES,
    MAX_CONTENT_CHARS,
    Action,
    ActionType,
    Direction,
    InvalidAction,
    Point,
)
from vm_pool.screen.capture import Frame
from vm_pool.screen.settle import wait_until_settled
from vm_pool.x11.controller import X11Controller
from vm_pool.x11.xtest import InputTimeout, XTestInput, keysym_for_key

x_desktop = desktops.x_desktop
desktop_factory = desktops.desktop_factory

GREEK = "αβγδεζηθικλμνξοπρστυφχψω"
# More distinct characters than there are keycodes to borrow: keycodes are reused while typing.
CJK = "".join(chr(0x4E00 + 7 * i) for i in range(300))


@pytest.fixture
def controller(x_desktop: XDesktop) -> Iterator[X11Controller]:
    with X11Controller(x_desktop.display) as controller:
        yield controller


def wait_for(read: Callable[[], object], expected: object, timeout: float = 5.0) -> None:
    """Read until ``expected`` comes back; fail with the last value read."""
    deadline = time.monotonic() + timeout
    while (value := read()) != expected:
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout}s: {value!r}, expected {expected!r}")
        time.sleep(0.02)


def file_text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def primary_selection(desktop: XDesktop) -> str | None:
    """The PRIMARY selection's text, None while nothing is selected."""
    try:
        return desktop.run("xclip", "-o", "-selection", "primary")
    except subprocess.CalledProcessError:
        return None


class Terminal:
    """An xterm of ``columns`` x ``rows`` running a shell command, with its character cells."""

    def __init__(self, desktop: XDesktop, command: str, columns: int = 80, rows: int = 10):
        self.process = desktop.launch(
            "xterm", "-geometry", f"{columns}x{rows}", "-e", "sh", "-c", command
        )
        self.window = desktop.wait_for_window("XTerm")
        border = 2  # xterm's internal border
        self.cell_width = (self.window.width - 2 * border) / columns
        self.cell_height = (self.window.height - 2 * border) / rows
        self.origin = Point(self.window.x + border, self.window.y + border)

    def cell(self, column: int, row: int) -> Point:
        """The centre of a character cell, in screen pixels."""
        x = self.origin.x + (column + 0.5) * self.cell_width
        y = self.origin.y + (row + 0.5) * self.cell_height
        return Point(int(x), int(y))


def crop(frame: Frame, window: Window) -> Image.Image:
    return frame.rgb().crop((window.x, window.y, window.x + window.width, window.y + window.height))


def vertical_shift(before: Image.Image, after: Image.Image) -> int | None:
    """How many pixels the content moved down (negative: up) between two images of a box."""
    width, height = before.size
    for dy in range(1, height):
        if (
            before.crop((0, 0, width, height - dy)).tobytes()
            == after.crop((0, dy, width, height)).tobytes()
        ):
            return dy
        if (
            after.crop((0, 0, width, height - dy)).tobytes()
            == before.crop((0, dy, width, height)).tobytes()
        ):
            return -dy
    return None


def changed_box(first: Frame, second: Frame) -> tuple[int, int, int, int] | None:
    """The bounding box of the pixels that differ between two frames of the same size."""
    return ImageChops.difference(first.rgb(), second.rgb()).getbbox()


# --- typing and hotkeys ---------------------------------------------------------------------


def test_typed_text_with_accents_reaches_the_program_and_the_newline_submits(x_desktop, controller):
    typed = x_desktop.home / "typed.txt"
    terminal = Terminal(x_desktop, f"cat > {typed}")

    controller.execute(Action(ActionType.TYPE, content="Größe: 5 € — café, 日本 ok?\n"))
    wait_for(lambda: file_text(typed), "Größe: 5 € — café, 日本 ok?\n")

    controller.execute(Action(ActionType.HOTKEY, keys=("ctrl", "d")))
    assert terminal.process.wait(timeout=5) == 0


def test_characters_missing_from_the_keymap_are_typed_in_order(x_desktop, controller):
    typed = x_desktop.home / "greek.txt"
    Terminal(x_desktop, f"cat > {typed}")

    controller.execute(Action(ActionType.TYPE, content=f"{GREEK} {GREEK.upper()}\n"))

    wait_for(lambda: file_text(typed), f"{GREEK} {GREEK.upper()}\n")


def test_more_distinct_characters_than_borrowable_keys_are_typed_in_order(x_desktop, controller):
    note = x_desktop.home / "note.txt"
    note.write_text("")
    x_desktop.launch("mousepad", str(note))
    x_desktop.wait_for_window("Mousepad")

    controller.execute(Action(ActionType.TYPE, content=f"{CJK}\n"))
    controller.execute(Action(ActionType.HOTKEY, keys=("ctrl", "s")))

    wait_for(lambda: file_text(note), f"{CJK}\n")


def test_more_distinct_characters_than_borrowable_keys_reach_a_terminal_in_order(
    x_desktop, controller
):
    typed = x_desktop.home / "cjk.txt"
    Terminal(x_desktop, f"cat > {typed}")  # xterm takes no pings: borrowed keys wait instead

    controller.execute(Action(ActionType.TYPE, content=f"{CJK}\n"))

    wait_for(lambda: file_text(typed), f"{CJK}\n")


def test_closing_the_controller_gives_borrowed_keys_back(x_desktop):
    display = Display(x_desktop.display)
    first = display.display.info.min_keycode
    count = display.display.info.max_keycode - first + 1
    before = [tuple(keysyms) for keysyms in display.get_keyboard_mapping(first, count)]
    Terminal(x_desktop, "cat > /dev/null")

    with X11Controller(x_desktop.display) as controller:
        controller.execute(Action(ActionType.TYPE, content=GREEK))
        during = [tuple(keysyms) for keysyms in display.get_keyboard_mapping(first, count)]

    after = [tuple(keysyms) for keysyms in display.get_keyboard_mapping(first, count)]
    display.close()
    assert during != before
    assert after == before


def test_every_key_name_of_the_action_space_has_a_keysym():
    for name in KEY_NAMES:
        assert keysym_for_key(name) != X.NoSymbol, name
    assert keysym_for_key("enter") == XK.XK_Return
    assert keysym_for_key("f5") == XK.XK_F5
    assert keysym_for_key("comma") == keysym_for_key(",") == XK.XK_comma


def test_typing_into_a_gtk_editor_and_saving_with_ctrl_s(x_desktop, controller):
    note = x_desktop.home / "note.txt"
    note.write_text("")
    x_desktop.launch("mousepad", str(note))
    x_desktop.wait_for_window("Mousepad")

    controller.execute(Action(ActionType.TYPE, content="première ligne\nzweite Zeile: ß\n"))
    controller.execute(Action(ActionType.HOTKEY, keys=("ctrl", "s")))

    wait_for(lambda: file_text(note), "première ligne\nzweite Zeile: ß\n")


def test_ctrl_c_and_ctrl_v_copy_and_paste_in_an_editor(x_desktop, controller):
    note = x_desktop.home / "note.txt"
    note.write_text("copy me\n")
    x_desktop.launch("mousepad", str(note))
    x_desktop.wait_for_window("Mousepad")

    for keys in (("ctrl", "a"), ("ctrl", "c"), ("ctrl", "end"), ("ctrl", "v"), ("ctrl", "s")):
        controller.execute(Action(ActionType.HOTKEY, keys=keys))

    wait_for(lambda: file_text(note), "copy me\ncopy me\n")


# --- bounds ---------------------------------------------------------------------------------


def test_longest_type_finishes_within_the_action_time_bound(x_desktop, controller):
    note = x_desktop.home / "long.txt"
    note.write_text("")
    x_desktop.launch("mousepad", str(note))
    x_desktop.wait_for_window("Mousepad")
    line = "Größe 5 € — the quick brown fox jumps over the lazy dog 0123456789\n"
    text = (line * (MAX_CONTENT_CHARS // len(line) + 1))[:MAX_CONTENT_CHARS]

    started = time.monotonic()
    controller.execute(Action(ActionType.TYPE, content=text))
    took = time.monotonic() - started
    controller.execute(Action(ActionType.HOTKEY, keys=("ctrl", "s")))

    assert took < ACTION_TIMEOUT_S
    wait_for(lambda: file_text(note), text, timeout=20)


def test_typing_to_a_program_that_stopped_reading_gives_up_at_the_deadline(x_desktop):
    editor = x_desktop.launch("mousepad")
    x_desktop.wait_for_window("Mousepad")
    os.kill(editor.pid, signal.SIGSTOP)  # it takes pings, and will answer none now
    display = Display(x_desktop.display)
    try:
        typing = XTestInput(display)
        started = time.monotonic()
        with pytest.raises(InputTimeout, match="did not finish"):
            typing.type_text("x" * 1000, deadline=started + 1.0)
        assert time.monotonic() - started < 1.5
    finally:
        os.kill(editor.pid, signal.SIGCONT)
        display.close()


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        ({"type": "type", "content": "x" * 1_000_000}, "1,000,000 characters, over the cap"),
        (
            {"type": "type", "content": "x" * (MAX_CONTENT_CHARS + 1)},
            f"over the cap of {MAX_CONTENT_CHARS:,}",
        ),
        (
            {"type": "scroll", "point": [640, 400], "direction": "down", "amount": 51},
            "scroll amount 51 is over the cap of 50",
        ),
        (
            {"type": "hotkey", "keys": ["ctrl", "alt", "shift", "super", "a", "b", "c"]},
            "hotkey has 7 keys, over the cap of 6",
        ),
    ],
)
def test_actions_over_a_cap_are_refused_at_once_and_leave_the_desktop_untouched(
    x_desktop, controller, decision, message
):
    note = x_desktop.home / "note.txt"
    note.write_text("untouched\n")
    x_desktop.launch("mousepad", str(note))
    x_desktop.wait_for_window("Mousepad")
    before = controller.settle().frame

    started = time.monotonic()
    with pytest.raises(InvalidAction, match=message):
        # As a decision is read: the action never exists, so it never reaches ``execute``.
        controller.execute(Action.from_json(decision, platform="desktop", screen=controller.screen))
    refused_in = time.monotonic() - started
    controller.execute(Action(ActionType.HOTKEY, keys=("ctrl", "s")))

    assert refused_in < 0.5
    assert controller.settle().frame == before
    assert note.read_text() == "untouched\n"


# --- pointer --------------------------------------------------------------------------------


def test_click_presses_the_button_under_the_point(x_desktop, controller):
    dialog = x_desktop.launch("xmessage", "-buttons", "Yes:3,No:4", "Do you agree?")
    window = x_desktop.wait_for_window("Xmessage")
    controller.settle()  # drawn, and placed for good by the window manager
    parts = x_desktop.subwindows(window)
    bottom_row = max(part.y for part in parts)
    yes, no = sorted((part for part in parts if part.y == bottom_row), key=lambda part: part.x)

    controller.execute(Action(ActionType.CLICK, no.center))

    assert dialog.wait(timeout=10) == 4


def test_double_click_selects_the_word_under_the_point(x_desktop, controller):
    terminal = Terminal(x_desktop, "echo alpha bravo charlie delta; sleep 600")
    controller.settle()

    controller.execute(Action(ActionType.LEFT_DOUBLE, terminal.cell(14, 0)))

    wait_for(lambda: primary_selection(x_desktop), "charlie")


def test_drag_selects_the_text_between_its_points(x_desktop, controller):
    terminal = Terminal(x_desktop, "echo alpha bravo charlie delta; sleep 600")
    controller.settle()

    controller.execute(Action(ActionType.DRAG, terminal.cell(6, 0), end=terminal.cell(18, 0)))

    wait_for(lambda: primary_selection(x_desktop), "bravo charli")


def test_right_click_opens_a_context_menu_at_the_point(x_desktop, controller):
    note = x_desktop.home / "note.txt"
    note.write_text("some text\n")
    x_desktop.launch("mousepad", str(note))
    window = x_desktop.wait_for_window("Mousepad")
    before = controller.settle().frame
    assert x_desktop.popups() == []

    controller.execute(Action(ActionType.RIGHT_SINGLE, window.center))
    after = controller.settle().frame

    (menu,) = x_desktop.popups()
    assert abs(menu.x - window.center.x) <= 5 and abs(menu.y - window.center.y) <= 5
    assert crop(before, menu).tobytes() != crop(after, menu).tobytes()


def test_scroll_moves_the_content_in_the_wheel_direction(x_desktop, controller):
    terminal = Terminal(x_desktop, "seq 1 300; sleep 600", rows=24)
    controller.settle()
    at_bottom = crop(controller.grab_frame(cursor=False), terminal.window)

    controller.execute(
        Action(ActionType.SCROLL, terminal.window.center, direction=Direction.UP, amount=2)
    )
    controller.settle()
    scrolled_up = crop(controller.grab_frame(cursor=False), terminal.window)
    controller.execute(
        Action(ActionType.SCROLL, terminal.window.center, direction=Direction.DOWN, amount=2)
    )
    controller.settle()
    back_down = crop(controller.grab_frame(cursor=False), terminal.window)

    lines_per_click = 5  # xterm's default
    assert vertical_shift(at_bottom, scrolled_up) == 2 * lines_per_click * terminal.cell_height
    assert back_down.tobytes() == at_bottom.tobytes()


def test_points_off_the_screen_and_android_actions_are_refused(x_desktop, controller):
    before = controller.grab_frame()

    for action in (
        Action(ActionType.CLICK, Point(1280, 10)),
        Action(ActionType.DRAG, Point(10, 10), end=Point(10, 800)),
        Action(ActionType.LONG_PRESS, Point(10, 10)),
        Action(ActionType.PRESS_HOME),
        Action(ActionType.OPEN_APP, app="Settings"),
    ):
        with pytest.raises(InvalidAction):
            controller.execute(action)

    assert controller.grab_frame() == before


def test_wait_pauses_and_finished_and_call_user_leave_the_desktop_alone(x_desktop):
    with X11Controller(x_desktop.display, wait_s=0.3) as controller:
        before = controller.grab_frame()
        started = time.monotonic()
        controller.execute(Action(ActionType.WAIT))
        waited = time.monotonic() - started
        controller.execute(Action(ActionType.FINISHED, content="done"))
        controller.execute(Action(ActionType.CALL_USER))

        assert waited >= 0.3
        assert controller.grab_frame() == before


# --- screenshots ----------------------------------------------------------------------------


@pytest.mark.parametrize("width, height", [(1280, 800), (1920, 1080)])
def test_screenshot_is_a_lossless_png_of_the_whole_desktop(desktop_factory, width, height):
    desktop = desktop_factory(width, height)
    desktop.set_wallpaper(desktops.busy_wallpaper(desktop.size))
    with X11Controller(desktop.display) as controller:
        png = controller.screenshot()
        frame = controller.grab_frame()

    image = Image.open(io.BytesIO(png))
    assert controller.screen.width == width and controller.screen.height == height
    assert (image.format, image.mode, image.size) == ("PNG", "RGB", (width, height))
    assert image.tobytes() == frame.rgb().tobytes()


def test_screenshot_draws_the_cursor_where_the_pointer_is(x_desktop, controller):
    pointer = Point(400, 300)
    controller.execute(Action(ActionType.CLICK, pointer))  # on the bare root window: no effect

    box = changed_box(controller.grab_frame(cursor=False), controller.grab_frame())

    assert box is not None
    left, top, right, bottom = box
    assert left - 32 <= pointer.x <= right + 32 and top - 32 <= pointer.y <= bottom + 32
    assert right - left <= 64 and bottom - top <= 64


# --- settle detection -----------------------------------------------------------------------

# A grey window that waits for a click; what it does then follows it in each program.
AFTER_A_CLICK = """
import sys, time
from Xlib import X, display

d = display.Display()
root = d.screen().root
window = root.create_window(
    100, 100, 300, 200, 0, d.screen().root_depth, override_redirect=True,
    background_pixel=0x808080, event_mask=X.ButtonPressMask,
)
window.map()
d.sync()
while d.next_event().type != X.ButtonPress:
    pass
"""
# It flips between red and blue for argv[1] ms, then stays green.
ANIMATION = (
    AFTER_A_CLICK
    + """
end = time.monotonic() + float(sys.argv[1]) / 1000
flip = 0
while time.monotonic() < end:
    flip = 1 - flip
    window.change_attributes(background_pixel=(0xFF0000, 0x0000FF)[flip])
    window.clear_area()
    d.sync()
    time.sleep(0.03)
window.change_attributes(background_pixel=0x00FF00)
window.clear_area()
d.sync()
time.sleep(600)
"""
)
# It draws a caret-sized stroke at once, and the whole window green 200 ms later.
CARET_THEN_WINDOW = (
    AFTER_A_CLICK
    + """
window.change_attributes(background_pixel=0x000000)
window.clear_area(20, 20, 2, 16)
d.sync()
time.sleep(0.2)
window.change_attributes(background_pixel=0x00FF00)
window.clear_area()
d.sync()
time.sleep(600)
"""
)


def test_settle_returns_soon_on_a_static_screen(x_desktop, controller):
    result = controller.settle()

    assert result.settled
    assert result.waited_ms < 2000  # a loose bound: timings are for the benchmarks
    assert result.frames >= 2
    assert result.frame == controller.grab_frame()


def test_an_observation_is_the_settled_screen_as_png(x_desktop, controller):
    observation = controller.observe()

    image = Image.open(io.BytesIO(observation.png))
    assert image.size == (1280, 800) and observation.screen == x_desktop.size
    assert observation.settled and 0 < observation.waited_ms < 2000
    assert image.tobytes() == controller.grab_frame().rgb().tobytes()


def test_settle_waits_out_an_animation_and_keeps_its_last_frame(x_desktop, controller):
    animation_ms = 600
    x_desktop.launch(sys.executable, "-c", ANIMATION, str(animation_ms))
    wait_for(lambda: controller.grab_frame().rgb().getpixel((120, 120)), (128, 128, 128))

    controller.execute(Action(ActionType.CLICK, Point(250, 200)))
    result = controller.settle()

    assert result.settled
    assert result.waited_ms >= animation_ms
    assert result.frame.rgb().getpixel((120, 120)) == (0, 255, 0)
    assert result.frame == controller.grab_frame()


def test_a_reaction_that_went_still_is_settled_without_waiting_out_min_ms(x_desktop, controller):
    """``min_ms`` is the wait for a reaction to begin: a screen that did not change waits it
    out, one that changed and went still for the window is settled then."""
    x_desktop.launch(sys.executable, "-c", ANIMATION, "100")
    wait_for(lambda: controller.grab_frame().rgb().getpixel((120, 120)), (128, 128, 128))

    unchanged = controller.settle(window_ms=50, min_ms=1500)
    controller.execute(Action(ActionType.CLICK, Point(250, 200)))
    reacted = controller.settle(window_ms=50, min_ms=1500)

    assert unchanged.settled and unchanged.waited_ms >= 1500
    assert reacted.settled and 100 <= reacted.waited_ms < 1500
    assert reacted.frame.rgb().getpixel((120, 120)) == (0, 255, 0)


def test_a_caret_sized_drawing_is_no_reaction_to_end_the_wait_for_one(x_desktop, controller):
    x_desktop.launch(sys.executable, "-c", CARET_THEN_WINDOW)
    wait_for(lambda: controller.grab_frame().rgb().getpixel((120, 120)), (128, 128, 128))

    controller.execute(Action(ActionType.CLICK, Point(250, 200)))
    result = controller.settle(window_ms=50, min_ms=1500)

    assert result.settled
    assert result.frame.rgb().getpixel((200, 200)) == (0, 255, 0)


def test_compared_frames_end_a_reaction_that_went_still_before_min_ms():
    started = time.monotonic()

    def grab() -> str:
        return "before" if time.monotonic() - started < 0.05 else "after"

    result = wait_until_settled(grab, window_ms=50, min_ms=1500, max_ms=3000)

    assert result.settled and result.frame == "after"
    assert 100 <= result.waited_ms < 1500


def test_settle_gives_up_at_max_ms_on_a_screen_that_keeps_changing():
    frames = iter(range(1_000_000))

    result = wait_until_settled(lambda: next(frames), window_ms=50, min_ms=0, max_ms=300)

    assert not result.settled
    assert 300 <= result.waited_ms < 1000
    assert result.frame == result.frames - 1


def test_settle_never_returns_before_min_ms():
    result = wait_until_settled(lambda: "static", window_ms=20, min_ms=250, max_ms=1000)

    assert result.settled
    assert result.waited_ms >= 250


def test_settle_counts_the_window_from_the_last_change():
    started = time.monotonic()

    def grab() -> float | str:
        now = time.monotonic()
        return now if now - started < 0.2 else "still"

    result = wait_until_settled(grab, window_ms=100, min_ms=0, max_ms=2000)

    assert result.settled and result.frame == "still"
    assert result.waited_ms >= 300
