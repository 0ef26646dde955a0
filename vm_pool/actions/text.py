"""UI-TARS-1.5 action text, piece by piece: reading a call ``name(argument='value', ...)``
with its quoted strings, points and boxes, and writing points and quoted strings back.

``Action.from_text`` and ``Action.to_text`` (``vm_pool.actions``) are built on these.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from vm_pool.actions.space import (
    MAX_CONTENT_CHARS,
    ActionType,
    InvalidAction,
    Point,
    excerpt,
    parse_action_type,
)

TEXT_ARGUMENTS = {
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
# The longest action text read: the longest content with every character escaped, and the
# rest of a call. Longer text is refused before it is read, so that reading it stays quick.
MAX_ACTION_TEXT_CHARS = 2 * MAX_CONTENT_CHARS + 1_000
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


def write_point(point: Point) -> str:
    return f"({point.x},{point.y})"


def quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{escaped}'"


def parse_call(text: str) -> tuple[ActionType, dict[str, str]]:
    """Split ``name(arg='value', …)`` into the action type and its raw string arguments."""
    if not isinstance(text, str):
        raise InvalidAction("action text must be a string")
    if len(text) > MAX_ACTION_TEXT_CHARS:
        raise InvalidAction(
            f"action text is {len(text):,} characters, over the cap of {MAX_ACTION_TEXT_CHARS:,}"
        )
    pos = _skip_space(text, 0)
    match = _NAME.match(text, pos)
    if match is None:
        raise InvalidAction("not an action call: expected name(argument='value', ...)")
    name = match.group()
    pos = _skip_space(text, match.end())
    if not text.startswith("(", pos):
        raise InvalidAction(f"not an action call: expected '(' after {name!r}")
    action_type = parse_action_type(name)
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
    return "the end of the text" if pos >= len(text) else f"position {pos}: {excerpt(text[pos:])}"


def text_value(field: str, raw: str) -> Any:
    if field in ("point", "end"):
        return _text_point(raw)
    if field == "amount":
        if not re.fullmatch(r"\s*\d{1,9}\s*", raw):
            raise InvalidAction(f"scroll amount must be a whole number, not {excerpt(raw)}")
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
        raise InvalidAction(f"not a point or a box: {excerpt(raw)}")
    group = next(g for g in match.groups() if g is not None)
    numbers = [Decimal(n) for n in re.findall(_NUMBER, group)]
    if len(numbers) == 2:
        x, y = numbers
    elif len(numbers) == 4:
        x, y = (numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2
    else:
        raise InvalidAction(
            f"a point has 2 numbers and a box 4, not {len(numbers)}: {excerpt(raw)}"
        )
    return Point(_round(x), _round(y))


def _round(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_HALF_UP))
