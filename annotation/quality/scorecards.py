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
- Computed in PostgreSQL, one aggregate query for the episodes and one for the steps,
  never by loading steps into Python.
- An annotator may read their own scorecard. A project's managers read everyone's, as JSON or
  CSV.
"""

import csv
import io
from dataclasses import asdict, dataclass
from datetime import datetime
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

from annotation.models import PEOPLE_DECISIONS, Decision, Episode, EpisodeMode, Review, Step
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
            )
        )
    return sorted(cards, key=lambda card: card.annotator)


def as_csv(cards: list[Scorecard]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(Scorecard.__dataclass_fields__))
    writer.writeheader()
    for card in cards:
        writer.writerow({k: "" if v is None else v for k, v in asdict(card).items()})
    return out.getvalue()


def as_json(cards: list[Scorecard]) -> list[dict[str, Any]]:
    return [asdict(card) for card in cards]
