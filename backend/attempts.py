"""One attempt at a long job's row at a time: the rule every re-delivered job follows.

A long job (a dataset export, a fine-tuning run, a rollout) is delivered again when its worker
dies (``acks_late``), so two deliveries may meet on one row. The row keeps the number of its
attempt and a heartbeat (``backend.heartbeats``). A delivery that finds the row's heartbeat
fresher than ``stale`` leaves it to the attempt that beats and asks to be delivered again later
(``AttemptAlive``, saying when that heartbeat goes stale); one that finds it stale, or never
beaten, may take the row over as a new attempt (``take``, under the row's lock). Work then
writes only where ``attempt`` is still its own, so a superseded attempt changes nothing.
"""

from datetime import datetime, timedelta
from typing import Any


class AttemptAlive(Exception):
    """Another attempt at this row is running and alive: deliver again after ``seconds``."""

    def __init__(self, seconds: float, what: str = "another attempt") -> None:
        super().__init__(f"{what} is running; retry in {seconds:.0f} s")
        self.seconds = seconds


def refuse_while_alive(
    heartbeat_at: datetime | None, stale: timedelta, now: datetime, what: str = "another attempt"
) -> None:
    """Raise ``AttemptAlive`` while a heartbeat at ``heartbeat_at`` is fresher than ``stale``."""
    if heartbeat_at is not None and now - heartbeat_at < stale:
        raise AttemptAlive((heartbeat_at + stale - now).total_seconds() + 1, what)


def take(row: Any, running: bool, stale: timedelta, now: datetime) -> None:
    """Within the caller's transaction, with ``row`` locked: unless a running attempt is alive,
    count a new attempt on the row and beat for it (the caller saves the row)."""
    if running:
        refuse_while_alive(row.heartbeat_at, stale, now)
    row.attempt += 1
    row.heartbeat_at = now
