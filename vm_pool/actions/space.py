"""The vocabulary of the action space: points, screen sizes, action types, directions,
platforms, which types each platform allows, the arguments each type takes and the key names.

``vm_pool.actions`` builds the ``Action`` on it and is what the rest of Tandem imports.

Every action is bounded, so that executing any valid one takes a bounded time on the desktop
(``ACTION_TIMEOUT_S``) and storing it a bounded space. An action over a cap is
invalid, wherever it comes from (a model's text, an annotator's JSON, code):

- ``MAX_CONTENT_CHARS`` = 10,000 characters of ``type`` content (and of a ``finished`` answer).
  What one types into one place at one go (a form field, a command, a message, a page of
  prose) is far shorter; a model's whole answer is a few thousand tokens. Typing goes at the
  pace of the program that reads it, a few thousand characters a second in GTK and xterm,
  so the longest content is typed in seconds, well inside the action's time bound.
- ``MAX_SCROLL_AMOUNT`` = 50 wheel clicks: 150 to 250 lines in most programs, pages of them.
  A model that needs more should scroll again and look in between (UI-TARS itself has no
  amount: the default is ``DEFAULT_SCROLL_AMOUNT``).
- ``MAX_HOTKEY_KEYS`` = 6 keys held together: the longest chords are the four modifiers and a
  key; one more is spare.
- ``MAX_APP_NAME_CHARS`` = 200 characters of an app name: names are a few words.
- A drag is bounded by the screen, where both of its points must be, and runs in a fixed
  number of motion steps (``vm_pool.x11.xtest.DRAG_STEPS``), whatever its length.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class InvalidAction(ValueError):
    """An action that is malformed, unparseable, off the screen or not allowed on the platform."""


@dataclass(frozen=True)
class Point:
    x: int
    y: int


@dataclass(frozen=True)
class ScreenSize:
    width: int
    height: int

    def contains(self, point: Point) -> bool:
        return 0 <= point.x < self.width and 0 <= point.y < self.height


class ActionType(StrEnum):
    CLICK = "click"
    LEFT_DOUBLE = "left_double"
    RIGHT_SINGLE = "right_single"
    DRAG = "drag"
    SCROLL = "scroll"
    TYPE = "type"
    HOTKEY = "hotkey"
    WAIT = "wait"
    FINISHED = "finished"
    CALL_USER = "call_user"
    LONG_PRESS = "long_press"
    OPEN_APP = "open_app"
    PRESS_HOME = "press_home"
    PRESS_BACK = "press_back"


class Direction(StrEnum):
    UP = "up"
    DOWN = "down"
    LEFT = "left"
    RIGHT = "right"


class Platform(StrEnum):
    DESKTOP = "desktop"
    WEB = "web"
    ANDROID = "android"


_COMMON = frozenset(
    {
        ActionType.CLICK,
        ActionType.DRAG,
        ActionType.SCROLL,
        ActionType.TYPE,
        ActionType.WAIT,
        ActionType.FINISHED,
        ActionType.CALL_USER,
    }
)
_DESKTOP = _COMMON | {ActionType.LEFT_DOUBLE, ActionType.RIGHT_SINGLE, ActionType.HOTKEY}
_ANDROID = _COMMON | {
    ActionType.LONG_PRESS,
    ActionType.OPEN_APP,
    ActionType.PRESS_HOME,
    ActionType.PRESS_BACK,
}

ALLOWED_ACTIONS: Mapping[Platform, frozenset[ActionType]] = {
    Platform.DESKTOP: _DESKTOP,
    Platform.WEB: _DESKTOP,
    Platform.ANDROID: _ANDROID,
}

# The arguments each type needs; any other argument is refused.
ARGUMENTS: Mapping[ActionType, tuple[str, ...]] = {
    ActionType.CLICK: ("point",),
    ActionType.LEFT_DOUBLE: ("point",),
    ActionType.RIGHT_SINGLE: ("point",),
    ActionType.DRAG: ("point", "end"),
    ActionType.SCROLL: ("point", "direction", "amount"),
    ActionType.TYPE: ("content",),
    ActionType.HOTKEY: ("keys",),
    ActionType.WAIT: (),
    ActionType.FINISHED: ("content",),
    ActionType.CALL_USER: (),
    ActionType.LONG_PRESS: ("point",),
    ActionType.OPEN_APP: ("app",),
    ActionType.PRESS_HOME: (),
    ActionType.PRESS_BACK: (),
}

DEFAULT_SCROLL_AMOUNT = 5
# Caps on the arguments (see the module docstring for the reasons).
MAX_CONTENT_CHARS = 10_000
MAX_SCROLL_AMOUNT = 50
MAX_HOTKEY_KEYS = 6
# The longest any action may take to execute. A type of the longest content allowed
# (``MAX_CONTENT_CHARS``) into a program that reads it takes a few seconds; the rest is margin
# for a loaded machine and for the pauses of a submit and of borrowed keycodes.
ACTION_TIMEOUT_S = 60.0
MAX_APP_NAME_CHARS = 200
# Characters that typing turns into keys (Return, Tab); every other control character is refused.
TYPED_CONTROLS = frozenset("\n\t\r")

_PUNCTUATION_NAMES = {
    "minus",
    "plus",
    "equal",
    "comma",
    "period",
    "slash",
    "backslash",
    "semicolon",
    "apostrophe",
    "grave",
    "bracketleft",
    "bracketright",
}
KEY_NAMES: frozenset[str] = frozenset(
    set(string.ascii_lowercase)
    | set(string.digits)
    | set(string.punctuation)
    | {f"f{n}" for n in range(1, 25)}
    | {"ctrl", "alt", "shift", "super"}
    | {"enter", "esc", "tab", "space", "backspace", "delete", "insert"}
    | {"home", "end", "pageup", "pagedown", "up", "down", "left", "right"}
    | {"capslock", "printscreen"}
    | _PUNCTUATION_NAMES
)
# Other spellings of a key, rewritten to the name in KEY_NAMES when an Action is built.
KEY_ALIASES: Mapping[str, str] = {
    "meta": "super",
    "win": "super",
    "cmd": "super",
    "control": "ctrl",
    "return": "enter",
    "escape": "esc",
    "arrowup": "up",
    "arrowdown": "down",
    "arrowleft": "left",
    "arrowright": "right",
}


def parse_action_type(value: str) -> ActionType:
    try:
        return ActionType(value)
    except ValueError:
        raise InvalidAction(f"unknown action type {excerpt(value)}") from None


def excerpt(value: str, limit: int = 30) -> str:
    """A value quoted for an error message, cut short: messages are shown and stored."""
    return repr(value if len(value) <= limit else value[:limit] + "…")
