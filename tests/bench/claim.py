"""The "next task" claim under load: 16 annotators claiming at once from 10,000 queued tasks.

Each annotator is a thread with its own database connection that claims and at once submits,
so every task is claimed at most once; a task with two ``claimed`` events was handed to two
people. Only ``claim_next_task`` is timed, over the claims after a warm-up.

The same claim by one annotator alone is measured first, in the same run, as the anchor: it
tells the cost of the claim itself apart from the wait for a machine shared by 16 clients.

Real annotators are separate clients (web requests served by separate worker processes), so the
16 are measured twice: as 16 processes, each with its own interpreter and connection
(``claim_p95_ms``, the goal's figure), and as 16 threads of this one process
(``claim_p95_ms_threads``), where each claim also waits for the one interpreter lock. The
difference between the two is the share of the p95 that is the benchmark's own queueing.

The anchor, in the same run: the same 16 processes claiming from the pool and submitting by one
SQL statement each, without Tandem's rules or its ORM (``claim_client.run_sql``):
``claim_p95_ms_one_statement``, and Tandem's p95 over it (``claim_p95_vs_one_statement``). On
a machine whose two cores the 16 clients and PostgreSQL share, the p95 is mostly the wait for a
core, and that wait grows with the CPU each claim and submit takes: the anchor tells what is
the machine's and what is Tandem's own.
"""

import multiprocessing
import random
import statistics
import threading
import time

from django.contrib.auth.hashers import make_password
from django.db import connection
from django.db.models import Count

from annotation.models import Membership, Project, Task, TaskEvent
from annotation.projects.access import projects_where
from annotation.projects.queue import claim_next_task, submit_task
from backend.accounts.models import User
from backend.accounts.roles import Capability, Role
from tests.bench import claim_client, fresh_database
from tests.support.services import database_address

TASKS = 10_000
CLIENTS = 16
WARMUP_CLAIMS = 320
TIMED_CLAIMS = 2_000
SOLO_WARMUP_CLAIMS = 50
SOLO_TIMED_CLAIMS = 200

GOALS = {
    "claim_p95_ms": "≤ 30",
    "claim_double_assignments": "0",
}


def _populate() -> list[User]:
    """One project with TASKS queued tasks of varied priority and CLIENTS annotators."""
    project = Project.objects.create(name="Claim benchmark")
    priorities = random.Random(0)
    Task.objects.bulk_create(
        (
            Task(
                project=project,
                external_id=f"bench-{i:05d}",
                instruction=f"Benchmark task {i}",
                priority=priorities.randint(0, 9),
            )
            for i in range(TASKS)
        ),
        batch_size=2_000,
    )
    unusable = make_password(None)
    users = User.objects.bulk_create(
        User(username=f"annotator-{i:02d}", password=unusable) for i in range(CLIENTS)
    )
    Membership.objects.bulk_create(
        Membership(project=project, user=user, role=Role.ANNOTATOR) for user in users
    )
    return users


class _Annotator(threading.Thread):
    """Claims and submits ``warmup`` tasks, waits at ``start_line``, then times ``timed`` claims."""

    def __init__(self, user: User, warmup: int, timed: int, start_line: threading.Barrier):
        super().__init__(name=f"bench-{user.username}")
        self.user = user
        self.warmup = warmup
        self.timed = timed
        self.start_line = start_line
        self.claim_seconds: list[float] = []
        self.error: BaseException | None = None

    def _claim_and_submit(self) -> float:
        projects = projects_where(self.user, Capability.WORK_QUEUE)
        started = time.perf_counter()
        claim = claim_next_task(self.user, projects)
        elapsed = time.perf_counter() - started
        submit_task(claim.task.pk, claim.lease_id, self.user)
        return elapsed

    def run(self) -> None:
        try:
            for _ in range(self.warmup):
                self._claim_and_submit()
            self.start_line.wait()
            for _ in range(self.timed):
                self.claim_seconds.append(self._claim_and_submit())
        except BaseException as exc:
            self.error = exc
            self.start_line.abort()
        finally:
            connection.close()


def _claim_together(users: list[User], warmup: int, timed: int) -> tuple[list[float], float]:
    """Run one annotator thread per user; return the timed claims in ms and the timed seconds."""
    started: list[float] = []
    start_line = threading.Barrier(len(users), action=lambda: started.append(time.perf_counter()))
    annotators = [
        _Annotator(user, warmup // len(users), timed // len(users), start_line) for user in users
    ]
    for annotator in annotators:
        annotator.start()
    for annotator in annotators:
        annotator.join()
    elapsed = time.perf_counter() - started[0] if started else 0.0
    # When one annotator fails, the others only report the barrier it broke.
    errors = [a.error for a in annotators if a.error is not None]
    errors.sort(key=lambda error: isinstance(error, threading.BrokenBarrierError))
    if errors:
        raise errors[0]
    return [s * 1000 for a in annotators for s in a.claim_seconds], elapsed


def _claim_in_processes(
    users: list[User], warmup: int, timed: int, anchor: bool = False
) -> tuple[list[float], float]:
    """As ``_claim_together``, with each annotator in its own process; with ``anchor``, each
    claims and submits by one SQL statement each (``claim_client.run_sql``)."""
    project = Project.objects.values_list("pk", flat=True).get()
    connection.close()
    database = database_address()
    context = multiprocessing.get_context("spawn")
    start_line = context.Barrier(len(users) + 1)
    out = context.Queue()
    counts = (warmup // len(users), timed // len(users), start_line, out)
    workers = [
        context.Process(target=claim_client.run_sql, args=(database, u.pk, project, *counts))
        if anchor
        else context.Process(target=claim_client.run, args=(u.username, *counts))
        for u in users
    ]
    for worker in workers:
        worker.start()
    start_line.wait(timeout=180)  # every process has warmed up
    started = time.perf_counter()
    claims: list[float] = []
    for _ in workers:
        kind, found = out.get(timeout=600)
        if kind == "error":
            raise RuntimeError(found)
        claims.extend(found)
    elapsed = time.perf_counter() - started
    for worker in workers:
        worker.join()
    return claims, elapsed


def _p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1]


def _double_assignments() -> int:
    return (
        TaskEvent.objects.filter(kind=TaskEvent.Kind.CLAIMED)
        .values("task")
        .annotate(claims=Count("id"))
        .filter(claims__gt=1)
        .count()
    )


def run() -> dict[str, float | int]:
    with fresh_database():
        users = _populate()
        solo_ms, _ = _claim_together(users[:1], SOLO_WARMUP_CLAIMS, SOLO_TIMED_CLAIMS)
        threads_ms, _ = _claim_together(users, WARMUP_CLAIMS, TIMED_CLAIMS)
        together_ms, seconds = _claim_in_processes(users, WARMUP_CLAIMS, TIMED_CLAIMS)
        double_assignments = _double_assignments()  # Tandem's claims only, not the anchor's
        anchor_ms, _ = _claim_in_processes(users, WARMUP_CLAIMS, TIMED_CLAIMS, anchor=True)
        return {
            "claim_p50_ms": statistics.median(together_ms),
            "claim_p95_ms": _p95(together_ms),
            "claim_p50_ms_threads": statistics.median(threads_ms),
            "claim_p95_ms_threads": _p95(threads_ms),
            "claim_p95_ms_one_statement": _p95(anchor_ms),
            "claim_p95_vs_one_statement": _p95(together_ms) / _p95(anchor_ms),
            "claim_double_assignments": double_assignments,
            "claim_tasks": TASKS,
            "claim_clients": CLIENTS,
            "claim_throughput_per_s": len(together_ms) / seconds,
            "claim_p50_ms_1_client": statistics.median(solo_ms),
            "claim_p95_ms_1_client": _p95(solo_ms),
        }
