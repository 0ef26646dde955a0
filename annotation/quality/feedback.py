"""Immediate feedback (a project setting, ``Project.immediate_feedback``): an annotator is told
the right answer right after a gold miss, and the reviewer's reason right after a rejection.

Rules:

- Off, nothing is told: the annotator learns of neither (their scorecard still counts gold up
  to yesterday).
- On, each miss of a scored honeypot run (``honeypots.score_run``) and each rejection of one of
  their episodes is sent as a ``quality_feedback`` notice when it happens, and listed (latest
  first) with their own scorecard. A miss names the task, the step, why it was a miss and the
  right answers: it tells, after the run, that the task was gold. That is the price of the
  setting, as in CVAT's immediate feedback; a manager chooses it.
"""

from typing import Any

from annotation.models import GoldVerdict, Project, Review
from backend.accounts.models import User
from backend.notifications import notify_user

LISTED = 20


def rejection_told(review: Review) -> None:
    """Tell the annotator of a rejection of their episode, when the project gives feedback."""
    episode = review.episode
    if review.verdict != Review.Verdict.REJECTED or not episode.task.project.immediate_feedback:
        return
    notify_user(episode.annotator_id, "quality_feedback", _rejection(review))


def miss_told(verdict: GoldVerdict) -> None:
    notify_user(verdict.annotator_id, "quality_feedback", _miss(verdict))


def for_annotator(project: Project, user: User) -> list[dict[str, Any]]:
    """The feedback ``user`` was given in ``project``, latest first; none when it is off."""
    if not project.immediate_feedback:
        return []
    misses = (
        GoldVerdict.objects.filter(annotator=user, right=False, run__episode__task__project=project)
        .select_related("step", "gold", "run__episode__task")
        .order_by("-at")[:LISTED]
    )
    rejections = (
        Review.objects.filter(
            episode__annotator=user,
            episode__task__project=project,
            verdict=Review.Verdict.REJECTED,
        )
        .select_related("episode__task")
        .order_by("-created_at")[:LISTED]
    )
    told = [_miss(v) for v in misses] + [_rejection(r) for r in rejections]
    return sorted(told, key=lambda item: item["at"], reverse=True)[:LISTED]


def _miss(verdict: GoldVerdict) -> dict[str, Any]:
    episode = verdict.run.episode
    return {
        "kind": "gold_miss",
        "episode": episode.pk,
        "task": episode.task.external_id,
        "step": verdict.step.index,
        "why": verdict.reason,
        "right_answers": verdict.gold.answers,
        "at": verdict.at.isoformat(),
    }


def _rejection(review: Review) -> dict[str, Any]:
    episode = review.episode
    return {
        "kind": "rejected",
        "episode": episode.pk,
        "task": episode.task.external_id,
        "step": review.first_wrong_step,
        "why": review.comment or "rejected by a reviewer",
        "right_answers": None,
        "at": review.created_at.isoformat(),
    }
