"""OSWorld's ``rule_relativeTime``: a rule whose expected dates are relative to today.

The getter gathers "now" (the desktop's clock, or the rule's own ``timezone``'s, see
``getters.clock``); here the rule's ``relativeTime`` names ("tomorrow", "10th next month",
"next week Saturday", …) become dates and the expected values' placeholders are filled from them,
exactly as OSWorld's ``get_rule_relativeTime`` and ``apply_rules_to_timeFormat`` do:

- with only ``from``, the expected ``time`` (a string or a list of strings) is filled;
- with ``from`` and ``to``, the expected ``from`` and ``to`` are; the "split" names fill
  ``puDay``/``puMonth``/``puYear`` and ``doDay``/``doMonth``/``doYear`` instead;
- a ``to`` that names the same week or weekend as its ``from`` ("next Friday" after
  "next Monday", "next Sunday" after "next Saturday") is taken from the ``from`` date.

Placeholders, each replaced once: ``{DoW}`` (Mon), ``{Month}`` (Jan), ``{DayD}`` (5),
``{Year}``, ``{Month0D}`` (01), ``{month}`` (january), ``{MonthFull}`` (January), ``{Day0D}``
(05), ``{MonthD}`` (1). A name OSWorld does not know, or knows only as the other end of a range,
is a malformed rule (``MetricError``), as it is a crash there.
"""

import copy
from datetime import date, datetime, timedelta
from typing import Any

from vm_pool.evaluation.metrics.errors import MetricError
from vm_pool.evaluation.readers.base import Reader, Unreadable

NOW_CHARS = 64
_WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_MONTHS_FULL = ["January", "February", "March", "April", "May", "June", "July", "August",
                "September", "October", "November", "December"]  # fmt: skip
_NAMES = {
    "tomorrow", "5th next month", "10th next month", "11th next month", "this month",
    "this Saturday", "this Sunday", "next Monday", "next Friday", "next Saturday",
    "next Sunday", "next week Friday", "next week Saturday", "next week Sunday",
    "first monday four months later", "first monday eight months later",
    "next Monday split", "next Friday split",
}  # fmt: skip
"""The relative times OSWorld's table knows (``relativeTime_to_IntDay``)."""


def fill(time_format: str, day: date) -> str:
    """OSWorld's ``apply_rules_to_timeFormat``: each placeholder replaced once, in its order."""
    for placeholder, text in (
        ("{DoW}", _WEEKDAYS[day.weekday()]),
        ("{Month}", _MONTHS[day.month - 1]),
        ("{DayD}", str(day.day)),
        ("{Year}", str(day.year)),
        ("{Month0D}", f"{day.month:02d}"),
        ("{month}", _MONTHS_FULL[day.month - 1].lower()),
        ("{MonthFull}", _MONTHS_FULL[day.month - 1]),
        ("{Day0D}", f"{day.day:02d}"),
        ("{MonthD}", str(day.month)),
    ):
        time_format = time_format.replace(placeholder, text, 1)
    return time_format


def _next_month(today: date, day: int) -> date:
    return date(today.year + (today.month == 12), today.month % 12 + 1, day)


def _first_monday(today: date, months: int) -> date:
    """The first Monday of the month ``months`` later, as OSWorld computes it: the year turns
    when the month number passes 12."""
    year = today.year + 1 if today.month + months > 12 else today.year
    # Deliberate difference from OSWorld: it computes the month as (month + n) % 12, which is
    # 0 for a December target (April + 8, August + 4) and crashes; here that month is 12.
    month = (today.month + months) % 12 or 12
    first = date(year, month, 1)
    return first + timedelta(days=(7 - first.weekday()) % 7)


def _single(name: str, today: date) -> date:
    """The date of a ``relativeTime`` with only ``from``."""
    weekday = today.weekday()
    if name == "tomorrow":
        return today + timedelta(days=1)
    if name == "5th next month":
        return _next_month(today, 5)
    if name == "10th next month":
        return _next_month(today, 10)
    if name == "this month":
        return today
    if name == "next Monday":
        return today + timedelta(days=7 - weekday)
    if name == "first monday four months later":
        return _first_monday(today, 4)
    if name == "first monday eight months later":
        return _first_monday(today, 8)
    raise MetricError(f"relative time {name!r} is not known without a 'to'")


def _range_start(name: str, today: date) -> date:
    weekday = today.weekday()
    days: dict[str, int] = {
        "tomorrow": 1,
        "this Saturday": 5 - weekday,
        "next Monday": 7 - weekday,
        "next Monday split": 7 - weekday,
        "next Friday": 4 - weekday if weekday < 4 else (7 if weekday == 4 else 11 - weekday),
        "next Saturday": 5 - weekday if weekday < 5 else (7 if weekday == 5 else 6),
        "next week Friday": 7 - weekday + 4,
        "next week Saturday": 7 - weekday + 5,
        "next week Sunday": 7 - weekday + 6,
    }
    if name == "10th next month":
        return _next_month(today, 10)
    if name not in days:
        raise MetricError(f"relative time {name!r} is not known as a 'from'")
    return today + timedelta(days=days[name])


def _range_end(name: str, start_name: str, start: date, today: date) -> date:
    weekday = today.weekday()
    if name == "tomorrow":
        return today + timedelta(days=1)
    if name == "this Sunday":
        return today + timedelta(days=6 - weekday)
    if name == "11th next month":
        return _next_month(today, 11)
    if name in ("next Friday", "next Friday split"):
        if start_name in ("next Monday", "next Monday split"):
            return start + timedelta(days=4)
        return today + timedelta(days=4 - weekday if weekday < 4 else 11 - weekday)
    if name == "next Sunday":
        if start_name in ("next Friday", "next Saturday"):
            return start + timedelta(days=6 - start.weekday())
        return today + timedelta(days=6 - weekday if weekday < 6 else 7)
    if name == "next week Sunday":
        if start_name in ("next week Friday", "next week Saturday"):
            return start + timedelta(days=6 - start.weekday())
        return today + timedelta(days=7 - weekday + 6)
    raise MetricError(f"relative time {name!r} is not known as a 'to'")


def _filled(expected: dict[str, Any], keys: tuple[str, ...], day: date) -> None:
    for key in keys:
        if not isinstance(expected.get(key), str):
            raise MetricError(f"the rule's expected {key!r} must be a time format string")
        expected[key] = fill(expected[key], day)


def relative_rules(rules: dict[str, Any], today: date) -> dict[str, Any]:
    """The rule with its expected dates filled for ``today`` (see the module's docstring)."""
    relative = rules.get("relativeTime")
    filled = copy.deepcopy(rules)
    expected = filled.get("expected")
    if not isinstance(relative, dict) or "from" not in relative or not isinstance(expected, dict):
        raise MetricError("rule_relativeTime needs 'relativeTime' with 'from', and 'expected'")
    names = [relative["from"]] + ([relative["to"]] if "to" in relative else [])
    unknown = [name for name in names if name not in _NAMES]
    if unknown:
        raise MetricError(f"relative time {unknown[0]!r} is not known")
    if "to" not in relative:
        day = _single(relative["from"], today)
        time = expected.get("time")
        if isinstance(time, list) and all(isinstance(t, str) for t in time):
            expected["time"] = [fill(t, day) for t in time]
        else:
            _filled(expected, ("time",), day)
        return filled
    start_name, end_name = relative["from"], relative["to"]
    start = _range_start(start_name, today)
    split = start_name == "next Monday split"
    _filled(expected, ("puDay", "puMonth", "puYear") if split else ("from",), start)
    end = _range_end(end_name, start_name, start, today)
    split = end_name == "next Friday split"
    _filled(expected, ("doDay", "doMonth", "doYear") if split else ("to",), end)
    return filled


def relative_time_rules(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    """``text``: "now" as ISO 8601 with its offset (the getter's); ``config["rules"]``: the
    task's rule."""
    shown = (text or "").strip()
    if len(shown) > NOW_CHARS:
        raise Unreadable(f"the desktop's clock gave {len(shown)} characters, not a time")
    try:
        now = datetime.fromisoformat(shown)
    except ValueError as error:
        raise Unreadable(f"the desktop's clock gave {shown!r}, not a time") from error
    rules = config.get("rules")
    if not isinstance(rules, dict):
        raise MetricError("rule_relativeTime needs 'rules' (an object)")
    return relative_rules(rules, now.date())


READERS: dict[str, Reader] = {"relative_time_rules": relative_time_rules}
