"""What every reader shares: the error for what it cannot read, and a bounded listing."""

from collections.abc import Callable
from typing import Any

from vm_pool.evaluation.bounds import LimitHit

LISTING_LINES = 100_000

Reader = Callable[[str | None, str | None, dict[str, Any]], Any]
"""``reader(path, text, config)``: the gathered file's path (None when the desktop had none) or
text, and the getter's own settings; returns the metric's value."""


class Unreadable(LimitHit):
    """What a getter gathered is not what its reader reads."""

    def __init__(self, detail: str, limit: str = "file format") -> None:
        super().__init__(limit, detail)


def lines(text: str | None) -> list[str]:
    lines = (text or "").splitlines()
    if len(lines) > LISTING_LINES:
        raise LimitHit("listing lines", f"{len(lines)} lines (at most {LISTING_LINES})")
    return lines
