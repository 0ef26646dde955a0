"""The unified action space: every step a model proposes or an annotator executes is an Action.

This module is the only definition of the action space. The model's parser, the desktop
controller, the annotator's workspace, the step records and the dataset exports all import it;
none of them keeps its own list of action types, arguments or key names. It is plain typed data
with no Django in it.

The space is UI-TARS's unified one (click, left_double, right_single, drag, scroll, type,
hotkey, wait, finished, call_user, and on Android long_press, open_app, press_home, press_back).
``ALLOWED_ACTIONS`` says which types each platform allows; a web task runs in a desktop browser,
so ``web`` allows what ``desktop`` allows.

Coordinates: a point is in screen pixels of the observation (screenshot) it refers to, and the
size of that screen is stored beside the action, never inside it. Converting to or from a
model's coordinate convention (UI-TARS-1.5 smart-resized pixels, UI-TARS-1.0 relative 0-1000)
happens elsewhere, on the way in and out of the model.

An Action checks its own shape when it is built (the arguments its type needs and no others,
known key names, a known scroll direction, no negative coordinate), so a malformed Action never
exists. ``validate`` adds what depends on where it runs: the platform and the screen size.

Two serialisations, both round-tripping exactly:

- JSON, for the API and the database: ``{"type": "drag", "point": [10, 20], "end": [30, 40]}``.
- UI-TARS-1.5 action text, for the model: ``drag(start_box='(10,20)', end_box='(30,40)')``.
  String arguments are single-quoted with ``\\``, ``'`` and newlines escaped as UI-TARS does; a
  trailing newline in ``type`` content means "submit". UI-TARS has no scroll amount: the text
  carries ``amount='N'`` only when it is not the default of 5, and reading text without one
  gives 5.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from typing import Any


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

# How each argument is named in messages: its JSON name, and its UI-TARS name where different.
_LABELS = {
    "point": "point (start_box)",
    "end": "end point (end_box)",
    "direction": "direction",
    "amount": "amount",
    "content": "content",
    "keys": "keys (key)",
    "app": "app (app_name)",
}

_JSON_KEYS = frozenset({"type", *_LABELS})


@dataclass(frozen=True)
class Action:
    """One step on a screen. Build it with the arguments its type needs, e.g.
    ``Action(ActionType.CLICK, Point(120, 34))``,
    ``Action(ActionType.SCROLL, Point(500, 400), direction=Direction.DOWN)``,
    ``Action(ActionType.HOTKEY, keys=("ctrl", "c"))``, ``Action(ActionType.TYPE, content="hi\\n")``.
    """

    type: ActionType
    point: Point | None = None
    end: Point | None = None
    direction: Direction | None = None
    amount: int | None = None
    content: str | None = None
    keys: tuple[str, ...] | None = None
    app: str | None = None

    def __post_init__(self) -> None:
        action_type = self.type if isinstance(self.type, ActionType) else _action_type(self.type)
        object.__setattr__(self, "type", action_type)
        if action_type is ActionType.SCROLL and self.amount is None:
            object.__setattr__(self, "amount", DEFAULT_SCROLL_AMOUNT)
        if action_type is ActionType.FINISHED and self.content is None:
            object.__setattr__(self, "content", "")

        needed = ARGUMENTS[action_type]
        for name, label in _LABELS.items():
            present = getattr(self, name) is not None
            if name in needed and not present:
                raise InvalidAction(f"{action_type} is missing {label}")
            if name not in needed and present:
                raise InvalidAction(f"{action_type} does not take {label}")

        for name in ("point", "end"):
            point = getattr(self, name)
            if point is not None and (point.x < 0 or point.y < 0):
                raise InvalidAction(f"{_LABELS[name]} ({point.x}, {point.y}) is negative")
        if self.direction is not None:
            try:
                object.__setattr__(self, "direction", Direction(self.direction.lower()))
            except ValueError:
                raise InvalidAction(
                    f"unknown scroll direction {_excerpt(self.direction)}"
                    " (expected up, down, left, right)"
                ) from None
        if self.amount is not None and (
            isinstance(self.amount, bool) or not isinstance(self.amount, int) or self.amount < 1
        ):
            raise InvalidAction(
                f"scroll amount must be a whole number of 1 or more, not {self.amount!r}"
            )
        if action_type is ActionType.TYPE and not self.content:
            raise InvalidAction("type needs some content to type")
        if action_type is ActionType.OPEN_APP and not (self.app or "").strip():
            raise InvalidAction("open_app needs an app name")
        if self.keys is not None:
            object.__setattr__(self, "keys", _normalise_keys(self.keys))

    def validate(self, platform: str | None = None, screen: ScreenSize | None = None) -> None:
        """Refuse the action where it cannot run: a type the platform does not allow, or a point
        outside the screen. The shape of the action was already checked when it was built."""
        if platform is not None:
            try:
                allowed = ALLOWED_ACTIONS[Platform(platform)]
            except ValueError:
                raise InvalidAction(f"unknown platform {platform!r}") from None
            if self.type not in allowed:
                where = ", ".join(p for p in Platform if self.type in ALLOWED_ACTIONS[p])
                raise InvalidAction(f"{self.type} is not available on {platform} (only on {where})")
        if screen is not None:
            for name in ("point", "end"):
                point = getattr(self, name)
                if point is not None and not screen.contains(point):
                    raise InvalidAction(
                        f"{_LABELS[name]} ({point.x}, {point.y}) is outside the "
                        f"{screen.width}x{screen.height} screen"
                    )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": str(self.type)}
        for name in ARGUMENTS[self.type]:
            value = getattr(self, name)
            if isinstance(value, Point):
                value = [value.x, value.y]
            elif isinstance(value, Direction):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            data[name] = value
        return data

    @classmethod
    def from_json(
        cls, data: Any, *, platform: str | None = None, screen: ScreenSize | None = None
    ) -> Action:
        """Read the JSON form, refusing unknown keys and wrong types, then validate."""
        if not isinstance(data, Mapping):
            raise InvalidAction("an action must be a JSON object")
        if not _JSON_KEYS.issuperset(data):
            unknown = sorted(map(str, set(data) - _JSON_KEYS))
            raise InvalidAction(f"unknown key(s) in action: {', '.join(unknown)}")
        if not isinstance(data.get("type"), str):
            raise InvalidAction("action 'type' must be a string")
        action_type = _action_type(data["type"])
        values: dict[str, Any] = {}
        for name in ("point", "end"):
            if name in data:
                values[name] = _json_point(name, data[name])
        for name in ("direction", "content", "app"):
            if name in data:
                if not isinstance(data[name], str):
                    raise InvalidAction(f"{name} must be a string")
                values[name] = data[name]
        if "amount" in data:
            if isinstance(data["amount"], bool) or not isinstance(data["amount"], int):
                raise InvalidAction("amount must be an integer")
            values["amount"] = data["amount"]
        if "keys" in data:
            keys = data["keys"]
            if not isinstance(keys, list | tuple) or not all(isinstance(k, str) for k in keys):
                raise InvalidAction("keys must be a list of key names")
            values["keys"] = tuple(keys)
        action = cls(action_type, **values)
        action.validate(platform, screen)
        return action

    def to_text(self, point_text: Callable[[Point], str] | None = None) -> str:
        """The action as UI-TARS-1.5 writes it, in screen pixels. ``point_text``, when given,
        writes each point instead of ``(x,y)``: a model's coordinates, with box tokens."""
        write = point_text or _point_text
        arguments: list[str] = []
        if self.point is not None:
            arguments.append(f"start_box='{write(self.point)}'")
        if self.end is not None:
            arguments.append(f"end_box='{write(self.end)}'")
        if self.direction is not None:
            arguments.append(f"direction='{self.direction}'")
        if self.amount is not None and self.amount != DEFAULT_SCROLL_AMOUNT:
            arguments.append(f"amount='{self.amount}'")
        if self.keys is not None:
            arguments.append(f"key={_quote(' '.join(self.keys))}")
        if self.content is not None:
            arguments.append(f"content={_quote(self.content)}")
        if self.app is not None:
            arguments.append(f"app_name={_quote(self.app)}")
        return f"{self.type}({', '.join(arguments)})"

    @classmethod
    def from_text(
        cls, text: str, *, platform: str | None = None, screen: ScreenSize | None = None
    ) -> Action:
        """Read one UI-TARS action call (no ``Thought:``, no ``Action:`` prefix), then validate.

        Besides what ``to_text`` writes, this reads what models emit: double quotes, spaces
        around ``=``, points wrapped in ``<|box_start|>``/``<|box_end|>``, boxes
        ``[x1, y1, x2, y2]`` (their centre), ``<point>x y</point>`` and ``<bbox>…</bbox>``, and
        ``point=``/``start_point=``/``end_point=`` for the box arguments.
        """
        action_type, arguments = _parse_call(text)
        values: dict[str, Any] = {}
        for argument, raw in arguments.items():
            field = _TEXT_ARGUMENTS.get(argument)
            if field is None:
                raise InvalidAction(f"{action_type}() has an unknown argument {_excerpt(argument)}")
            if field in values:
                raise InvalidAction(f"{action_type}() gives {_LABELS[field]} twice")
            values[field] = _text_value(field, raw)
        action = cls(action_type, **values)
        action.validate(platform, screen)
        return action


def _action_type(value: str) -> ActionType:
    try:
        return ActionType(value)
    except ValueError:
        raise InvalidAction(f"unknown action type {_excerpt(value)}") from None


def _normalise_keys(keys: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    if isinstance(keys, str) or not isinstance(keys, tuple | list):
        raise InvalidAction("keys must be a sequence of key names")
    if not keys:
        raise InvalidAction("hotkey needs at least one key")
    normalised = []
    for key in keys:
        name = key.strip().lower()
        name = KEY_ALIASES.get(name, name)
        if name not in KEY_NAMES:
            raise InvalidAction(f"unknown key name {_excerpt(key)} in hotkey")
        normalised.append(name)
    return tuple(normalised)


def _json_point(name: str, value: Any) -> Point:
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) for v in value)
    ):
        raise InvalidAction(f"{name} must be [x, y] with two integers")
    return Point(value[0], value[1])


# --- UI-TARS text -------------------------------------------------------------------------

_TEXT_ARGUMENTS = {
    "start_box": "point",
    "point": "point",
    "start_point": "point",
    "end_box": "end",
    "end_point": "end",
    "direction": "direction",
    "amount": "amount",
    "content": "content",
    "key": "keys",
    "app_name": "app",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}
# Digit runs are bounded so that absurd text is refused rather than turned into huge integers.
_NUMBER = r"-?\d{1,9}(?:\.\d{1,9})?"
# A point or a box, in any of the wrappings models write; box tokens are removed first.
_POINT = re.compile(
    rf"""\s*(?:
        \(\s*(?P<paren>{_NUMBER}(?:\s*,\s*{_NUMBER})*)\s*\)
      | \[\s*(?P<bracket>{_NUMBER}(?:\s*,\s*{_NUMBER})*)\s*\]
      | <point>\s*(?P<point>{_NUMBER}(?:[\s,]+{_NUMBER})*)\s*</point>
      | <bbox>\s*(?P<bbox>{_NUMBER}(?:[\s,]+{_NUMBER})*)\s*</bbox>
    )\s*""",
    re.VERBOSE,
)


def _point_text(point: Point) -> str:
    return f"({point.x},{point.y})"


def _quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{escaped}'"


def _parse_call(text: str) -> tuple[ActionType, dict[str, str]]:
    """Split ``name(arg='value', …)`` into the action type and its raw string arguments."""
    if not isinstance(text, str):
        raise InvalidAction("action text must be a string")
    pos = _skip_space(text, 0)
    match = _NAME.match(text, pos)
    if match is None:
        raise InvalidAction("not an action call: expected name(argument='value', ...)")
    name = match.group()
    pos = _skip_space(text, match.end())
    if not text.startswith("(", pos):
        raise InvalidAction(f"not an action call: expected '(' after {name!r}")
    action_type = _action_type(name)
    pos = _skip_space(text, pos + 1)
    arguments: dict[str, str] = {}
    while not text.startswith(")", pos):
        match = _NAME.match(text, pos)
        if match is None:
            raise InvalidAction(f"{name}(): expected an argument name at {_where(text, pos)}")
        argument = match.group()
        pos = _skip_space(text, match.end())
        if not text.startswith("=", pos):
            raise InvalidAction(f"{name}(): expected '=' after {argument!r}")
        value, pos = _read_string(text, _skip_space(text, pos + 1), f"{name}() {argument}")
        if argument in arguments:
            raise InvalidAction(f"{name}() gives {argument!r} twice")
        arguments[argument] = value
        pos = _skip_space(text, pos)
        if text.startswith(",", pos):
            pos = _skip_space(text, pos + 1)
        elif not text.startswith(")", pos):
            raise InvalidAction(f"{name}(): expected ',' or ')' at {_where(text, pos)}")
    pos = _skip_space(text, pos + 1)
    if pos != len(text):
        raise InvalidAction(f"unexpected text after the action call at {_where(text, pos)}")
    return action_type, arguments


def _read_string(text: str, pos: int, what: str) -> tuple[str, int]:
    """Read a quoted string at ``pos``; return its value and the position after it.

    A quote closes the string only when a ``,`` or ``)`` follows it, so an unescaped quote
    inside typed text (``type(content='it's')``, which models do write) stays part of it.
    """
    quote = text[pos : pos + 1]
    if quote not in ("'", '"'):
        raise InvalidAction(f"{what} must be a quoted string ({_where(text, pos)})")
    chars: list[str] = []
    pos += 1
    while pos < len(text):
        char = text[pos]
        if char == "\\" and pos + 1 < len(text):
            following = text[pos + 1]
            chars.append(_ESCAPES.get(following, char + following))
            pos += 2
            continue
        if char == quote:
            after = _skip_space(text, pos + 1)
            if after == len(text) or text[after] in ",)":
                return "".join(chars), pos + 1
        chars.append(char)
        pos += 1
    raise InvalidAction(f"{what}: the quoted string is not closed")


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _where(text: str, pos: int) -> str:
    return "the end of the text" if pos >= len(text) else f"position {pos}: {_excerpt(text[pos:])}"


def _excerpt(value: str, limit: int = 30) -> str:
    """A value quoted for an error message, cut short: messages are shown and stored."""
    return repr(value if len(value) <= limit else value[:limit] + "…")


def _text_value(field: str, raw: str) -> Any:
    if field in ("point", "end"):
        return _text_point(raw)
    if field == "amount":
        if not re.fullmatch(r"\s*\d{1,9}\s*", raw):
            raise InvalidAction(f"scroll amount must be a whole number, not {_excerpt(raw)}")
        return int(raw)
    if field == "keys":
        return tuple(raw.split())
    if field == "direction":
        return raw.strip()
    return raw


def _text_point(raw: str) -> Point:
    """A point from ``(x,y)``, a box ``[x1,y1,x2,y2]`` (its centre, rounded half up), or a
    ``<point>``/``<bbox>`` tag, with or without box tokens around it."""
    cleaned = raw.replace("<|box_start|>", "").replace("<|box_end|>", "")
    match = _POINT.fullmatch(cleaned)
    if match is None:
        raise InvalidAction(f"not a point or a box: {_excerpt(raw)}")
    group = next(g for g in match.groups() if g is not None)
    numbers = [Decimal(n) for n in re.findall(_NUMBER, group)]
    if len(numbers) == 2:
        x, y = numbers
    elif len(numbers) == 4:
        x, y = (numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2
    else:
        raise InvalidAction(
            f"a point has 2 numbers and a box 4, not {len(numbers)}: {_excerpt(raw)}"
        )
    return Point(_round(x), _round(y))


def _round(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_HALF_UP))
