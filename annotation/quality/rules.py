"""What counts as right at a step, stated once: gold answers, agreement, and how sure a rate is.

Pure: action JSON in, verdicts out. Gold, overlap, scorecards and exports all use these rules.

- **A gold answer** is one right way to take a step. It names:
  - the action type;
  - for an action with a point (click, double click, right click, drag, scroll), where the
    point must fall: a ``region`` box ``[x0, y0, x1, y1]`` (inclusive, in the screenshot's
    pixels), or a ``point`` with a ``radius`` (``DEFAULT_RADIUS_PX`` when left out). A drag
    names its end the same way (``end_region``, or ``end`` with ``end_radius``);
  - for ``type``, the ``text``, compared after a ``normalise`` choice: ``exact``, ``trim``
    (surrounding whitespace), ``whitespace`` (runs of whitespace as one space, trimmed) or
    ``casefold`` (``whitespace``, and case ignored);
  - for ``hotkey``, the ``keys``, as a set (``ctrl s`` is ``s ctrl``), in lower case;
  - for ``scroll``, optionally its ``direction`` (the amount is never judged).
  Other types (``finished``, ``call_user``, ``wait``) need only the type.
- **A step's gold** is a non-empty list of answers. An action is right when it matches any of
  them, and a miss otherwise.
- **Two decisions agree** when each is right by the gold answer the other makes with the
  default radius and ``whitespace`` text. The rule is symmetric. Overlapping annotators are
  compared step by step while their screens are comparable.
- **A rate** of k right out of n is shown with its Wilson 95 % interval: a few samples say
  little.
"""

import math
from typing import Any

from vm_pool.actions import ScreenSize

DEFAULT_RADIUS_PX = 20
NORMALISE = ("exact", "trim", "whitespace", "casefold")
POINTED = ("click", "left_double", "right_single", "drag", "scroll")
DIRECTIONS = ("up", "down", "left", "right")
MAX_ANSWERS = 10
Z_95 = 1.959963984540054


class GoldRefused(ValueError):
    """A gold answer that cannot be used; the message says which and why."""


def check_answers(answers: Any, screen: ScreenSize) -> list[dict[str, Any]]:
    """The answers of one step's gold, checked against the step's screen and put in their
    canonical form; ``GoldRefused`` for anything else, before anything is stored."""
    if not isinstance(answers, list) or not answers:
        raise GoldRefused("A gold step needs at least one right answer.")
    if len(answers) > MAX_ANSWERS:
        raise GoldRefused(f"A gold step takes at most {MAX_ANSWERS} right answers.")
    return [_checked(answer, screen, n) for n, answer in enumerate(answers, start=1)]


def _checked(answer: Any, screen: ScreenSize, n: int) -> dict[str, Any]:
    if not isinstance(answer, dict) or not isinstance(answer.get("type"), str):
        raise GoldRefused(f"Answer {n} names no action type.")
    kind = answer["type"]
    known = {"type", "region", "point", "radius", "end_region", "end", "end_radius", "text",
             "normalise", "keys", "direction"}  # fmt: skip
    unknown = sorted(set(answer) - known)
    if unknown:
        raise GoldRefused(f"Answer {n} has fields no answer has: {', '.join(unknown)}.")
    out: dict[str, Any] = {"type": kind}
    if kind in POINTED:
        out.update(_place(answer, "region", "point", "radius", screen, n))
        if kind == "drag":
            out.update(_place(answer, "end_region", "end", "end_radius", screen, n))
        if kind == "scroll" and answer.get("direction") is not None:
            if answer["direction"] not in DIRECTIONS:
                raise GoldRefused(f"Answer {n}: a scroll goes {', '.join(DIRECTIONS)}.")
            out["direction"] = answer["direction"]
    elif kind == "type":
        if not isinstance(answer.get("text"), str) or answer["text"] == "":
            raise GoldRefused(f"Answer {n}: a type answer needs the text.")
        normalise = answer.get("normalise", "whitespace")
        if normalise not in NORMALISE:
            raise GoldRefused(f"Answer {n}: normalise is one of {', '.join(NORMALISE)}.")
        out.update(text=answer["text"], normalise=normalise)
    elif kind == "hotkey":
        keys = answer.get("keys")
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise GoldRefused(f"Answer {n}: a hotkey answer needs its keys.")
        out["keys"] = sorted({k.lower() for k in keys})
    elif kind not in ("finished", "call_user", "wait", "open_app"):
        raise GoldRefused(f"Answer {n}: {kind!r} is no action of the space.")
    return out


def _place(
    answer: dict[str, Any], region: str, point: str, radius: str, screen: ScreenSize, n: int
) -> dict[str, Any]:
    """Where a point must fall: a box inside the screen, or a point on it with a radius."""
    if answer.get(region) is not None:
        box = answer[region]
        if not (isinstance(box, list) and len(box) == 4 and all(type(v) is int for v in box)):
            raise GoldRefused(f"Answer {n}: {region} is [x0, y0, x1, y1] in pixels.")
        x0, y0, x1, y1 = box
        if not (0 <= x0 <= x1 < screen.width and 0 <= y0 <= y1 < screen.height):
            raise GoldRefused(
                f"Answer {n}: the {region} {box} is not a box on the "
                f"{screen.width}x{screen.height} screen."
            )
        return {region: box}
    at = answer.get(point)
    if not (isinstance(at, list) and len(at) == 2 and all(type(v) is int for v in at)):
        raise GoldRefused(f"Answer {n} needs a {region} or a {point} [x, y].")
    if not (0 <= at[0] < screen.width and 0 <= at[1] < screen.height):
        raise GoldRefused(f"Answer {n}: the {point} {at} is off the screen.")
    within = answer.get(radius, DEFAULT_RADIUS_PX)
    if type(within) is not int or not 0 < within <= max(screen.width, screen.height):
        raise GoldRefused(f"Answer {n}: the {radius} is a number of pixels above 0.")
    return {point: at, radius: within}


def is_right(action: dict[str, Any] | None, answers: list[dict[str, Any]]) -> bool:
    """Whether the final action matches any of a step's (checked) gold answers."""
    return action is not None and any(_matches(action, answer) for answer in answers)


def _matches(action: dict[str, Any], answer: dict[str, Any]) -> bool:
    if action.get("type") != answer["type"]:
        return False
    kind = answer["type"]
    if kind in POINTED:
        if not _inside(action.get("point"), answer, "region", "point", "radius"):
            return False
        if kind == "drag" and not _inside(action.get("end"), answer, "end_region", "end",
                                          "end_radius"):  # fmt: skip
            return False
        return "direction" not in answer or action.get("direction") == answer["direction"]
    if kind == "type":
        return _normal(action.get("content") or "", answer["normalise"]) == _normal(
            answer["text"], answer["normalise"]
        )
    if kind == "hotkey":
        return sorted({str(k).lower() for k in action.get("keys") or []}) == answer["keys"]
    return True


def _inside(at: Any, answer: dict[str, Any], region: str, point: str, radius: str) -> bool:
    if not isinstance(at, list | tuple) or len(at) != 2:
        return False
    x, y = at
    if region in answer:
        x0, y0, x1, y1 = answer[region]
        return x0 <= x <= x1 and y0 <= y <= y1
    return math.dist((x, y), answer[point]) <= answer[radius]


def _normal(text: str, how: str) -> str:
    if how == "exact":
        return text
    if how == "trim":
        return text.strip()
    joined = " ".join(text.split())
    return joined.casefold() if how == "casefold" else joined


def answer_from(action: dict[str, Any]) -> dict[str, Any]:
    """The gold answer a decided action makes by default: its type, its point within the
    default radius (and a drag's end), its text as ``whitespace``, its keys, its direction."""
    answer: dict[str, Any] = {"type": action["type"]}
    if action["type"] in POINTED:
        answer.update(point=list(action["point"]), radius=DEFAULT_RADIUS_PX)
        if action["type"] == "drag":
            answer.update(end=list(action["end"]), end_radius=DEFAULT_RADIUS_PX)
        if action["type"] == "scroll" and action.get("direction"):
            answer["direction"] = action["direction"]
    elif action["type"] == "type":
        answer.update(text=action.get("content") or "", normalise="whitespace")
    elif action["type"] == "hotkey":
        answer["keys"] = sorted({str(k).lower() for k in action.get("keys") or []})
    return answer


def agree(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two people's final actions at comparable screens agree (see the module)."""
    if a is None or b is None:
        return False
    return is_right(a, [answer_from(b)]) and is_right(b, [answer_from(a)])


def wilson(right: int, total: int) -> tuple[float, float] | None:
    """The Wilson 95 % interval of a rate of ``right`` out of ``total``; None for no samples."""
    if total <= 0:
        return None
    p = right / total
    spread = Z_95 * math.sqrt(p * (1 - p) / total + Z_95**2 / (4 * total**2))
    centre = p + Z_95**2 / (2 * total)
    scale = 1 + Z_95**2 / total
    return max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale)
