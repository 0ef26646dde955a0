"""Annotator scorecards: how each person's work in a project stands, over a period.

Rules:

- The period bounds the episode's end (``ended_from`` inclusive, ``ended_until`` exclusive).
  People's ended episodes count; rollouts do not.
- Per annotator:
  - ``episodes``: their ended episodes.
  - ``decided_steps``: the steps they decided on a proposal (accepted, corrected, error kept).
  - ``demonstrated_steps``: the steps they demonstrated.
  - ``reviewed`` / ``accepted``: their episodes with a review in force, and those it accepted.
    ``review_acceptance`` is the share, with its Wilson 95 % interval (``rules.wilson``).
  - ``scored`` / ``evaluator_success``: their episodes the task's evaluator scored, and the
    mean score.
  - ``median_decision_ms``: the median time they took to decide a step on a proposal.
  - ``steps_per_hour``: all their steps over the hours their episodes ran (start to end).
  - ``gold_steps`` / ``gold_right``: their scored honeypot steps whose run ended in the period,
    and the right ones (``honeypots``); ``gold_accuracy`` is the share, with its interval.
  - ``compared_steps`` / ``agreed_steps``: their step pairs compared with other annotators on
    overlapping tasks (``overlap``), dated by the later episode's end, and those that agreed;
    ``agreement`` is the share, with its interval.
- ``pairs``: per pair of annotators, their compared and agreed steps; ``tasks``: the same per
  task, least agreement first. ``timeline``: per
  annotator and day, the same counts (gold, agreement, steps decided), for the chart.
- Computed in PostgreSQL, a few aggregate queries, never by loading steps into Python.
- An annotator may read their own scorecard, over the whole project and no shorter period (a
  period around one episode's end would tell whether it was scored against gold or
  compared). Its gold and agreement figures count only what was scored before today (UTC): a
  count that moved right after an episode would tell that the task was gold, or overlapped.
  A project's managers read everyone's, as JSON or CSV, over any period.
"""

import csv
import io
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import (
    Aggregate,
    Avg,
    Count,
    F,
    FloatField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.functions import TruncDate

from annotation.models import (
    PEOPLE_DECISIONS,
    Agreement,
    Decision,
    Episode,
    EpisodeMode,
    GoldVerdict,
    Review,
    Step,
)
from annotation.quality.rules import wilson


class Median(Aggregate):
    function = "percentile_cont"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


@dataclass(frozen=True)
class Scorecard:
    annotator: str
    episodes: int
    decided_steps: int
    demonstrated_steps: int
    reviewed: int
    accepted: int
    review_acceptance: float | None
    review_acceptance_low: float | None
    review_acceptance_high: float | None
    scored: int
    evaluator_success: float | None
    median_decision_ms: float | None
    steps_per_hour: float | None
    gold_steps: int = 0
    gold_right: int = 0
    gold_accuracy: float | None = None
    gold_accuracy_low: float | None = None
    gold_accuracy_high: float | None = None
    compared_steps: int = 0
    agreed_steps: int = 0
    agreement: float | None = None
    agreement_low: float | None = None
    agreement_high: float | None = None


def _episodes(
    project_id: int, ended_from: datetime | None, ended_until: datetime | None
) -> QuerySet[Episode]:
    episodes = Episode.objects.filter(
        task__project_id=project_id, mode=EpisodeMode.INTERACTIVE, ended_at__isnull=False
    )
    if ended_from is not None:
        episodes = episodes.filter(ended_at__gte=ended_from)
    if ended_until is not None:
        episodes = episodes.filter(ended_at__lt=ended_until)
    return episodes


def scorecards(
    project_id: int,
    ended_from: datetime | None = None,
    ended_until: datetime | None = None,
    annotator_id: int | None = None,
    checks_before: datetime | None = None,
) -> list[Scorecard]:
    """Every annotator's scorecard (or one annotator's), by username (see the module)."""
    episodes = _episodes(project_id, ended_from, ended_until)
    if annotator_id is not None:
        episodes = episodes.filter(annotator_id=annotator_id)
    latest = Review.objects.filter(episode=OuterRef("pk")).order_by("-created_at", "-id")
    per_episode = (
        episodes.annotate(verdict=Subquery(latest.values("verdict")[:1]))
        .values("annotator_id", "annotator__username")
        .annotate(
            episodes=Count("id"),
            reviewed=Count("id", filter=Q(verdict__isnull=False)),
            accepted=Count("id", filter=Q(verdict=Review.Verdict.ACCEPTED)),
            scored=Count("id", filter=Q(evaluation_status="scored")),
            success=Avg("task_success", filter=Q(evaluation_status="scored")),
            ran=Sum(F("ended_at") - F("started_at")),
        )
    )
    steps = (
        Step.objects.filter(episode__in=episodes.values("pk"), decided_at__isnull=False)
        .values("episode__annotator_id")
        .annotate(
            decided=Count("id", filter=Q(decision__in=PEOPLE_DECISIONS)),
            demonstrated=Count("id", filter=Q(decision=Decision.DEMONSTRATED)),
            median_ms=Median("decision_ms", filter=Q(decision__in=PEOPLE_DECISIONS)),
        )
    )
    by_annotator: dict[int, dict[str, Any]] = {
        row["episode__annotator_id"]: dict(row) for row in steps
    }
    gold = _gold(project_id, ended_from, ended_until, annotator_id, checks_before)
    agreement = _agreement(project_id, ended_from, ended_until, checks_before)
    cards = []
    for row in per_episode:
        step_row: dict[str, Any] = by_annotator.get(row["annotator_id"], {})
        decided = step_row.get("decided", 0)
        demonstrated = step_row.get("demonstrated", 0)
        interval = wilson(row["accepted"], row["reviewed"])
        hours = row["ran"].total_seconds() / 3600 if row["ran"] else 0.0
        cards.append(
            Scorecard(
                annotator=row["annotator__username"],
                episodes=row["episodes"],
                decided_steps=decided,
                demonstrated_steps=demonstrated,
                reviewed=row["reviewed"],
                accepted=row["accepted"],
                review_acceptance=row["accepted"] / row["reviewed"] if row["reviewed"] else None,
                review_acceptance_low=interval[0] if interval else None,
                review_acceptance_high=interval[1] if interval else None,
                scored=row["scored"],
                evaluator_success=row["success"],
                median_decision_ms=step_row.get("median_ms"),
                steps_per_hour=(decided + demonstrated) / hours if hours > 0 else None,
                **_rate("gold_accuracy", *gold.get(row["annotator_id"], (0, 0))),
                **_rate("agreement", *agreement.get(row["annotator_id"], (0, 0))),
            )
        )
    return sorted(cards, key=lambda card: card.annotator)


def _rate(name: str, right: int, total: int) -> dict[str, Any]:
    """A rate's fields on a scorecard: counts, share and interval."""
    counts = {
        "gold_accuracy": ("gold_steps", "gold_right"),
        "agreement": ("compared_steps", "agreed_steps"),
    }
    interval = wilson(right, total)
    return {
        counts[name][0]: total,
        counts[name][1]: right,
        name: right / total if total else None,
        f"{name}_low": interval[0] if interval else None,
        f"{name}_high": interval[1] if interval else None,
    }


def _dated(rows: QuerySet[Any], field: str, start: datetime | None, end: datetime | None) -> Any:
    if start is not None:
        rows = rows.filter(**{f"{field}__gte": start})
    if end is not None:
        rows = rows.filter(**{f"{field}__lt": end})
    return rows


def _gold(
    project_id: int,
    start: datetime | None,
    end: datetime | None,
    annotator_id: int | None,
    before: datetime | None,
) -> dict[int, tuple[int, int]]:
    """(right, scored) gold steps per annotator."""
    verdicts = _dated(
        GoldVerdict.objects.filter(run__episode__task__project_id=project_id), "at", start, end
    )
    if annotator_id is not None:
        verdicts = verdicts.filter(annotator_id=annotator_id)
    if before is not None:
        verdicts = verdicts.filter(at__lt=before)
    rows = verdicts.values("annotator_id").annotate(
        total=Count("id"), right=Count("id", filter=Q(right=True))
    )
    return {r["annotator_id"]: (r["right"], r["total"]) for r in rows}


def _agreement(
    project_id: int, start: datetime | None, end: datetime | None, before: datetime | None = None
) -> dict[int, tuple[int, int]]:
    """(agreed, compared) step pairs per annotator, on either side of a pair."""
    pairs = _dated(Agreement.objects.filter(task__project_id=project_id), "at", start, end)
    if before is not None:
        pairs = pairs.filter(at__lt=before)
    seen: dict[int, tuple[int, int]] = {}
    for side in ("annotator_a_id", "annotator_b_id"):
        for row in pairs.values(side).annotate(
            total=Count("id"), agreed=Count("id", filter=Q(agree=True))
        ):
            agreed, total = seen.get(row[side], (0, 0))
            seen[row[side]] = (agreed + row["agreed"], total + row["total"])
    return seen


def pairs(
    project_id: int, ended_from: datetime | None = None, ended_until: datetime | None = None
) -> list[dict[str, Any]]:
    """Per pair of annotators: compared and agreed step pairs, and the share."""
    rows = (
        _dated(
            Agreement.objects.filter(task__project_id=project_id), "at", ended_from, ended_until
        )  # fmt: skip
        .values("annotator_a__username", "annotator_b__username")
        .annotate(compared=Count("id"), agreed=Count("id", filter=Q(agree=True)))
        .order_by("annotator_a__username", "annotator_b__username")
    )
    return [
        {
            "annotators": [r["annotator_a__username"], r["annotator_b__username"]],
            "compared_steps": r["compared"],
            "agreed_steps": r["agreed"],
            "agreement": r["agreed"] / r["compared"],
        }
        for r in rows
    ]


def tasks(
    project_id: int,
    ended_from: datetime | None = None,
    ended_until: datetime | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """Per task done by several annotators: compared and agreed step pairs and the share,
    least agreement first (at most ``limit``)."""
    rows = (
        _dated(
            Agreement.objects.filter(task__project_id=project_id), "at", ended_from, ended_until
        )  # fmt: skip
        .values("task_id", "task__external_id")
        .annotate(compared=Count("id"), agreed=Count("id", filter=Q(agree=True)))
        .order_by()
    )
    ordered = sorted(rows, key=lambda r: (r["agreed"] / r["compared"], r["task__external_id"]))
    return [
        {
            "task": r["task_id"],
            "external_id": r["task__external_id"],
            "compared_steps": r["compared"],
            "agreed_steps": r["agreed"],
            "agreement": r["agreed"] / r["compared"],
        }
        for r in ordered[:limit]
    ]


def timeline(
    project_id: int, ended_from: datetime | None = None, ended_until: datetime | None = None
) -> list[dict[str, Any]]:
    """Per annotator and day (UTC): gold steps and right ones, compared and agreed step
    pairs, and steps decided or demonstrated; days without any are left out."""
    days: dict[tuple[str, str], dict[str, Any]] = {}

    def add(rows: Any, name_field: str, counts: dict[str, str]) -> None:
        for row in rows:
            key = (row["day"].isoformat(), row[name_field])
            entry = days.setdefault(key, {
                "day": key[0], "annotator": key[1], "gold_steps": 0, "gold_right": 0,
                "compared_steps": 0, "agreed_steps": 0, "steps": 0,
            })  # fmt: skip
            for field, column in counts.items():
                entry[field] += row[column]

    verdicts = _dated(
        GoldVerdict.objects.filter(run__episode__task__project_id=project_id), "at", ended_from,
        ended_until,
    )  # fmt: skip
    add(
        verdicts.annotate(day=TruncDate("at", tzinfo=UTC))
        .values("day", "annotator__username")
        .annotate(total=Count("id"), right=Count("id", filter=Q(right=True))),
        "annotator__username",
        {"gold_steps": "total", "gold_right": "right"},
    )
    compared = _dated(Agreement.objects.filter(task__project_id=project_id), "at", ended_from,
                      ended_until)  # fmt: skip
    for side in ("annotator_a__username", "annotator_b__username"):
        add(
            compared.annotate(day=TruncDate("at", tzinfo=UTC))
            .values("day", side)
            .annotate(total=Count("id"), agreed=Count("id", filter=Q(agree=True))),
            side,
            {"compared_steps": "total", "agreed_steps": "agreed"},
        )
    steps = Step.objects.filter(
        episode__in=_episodes(project_id, ended_from, ended_until).values("pk"),
        decision__in=[*PEOPLE_DECISIONS, Decision.DEMONSTRATED],
    )
    add(
        steps.annotate(day=TruncDate("decided_at", tzinfo=UTC))
        .values("day", "episode__annotator__username")
        .annotate(total=Count("id")),
        "episode__annotator__username",
        {"steps": "total"},
    )
    return [days[key] for key in sorted(days)]


def as_csv(cards: list[Scorecard]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(Scorecard.__dataclass_fields__))
    writer.writeheader()
    for card in cards:
        writer.writerow({k: "" if v is None else v for k, v in asdict(card).items()})
    return out.getvalue()


def as_json(cards: list[Scorecard]) -> list[dict[str, Any]]:
    return [asdict(card) for card in cards]
