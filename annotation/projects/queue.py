"""The task queue: claiming the next task, leases, heartbeats, assignment.

The rule for "next task", in order:

1. If the annotator already holds a task in the asked projects, that task is returned again
   with its lease renewed (a reload or a second tab resumes; nobody holds two tasks).
2. Else the highest-priority task a manager assigned to them (oldest first on ties).
3. Else the highest-priority task of the project pool, but not the task they were last
   handed: a task given back (released, or its lease lapsed) does not come straight back to
   the person who gave it back, as a honeypot never does. When nothing else is left for them,
   it does (a honeypot too).

Quality control (``annotation.quality``) adds two rules:

- **Overlap.** In a project whose ``overlap`` is k > 1, a submitted task returns to the pool
  until k different annotators have submitted it, and nobody is handed a task they submitted.
- **Honeypots.** Before rule 3 (after rule 2: a task from outside the list of tasks assigned
  to them would read as gold while that list is not empty), with the project's
  ``honeypot_rate`` as the chance, an active honeypot (``status`` ``gold``) the annotator may
  run comes first; never right after another one, so a queue with only gold left hands out no
  gold twice in a row. It reads as a pool claim. Between runs a honeypot's task goes back to
  ``gold``, never to the pool.

Each candidate is read with ``SELECT … FOR UPDATE SKIP LOCKED`` inside one transaction that
also marks it claimed, so concurrent claimers never get the same task and never wait on each
other's rows. Claims by one user are serialised on that user's row, which makes rule 1 exact.

A claim gives a lease: a fresh ``lease_id`` and an expiry ``TANDEM_LEASE_SECONDS`` ahead.
A task that cannot run here (``Task.cannot_run``: its setup needs a third-party account, see
``annotation.projects.support``) is never handed out, whether pooled or assigned, and cannot be
assigned.

Heartbeats carrying that lease id push the expiry forward; they are refused once the lease
has lapsed. A task whose episode is running is not returned when its lease lapses: the
episode is paused and both are kept for the annotator for a grace period
(``annotation.episodes.loop.pause_lapsed_episodes``). ``return_lapsed_leases`` (run periodically by
Celery beat, after the pause) puts the other lapsed tasks back in the pool.
"""

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from annotation.models import (
    Episode,
    EpisodeMode,
    Honeypot,
    Project,
    Task,
    TaskEvent,
    TaskStatus,
)
from backend.accounts.models import User
from backend.errors import DomainError
from backend.notifications import notify_user


class NoTaskAvailable(DomainError):
    status_code = 404
    code = "no_task_available"


class LeaseLost(DomainError):
    status_code = 409
    code = "lease_lost"


class AssignmentRefused(DomainError):
    status_code = 409
    code = "assignment_refused"


@dataclass(frozen=True)
class Claim:
    task: Task
    lease_id: uuid.UUID
    lease_expires_at: datetime
    reason: str
    resumed: bool


def lease_duration() -> timedelta:
    return timedelta(seconds=settings.TANDEM_LEASE_SECONDS)


def _event(task: Task, kind: str, actor: User | None, reason: str = "") -> TaskEvent:
    return TaskEvent(
        task=task,
        kind=kind,
        actor=actor,
        # The id, not the user: reading it would cost a query per event (per task of a batch).
        assignee_id=task.assignee_id,
        lease_id=task.lease_id,
        reason=reason[:300],
    )


def claim_next_task(user: User, projects: QuerySet[Project]) -> Claim:
    """Give ``user`` their next task from ``projects`` under a fresh lease (rules above)."""
    now = timezone.now()
    # Plain ids, so that PostgreSQL can walk the pool's partial index instead of sorting.
    asked = list(projects.values_list("pk", "name", "overlap", "honeypot_rate"))
    names = {pk: name for pk, name, _, _ in asked}
    with transaction.atomic():
        User.objects.select_for_update().filter(pk=user.pk).values_list("pk").get()
        # A held task is resumed even when its lease lapsed a moment ago: until the reaper
        # returns it to the pool, nobody else can have it.
        held = (
            Task.objects.select_for_update()
            .filter(project_id__in=list(names), assignee=user, status=TaskStatus.IN_PROGRESS)
            .first()
        )
        if held is not None:
            assert held.lease_id is not None
            held.lease_expires_at = now + lease_duration()
            held.save(update_fields=["lease_expires_at", "updated_at"])
            return Claim(held, held.lease_id, held.lease_expires_at, "resumed your held task", True)

        candidates = (
            Task.objects.select_for_update(skip_locked=True)
            .filter(cannot_run="")
            .order_by("-priority", "id")
        )
        if any(overlap > 1 for _, _, overlap, _ in asked):
            candidates = candidates.exclude(pk__in=_submitted_by(user))
        task = candidates.filter(
            project_id__in=list(names), status=TaskStatus.ASSIGNED, assignee=user
        ).first()
        if task is not None:
            reason = f"assigned to you; highest priority ({task.priority}) in your own queue"
        else:
            drawn = _honeypot_drawn(max((rate for _, _, _, rate in asked), default=0.0))
            task = _honeypot(user, list(names)) if drawn else None
            pool = candidates.filter(project_id__in=list(names), status=TaskStatus.QUEUED)
            if task is None:
                task = pool.exclude(pk__in=_last_claimed(user)).first()
                if task is None and not drawn:  # only gold may be left: never two in a row
                    task = _honeypot(user, list(names))
            if task is None:  # nothing else is left: what they gave back comes back to them
                task = _given_back(user, pool, list(names))
            if task is None:
                raise NoTaskAvailable("No task is available for you right now.")
            reason = _pool_reason(task, names)

        task.status = TaskStatus.IN_PROGRESS
        task.assignee = user
        task.lease_id = uuid.uuid4()
        task.lease_expires_at = now + lease_duration()
        task.claimed_at = now
        task.claim_reason = reason
        task.save(
            update_fields=[
                "status",
                "assignee",
                "lease_id",
                "lease_expires_at",
                "claimed_at",
                "claim_reason",
                "updated_at",
            ]
        )
        _event(task, TaskEvent.Kind.CLAIMED, user, reason).save()
        return Claim(task, task.lease_id, task.lease_expires_at, reason, False)


def _pool_reason(task: Task, names: dict[int, str]) -> str:
    return f"highest priority ({task.priority}) in the pool of {names[task.project_id]}"


def _last_claimed(user: User) -> QuerySet[TaskEvent, Any]:
    """The task ``user`` was last handed (a subquery of the claim's own query)."""
    return (
        TaskEvent.objects.filter(kind=TaskEvent.Kind.CLAIMED, actor=user)
        .order_by("-at", "-id")
        .values("task_id")[:1]
    )


def as_left(kind: str) -> str:
    """The status a task reads as, to the annotator whose lease ended with ``kind``: what they
    did to it, not what became of it (gold again, back in the pool for overlap, reviewed),
    which would tell them of a quality check."""
    return TaskStatus.SUBMITTED if kind == TaskEvent.Kind.SUBMITTED else TaskStatus.QUEUED


def _submitted_by(user: User) -> QuerySet[TaskEvent, Any]:
    return TaskEvent.objects.filter(kind=TaskEvent.Kind.SUBMITTED, actor=user).values("task_id")


def _honeypot_drawn(rate: float) -> bool:
    """Whether this claim draws a honeypot, with ``rate`` (the highest among the projects)."""
    return rate > 0 and random.random() < rate


def _honeypot(user: User, project_ids: list[int]) -> Task | None:
    """An active honeypot ``user`` may run now (the module's rules), locked; None if none."""
    if Honeypot.objects.filter(task_id__in=_last_claimed(user)).exists():
        return None
    return _gold_for(user, project_ids).order_by("?").first()


def _gold_for(user: User, project_ids: list[int]) -> QuerySet[Task]:
    """The honeypots' tasks ``user`` may run, to lock: not one they submitted or gave the gold
    of."""
    runnable = Honeypot.objects.filter(active=True, task_id=OuterRef("pk")).exclude(
        Q(task_id__in=_submitted_by(user)) | Q(gold_episode__annotator=user)
    )
    return (
        Task.objects.select_for_update(skip_locked=True)
        .filter(project_id__in=project_ids, status=TaskStatus.GOLD, cannot_run="")
        .filter(project__honeypot_rate__gt=0)
        .filter(Exists(runnable))
    )


def _given_back(user: User, pool: QuerySet[Task], project_ids: list[int]) -> Task | None:
    """The task ``user`` was last handed, when it is free again (given back: pooled, or a
    honeypot gold again); None otherwise."""
    last = _last_claimed(user)
    return (
        pool.filter(pk__in=last).first() or _gold_for(user, project_ids).filter(pk__in=last).first()
    )


def _after_submit(task: Task) -> str:
    """The status a submitted task takes: ``gold`` for a honeypot, back to the pool while
    fewer than the project's k annotators submitted it, else submitted."""
    gold = Exists(Honeypot.objects.filter(task=task, active=True))
    overlap, is_gold = Project.objects.filter(pk=task.project_id).values_list("overlap", gold).get()
    if is_gold:
        return TaskStatus.GOLD
    if overlap > 1:
        done = (
            TaskEvent.objects.filter(task=task, kind=TaskEvent.Kind.SUBMITTED)
            .values("actor")
            .distinct()
            .count()
        )
        if done < overlap:
            return TaskStatus.QUEUED
    return TaskStatus.SUBMITTED


def _live_lease(task_id: int, lease_id: uuid.UUID, user: User) -> QuerySet[Task]:
    return Task.objects.filter(
        pk=task_id,
        assignee=user,
        status=TaskStatus.IN_PROGRESS,
        lease_id=lease_id,
        lease_expires_at__gt=timezone.now(),
    )


def heartbeat(task_id: int, lease_id: uuid.UUID, user: User) -> datetime:
    """Extend a live lease and return its new expiry; a lapsed or foreign lease is refused."""
    expires = timezone.now() + lease_duration()
    if _live_lease(task_id, lease_id, user).update(lease_expires_at=expires) != 1:
        raise LeaseLost("This lease is no longer yours: it lapsed or the task was released.")
    return expires


def _end_lease(task_id: int, lease_id: uuid.UUID, user: User, status: str, kind: str) -> Task:
    with transaction.atomic():
        task = _live_lease(task_id, lease_id, user).select_for_update().first()
        if task is None:
            raise LeaseLost("This lease is no longer yours: it lapsed or the task was released.")
        return end_held_task(task, status, kind, user)


def end_held_task(task: Task, status: str, kind: str, actor: User | None, reason: str = "") -> Task:
    """End the lease of a task whose row the caller has locked: submitted, or back in the pool.

    The episode that held the task is the authority here (its end is what ends the lease), so
    the lease's expiry is not checked: a paused episode's task is kept past it."""
    _event(task, kind, actor, reason).save()
    if status == TaskStatus.SUBMITTED:
        status = _after_submit(task)
    elif status == TaskStatus.QUEUED and Honeypot.objects.filter(task=task, active=True).exists():
        status = TaskStatus.GOLD
    task.status = status
    if status in (TaskStatus.QUEUED, TaskStatus.GOLD):
        task.assignee = None
    task.lease_id = None
    task.lease_expires_at = None
    task.save(update_fields=["status", "assignee", "lease_id", "lease_expires_at", "updated_at"])
    return task


def keep_for(task: Task, until: datetime, kind: str, reason: str) -> None:
    """Hold a locked task's lease until ``until`` (a paused or resumed episode keeps its task)."""
    _event(task, kind, None, reason).save()
    task.lease_expires_at = until
    task.save(update_fields=["lease_expires_at", "updated_at"])


def release_task(task_id: int, lease_id: uuid.UUID, user: User) -> Task:
    """Give a held task back to the project pool."""
    return _end_lease(task_id, lease_id, user, TaskStatus.QUEUED, TaskEvent.Kind.RELEASED)


def submit_task(task_id: int, lease_id: uuid.UUID, user: User) -> Task:
    """Mark a held task submitted for review; the lease ends."""
    return _end_lease(task_id, lease_id, user, TaskStatus.SUBMITTED, TaskEvent.Kind.SUBMITTED)


def return_lapsed_leases(now: datetime | None = None) -> int:
    """Put every task whose lease lapsed, and whose episode (if any) has ended, back in the
    pool; return how many. Tasks with a running episode are the episodes' to pause or end."""
    now = now or timezone.now()
    with transaction.atomic():
        lapsed = list(
            Task.objects.select_for_update(skip_locked=True)
            .filter(status=TaskStatus.IN_PROGRESS, lease_expires_at__lte=now)
            .exclude(
                pk__in=Episode.objects.filter(
                    ended_at__isnull=True, mode=EpisodeMode.INTERACTIVE
                ).values("task_id")
            )
        )
        TaskEvent.objects.bulk_create(
            _event(t, TaskEvent.Kind.LEASE_LAPSED, None, "no heartbeat before the lease expired")
            for t in lapsed
        )
        gold = set(
            Honeypot.objects.filter(task__in=lapsed, active=True).values_list("task_id", flat=True)
        )
        Task.objects.filter(pk__in=[t.pk for t in lapsed if t.pk in gold]).update(
            status=TaskStatus.GOLD,
            assignee=None,
            lease_id=None,
            lease_expires_at=None,
            updated_at=now,
        )
        Task.objects.filter(pk__in=[t.pk for t in lapsed if t.pk not in gold]).update(
            status=TaskStatus.QUEUED,
            assignee=None,
            lease_id=None,
            lease_expires_at=None,
            updated_at=now,
        )
    return len(lapsed)


@dataclass(frozen=True)
class Assignment:
    """What assigning a selection did: the runnable tasks moved; the ones that cannot run here
    stayed where they were, each with its reason."""

    assigned: int
    cannot_run: list[tuple[str, str]]  # (task id, reason)

    @property
    def message(self) -> str:
        moved = f"{self.assigned} task{'' if self.assigned == 1 else 's'} assigned."
        if not self.cannot_run:
            return moved
        left = "; ".join(f"{task}: {reason}" for task, reason in self.cannot_run[:5])
        more = "…" if len(self.cannot_run) > 5 else ""
        count = len(self.cannot_run)
        return f"{moved} {count} cannot run here and stayed unassigned ({left}{more})."


def assign_tasks(tasks: Iterable[Task], assignee: User, actor: User) -> Assignment:
    """Put tasks in ``assignee``'s own queue. Only queued or assigned tasks can move; those
    that cannot run here are left out and named."""
    ids = [t.pk for t in tasks]
    with transaction.atomic():
        rows = list(Task.objects.select_for_update().filter(pk__in=ids).order_by("id"))
        busy = [
            t.external_id for t in rows if t.status not in (TaskStatus.QUEUED, TaskStatus.ASSIGNED)
        ]
        if busy:
            raise AssignmentRefused(
                "Only queued or assigned tasks can be assigned; these are not: "
                + ", ".join(busy[:20]),
                details={"tasks": busy},
            )
        unrunnable = [(t.external_id, t.cannot_run) for t in rows if t.cannot_run]
        rows = [t for t in rows if not t.cannot_run]
        for task in rows:
            task.status = TaskStatus.ASSIGNED
            task.assignee = assignee
            task.updated_at = timezone.now()
        Task.objects.bulk_update(rows, ["status", "assignee", "updated_at"])
        TaskEvent.objects.bulk_create(
            _event(t, TaskEvent.Kind.ASSIGNED, actor, f"assigned by {actor.username}") for t in rows
        )
        if rows:
            notify_user(
                assignee.pk,
                "tasks_assigned",
                {"count": len(rows), "task_ids": [t.pk for t in rows], "by": actor.username},
            )
    return Assignment(len(rows), unrunnable)


@dataclass(frozen=True)
class Unassignment:
    """What unassigning a selection did. Assigned tasks go back to the pool; the others are
    left as they are: queued ones were in nobody's queue, started ones keep their work."""

    unassigned: int
    not_assigned: int
    started: int

    @property
    def left_alone(self) -> int:
        return self.not_assigned + self.started

    @property
    def message(self) -> str:
        parts = [
            f"{_tasks(self.unassigned)} back in the pool."
            if self.unassigned
            else "No task went back to the pool."
        ]
        if self.not_assigned:
            were = "was" if self.not_assigned == 1 else "were"
            parts.append(f"{_tasks(self.not_assigned)} {were} not assigned to anyone.")
        if self.started:
            parts.append(f"{_tasks(self.started)} already started: left alone.")
        return " ".join(parts)


def _tasks(count: int) -> str:
    return f"{count} task" if count == 1 else f"{count} tasks"


def unassign_tasks(tasks: Iterable[Task], actor: User) -> Unassignment:
    """Return assigned tasks to the project pool. Tasks being worked on are left alone."""
    ids = [t.pk for t in tasks]
    with transaction.atomic():
        rows = list(
            Task.objects.select_for_update()
            .filter(pk__in=ids, status=TaskStatus.ASSIGNED)
            .order_by("id")
        )
        returned = [t.pk for t in rows]
        TaskEvent.objects.bulk_create(
            _event(t, TaskEvent.Kind.UNASSIGNED, actor, f"unassigned by {actor.username}")
            for t in rows
        )
        Task.objects.filter(pk__in=returned).update(
            status=TaskStatus.QUEUED, assignee=None, updated_at=timezone.now()
        )
        others = list(
            Task.objects.filter(pk__in=ids)
            .exclude(pk__in=returned)
            .values_list("status", flat=True)
        )
    queued = others.count(TaskStatus.QUEUED)
    return Unassignment(unassigned=len(rows), not_assigned=queued, started=len(others) - queued)
