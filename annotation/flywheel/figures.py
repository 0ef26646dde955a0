"""The figures a project's managers and reviewers watch: its progress board, each annotator's
throughput over time, and how often annotators accept each model version's proposals.

- **Progress board.** Every task of the project counted by status (``queued``, ``assigned``,
  ``in_progress``, ``submitted``, ``reviewed``, ``rejected``, and ``gold``: a honeypot between
  runs; every status appears, zero included), and for each status the most recently updated
  tasks (at most ``limit``), each with its latest episode so the board can open it (with its
  task success, when its task's evaluator scored it), why it cannot run here if it cannot, and
  the files it needs that the task-file cache lacks (``annotation.projects.support``).
- **Throughput.** Per annotator and per time bucket (an hour or a day, in UTC): *steps decided*
  is the number of steps whose decision they committed in that bucket (``Step.decided_at``);
  *episodes submitted* is the number of their episodes that ended in that bucket with an outcome
  that submits the task for review (``finished``, ``call_user``, ``max_steps``); the mean time
  they took to decide a step is given as well. Buckets with no work are listed with zeros so a
  chart's axis is continuous.
- **Acceptance rate per model version.** Per model version and time bucket, the annotators'
  live decisions (``Step.decision``; a reviewer's later revision does not change what the
  annotator did with the proposal) on the steps where that model version made a valid proposal:
  ``accepted``, ``corrected`` and ``error_kept`` counts, and the rate ``accepted / (accepted +
  corrected + error_kept)`` (``null`` for a bucket without decided steps). A step's model version
  is that of the proposal the annotator picked, else of its best-ranked valid proposal. Steps
  where the model gave no valid proposal (unparseable text, model down) say nothing about a
  version's quality: they are counted apart, as ``without_proposal`` of the episode's version.
- **Task success per model version**, beside acceptance, over the same buckets: the episodes that
  ended in the bucket and were scored by their task's evaluator (``annotation.episodes.scoring``)
  under the episode's model version: ``scored``, the ``mean`` task success (0–1), the
  ``success_rate`` (the share that scored 1), and ``failed``, those whose evaluator could not run
  (never counted as a score). The project's totals for the whole window come with them.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Avg, Count, Exists, F, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce, NullIf, Trunc
from django.utils import timezone

from annotation.models import (
    PEOPLE_DECISIONS,
    Decision,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    EvaluationStatus,
    EvaluatorCheck,
    Project,
    Proposal,
    Step,
    Task,
    TaskStatus,
)
from annotation.projects import evaluator_checks
from annotation.projects.support import files_missing
from backend.errors import DomainError

BUCKETS = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
DEFAULT_SPAN = {"hour": timedelta(hours=48), "day": timedelta(days=14)}
MAX_BUCKETS = 500
SUBMITTING_OUTCOMES = (EpisodeOutcome.FINISHED, EpisodeOutcome.CALL_USER, EpisodeOutcome.MAX_STEPS)
UNKNOWN_VERSION = "unknown"


class BadRange(DomainError):
    code = "bad_range"


@dataclass(frozen=True)
class Window:
    """Whole buckets of ``size`` from ``start`` (inclusive) to ``end`` (exclusive), in UTC."""

    bucket: str
    start: datetime
    end: datetime

    @property
    def starts(self) -> list[datetime]:
        step = BUCKETS[self.bucket]
        count = int((self.end - self.start) / step)
        return [self.start + i * step for i in range(count)]


def _floor(moment: datetime, bucket: str) -> datetime:
    moment = moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0) if bucket == "day" else moment


def window(bucket: str, since: datetime | None, until: datetime | None) -> Window:
    """The buckets covering ``since``..``until`` (default: the last 14 days or 48 hours)."""
    if bucket not in BUCKETS:
        raise BadRange(f"bucket must be one of {', '.join(BUCKETS)}, not {bucket!r}.")
    end = until or timezone.now()
    try:
        begin = since or end - DEFAULT_SPAN[bucket]
        if begin >= end:
            raise BadRange("since must be before until.")
        start = _floor(begin, bucket)
        stop = _floor(end, bucket) + BUCKETS[bucket]
    except OverflowError:  # a range at the calendar's ends (year 1 or 9999)
        raise BadRange("since and until must lie between the years 1 and 9999.") from None
    result = Window(bucket, start, stop)
    if (stop - start) / BUCKETS[bucket] > MAX_BUCKETS:
        raise BadRange(f"At most {MAX_BUCKETS} buckets; choose a shorter range or a larger bucket.")
    return result


# --- progress board ------------------------------------------------------------------------


def _check_of(task: Task) -> EvaluatorCheck | None:
    try:
        return task.evaluator_check
    except EvaluatorCheck.DoesNotExist:
        return None


def progress_board(project: Project, limit: int = 50) -> dict[str, Any]:
    latest_episode = Episode.objects.filter(
        task=OuterRef("pk"), mode=EpisodeMode.INTERACTIVE
    ).order_by("-started_at", "-id")
    counts = dict(project.tasks.values_list("status").annotate(n=Count("id")).order_by())
    shown: dict[str, list[Task]] = {}
    for status in TaskStatus:
        tasks: QuerySet[Task] = (
            project.tasks.filter(status=status)
            .select_related("assignee", "evaluator_check__cleared_by")
            .annotate(
                latest_episode=Subquery(latest_episode.values("pk")[:1]),
                latest_evaluation_status=Subquery(latest_episode.values("evaluation_status")[:1]),
                latest_task_success=Subquery(latest_episode.values("task_success")[:1]),
            )
            .order_by("-updated_at", "-id")[:limit]
        )
        shown[status.value] = list(tasks)
    missing = files_missing(task for tasks in shown.values() for task in tasks)
    columns = [
        {
            "status": status,
            "count": counts.get(status, 0),
            "tasks": [
                {
                    "id": task.pk,
                    "external_id": task.external_id,
                    "instruction": task.instruction[:200],
                    "assignee": task.assignee.username if task.assignee else None,
                    "priority": task.priority,
                    "updated_at": task.updated_at,
                    "episode": task.latest_episode,  # type: ignore[attr-defined]
                    # what the task's evaluator made of that episode ("" when nothing)
                    "evaluation_status": task.latest_evaluation_status or "",  # type: ignore[attr-defined]
                    "task_success": task.latest_task_success,  # type: ignore[attr-defined]
                    "cannot_run": task.cannot_run,
                    "files_missing": missing[task.pk],
                    "evaluator_check": evaluator_checks.as_json(_check_of(task), task),
                }
                for task in tasks
            ],
        }
        for status, tasks in shown.items()
    ]
    return {"project": project.pk, "total": sum(counts.values()), "columns": columns}


# --- throughput ----------------------------------------------------------------------------


def throughput(project: Project, span: Window) -> dict[str, Any]:
    steps = (
        Step.objects.filter(
            episode__task__project=project,
            decided_at__gte=span.start,
            decided_at__lt=span.end,
        )
        .annotate(at=Trunc("decided_at", span.bucket, tzinfo=UTC), who=F("decided_by__username"))
        .exclude(decided_by=None)
        .values("at", "who")
        .annotate(n=Count("id"), mean_ms=Avg("decision_ms"))
        .order_by()
    )
    submitted = (
        Episode.objects.filter(
            task__project=project,
            mode=EpisodeMode.INTERACTIVE,
            outcome__in=SUBMITTING_OUTCOMES,
            ended_at__gte=span.start,
            ended_at__lt=span.end,
        )
        .annotate(at=Trunc("ended_at", span.bucket, tzinfo=UTC), who=F("annotator__username"))
        .values("at", "who")
        .annotate(n=Count("id"))
        .order_by()
    )
    cells: dict[str, dict[datetime, dict[str, Any]]] = defaultdict(dict)

    def cell(who: str, at: datetime) -> dict[str, Any]:
        return cells[who].setdefault(at, {"steps": 0, "episodes": 0, "mean_decision_ms": None})

    for row in steps:
        entry = cell(row["who"], row["at"])
        entry["steps"] = row["n"]
        entry["mean_decision_ms"] = round(row["mean_ms"]) if row["mean_ms"] is not None else None
    for done in submitted:
        cell(done["who"], done["at"])["episodes"] = done["n"]
    empty = {"steps": 0, "episodes": 0, "mean_decision_ms": None}
    series = [
        {
            "annotator": who,
            "steps": sum(c["steps"] for c in cells[who].values()),
            "episodes": sum(c["episodes"] for c in cells[who].values()),
            "points": [{"at": at, **cells[who].get(at, empty)} for at in span.starts],
        }
        for who in sorted(cells)
    ]
    return _framed(project, span, {"annotators": series})


# --- acceptance ----------------------------------------------------------------------------


def acceptance(project: Project, span: Window) -> dict[str, Any]:
    best_valid = Proposal.objects.filter(step=OuterRef("pk"), invalid_reason="").order_by("rank")
    # Counted in PostgreSQL, one row per (bucket, decision, version, proposal or not).
    # People's decisions only: a rollout's steps ran as proposed (its success is its batch's).
    rows = (
        Step.objects.filter(
            episode__task__project=project,
            episode__mode=EpisodeMode.INTERACTIVE,
            decision__in=PEOPLE_DECISIONS,  # a branch's replayed steps are nobody's decision
            decided_at__gte=span.start,
            decided_at__lt=span.end,
        )
        .annotate(
            at=Trunc("decided_at", span.bucket, tzinfo=UTC),
            proposed_by=Coalesce(
                NullIf(F("chosen_proposal__model_version"), Value("")),
                Subquery(best_valid.values("model_version")[:1]),
            ),
            valid=Exists(best_valid),
            fallback=F("episode__model_version"),
        )
        .values("at", "decision", "proposed_by", "fallback", "valid")
        .annotate(n=Count("id"))
        .order_by()
    )
    cells: dict[str, dict[datetime, dict[str, int]]] = defaultdict(dict)
    for row in rows:
        if row["valid"]:
            version = row["proposed_by"] or row["fallback"] or UNKNOWN_VERSION
            kind = row["decision"]
        else:
            version = row["fallback"] or UNKNOWN_VERSION
            kind = "without_proposal"
        counts = cells[version].setdefault(row["at"], _zero())
        counts[kind] += row["n"]
    success = _task_success(project, span)
    versions = []
    for version in sorted(cells.keys() | success.keys()):
        total = _zero()
        points = []
        for at in span.starts:
            counts = cells[version].get(at, _zero())
            for kind, n in counts.items():
                total[kind] += n
            points.append({"at": at, **counts, "rate": _rate(counts)})
        summary: dict[str, Any] = {**total, "rate": _rate(total)}
        scores = success.get(version, {})
        scored: dict[str, Any] = _success(_summed(scores.values()))
        scored["points"] = [
            {"at": at, **_success(scores.get(at, _unscored()))} for at in span.starts
        ]
        versions.append(
            {"model_version": version, "total": summary, "points": points, "task_success": scored}
        )
    overall = _success(_summed(c for scores in success.values() for c in scores.values()))
    return _framed(project, span, {"versions": versions, "task_success": overall})


def _task_success(project: Project, span: Window) -> dict[str, dict[datetime, dict[str, Any]]]:
    """Per model version and bucket: the evaluator's verdicts on the episodes that ended there."""
    scored = Q(evaluation_status=EvaluationStatus.SCORED)
    rows = (
        Episode.objects.filter(
            task__project=project,
            mode=EpisodeMode.INTERACTIVE,
            ended_at__gte=span.start,
            ended_at__lt=span.end,
            evaluation_status__in=(EvaluationStatus.SCORED, EvaluationStatus.FAILED),
        )
        .annotate(at=Trunc("ended_at", span.bucket, tzinfo=UTC))
        .values("at", "model_version")
        .annotate(
            scored=Count("id", filter=scored),
            succeeded=Count("id", filter=scored & Q(task_success__gte=1.0)),
            success_sum=Sum("task_success", filter=scored),
            failed=Count("id", filter=Q(evaluation_status=EvaluationStatus.FAILED)),
        )
        .order_by()
    )
    cells: dict[str, dict[datetime, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        counts = cells[row["model_version"] or UNKNOWN_VERSION].setdefault(row["at"], _unscored())
        for key in ("scored", "succeeded", "failed"):
            counts[key] += row[key]
        counts["success_sum"] += row["success_sum"] or 0.0
    return cells


def _unscored() -> dict[str, Any]:
    return {"scored": 0, "succeeded": 0, "success_sum": 0.0, "failed": 0}


def _summed(cells: Iterable[dict[str, Any]]) -> dict[str, Any]:
    total = _unscored()
    for counts in cells:
        for key in total:
            total[key] += counts[key]
    return total


def _success(counts: dict[str, Any]) -> dict[str, Any]:
    """Scored and failed counts, the mean task success and the share that scored 1."""
    n = counts["scored"]
    return {
        "scored": n,
        "failed": counts["failed"],
        "mean": round(counts["success_sum"] / n, 4) if n else None,
        "success_rate": round(counts["succeeded"] / n, 4) if n else None,
    }


def _zero() -> dict[str, int]:
    return {**{d.value: 0 for d in PEOPLE_DECISIONS}, "without_proposal": 0}


def _rate(counts: dict[str, int]) -> float | None:
    judged = sum(counts[d.value] for d in PEOPLE_DECISIONS)
    return round(counts[Decision.ACCEPTED] / judged, 4) if judged else None


def _framed(project: Project, span: Window, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "project": project.pk,
        "bucket": span.bucket,
        "since": span.start,
        "until": span.end,
        "buckets": span.starts,
        **body,
    }
