"""What a client may send on an episode's socket, read strictly before anything is stored.

Every frame is checked here, in this order, and a frame that fails a check is refused with a
``MessageRefused`` naming the problem (the consumer answers it with an ``error`` event and keeps
the socket open; nothing is stored):

- a text frame (binary frames are refused) of at most ``MAX_MESSAGE_CHARS`` characters, holding
  one JSON object;
- its ``type`` is one of ``decide``, ``heartbeat``, ``abandon``, ``state``, and it carries no
  field other than its type's;
- no string anywhere in it holds a NUL character or a lone surrogate (PostgreSQL stores neither
  in text nor in JSON);
- a ``decide`` has ``step`` (an integer from 1) and ``decision`` (a string); ``proposal`` is a
  rank (an integer from 0) or null; ``thought`` a string of at most ``MAX_THOUGHT_CHARS``
  characters; ``action`` a JSON object or null whose text arguments (typed text, an answer, an
  app name) hold at most ``MAX_TEXT_CHARS`` characters; ``decision_ms`` an integer from 0 to
  ``MAX_DECISION_MS`` (a day) or null; ``observation`` the sha256 of the screenshot decided on,
  or null.

Integers are JSON integers, never strings or booleans (``"3"`` and ``true`` are refused), and
indexes and ranks stay within PostgreSQL's integer. What the values mean (the decision's name,
whether the action is valid on this screen and platform, whether the step is the open one) is
the live loop's to judge (``annotation.episodes.loop``).
"""

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard, cast

from backend.errors import DomainError

MAX_MESSAGE_CHARS = 64 * 1024
MAX_THOUGHT_CHARS = 10_000
MAX_TEXT_CHARS = 10_000
MAX_DECISION_MS = 24 * 60 * 60 * 1000
MAX_INDEX = 2**31 - 1  # PostgreSQL's integer

Command = Literal["heartbeat", "abandon", "state"]

_DECIDE_FIELDS = (
    "type",
    "step",
    "decision",
    "proposal",
    "thought",
    "action",
    "decision_ms",
    "observation",
)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_FIELDS: dict[str, tuple[str, ...]] = {
    "decide": _DECIDE_FIELDS,
    "heartbeat": ("type",),
    "abandon": ("type",),
    "state": ("type",),
}
_TEXT_ARGUMENTS = ("content", "app")


class MessageRefused(DomainError):
    status_code = 400
    code = "invalid_message"

    def __init__(self, message: str, field: str | None = None, step: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.step = step


@dataclass(frozen=True)
class Decide:
    step: int
    decision: str
    proposal: int | None
    thought: str
    action: dict[str, Any] | None
    decision_ms: int | None
    observation: str | None


def read_frame(text: str | None) -> Any:
    """The JSON value of one WebSocket frame (``text`` is None for a binary frame)."""
    if text is None:
        raise MessageRefused("Binary messages are not accepted; send JSON text.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise MessageRefused(
            f"The message is too large ({len(text)} characters; at most {MAX_MESSAGE_CHARS})."
        )
    try:
        return json.loads(text)
    except ValueError as error:
        raise MessageRefused(f"The message is not JSON: {error}.") from error
    except RecursionError as error:
        raise MessageRefused("The message is nested too deeply.") from error


def parse_message(content: Any) -> Decide | Command:
    """A checked ``Decide``, or the name of a command that carries nothing else."""
    if not isinstance(content, dict):
        raise MessageRefused(f"A message must be a JSON object, not {_json_type(content)}.")
    kind = content.get("type")
    if not isinstance(kind, str) or kind not in _FIELDS:
        raise MessageRefused(
            f"Unknown message type {_short(kind)}; one of {', '.join(_FIELDS)}.", field="type"
        )
    step = content.get("step") if kind == "decide" and _is_int(content.get("step")) else None
    unknown = sorted(str(key) for key in content if key not in _FIELDS[kind])
    if unknown:
        raise MessageRefused(
            f"A {kind} message has no field {', '.join(map(_short, unknown[:5]))}.",
            field=unknown[0],
            step=step,
        )
    _refuse_bad_strings(content, step)
    if kind != "decide":
        return cast(Command, kind)
    index = _integer(content, "step", 1, MAX_INDEX, step, required=True)
    assert index is not None  # required
    return Decide(
        step=index,
        decision=_string(content, "decision", None, step, required=True),
        proposal=_integer(content, "proposal", 0, MAX_INDEX, step),
        thought=_string(content, "thought", MAX_THOUGHT_CHARS, step),
        action=_action(content, step),
        decision_ms=_integer(content, "decision_ms", 0, MAX_DECISION_MS, step),
        observation=_observation(content, step),
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _integer(
    content: dict[str, Any],
    field: str,
    low: int,
    high: int,
    step: int | None,
    required: bool = False,
) -> int | None:
    value = content.get(field)
    if value is None and not required:
        return None
    if not _is_int(value):
        raise MessageRefused(
            f"'{field}' must be an integer, not {_json_type(value)}.", field=field, step=step
        )
    if not low <= value <= high:
        raise MessageRefused(
            f"'{field}' must be from {low} to {high}, not {_short(value)}.", field=field, step=step
        )
    return value


def _string(
    content: dict[str, Any], field: str, limit: int | None, step: int | None, required: bool = False
) -> str:
    value = content.get(field)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise MessageRefused(
            f"'{field}' must be a string, not {_json_type(value)}.", field=field, step=step
        )
    if limit is not None and len(value) > limit:
        raise MessageRefused(
            f"'{field}' is too long ({len(value)} characters; at most {limit}).",
            field=field,
            step=step,
        )
    return value


def _observation(content: dict[str, Any], step: int | None) -> str | None:
    value = content.get("observation")
    if value is None:
        return None
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise MessageRefused(
            "'observation' must be a screenshot's sha256 (64 lowercase hex characters).",
            field="observation",
            step=step,
        )
    return value


def _action(content: dict[str, Any], step: int | None) -> dict[str, Any] | None:
    action = content.get("action")
    if action is None:
        return None
    if not isinstance(action, dict):
        raise MessageRefused(
            f"'action' must be an object, not {_json_type(action)}.", field="action", step=step
        )
    for name in _TEXT_ARGUMENTS:
        text = action.get(name)
        if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
            raise MessageRefused(
                f"'action.{name}' is too long ({len(text)} characters; at most {MAX_TEXT_CHARS}).",
                field=f"action.{name}",
                step=step,
            )
    return action


def _refuse_bad_strings(content: dict[str, Any], step: int | None) -> None:
    """Refuse NUL characters and lone surrogates in any string of the message, keys included."""
    pending: list[tuple[str, Any]] = [("", content)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                pending.append((path, key))
                pending.append((f"{path}.{key}" if path else str(key), item))
        elif isinstance(value, list):
            pending.extend((f"{path}[{index}]", item) for index, item in enumerate(value))
        elif isinstance(value, str):
            where = path or "the message"
            if "\x00" in value:
                raise MessageRefused(
                    f"'{where}' holds a NUL character, which cannot be stored.",
                    field=path,
                    step=step,
                )
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as error:
                raise MessageRefused(
                    f"'{where}' is not valid Unicode (a lone surrogate).", field=path, step=step
                ) from error
