"""Where annotation meets model versions: training data for jobs, offline evaluation on a
project's held-out steps, and a project's versions side by side.

- **Datasets of a fine-tuning job.** Each export the engineer names must exist, belong to a
  project where they may manage datasets, have succeeded, be TRL Parquet, and be SFT or DPO;
  it must have been built with ``exclude_held_out``; it becomes a stage pinned to its exact
  files and sha256s (``model_serving.training.spec``). Stages run in the order given. The
  worker checks the data itself too (its ``episode_id`` column), so that a change of the
  held-out share after the export cannot leak evaluation episodes into training.
- **Versions of a project** are chosen and fixed on episodes by ``annotation.projects.versions``.
- **Held-out steps** of a project: the decided steps of its ended, held-out episodes
  (``model_serving.evaluation.is_held_out``), their final action (a reviewer's latest revision
  when there is one), leaving out kept errors (never a target) and the steps a rejection marks
  as wrong (from its first wrong step on; all of them when it names none). The request for each
  is built by ``annotation.episodes.requests``, the live loop's own, so the evaluation
  prompt is the live prompt.
- **A project's versions side by side** (``overview``): A, B and B's share, and for every version
  that proposed there or was evaluated there its live acceptance (``annotation.flywheel.figures``
  over the last ``ACCEPTANCE_DAYS`` days) next to its latest succeeded offline evaluation.
"""

import asyncio
import logging
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from annotation.datasets.finals import SPLIT_TASK
from annotation.episodes.requests import proposal_request
from annotation.flywheel import figures as stats
from annotation.job_names import EVALUATE_MODEL_VERSION, QUEUES
from annotation.models import DatasetExport, Decision, Episode, Project, Review, Step
from annotation.projects import access
from backend.accounts.models import User
from backend.accounts.roles import Capability
from backend.celery import send_after_commit
from backend.errors import DomainError
from model_serving import finetune
from model_serving.evaluation import DEFAULT_TOLERANCE, HeldOutStep, evaluate, is_held_out
from model_serving.models import EvaluationRun, JobStatus, ModelVersion
from model_serving.proposers.base import ModelUnavailable
from model_serving.registry import ProposerMisconfigured, get_proposer
from model_serving.training.spec import DatasetFile, DatasetRef, Stage
from model_serving.versions import proposer_settings
from vm_pool.actions import Action

logger = logging.getLogger(__name__)

ACCEPTANCE_DAYS = 365
MAX_EVALUATION_STEPS = 2000


class DatasetNotUsable(DomainError):
    code = "dataset_not_usable"


class VersionNameTaken(DomainError):
    code = "invalid"


TAKEN = "A model version with this name exists, or a fine-tuning job will register it."


def register(fields: dict[str, Any], user: User) -> ModelVersion:
    """A version registered by hand (an endpoint's base model, or an adapter already in
    storage). Two registrations of one name at once give one version and a 400."""
    try:
        with transaction.atomic():
            return ModelVersion.objects.create(
                **fields, lineage={"registered": True}, created_by=user
            )
    except IntegrityError:
        raise VersionNameTaken(TAKEN, details={"name": [TAKEN]}) from None


class ExportNotFound(DomainError):
    status_code = 404
    code = "not_found"


class EvaluationRejected(DomainError):
    code = "evaluation_rejected"


# --- datasets of a fine-tuning job ----------------------------------------------------------


def training_stages(user: User, export_ids: list[int]) -> tuple[list[Stage], list[int]]:
    """The stages for these exports, in order, and the projects they come from."""
    if not export_ids:
        raise DatasetNotUsable("a fine-tuning job needs at least one dataset export")
    stages, projects = [], []
    for export_id in export_ids:
        export = DatasetExport.objects.select_related("project").filter(pk=export_id).first()
        if export is None or not access.visible_projects(user).filter(pk=export.project_id):
            raise ExportNotFound(f"no dataset export {export_id}", details={"export": export_id})
        access.require(user, export.project, Capability.MANAGE_DATASETS)
        problem = _unusable(export)
        if problem:
            raise DatasetNotUsable(
                f"dataset export {export_id} cannot be trained on: {problem}",
                details={"export": export_id, "status": export.status},
            )
        files = tuple(
            DatasetFile(name=f["name"], sha256=f["sha256"], size=int(f["size"]))
            for f in export.files
        )
        ref = DatasetRef(
            export_id=export.pk,
            kind=export.kind,
            location=export.location,
            files=files,
            content_hash=export.content_hash,
            coordinate_style=export.coordinate_style,
        )
        stages.append(Stage(kind=export.kind, dataset=ref))
        projects.append(export.project_id)
    finetune.data_style(stages)  # an estimate is refused as the job would be
    return stages, projects


def _unusable(export: DatasetExport) -> str:
    if export.status != DatasetExport.Status.SUCCEEDED:
        return f"it is {export.status}, not succeeded"
    if export.format != DatasetExport.Format.TRL:
        return f"it is in {export.format} format; fine-tuning reads trl (Parquet) exports"
    if export.kind not in (DatasetExport.Kind.SFT, DatasetExport.Kind.DPO):
        return f"it is a {export.kind} dataset; fine-tuning takes sft and dpo"
    if not any(f["name"].endswith(".parquet") for f in export.files):
        return "it has no Parquet files"
    if not export.filters.get("exclude_held_out"):
        return (
            "it may hold held-out episodes, which are kept for evaluation; export it again "
            "with filters.exclude_held_out"
        )
    return ""


# --- offline evaluation ---------------------------------------------------------------------


def held_out_steps(project: Project, limit: int = MAX_EVALUATION_STEPS) -> list[int]:
    """Ids of the project's held-out steps, by episode and index (see the module docstring)."""
    latest = Review.objects.filter(episode=OuterRef("pk")).order_by("-created_at", "-id")
    episodes = (
        Episode.objects.filter(task__project=project, ended_at__isnull=False)
        .annotate(
            verdict=Subquery(latest.values("verdict")[:1]),
            first_wrong=Subquery(latest.values("first_wrong_step")[:1]),
            split_task=SPLIT_TASK,
        )
        .order_by("id")
        .values_list("id", "split_task", "verdict", "first_wrong")
    )
    step_ids: list[int] = []
    for episode_id, split_task, verdict, first_wrong in episodes.iterator():
        if not is_held_out(split_task):
            continue
        steps = Step.objects.filter(episode_id=episode_id, decided_at__isnull=False)
        if verdict == Review.Verdict.REJECTED:
            if first_wrong is None:
                continue
            steps = steps.filter(index__lt=first_wrong)
        for step in steps.prefetch_related("revisions").order_by("index"):
            if _final(step)[0] == Decision.ERROR_KEPT:
                continue
            step_ids.append(step.pk)
            if len(step_ids) >= limit:
                return step_ids
    return step_ids


def _final(step: Step) -> tuple[str, dict[str, Any]]:
    revisions = sorted(step.revisions.all(), key=lambda r: r.number)
    if revisions:
        return revisions[-1].decision, revisions[-1].final_action
    return step.decision, step.final_action or {}


def start_evaluation(
    version: ModelVersion, project: Project, user: User, tolerance: float = DEFAULT_TOLERANCE
) -> EvaluationRun:
    if not version.base_url:
        raise EvaluationRejected(f"model version {version.name} has no endpoint (base_url)")
    if not 0 < tolerance <= 1:
        raise EvaluationRejected("tolerance is a share of the screen diagonal, in (0, 1]")
    step_ids = held_out_steps(project)
    if not step_ids:
        raise EvaluationRejected(
            f"project {project.name!r} has no held-out steps to evaluate on yet",
            details={"project": project.pk},
        )
    with transaction.atomic():
        run = EvaluationRun.objects.create(
            model_version=version,
            project_id=project.pk,
            tolerance=tolerance,
            step_ids=step_ids,
            total=len(step_ids),
            created_by=user,
        )
        send_after_commit(EVALUATE_MODEL_VERSION, [run.pk], QUEUES[EVALUATE_MODEL_VERSION])
    return run


def run_evaluation(run_id: int) -> str:
    """The job: ask the version for every held-out step and store the step success rate."""
    with transaction.atomic():
        run = (
            EvaluationRun.objects.select_for_update().select_related("model_version").get(pk=run_id)
        )
        if run.status != JobStatus.QUEUED:
            return "skipped"
        run.status = JobStatus.RUNNING
        run.started_at = timezone.now()
        run.save(update_fields=["status", "started_at"])
    project = Project.objects.get(pk=run.project_id)
    steps = Step.objects.select_related("episode__task__project", "observation").prefetch_related(
        "revisions"
    )
    by_id = {step.pk: step for step in steps.filter(pk__in=run.step_ids)}
    held_out = [
        HeldOutStep(
            step_id=step_id,
            request=proposal_request(by_id[step_id]),
            expected=Action.from_json(_final(by_id[step_id])[1]),
        )
        for step_id in run.step_ids
        if step_id in by_id
    ]

    async def progress(done: int, total: int) -> None:
        await asyncio.to_thread(
            EvaluationRun.objects.filter(pk=run_id).update, progress=round(done / total, 4)
        )

    try:
        proposer = get_proposer(proposer_settings(project.model_settings, run.model_version))
        result = asyncio.run(evaluate(held_out, proposer, run.tolerance, on_progress=progress))
    except Exception as error:
        # Whatever stopped it, the run must not stay "running" for ever.
        if not isinstance(error, ProposerMisconfigured | ModelUnavailable):
            logger.exception("evaluation %s failed", run_id)
        EvaluationRun.objects.filter(pk=run_id).update(
            status=JobStatus.FAILED,
            error=f"{type(error).__name__}: {error}",
            finished_at=timezone.now(),
        )
        return JobStatus.FAILED
    EvaluationRun.objects.filter(pk=run_id).update(
        status=JobStatus.SUCCEEDED,
        progress=1.0,
        total=result.total,
        succeeded=result.succeeded,
        invalid=result.invalid,
        success_rate=result.success_rate,
        by_action=result.by_action,
        results=result.results,
        finished_at=timezone.now(),
    )
    return JobStatus.SUCCEEDED


# --- a project's versions side by side -----------------------------------------------------


def overview(project: Project) -> dict[str, Any]:
    """A project's versions and, per version that proposed or was evaluated there, live and
    offline figures."""
    now = timezone.now()
    live = stats.acceptance(
        project, stats.window("day", now - timedelta(days=ACCEPTANCE_DAYS), now)
    )
    rates = {row["model_version"]: row["total"] for row in live["versions"]}
    names = set(rates)
    for version in (project.model_version, project.version_b):
        if version is not None:
            names.add(version.name)
    latest: dict[str, EvaluationRun] = {}
    for run in (
        EvaluationRun.objects.filter(project_id=project.pk, status=JobStatus.SUCCEEDED)
        .select_related("model_version")
        .order_by("-created_at", "-pk")
    ):
        latest.setdefault(run.model_version.name, run)
    names |= set(latest)
    rows = []
    for name in sorted(names):
        found = latest.get(name)
        rows.append(
            {
                "model_version": name,
                "live": rates.get(name),
                "offline": None
                if found is None
                else {
                    "evaluation": found.pk,
                    "step_success_rate": found.success_rate,
                    "steps": found.total,
                    "invalid": found.invalid,
                    "finished_at": found.finished_at,
                },
            }
        )
    return {
        "project": project.pk,
        "model_version": project.model_version.name if project.model_version else None,
        "version_b": project.version_b.name if project.version_b else None,
        "version_b_share": project.version_b_share,
        "acceptance_window_days": ACCEPTANCE_DAYS,
        "versions": rows,
    }
