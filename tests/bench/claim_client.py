"""One annotator of the claim benchmark in a process of its own (``spawn``: a fresh
interpreter and connection, as a real client's request has). Kept apart from ``claim``, which
imports Django's models at its top: a spawned process imports this module before Django is set
up.

``run_sql`` is the anchor: the pool claim and the submit as one SQL statement each, sent with
psycopg alone. It keeps none of Tandem's rules (a held task, assignments, overlap, honeypots,
the reason) and no ORM: what 16 clients and PostgreSQL cost by themselves on this machine.
"""

import time
from typing import Any

import psycopg

POOL_CLAIM = """
WITH picked AS (
    SELECT id FROM annotation_task
    WHERE project_id = %(project)s AND status = 'queued' AND cannot_run = ''
    ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE annotation_task AS task
    SET status = 'in_progress', assignee_id = %(user)s, lease_id = gen_random_uuid(),
        lease_expires_at = now() + interval '2 minutes', claimed_at = now(),
        claim_reason = 'the pool', updated_at = now()
    FROM picked WHERE task.id = picked.id
    RETURNING task.id, task.lease_id
), event AS (
    INSERT INTO annotation_taskevent (task_id, kind, actor_id, assignee_id, lease_id, reason, at)
    SELECT id, 'claimed', %(user)s, %(user)s, lease_id, 'the pool', now() FROM claimed
)
SELECT id, lease_id FROM claimed
"""
SUBMIT = """
WITH submitted AS (
    UPDATE annotation_task
    SET status = 'submitted', lease_id = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE id = %(task)s AND lease_id = %(lease)s AND assignee_id = %(user)s
    RETURNING id
)
INSERT INTO annotation_taskevent (task_id, kind, actor_id, assignee_id, lease_id, reason, at)
SELECT id, 'submitted', %(user)s, %(user)s, %(lease)s, '', now() FROM submitted
"""


def run(username: str, warmup: int, timed: int, start_line: Any, out: Any) -> None:
    """Claim as ``username`` (``claim._Annotator``); put the timed claims in ms, or the error,
    on ``out``."""
    from tests.bench import setup_django

    try:
        setup_django()
        from backend.accounts.models import User  # Django: set up just above
        from tests.bench.claim import _Annotator  # Django: as above

        annotator = _Annotator(User.objects.get(username=username), warmup, timed, start_line)
        annotator.run()  # in this process's main thread
        if annotator.error is not None:
            raise annotator.error
        out.put(("claims", [s * 1000 for s in annotator.claim_seconds]))
    except BaseException as error:  # noqa: BLE001 - reported to the parent, which raises it
        start_line.abort()
        out.put(("error", f"{username}: {type(error).__name__}: {error}"))


def run_sql(
    database: dict[str, Any],
    user: int,
    project: int,
    warmup: int,
    timed: int,
    start_line: Any,
    out: Any,
) -> None:
    """As ``run``, with ``POOL_CLAIM`` and ``SUBMIT`` on a connection of its own (autocommit)."""
    try:
        with psycopg.connect(**database, autocommit=True) as connection:
            timings: list[float] = []
            for done in range(warmup + timed):
                if done == warmup:
                    start_line.wait()
                started = time.perf_counter()
                claimed = connection.execute(POOL_CLAIM, {"project": project, "user": user})
                task, lease = claimed.fetchone() or (None, None)
                elapsed = time.perf_counter() - started
                if task is None:
                    raise RuntimeError("the queue ran dry")
                connection.execute(SUBMIT, {"task": task, "lease": lease, "user": user})
                if done >= warmup:
                    timings.append(elapsed * 1000)
        out.put(("claims", timings))
    except BaseException as error:  # noqa: BLE001 - reported to the parent, which raises it
        start_line.abort()
        out.put(("error", f"user {user}: {type(error).__name__}: {error}"))
