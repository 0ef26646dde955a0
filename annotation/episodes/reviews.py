"""Reviews: a reviewer's verdict on a finished episode.

A review accepts or rejects an episode. A rejection may name the first wrong step: the steps
before it stay usable as training data (the valid prefix, as UI-TARS's filtering keeps it).
The latest review of an episode is the one in force; the task's status follows it.

Submitting is idempotent over a short window, so that a double click or a retried request
never stores a second, identical review: when the episode's latest review is by the same
reviewer, with the same verdict, first wrong step and comment, and was written less than
``REPEAT_WINDOW`` ago, that review is answered again and nothing is stored (no review, no task
event). The rule needs no key from the client; reviews of one episode are written one at a time
(the episode's row is locked), so two requests racing each other cannot both store one. The
same review sent after someone else's review, or after the window, is a new review: it changes
which review is in force, or says the reviewer stands by it later on.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from annotation.job_names import QUEUES, VALIDATE_ROLLOUT
from annotation.models import Episode, EpisodeMode, Review, Rollout, TaskEvent, TaskStatus
from annotation.quality import feedback
from backend.accounts.models import User
from backend.celery import send_after_commit
from backend.errors import DomainError

REPEAT_WINDOW = timedelta(seconds=60)


class ReviewRefused(DomainError):
    status_code = 409
    code = "review_refused"


@dataclass(frozen=True)
class ReviewReceipt:
    """The review in force after a submission, and whether the submission repeated it."""

    review: Review
    duplicate: bool


def submit_review(
    episode: Episode, reviewer: User, verdict: str, first_wrong_step: int | None, comment: str
) -> ReviewReceipt:
    """Store a review of an ended episode, or answer again the identical one just stored."""
    if episode.ended_at is None:
        raise ReviewRefused("This episode is still running; review it once it has ended.")
    if first_wrong_step is not None:
        if verdict != Review.Verdict.REJECTED:
            raise ReviewRefused("Only a rejection can mark a first wrong step.")
        if not episode.steps.filter(index=first_wrong_step).exists():
            raise ReviewRefused(f"Episode {episode.pk} has no step {first_wrong_step}.")
    with transaction.atomic():
        Episode.objects.select_for_update().filter(pk=episode.pk).values_list("pk").get()
        latest = episode.reviews.order_by("-created_at", "-id").first()
        if latest is not None and _repeats(latest, reviewer, verdict, first_wrong_step, comment):
            return ReviewReceipt(latest, duplicate=True)
        review = Review.objects.create(
            episode=episode,
            reviewer=reviewer,
            verdict=verdict,
            first_wrong_step=first_wrong_step,
            comment=comment,
        )
        if episode.mode == EpisodeMode.AUTONOMOUS:
            # A rollout's review is a part of its validation: V is judged again.
            for pk in Rollout.objects.filter(episode=episode).values_list("pk", flat=True):
                send_after_commit(VALIDATE_ROLLOUT, [pk], QUEUES[VALIDATE_ROLLOUT])
        task = episode.task
        if episode.mode == EpisodeMode.INTERACTIVE and task.status in (
            TaskStatus.SUBMITTED,
            TaskStatus.REVIEWED,
            TaskStatus.REJECTED,
        ):
            task.status = (
                TaskStatus.REVIEWED if verdict == Review.Verdict.ACCEPTED else TaskStatus.REJECTED
            )
            task.save(update_fields=["status", "updated_at"])
        TaskEvent.objects.create(
            task=task,
            kind=TaskEvent.Kind.REVIEWED,
            actor=reviewer,
            reason=f"episode {episode.pk} {verdict}",
        )
        transaction.on_commit(lambda: feedback.rejection_told(review))
    return ReviewReceipt(review, duplicate=False)


def review_episode(
    episode: Episode, reviewer: User, verdict: str, first_wrong_step: int | None, comment: str
) -> Review:
    """``submit_review`` for callers that only need the review in force."""
    return submit_review(episode, reviewer, verdict, first_wrong_step, comment).review


def _repeats(
    review: Review, reviewer: User, verdict: str, first_wrong_step: int | None, comment: str
) -> bool:
    return (
        review.reviewer_id == reviewer.pk
        and (review.verdict, review.first_wrong_step, review.comment)
        == (verdict, first_wrong_step, comment)
        and timezone.now() - review.created_at < REPEAT_WINDOW
    )
