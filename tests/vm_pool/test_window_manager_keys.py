"""Keys a window manager takes for itself, on a real sandboxed desktop with openbox: Alt+Tab
switches windows and gives the keyboard back, so the next action's keys arrive."""

import time

import pytest

from vm_pool.actions import Action, ActionType
from vm_pool.desktop import DesktopControl

pytestmark = pytest.mark.django_db(transaction=True)


def terminal(name: str) -> list[str]:
    """A terminal whose every typed line goes to ``~/<name>.txt``."""
    return ["xterm", "-title", name, "-e", "sh", "-c", f"cat > ~/{name}.txt"]


def test_alt_tab_then_type_types_into_the_other_window(sandboxed_control: DesktopControl):
    control = sandboxed_control
    control.launch(terminal("first"), window_timeout=10)
    control.launch(terminal("second"), window_timeout=10)  # focused: the last one opened
    control.execute(Action(ActionType.HOTKEY, keys=("alt", "tab")))
    control.observe(settle=True)
    control.execute(Action(ActionType.TYPE, content="Hello from Tandem\n"))
    deadline = time.monotonic() + 5
    while (control.read_file("~/first.txt") or b"") != b"Hello from Tandem\n":
        assert time.monotonic() < deadline, (
            control.read_file("~/first.txt"),
            control.read_file("~/second.txt"),
        )
        time.sleep(0.1)
    assert control.read_file("~/second.txt") == b""
