"""A job's heartbeat, beaten from a thread of its own while the job lives.

A long job (a rollout's run, an episode's evaluation) marks its row as alive every ``every``
seconds, whatever the job is doing meanwhile (a setup that sleeps, a screen that will not keep
still). The beat is a conditional update: ``rows`` matches the row only while it is still this
job's (its attempt, its status), so a job taken for lost and superseded beats nothing.
A heartbeat goes stale only when the job's process is gone.
"""

import threading
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone


class Heartbeat:
    def __init__(self, rows: QuerySet[Any], every: float, field: str = "heartbeat_at") -> None:
        self.rows, self.every, self.field = rows, every, field
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="heartbeat", daemon=True)

    def run(self) -> None:
        while not self.stop.wait(self.every):
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
