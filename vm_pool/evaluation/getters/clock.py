"""The clock getter: OSWorld's ``rule_relativeTime``, a rule whose dates are relative to today.

"Today" is the rule's own ``timezone``'s when it names one (an unknown zone is UTC, as in
OSWorld), otherwise the desktop's: its clock and zone, read with ``date``. The dates themselves
are worked out in the jail (``readers.relative_time``).
"""

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from vm_pool.evaluation.getters.base import Gathered, Getter, GetterError, Reading, read, require

DATE_COMMAND = ["date", "+%Y-%m-%dT%H:%M:%S%:z"]


def _now_in(zone: str) -> str:
    try:
        return datetime.now(ZoneInfo(zone)).isoformat()
    except (ZoneInfoNotFoundError, ValueError):
        return datetime.now(UTC).isoformat()


def rule_relativeTime(reading: Reading, config: dict[str, Any]) -> Gathered:  # noqa: N802
    rules = require(config, "rules")
    if not isinstance(rules, dict):
        raise GetterError("rule_relativeTime's 'rules' must be an object")
    zone = rules.get("timezone")
    if zone:
        return read("relative_time_rules", text=_now_in(str(zone)), rules=rules)
    clock = reading.control.run(DATE_COMMAND, timeout=10)
    if clock.returncode == 0:
        return read("relative_time_rules", text=clock.stdout, rules=rules)
    # Deliberate difference from OSWorld: without the desktop's clock it asks a geolocation
    # service for the grader's zone, an answer that depends on where the grader runs; here it
    # is UTC, OSWorld's own last fallback.
    return read("relative_time_rules", text=datetime.now(UTC).isoformat(), rules=rules)


GETTERS: dict[str, Getter] = {"rule_relativeTime": rule_relativeTime}
