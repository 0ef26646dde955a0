"""The flywheel of a project: per model version, in the order the versions were made (the
flywheel's generations), how it did there and the data it was trained on.

- **Versions shown**: every registered version that served an episode of the project (a
  person's or a rollout), was evaluated on it, runs in it (A or B), has a rollout batch there,
  or was fine-tuned on one of its dataset exports; ordered by ``created_at``.
- **Rollouts** of a version: the project's rollouts whose episode it served
  (``Episode.served_version``). ``started``: those with an episode; ``ended``: their episode
  ran to an end (status ``ended`` or ``validated``; a cancelled one is not counted);
  ``validated``: V(s) is known; ``passed``: V = 1. The **rollout success rate** is ``passed /
  validated``, as on a batch's page (``annotation.rollouts.stats``), ``null`` before any rollout
  is validated; ``task_success`` is the mean evaluator score over the ``scored`` rollouts.
- **Live acceptance** and **offline step success rate** are the project's version overview's
  (``annotation.flywheel.model_versions.overview``): people's decisions on the version's proposals
  in interactive episodes over the last ``ACCEPTANCE_DAYS`` days, ``rate = accepted / steps`` where
  ``steps`` = accepted + corrected + error kept; and the latest succeeded offline evaluation on the
  project's held-out steps.
- **Trained on**: for a version a fine-tuning job made, each stage's dataset export of this
  project, with its sample count (``DatasetExport.counts``); exports of other projects a job
  also read are counted in ``other_exports`` only.
- **Datasets now**: the project's latest succeeded export of each kind and source, with its
  sample count: what the next generation would be trained on.
"""

from typing import Any

from django.db.models import Avg, Count, Q

from annotation.flywheel.model_versions import ACCEPTANCE_DAYS, overview
from annotation.models import (
    PEOPLE_DECISIONS,
    DatasetExport,
    Project,
    Rollout,
    RolloutBatch,
    RolloutStatus,
)
from model_serving.models import ModelVersion


def flywheel(project: Project) -> dict[str, Any]:
    """The project's versions, oldest first, with their figures, and its datasets now."""
    seen = overview(project)
    by_name = {row["model_version"]: row for row in seen["versions"]}
    rollouts = _rollouts(project)
    batches = RolloutBatch.objects.filter(project=project)
    ids = (
        set(rollouts)
        | set(batches.values_list("model_version", flat=True))
        | set(batches.exclude(version_b=None).values_list("version_b", flat=True))
    )
    versions = list(
        ModelVersion.objects.filter(
            Q(pk__in=ids) | Q(name__in=list(by_name)) | Q(job__project_ids__contains=[project.pk])
        )
        .select_related("parent", "job")
        .order_by("created_at", "id")
    )
    stages = {v.pk: v.job.stages if v.job else [] for v in versions}
    exports = DatasetExport.objects.filter(
        project=project,
        pk__in=[s["dataset"]["export_id"] for job in stages.values() for s in job],
    )
    sizes = {export.pk: _size(export) for export in exports}
    rows = []
    for version in versions:
        known = by_name.get(version.name, {})
        trained_on = [
            sizes[s["dataset"]["export_id"]]
            for s in stages[version.pk]
            if s["dataset"]["export_id"] in sizes
        ]
        rows.append(
            {
                "id": version.pk,
                "name": version.name,
                "parent": version.parent.name if version.parent else None,
                "base_model": version.base_model,
                "job": version.job_id,
                "created_at": version.created_at,
                "proposes": _role(seen, version.name),
                "rollouts": rollouts.get(version.pk, _no_rollouts()),
                "live": _live(known.get("live")),
                "offline": known.get("offline"),
                "trained_on": trained_on,
                "other_exports": len(stages[version.pk]) - len(trained_on),
            }
        )
    return {
        "project": project.pk,
        "acceptance_window_days": ACCEPTANCE_DAYS,
        "versions": rows,
        "datasets": _datasets_now(project),
    }


def _rollouts(project: Project) -> dict[int, dict[str, Any]]:
    """Per serving version's id: the project's rollouts and their validation (see above)."""
    rows = (
        Rollout.objects.filter(batch__project=project, episode__served_version__isnull=False)
        .values("episode__served_version")
        .annotate(
            started=Count("id"),
            ended=Count("id", filter=Q(status__in=(RolloutStatus.ENDED, RolloutStatus.VALIDATED))),
            validated=Count("id", filter=Q(verdict__isnull=False)),
            passed=Count("id", filter=Q(verdict=True)),
            scored=Count("id", filter=Q(episode__task_success__isnull=False)),
            mean_success=Avg("episode__task_success"),
        )
        .order_by()
    )
    return {
        row["episode__served_version"]: {
            "started": row["started"],
            "ended": row["ended"],
            "validated": row["validated"],
            "passed": row["passed"],
            "success_rate": _share(row["passed"], row["validated"]),
            "scored": row["scored"],
            "task_success": _rounded(row["mean_success"]),
        }
        for row in rows
    }


def _no_rollouts() -> dict[str, Any]:
    return {
        "started": 0,
        "ended": 0,
        "validated": 0,
        "passed": 0,
        "success_rate": None,
        "scored": 0,
        "task_success": None,
    }


def _live(total: dict[str, Any] | None) -> dict[str, Any] | None:
    """The overview's live decisions on the version's proposals, with the steps they count."""
    if total is None:
        return None
    return {**total, "steps": sum(total[d.value] for d in PEOPLE_DECISIONS)}


def _role(seen: dict[str, Any], name: str) -> str | None:
    if seen["model_version"] == name:
        return "A"
    return "B" if seen["version_b"] == name else None


def _size(export: DatasetExport) -> dict[str, Any]:
    return {
        "export": export.pk,
        "kind": export.kind,
        "source": export.filters.get("source", "interactive"),
        "samples": export.counts.get("samples"),
        "created_at": export.created_at,
    }


def _datasets_now(project: Project) -> list[dict[str, Any]]:
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    succeeded = project.exports.filter(status=DatasetExport.Status.SUCCEEDED)
    for export in succeeded.order_by("-created_at", "-id"):
        size = _size(export)
        latest.setdefault((size["kind"], size["source"]), size)
    return [latest[key] for key in sorted(latest)]


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _rounded(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None
