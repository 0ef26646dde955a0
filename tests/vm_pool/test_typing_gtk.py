"""Typing into GTK dialogs on real Xvfb desktops: a trailing newline submits a GTK Save As
dialog (GTK acts on a typed name 150 ms later, so the Return must not come at once), and
characters the keymap lacks reach a GTK entry exactly."""

import time
from collections.abc import Callable, Iterator

import pytest
from Xlib import X, Xatom
from Xlib.display import Display
from Xlib.error import XError

from tests.support import desktops
from tests.support.desktops import XDesktop
from vm_pool.actions import Action, ActionType
from vm_pool.x11.controller import X11Controller

x_desktop = desktops.x_desktop
desktop_factory = desktops.desktop_factory


@pytest.fixture
def controller(x_desktop: XDesktop) -> Iterator[X11Controller]:
    with X11Controller(x_desktop.display) as controller:
        yield controller


def focused_title(desktop: XDesktop) -> str:
    """The title of the window that has the keyboard focus (EWMH ``_NET_ACTIVE_WINDOW``)."""
    x = Display(desktop.display)
    try:
        root = x.screen().root
        active = root.get_full_property(x.intern_atom("_NET_ACTIVE_WINDOW"), Xatom.WINDOW)
        if active is None or not active.value[0]:
            return ""
        window = x.create_resource_object("window", active.value[0])
        name = window.get_full_property(x.intern_atom("_NET_WM_NAME"), X.AnyPropertyType)
        return name.value.decode() if name is not None else ""
    except XError:  # the window went away meanwhile
        return ""
    finally:
        x.close()


def wait_until(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def open_save_as(desktop: XDesktop, controller: X11Controller, text: str) -> None:
    """Mousepad with ``text`` typed in, and its Save As dialog open and focused."""
    desktop.launch("mousepad")
    desktop.wait_for_window("Mousepad")
    controller.execute(Action(ActionType.TYPE, content=text))
    controller.execute(Action(ActionType.HOTKEY, keys=("ctrl", "shift", "s")))
    assert wait_until(lambda: focused_title(desktop) == "Save As"), focused_title(desktop)
    controller.settle()


@pytest.mark.parametrize("run", range(3))
def test_trailing_newline_presses_save_in_a_gtk_save_as_dialog(x_desktop, controller, run):
    open_save_as(x_desktop, controller, "saved by a trailing newline")

    controller.execute(Action(ActionType.TYPE, content="name.txt\n"))

    saved = x_desktop.home / "name.txt"  # the dialog opens in HOME
    assert wait_until(saved.exists, timeout=5), "Return did not press Save"
    assert saved.read_text() == "saved by a trailing newline"


def test_trailing_newline_saves_to_a_typed_path_in_a_gtk_save_as_dialog(x_desktop, controller):
    folder = x_desktop.home / "reports"
    folder.mkdir()
    open_save_as(x_desktop, controller, "to a folder")

    controller.execute(Action(ActionType.TYPE, content=f"{folder}/q3.txt\n"))

    saved = folder / "q3.txt"
    assert wait_until(saved.exists, timeout=5), "Return did not press Save"
    assert saved.read_text() == "to a folder"


def test_characters_missing_from_the_keymap_are_typed_exactly_into_a_gtk_entry(
    x_desktop, controller
):
    name = "é€ü ß日本語✓ Ωμέγα.txt"  # accents are on no key of the US keymap; nor are these
    open_save_as(x_desktop, controller, "unicode name")

    controller.execute(Action(ActionType.TYPE, content=f"{name}\n"))

    saved = x_desktop.home / name
    assert wait_until(saved.exists, timeout=5), sorted(p.name for p in x_desktop.home.iterdir())
    assert [p.name for p in x_desktop.home.iterdir() if p.suffix == ".txt"] == [name]


def test_newlines_inside_the_text_are_line_breaks_in_a_gtk_editor(x_desktop, controller):
    note = x_desktop.home / "note.txt"
    note.write_text("")
    x_desktop.launch("mousepad", str(note))
    x_desktop.wait_for_window("Mousepad")

    controller.execute(Action(ActionType.TYPE, content="one\ntwo\n\nthree\n"))
    controller.execute(Action(ActionType.HOTKEY, keys=("ctrl", "s")))

    assert wait_until(lambda: note.read_text() == "one\ntwo\n\nthree\n", timeout=5)
