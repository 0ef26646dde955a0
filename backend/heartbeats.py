"""A job's heartbeat, beaten from a thread of its own while the job lives.

A long job (a rollout's run, an episode's evaluation) marks its row as alive every ``every``
seconds, whatever the job is doing meanwhile (a setup that sleeps, a screen that will not keep
still). The beat is a conditional update: ``rows`` matches the row only while it is still this
job's (its attempt, its status), so a job taken for lost and superseded beats nothing.
A heartbeat goes stale when the job's process is gone, or when the job is still at work past
its ``limit_s`` (stuck): then it stops beating, and whoever watches for silent jobs takes it up.
"""

import threading
import time
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone


class Heartbeat:
    def __init__(
        self,
        rows: QuerySet[Any],
        every: float,
        field: str = "heartbeat_at",
        limit_s: float | None = None,
    ) -> None:
        self.rows, self.every, self.field = rows, every, field
        self.until = None if limit_s is None else time.monotonic() + limit_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="heartbeat", daemon=True)

    def run(self) -> None:
        while not self.stop.wait(self.every):
            if self.until is not None and time.monotonic() > self.until:
                return  # stuck past its limit: the job is left to go stale
            try:
                self.rows.update(**{self.field: timezone.now()})
            finally:
                connection.close()  # back to the pool between beats

    def __enter__(self) -> "Heartbeat":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
