"""Fine-tuning jobs: created by the API, run by a worker on the ``train`` queue, cancelled.

Lifecycle: ``queued`` → ``running`` → ``succeeded`` | ``failed`` | ``cancelled``.

- ``create_job`` checks everything that can be checked before a GPU is involved (the base
  model is one the deployment knows or a path, the stages and settings make a valid
  ``TrainingSpec``, the version name is free, no row is longer than ``max_length``:
  ``training.lengths``) and queues the job after commit. The web process never trains.
  ``estimate_cost`` says beforehand what a job would cost (``training.cost``).
- ``run_job`` (the worker) copies the pinned dataset files and checks their sha256s, trains
  (``model_serving.training.trainer``), writes the adapter, the training arguments, the
  datasets used and the library versions through Django's storage under
  ``finetune/job-<id>/attempt-<n>/``, then registers the model version **in the same
  transaction** that marks the job succeeded: a job that fails or is cancelled at any point
  leaves no version behind. Progress, the loss curve and log lines are written as it goes.
- ``cancel_job``: a queued job is cancelled at once; a running one is asked to stop, and the
  trainer's callback stops it between two steps.

**Attempts.** The job's message is acknowledged only when it ends (``acks_late``), so a job
whose worker died is delivered again. A delivery starts an *attempt* under the row's lock: it
bumps ``attempt`` and beats ``heartbeat_at`` as it works (every step, every log line). A
delivery that finds the job running with a heartbeat younger than
``TANDEM_FINETUNE_STALE_SECONDS`` (the broker redelivers long jobs whose worker is alive) is
retried later instead (``AttemptAlive``); one that finds it older takes over as a new attempt,
in a new artifacts folder. Every write of an attempt names its number, so an attempt that was
taken over can neither report nor register anything: it stops at its next step.

**Checkpoints.** An attempt stores a checkpoint every ``checkpoint_steps`` steps and each
finished stage's adapter (``model_serving.checkpoints``); the attempt that takes over resumes
from them, its loss curve kept up to that point. The job's end removes them.
"""

import json
import logging
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import F, JSONField, Value
from django.db.models.expressions import CombinedExpression
from django.utils import timezone

from backend import attempts
from backend.celery import send_after_commit
from backend.errors import DomainError
from model_serving.artifacts import MissingArtifacts, download_folder, upload_folder
from model_serving.checkpoints import StoredCheckpoints
from model_serving.evaluation import is_held_out
from model_serving.models import FINAL_STATUSES, FineTuneJob, JobStatus, ModelVersion
from model_serving.training import cost, data, lengths
from model_serving.training.resume import ResumePoint
from model_serving.training.spec import (
    SpecError,
    Stage,
    TrainingSpec,
    lora_settings,
)
from model_serving.training.spec import hyperparameters as hyperparameters_of
from model_serving.versions import is_adapter_name

logger = logging.getLogger(__name__)

MAX_LOG_CHARS = 64_000


class JobRejected(DomainError):
    status_code = 400
    code = "finetune_rejected"


class JobConflict(DomainError):
    status_code = 409
    code = "finetune_conflict"


class _CancelledLate(Exception):
    """The job was cancelled after training, before its version was registered."""


def resolve_base_model(base_model: str) -> str:
    """The path a worker loads ``base_model`` from: a name in ``TANDEM_BASE_MODELS``, or an
    absolute path (checked on the worker, which may see other disks than the web server)."""
    known: dict[str, str] = settings.TANDEM_BASE_MODELS
    if base_model in known:
        return known[base_model]
    if base_model.startswith("/"):
        return base_model
    names = ", ".join(sorted(known)) or "none configured"
    raise JobRejected(
        f"unknown base model {base_model!r}: give an absolute path or one of the deployment's "
        f"base models ({names}; TANDEM_BASE_MODELS)"
    )


def spec_of(job: FineTuneJob, parent_adapter: str = "") -> TrainingSpec:
    return TrainingSpec(
        base_model_path=job.base_model_path,
        stages=tuple(Stage.from_json(stage) for stage in job.stages),
        lora=lora_settings(job.lora),
        hyperparameters=hyperparameters_of(job.hyperparameters),
        parent_adapter=parent_adapter,
    )


def name_taken(version_name: str) -> bool:
    """Whether a model version has the name, or a job that has not failed will register it."""
    return (
        ModelVersion.objects.filter(name=version_name).exists()
        or FineTuneJob.objects.filter(version_name=version_name)
        .exclude(status__in=[JobStatus.FAILED, JobStatus.CANCELLED])
        .exists()
    )


def data_style(stages: list[Stage]) -> str:
    """The coordinate convention the stages' rows share: the one the trained version answers
    in. Datasets in two conventions are refused, naming an export in each."""
    styles = {stage.dataset.coordinate_style: stage.dataset.export_id for stage in stages}
    if len(styles) > 1:
        named = ", ".join(f"export {export_id} in {style}" for style, export_id in styles.items())
        raise JobRejected(
            "the datasets write coordinates in different conventions "
            f"({named}); one model answers in one",
            details={"coordinate_styles": sorted(styles)},
        )
    return next(iter(styles), "uitars15")


def create_job(
    *,
    stages: list[Stage],
    base_model: str,
    version_name: str,
    project_ids: list[int],
    created_by: Any,
    lora: dict[str, Any] | None = None,
    hyperparameters: dict[str, Any] | None = None,
    parent_version: ModelVersion | None = None,
    base_url: str = "",
    name: str = "",
) -> FineTuneJob:
    """Check and queue a job (on the ``train`` queue, once the transaction commits)."""
    if parent_version is not None:
        base_model = base_model or parent_version.base_model
        base_url = base_url or parent_version.base_url
    path = parent_version.base_model_path if parent_version is not None else ""
    path = path or resolve_base_model(base_model)
    style = data_style(stages)
    if parent_version is not None and parent_version.coordinate_style != style:
        raise JobRejected(
            f"the datasets write coordinates in {style}, but {parent_version.name} answers in "
            f"{parent_version.coordinate_style}: export them from a project that serves it"
        )
    if not is_adapter_name(version_name):
        raise JobRejected(
            f"{version_name!r} cannot name a model version with an adapter: use letters, "
            "digits, dots, dashes and underscores"
        )
    if name_taken(version_name):
        raise JobConflict(f"the model version name {version_name!r} is taken")
    job = FineTuneJob(
        name=name or version_name,
        base_model=base_model,
        base_model_path=path,
        parent_version=parent_version,
        stages=[stage.to_json() for stage in stages],
        project_ids=sorted(set(project_ids)),
        lora=lora or {},
        hyperparameters=hyperparameters or {},
        version_name=version_name,
        base_url=base_url,
        created_by=created_by,
    )
    try:
        spec = spec_of(job)
        spec.validate()
        cost.refuse_layers(spec.hyperparameters, path)
    except SpecError as error:
        raise JobRejected(str(error)) from None
    counter = lengths.TokenCounter.for_base(path)
    for stage in spec.stages:
        try:
            lengths.refuse_too_long(
                stage_lengths(stage, counter),
                spec.hyperparameters.max_length,
                stage.dataset.export_id,
            )
        except lengths.RowTooLong as error:
            estimated = "" if counter.exact else " (text tokens estimated)"
            raise JobRejected(f"{error}{estimated}") from None
    with transaction.atomic():
        try:
            with transaction.atomic():  # a savepoint
                job.save()
        except IntegrityError:  # another request for the same version won the race
            raise JobConflict(f"the model version name {version_name!r} is taken") from None
        send_after_commit(
            "model_serving.jobs.run_finetune_job", [job.pk], settings.TANDEM_TRAIN_QUEUE
        )
    return job


def stage_lengths(stage: Stage, counter: lengths.TokenCounter) -> list[lengths.RowLength]:
    """Every row's tokens in the stage's export, read from storage (text and image headers)."""
    shards = []
    try:
        for file in stage.dataset.parquet_files:
            shards.append(_open(f"{stage.dataset.location.rstrip('/')}/{file.name}"))
        return lengths.row_lengths(shards, stage.kind, counter)
    except (OSError, ValueError) as error:
        raise JobRejected(f"export {stage.dataset.export_id} cannot be measured: {error}") from None
    finally:
        for shard in shards:
            shard.close()


def estimate_cost(
    stages: list[Stage],
    base_model: str,
    hyperparameters: dict[str, Any] | None = None,
    parent_version: ModelVersion | None = None,
) -> dict[str, Any]:
    """What a job with these settings would cost (``training.cost``): rows, tokens per row,
    GPU memory and hours on the measured card, and the rows longer than ``max_length``."""
    if parent_version is not None:
        base_model = base_model or parent_version.base_model
    path = parent_version.base_model_path if parent_version is not None else ""
    path = path or resolve_base_model(base_model)
    try:
        hp = hyperparameters_of(hyperparameters)
        cost.refuse_layers(hp, path)
    except SpecError as error:
        raise JobRejected(str(error)) from None
    counter = lengths.TokenCounter.for_base(path)
    measured = [(stage, stage_lengths(stage, counter)) for stage in stages]
    estimate = cost.estimate(
        [(stage.kind, [row.tokens for row in rows]) for stage, rows in measured],
        hp,
        cost.architecture(path, base_model),
    )
    estimate["max_length"] = hp.max_length
    estimate["text_tokens"] = "counted" if counter.exact else "estimated"
    estimate["too_long"] = [
        {"export": stage.dataset.export_id, "row": row.name(stage.dataset.export_id)}
        | {"tokens": row.tokens}
        for stage, rows in measured
        for row in rows
        if row.tokens > hp.max_length
    ]
    return estimate


def cancel_job(job_id: int) -> FineTuneJob:
    with transaction.atomic():
        job = FineTuneJob.objects.select_for_update().get(pk=job_id)
        if job.status in FINAL_STATUSES:
            raise JobConflict(f"the job has already {job.status}")
        if job.status == JobStatus.QUEUED:
            job.status = JobStatus.CANCELLED
            job.finished_at = timezone.now()
            job.error = "cancelled before it started"
        job.cancel_requested = True
        job.save()
    return job


class _JobReporter:
    """What the trainer reports, written to the job's row by this attempt only."""

    def __init__(self, job: FineTuneJob) -> None:
        self.job_id = job.pk
        self.attempt = job.attempt
        self.lines: list[str] = []

    def _write(self, **fields: Any) -> None:
        FineTuneJob.objects.filter(
            pk=self.job_id, attempt=self.attempt, status=JobStatus.RUNNING
        ).update(heartbeat_at=timezone.now(), **fields)

    def progress(self, fraction: float) -> None:
        self._write(progress=round(fraction, 4))

    def loss(self, stage: int, kind: str, step: int, logs: dict[str, float]) -> None:
        # Appended in the database (jsonb ||): a step writes its point, not the whole curve.
        point = {"stage": stage + 1, "kind": kind, "step": step, "loss": logs["loss"]}
        self._write(
            loss_curve=CombinedExpression(
                F("loss_curve"), "||", Value([point], JSONField()), output_field=JSONField()
            )
        )

    def resume_from(self, point: ResumePoint) -> None:
        """Keep the curve up to where the run resumes: the finished stages, and the stage in
        progress up to its checkpoint."""
        stage = len(point.finished) + 1
        FineTuneJob.objects.filter(pk=self.job_id, attempt=self.attempt).update(
            loss_curve=[
                p
                for p in FineTuneJob.objects.get(pk=self.job_id).loss_curve
                if p["stage"] < stage or (p["stage"] == stage and p["step"] <= point.step)
            ]
        )

    def logs_with(self, line: str) -> str:
        """The log with ``line`` added, as stored."""
        self.lines.append(f"{timezone.now().isoformat(timespec='seconds')} {line}")
        return "\n".join(self.lines)[-MAX_LOG_CHARS:]

    def log(self, line: str) -> None:
        self._write(logs=self.logs_with(line))

    def cancelled(self) -> bool:
        """Cancelled, or taken over by a newer attempt: either way this one stops."""
        return not FineTuneJob.objects.filter(
            pk=self.job_id,
            attempt=self.attempt,
            status=JobStatus.RUNNING,
            cancel_requested=False,
        ).exists()

    def owns_job(self) -> bool:
        """No newer attempt has taken the job over."""
        return FineTuneJob.objects.filter(pk=self.job_id, attempt=self.attempt).exists()

    def finish(self, status: str, error: str = "") -> None:
        FineTuneJob.objects.filter(pk=self.job_id, attempt=self.attempt).exclude(
            status__in=FINAL_STATUSES
        ).update(status=status, error=error, finished_at=timezone.now())


def _claim(job_id: int) -> FineTuneJob | None:
    now = timezone.now()
    stale = timedelta(seconds=settings.TANDEM_FINETUNE_STALE_SECONDS)
    with transaction.atomic():
        job = FineTuneJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status in FINAL_STATUSES:
            return None
        if job.cancel_requested:  # cancelled while its worker was gone
            job.status = JobStatus.CANCELLED
            job.finished_at = now
            job.error = job.error or "cancelled while no worker was running it"
            job.save()
            return None
        attempts.take(job, job.status == JobStatus.RUNNING, stale, now)
        job.status = JobStatus.RUNNING
        job.started_at = now
        job.progress = 0.0
        job.save()  # the loss curve is kept up to the resume point (``resume_from``)
    return job


def run_job(job_id: int) -> str:
    """Train the job (on a ``train`` worker) and register its version; returns its status."""
    from model_serving.training.trainer import (  # weight: torch and TRL, train workers only
        TrainingCancelled,
        TrainingFailed,
        check_lengths,
        train,
    )

    job = _claim(job_id)
    if job is None:
        return "skipped"
    reporter = _JobReporter(job)
    prefix = f"finetune/job-{job.pk}/attempt-{job.attempt}"
    checkpoints = StoredCheckpoints(job.pk)
    try:
        with tempfile.TemporaryDirectory(prefix=f"tandem-finetune-{job.pk}-") as tmp:
            workdir = Path(tmp)
            resume = checkpoints.resume_point(workdir / "resume")
            reporter.resume_from(resume)
            parent_adapter = ""
            parent = job.parent_version
            if parent is not None and parent.adapter_location:
                reporter.log(f"continuing the adapter of {parent.name}")
                download_folder(parent.adapter_location, workdir / "parent")
                parent_adapter = str(workdir / "parent")
            spec = spec_of(job, parent_adapter)
            tables, shards = [], []
            for index, stage in enumerate(spec.stages):
                reporter.log(f"fetching export {stage.dataset.export_id} ({stage.kind})")
                paths = data.fetch(stage.dataset, _open, workdir / f"data-{index + 1}")
                shards.append(paths)
                tables.append(data.load(stage.dataset, paths, is_held_out, workdir / "tables"))
            check_lengths(spec, shards)
            outcome = train(spec, tables, workdir, reporter, checkpoints, resume)
            reporter.log("storing the adapter and the training record")
            adapter_files = upload_folder(outcome.adapter_dir, f"{prefix}/adapter")
            record = {
                "job": job.pk,
                "attempt": job.attempt,
                "base_model": job.base_model,
                "base_model_path": job.base_model_path,
                "parent_version": parent.name if parent else None,
                "datasets": [stage["dataset"] for stage in job.stages],
                "stages": outcome.stages,
                "lora": job.lora,
                "hyperparameters": job.hyperparameters,
                "libraries": outcome.libraries,
                "adapter_files": adapter_files,
            }
            default_storage.save(
                f"{prefix}/run.json", ContentFile(json.dumps(record, indent=2).encode())
            )
    except TrainingCancelled as stopped:
        reporter.log(str(stopped))
        return _end(reporter, checkpoints, JobStatus.CANCELLED, str(stopped))
    except (SpecError, data.DatasetUnusable, TrainingFailed, MissingArtifacts) as error:
        reporter.log(f"failed: {error}")
        return _end(reporter, checkpoints, JobStatus.FAILED, str(error))
    except Exception as error:
        logger.exception("fine-tuning job %s failed", job.pk)
        return _end(reporter, checkpoints, JobStatus.FAILED, f"{type(error).__name__}: {error}")
    status = _register(job, reporter, prefix, record)
    if status != "superseded":
        checkpoints.remove()
    return status


def _end(reporter: _JobReporter, checkpoints: StoredCheckpoints, status: str, error: str) -> str:
    """The attempt ends the job: its checkpoints go (only a worker that died keeps them)."""
    if reporter.owns_job():
        checkpoints.remove()
    reporter.finish(status, error)
    return status


def _register(job: FineTuneJob, reporter: _JobReporter, prefix: str, record: dict[str, Any]) -> str:
    parent = job.parent_version
    try:
        with transaction.atomic():
            locked = FineTuneJob.objects.select_for_update().get(pk=job.pk)
            if locked.attempt != job.attempt or locked.status != JobStatus.RUNNING:
                return "superseded"  # a newer attempt owns the job now
            if locked.cancel_requested:
                raise _CancelledLate
            ModelVersion.objects.create(
                name=job.version_name,
                base_model=parent.base_model if parent else job.base_model,
                base_model_path=job.base_model_path,
                base_url=job.base_url,
                coordinate_style=data_style([Stage.from_json(s) for s in job.stages]),
                adapter_location=f"{prefix}/adapter",
                parent=parent,
                job=locked,
                lineage={key: record[key] for key in ("datasets", "stages", "libraries")}
                | {"job": job.pk, "parent": record["parent_version"], "run": f"{prefix}/run.json"},
                created_by=job.created_by,
            )
            locked.logs = reporter.logs_with(f"registered model version {job.version_name}")
            locked.status = JobStatus.SUCCEEDED
            locked.progress = 1.0
            locked.artifacts_location = prefix
            locked.finished_at = timezone.now()
            locked.save()
    except _CancelledLate:
        reporter.finish(JobStatus.CANCELLED, "cancelled before the version was registered")
        return JobStatus.CANCELLED
    except IntegrityError:
        error = f"the model version name {job.version_name!r} was taken meanwhile"
        reporter.log(error)
        reporter.finish(JobStatus.FAILED, error)
        return JobStatus.FAILED
    return JobStatus.SUCCEEDED


def _open(name: str) -> Any:
    return default_storage.open(name, "rb")
