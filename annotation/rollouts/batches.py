"""Autonomous rollouts: a model version running a project's tasks by itself on pooled desktops.

**A batch** (``RolloutBatch``) is tasks × k samples × a model version (a second version may take
a share of the samples, chosen from the episode id as for people). Creating it fixes its tasks
and makes one ``Rollout`` row per sample; the batch is then a background job with a row: status,
progress, counts, pause, resume and cancel.

**Dispatch** (``dispatch``, on every change and periodically) starts queued rollouts while the
batch has fewer than ``max_concurrent`` running and holds fewer than ``desktop_share`` of its
template's desktops (at least one): people keep the rest of the pool, so a batch never starves
annotators. Each start leases a ready desktop to the batch's creator, makes an ``Episode`` with
``mode=autonomous`` and queues ``run_rollout`` on its host's rollout queue
(``vm_pool.models.rollout_queue``: the host's rollout workers, a process per core, share the
runs). No ready desktop: it tries again at the next dispatch.

**A run** (``annotation.rollouts.runs``) is the live loop without a person: setup, observe, ask
the model, record its proposals, take the first valid one as the step's decision (``auto``), execute
it, settle, observe, and again. After every model answer the stop rules (``rollout_rules``) may end
it: finished or call_user, the step limit, invalid outputs in a row, a loop, no screen change. An
episode ends as any other (``end_episode``): the task's evaluator scores it when it has one, and the
desktop goes back to the pool. Then ``annotation.rollouts.validation`` judges the trajectory.

**Worker loss.** A run takes its attempt by setting the rollout's heartbeat, and beats every
step. A job delivered again (its worker died: the jobs are acknowledged late) or a periodic
check finds a rollout whose heartbeat is older than ``TANDEM_ROLLOUT_STALE_SECONDS``: its
episode is ended ``env_failed`` and kept, and the rollout is queued again for a fresh attempt. A
rollout that ended is never run again, so no finished rollout is lost. Its validation beats the
same heartbeat at every try (it retries while the evaluator scores); the periodic check sends
the validation again when an ended rollout's heartbeat went stale, its job lost with its worker
(as is an evaluation lost so, by ``evaluations.recover_lost``).

**Cancel** stops new rollouts at once; a running one ends at its next step with the stop reason
``cancelled`` and its desktop goes back.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.episodes.leases import end_episode
from annotation.job_names import DISPATCH_ROLLOUTS, QUEUES, RUN_ROLLOUT, VALIDATE_ROLLOUT
from annotation.models import (
    BatchStatus,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    Project,
    Rollout,
    RolloutBatch,
    RolloutStatus,
    Task,
)
from annotation.rollouts import rules as rollout_rules
from backend.accounts.models import User
from backend.attempts import refuse_while_alive
from backend.celery import send_after_commit
from backend.errors import DomainError
from model_serving.models import ModelVersion
from model_serving.versions import choose_version
from vm_pool import pool
from vm_pool.models import rollout_queue

logger = logging.getLogger(__name__)

DESKTOP_LEASE_S = 300  # renewed at every step
MAX_SAMPLES = 16
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens")


def stale_seconds() -> int:
    """A running rollout whose heartbeat is this old lost its worker."""
    return int(settings.TANDEM_ROLLOUT_STALE_SECONDS)


class RolloutRejected(DomainError):
    code = "rollout_rejected"


# --- batches -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchRequest:
    tasks: list[Task]
    samples_per_task: int
    model_version: ModelVersion
    version_b: ModelVersion | None = None
    version_b_share: float = 0.0
    sampling: dict[str, Any] | None = None
    stop_rules: dict[str, Any] | None = None
    max_concurrent: int = 4
    desktop_share: float = 0.5
    name: str = ""


def create_batch(project: Project, user: User, request: BatchRequest) -> RolloutBatch:
    """Check the request, record the batch and its rollouts, and start dispatching."""
    if not request.tasks:
        raise RolloutRejected("a batch needs at least one task")
    if not 1 <= request.samples_per_task <= MAX_SAMPLES:
        raise RolloutRejected(f"samples per task are 1 to {MAX_SAMPLES}")
    if not 1 <= request.max_concurrent <= 64:
        raise RolloutRejected("max_concurrent is 1 to 64")
    if not 0 < request.desktop_share <= 1:
        raise RolloutRejected("desktop_share is a share of the pool, in (0, 1]")
    if not 0 <= request.version_b_share <= 1:
        raise RolloutRejected("version_b_share is a share of the samples, in [0, 1]")
    for version in (request.model_version, request.version_b):
        if version is not None and version.serving_status != ModelVersion.Serving.SERVING:
            raise RolloutRejected(
                f"model version {version.name} is {version.serving_status}, not served: "
                "serve it first, so its endpoint is checked"
            )
    unknown = [k for k in (request.sampling or {}) if k not in SAMPLING_KEYS]
    if unknown:
        raise RolloutRejected(f"unknown sampling settings {unknown}; known: {SAMPLING_KEYS}")
    foreign = [t.pk for t in request.tasks if t.project_id != project.pk]
    if foreign:
        raise RolloutRejected(f"tasks {foreign} are not this project's")
    branches = [t.external_id for t in request.tasks if t.branch_of_id is not None]
    if branches:
        raise RolloutRejected(
            f"branch tasks are for people, not rollouts: {', '.join(branches[:5])}"
        )
    blocked = [t.external_id for t in request.tasks if t.cannot_run]
    if blocked:
        raise RolloutRejected(f"tasks that cannot run here: {', '.join(blocked)}")
    max_steps = min(t.max_steps for t in request.tasks)
    try:
        rules = rollout_rules.StopRules.from_json(
            {"max_steps": max_steps, **(request.stop_rules or {})}
        )
    except ValueError as error:
        raise RolloutRejected(f"stop rules: {error}") from None
    pool.template_named(project.environment_template)  # the pool must have it
    with transaction.atomic():
        batch = RolloutBatch.objects.create(
            project=project,
            name=request.name,
            model_version=request.model_version,
            version_b=request.version_b,
            version_b_share=request.version_b_share if request.version_b else 0.0,
            task_ids=[t.pk for t in request.tasks],
            samples_per_task=request.samples_per_task,
            sampling=dict(request.sampling or {}),
            stop_rules=rules.as_json(),
            max_concurrent=request.max_concurrent,
            desktop_share=request.desktop_share,
            created_by=user,
        )
        Rollout.objects.bulk_create(
            Rollout(batch=batch, task=task, sample=sample)
            for task in request.tasks
            for sample in range(request.samples_per_task)
        )
        refresh_counts(batch.pk)
        send_after_commit(DISPATCH_ROLLOUTS, [batch.pk], QUEUES[DISPATCH_ROLLOUTS])
    return batch


def set_status(batch: RolloutBatch, status: str) -> RolloutBatch:
    """Pause, resume or cancel a batch."""
    with transaction.atomic():
        batch = RolloutBatch.objects.select_for_update().get(pk=batch.pk)
        allowed: dict[str, tuple[str, ...]] = {
            BatchStatus.PAUSED: (BatchStatus.QUEUED, BatchStatus.RUNNING),
            BatchStatus.RUNNING: (BatchStatus.PAUSED,),
            BatchStatus.CANCELLED: (BatchStatus.QUEUED, BatchStatus.RUNNING, BatchStatus.PAUSED),
        }
        if batch.status not in allowed.get(status, ()):
            raise RolloutRejected(f"a {batch.status} batch cannot become {status}")
        batch.status = status
        fields = ["status"]
        if status == BatchStatus.CANCELLED:
            batch.rollouts.filter(status=RolloutStatus.QUEUED).update(
                status=RolloutStatus.CANCELLED, ended_at=timezone.now()
            )
            if not batch.rollouts.filter(status=RolloutStatus.RUNNING).exists():
                batch.finished_at = timezone.now()
                fields.append("finished_at")
        batch.save(update_fields=fields)
        refresh_counts(batch.pk)
        send_after_commit(DISPATCH_ROLLOUTS, [batch.pk], QUEUES[DISPATCH_ROLLOUTS])
    return batch


@contextmanager
def counted(batch_id: int) -> Iterator[None]:
    """A change to a batch's rollouts and the batch's counts, in one transaction: whoever reads a
    rollout's new status reads counts that hold it. The batch's row is locked before any
    rollout's, as everywhere (dispatch, cancel), so two changes counted at once wait in turn."""
    with transaction.atomic():
        list(RolloutBatch.objects.select_for_update().filter(pk=batch_id).values_list("pk"))
        yield
        refresh_counts(batch_id)


def refresh_counts(batch_id: int) -> None:
    """The batch's progress and counts from its rollouts' rows, counted under the batch's row
    lock: two rollouts validated at once each count what the other committed, and the later
    count is the one written. Callers hold the batch's lock already or no rollout's lock, so
    the lock order stays batch first."""
    with transaction.atomic():
        list(RolloutBatch.objects.select_for_update().filter(pk=batch_id).values_list("pk"))
        rows = Rollout.objects.filter(batch_id=batch_id)
        by_status = dict(
            rows.values_list("status").annotate(n=Count("id")).values_list("status", "n")
        )
        total = sum(by_status.values())
        done = sum(by_status.get(s, 0) for s in (RolloutStatus.ENDED, RolloutStatus.VALIDATED))
        done += by_status.get(RolloutStatus.CANCELLED, 0)
        verdicts = rows.filter(status=RolloutStatus.VALIDATED).aggregate(
            passed=Count("id", filter=Q(verdict=True)), failed=Count("id", filter=Q(verdict=False))
        )
        RolloutBatch.objects.filter(pk=batch_id).update(
            progress=done / total if total else 1.0,
            counts={"total": total, **by_status, **verdicts},
        )


# --- dispatch ------------------------------------------------------------------------------


def dispatch(batch_id: int) -> int:
    """Start what the batch may start now; mark it succeeded when nothing is left. Returns how
    many rollouts started."""
    recover_stale(batch_id)
    started = 0
    with transaction.atomic():
        # Waiting for the lock, not skipping: a dispatch that skipped while another read the
        # rollouts would leave a rollout that ended meanwhile unanswered until the beat's.
        batch = (
            RolloutBatch.objects.select_for_update(of=("self",))
            .select_related("project", "model_version", "version_b", "created_by")
            .filter(pk=batch_id)
            .first()
        )
        if batch is None or batch.status in (BatchStatus.SUCCEEDED,):
            return 0
        running = batch.rollouts.filter(status=RolloutStatus.RUNNING).count()
        if batch.status == BatchStatus.CANCELLED:
            if running == 0 and batch.finished_at is None:
                batch.finished_at = timezone.now()
                batch.save(update_fields=["finished_at"])
            return 0
        queued = batch.rollouts.filter(status=RolloutStatus.QUEUED).order_by("sample", "task_id")
        if running == 0 and not queued.exists():
            batch.status = BatchStatus.SUCCEEDED
            batch.finished_at = timezone.now()
            batch.save(update_fields=["status", "finished_at"])
            refresh_counts(batch.pk)
            return 0
        if batch.status == BatchStatus.PAUSED:
            return 0
        if batch.status == BatchStatus.QUEUED:
            batch.status = BatchStatus.RUNNING
            batch.started_at = timezone.now()
            batch.save(update_fields=["status", "started_at"])
        template = pool.template_named(batch.project.environment_template)
        desktops = max(1, int(batch.desktop_share * template.max_desktops))
        for rollout in queued[: max(0, min(batch.max_concurrent, desktops) - running)]:
            if not _start(batch, rollout, template):
                break
            started += 1
        refresh_counts(batch.pk)
    return started


def _start(batch: RolloutBatch, rollout: Rollout, template: Any) -> bool:
    try:
        desktop = pool.lease_desktop(
            template, batch.created_by, f"rollout:{rollout.pk}", DESKTOP_LEASE_S
        )
    except pool.NoDesktopAvailable:
        return False
    episode = Episode.objects.create(
        task=rollout.task,
        mode=EpisodeMode.AUTONOMOUS,
        annotator=batch.created_by,
        desktop=desktop,
        desktop_generation=desktop.generation,
    )
    version = choose_version(
        episode.pk, batch.model_version, batch.version_b, batch.version_b_share
    )
    assert version is not None
    episode.served_version = version
    episode.model_name = version.served_name
    episode.model_version = version.name
    episode.save(update_fields=["served_version", "model_name", "model_version"])
    rollout.episode = episode
    rollout.status = RolloutStatus.RUNNING
    rollout.attempt += 1
    rollout.heartbeat_at = None
    rollout.started_at = timezone.now()
    rollout.save(update_fields=["episode", "status", "attempt", "heartbeat_at", "started_at"])
    send_after_commit(RUN_ROLLOUT, [rollout.pk, rollout.attempt], rollout_queue(desktop.host))
    return True


def recover_stale(batch_id: int | None = None, now: Any = None) -> int:
    """Queue again the running rollouts whose worker was lost (their episodes end and stay),
    and validate again the ended ones whose validation's job was lost."""
    now = now or timezone.now()
    before = now - timedelta(seconds=stale_seconds())
    silent = Rollout.objects.filter(status=RolloutStatus.ENDED, heartbeat_at__lt=before)
    if batch_id is not None:
        silent = silent.filter(batch_id=batch_id)
    for rollout_id in list(silent.values_list("pk", flat=True)):
        # Marked first: the check after this one leaves it to the job sent now.
        ended = Rollout.objects.filter(
            pk=rollout_id, status=RolloutStatus.ENDED, heartbeat_at__lt=before
        )
        if ended.update(heartbeat_at=now):
            logger.info("rollout %s: its validation's job was lost; sent again", rollout_id)
            send_after_commit(VALIDATE_ROLLOUT, [rollout_id], QUEUES[VALIDATE_ROLLOUT])
    stale = Rollout.objects.filter(
        status=RolloutStatus.RUNNING,
        started_at__lt=before,
    ).filter(
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=now - timedelta(seconds=stale_seconds()))
    )
    if batch_id is not None:
        stale = stale.filter(batch_id=batch_id)
    recovered = 0
    for rollout_id in list(stale.values_list("pk", flat=True)):
        if _requeue(rollout_id, now):
            recovered += 1
    return recovered


def _requeue(rollout_id: int, now: Any) -> bool:
    with transaction.atomic():
        rollout = Rollout.objects.select_for_update().filter(pk=rollout_id).first()
        stale_before = now - timedelta(seconds=stale_seconds())
        if rollout is None or rollout.status != RolloutStatus.RUNNING:
            return False
        if rollout.heartbeat_at is not None and rollout.heartbeat_at >= stale_before:
            return False
        if rollout.episode_id is not None:
            end_episode(rollout.episode_id, EpisodeOutcome.ENV_FAILED, "its worker was lost")
        rollout.status = RolloutStatus.QUEUED
        rollout.episode = None
        rollout.save(update_fields=["status", "episode"])
    logger.info("rollout %s lost its worker; queued again", rollout_id)
    return True


def active_batches() -> list[int]:
    return list(
        RolloutBatch.objects.filter(
            status__in=(BatchStatus.QUEUED, BatchStatus.RUNNING, BatchStatus.PAUSED)
        ).values_list("pk", flat=True)
    )


# --- attempts -------------------------------------------------------------------------------


def take_attempt(rollout_id: int, attempt: int) -> Rollout | None:
    """The rollout for this job, or None when it is not this job's to run. A delivery that
    finds its attempt already taken runs it only once that attempt went silent."""
    now = timezone.now()
    fresh = Rollout.objects.filter(
        pk=rollout_id, attempt=attempt, status=RolloutStatus.RUNNING, heartbeat_at__isnull=True
    ).update(heartbeat_at=now)
    if fresh:
        return Rollout.objects.select_related("batch__project", "task", "episode__desktop").get(
            pk=rollout_id
        )
    rollout = Rollout.objects.filter(pk=rollout_id).first()
    if rollout is None or rollout.attempt != attempt or rollout.status != RolloutStatus.RUNNING:
        return None
    stale = timedelta(seconds=stale_seconds())
    what = f"rollout {rollout_id} attempt {attempt}"
    refuse_while_alive(rollout.heartbeat_at, stale, now, what)  # another delivery of it runs
    _requeue(rollout_id, now)  # the delivery before this one died mid-run
    send_after_commit(DISPATCH_ROLLOUTS, [rollout.batch_id], QUEUES[DISPATCH_ROLLOUTS])
    return None
