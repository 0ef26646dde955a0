"""The unified action space: every step a model proposes or an annotator executes is an Action.

This module is the only definition of the action space. The model's parser, the desktop
controller, the annotator's workspace, the step records and the dataset exports all import it;
none of them keeps its own list of action types, arguments or key names. It is plain typed data
with no Django in it. Its vocabulary (types, platforms, key names) is written in
``vm_pool.actions.space`` and the pieces of UI-TARS text in ``vm_pool.actions.text``; both are
imported from here.

The space is UI-TARS's unified one (click, left_double, right_single, drag, scroll, type,
hotkey, wait, finished, call_user, and on Android long_press, open_app, press_home, press_back).
``ALLOWED_ACTIONS`` says which types each platform allows; a web task runs in a desktop browser,
so ``web`` allows what ``desktop`` allows.

Coordinates: a point is in screen pixels of the observation (screenshot) it refers to, and the
size of that screen is stored beside the action, never inside it. Converting to or from a
model's coordinate convention (UI-TARS-1.5 smart-resized pixels, UI-TARS-1.0 relative 0-1000)
happens elsewhere, on the way in and out of the model.

An Action checks its own shape when it is built (the arguments its type needs and no others,
known key names, a known scroll direction, no negative coordinate, no argument over its cap:
``MAX_CONTENT_CHARS``, ``MAX_SCROLL_AMOUNT``, ``MAX_HOTKEY_KEYS``, ``MAX_APP_NAME_CHARS``, see
``vm_pool.actions.space`` for why), so a malformed Action never exists, however it is read.
``validate`` adds what depends on where it runs: the platform and the screen size.

Two serialisations, both round-tripping exactly:

- JSON, for the API and the database: ``{"type": "drag", "point": [10, 20], "end": [30, 40]}``.
- UI-TARS-1.5 action text, for the model: ``drag(start_box='(10,20)', end_box='(30,40)')``.
  String arguments are single-quoted with ``\\``, ``'`` and newlines escaped as UI-TARS does; a
  trailing newline in ``type`` content means "submit". UI-TARS has no scroll amount: the text
  carries ``amount='N'`` only when it is not the default of 5, and reading text without one
  gives 5.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vm_pool.actions.space import (
    ACTION_TIMEOUT_S,
    ALLOWED_ACTIONS,
    ARGUMENTS,
    DEFAULT_SCROLL_AMOUNT,
    KEY_ALIASES,
    KEY_NAMES,
    MAX_APP_NAME_CHARS,
    MAX_CONTENT_CHARS,
    MAX_HOTKEY_KEYS,
    MAX_SCROLL_AMOUNT,
    TYPED_CONTROLS,
    ActionType,
    Direction,
    InvalidAction,
    Platform,
    Point,
    ScreenSize,
    excerpt,
    parse_action_type,
)
from vm_pool.actions.text import TEXT_ARGUMENTS, parse_call, quote, text_value, write_point

__all__ = [
    "ALLOWED_ACTIONS",
    "ARGUMENTS",
    "DEFAULT_SCROLL_AMOUNT",
    "KEY_ALIASES",
    "KEY_NAMES",
    "MAX_APP_NAME_CHARS",
    "MAX_CONTENT_CHARS",
    "ACTION_TIMEOUT_S",
    "MAX_HOTKEY_KEYS",
    "MAX_SCROLL_AMOUNT",
    "Action",
    "ActionType",
    "Direction",
    "InvalidAction",
    "Platform",
    "Point",
    "ScreenSize",
]

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
        action_type = (
            self.type if isinstance(self.type, ActionType) else parse_action_type(self.type)
        )
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
                    f"unknown scroll direction {excerpt(self.direction)}"
                    " (expected up, down, left, right)"
                ) from None
        if self.amount is not None and (
            isinstance(self.amount, bool) or not isinstance(self.amount, int) or self.amount < 1
        ):
            raise InvalidAction(
                f"scroll amount must be a whole number of 1 or more, not {self.amount!r}"
            )
        if self.amount is not None and self.amount > MAX_SCROLL_AMOUNT:
            raise InvalidAction(
                f"scroll amount {self.amount} is over the cap of {MAX_SCROLL_AMOUNT} wheel clicks"
            )
        if self.content is not None:
            _check_content(action_type, self.content)
        if self.app is not None and len(self.app) > MAX_APP_NAME_CHARS:
            raise InvalidAction(
                f"app name is {len(self.app):,} characters, over the cap of {MAX_APP_NAME_CHARS}"
            )
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
        action_type = parse_action_type(data["type"])
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
            values["keys"] = data["keys"]  # checked, counted first, when the Action is built
        action = cls(action_type, **values)
        action.validate(platform, screen)
        return action

    def to_text(self, point_text: Callable[[Point], str] | None = None) -> str:
        """The action as UI-TARS-1.5 writes it, in screen pixels. ``point_text``, when given,
        writes each point instead of ``(x,y)``: a model's coordinates, with box tokens."""
        write = point_text or write_point
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
            arguments.append(f"key={quote(' '.join(self.keys))}")
        if self.content is not None:
            arguments.append(f"content={quote(self.content)}")
        if self.app is not None:
            arguments.append(f"app_name={quote(self.app)}")
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
        action_type, arguments = parse_call(text)
        values: dict[str, Any] = {}
        for argument, raw in arguments.items():
            field = TEXT_ARGUMENTS.get(argument)
            if field is None:
                raise InvalidAction(f"{action_type}() has an unknown argument {excerpt(argument)}")
            if field in values:
                raise InvalidAction(f"{action_type}() gives {_LABELS[field]} twice")
            values[field] = text_value(field, raw)
        action = cls(action_type, **values)
        action.validate(platform, screen)
        return action


def _check_content(action_type: ActionType, content: str) -> None:
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidAction(
            f"{action_type} content is {len(content):,} characters,"
            f" over the cap of {MAX_CONTENT_CHARS:,}"
        )
    if action_type is not ActionType.TYPE:
        return
    if not content:
        raise InvalidAction("type needs some content to type")
    for char in content:
        if unicodedata.category(char) == "Cc" and char not in TYPED_CONTROLS:
            raise InvalidAction(
                f"type content has the control character U+{ord(char):04X}, which no key types"
            )


def _normalise_keys(keys: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    if not isinstance(keys, tuple | list):
        raise InvalidAction("keys must be a list of key names")
    if not keys:
        raise InvalidAction("hotkey needs at least one key")
    if len(keys) > MAX_HOTKEY_KEYS:
        raise InvalidAction(
            f"hotkey has {len(keys):,} keys, over the cap of {MAX_HOTKEY_KEYS} keys held together"
        )
    normalised = []
    for key in keys:
        if not isinstance(key, str):
            raise InvalidAction("keys must be a list of key names")
        name = key.strip().lower()
        name = KEY_ALIASES.get(name, name)
        if name not in KEY_NAMES:
            raise InvalidAction(f"unknown key name {excerpt(key)} in hotkey")
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


# Actions whose effect is not a change of the screen: waiting, ending, and a copy (which leaves
# the screen as it is by design).
_NOT_MEANT_TO_CHANGE = frozenset({ActionType.WAIT, ActionType.FINISHED, ActionType.CALL_USER})
_COPY_KEYS = frozenset({("ctrl", "c"), ("ctrl", "insert")})


def meant_to_change_screen(action: Mapping[str, Any]) -> bool:
    """Whether an action (its JSON) is meant to change the screen: anything but ``wait()``, an
    ending, or a copy. Such an action that left the screen as it was did nothing visible."""
    if ActionType(action["type"]) in _NOT_MEANT_TO_CHANGE:
        return False
    return tuple(action.get("keys") or ()) not in _COPY_KEYS
