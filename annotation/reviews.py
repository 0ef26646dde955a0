"""Reviews: a reviewer's verdict on a finished episode.

A review accepts or rejects an episode. A rejection may name the first wrong step: the steps
before it stay usable as training data (the valid prefix, as UI-TARS's filtering keeps it).
The latest review of an episode is the one in force; the task's status follows it.
"""

from django.db import transaction

from annotation.models import Episode, Review, TaskEvent, TaskStatus
from backend.accounts.models import User
from backend.errors import DomainError


class ReviewRefused(DomainError):
    status_code = 409
    code = "review_refused"


def review_episode(
    episode: Episode, reviewer: User, verdict: str, first_wrong_step: int | None, comment: str
) -> Review:
    if episode.ended_at is None:
        raise ReviewRefused("This episode is still running; review it once it has ended.")
    if first_wrong_step is not None:
        if verdict != Review.Verdict.REJECTED:
            raise ReviewRefused("Only a rejection can mark a first wrong step.")
        if not episode.steps.filter(index=first_wrong_step).exists():
            raise ReviewRefused(f"Episode {episode.pk} has no step {first_wrong_step}.")
    with transaction.atomic():
        review = Review.objects.create(
            episode=episode,
            reviewer=reviewer,
            verdict=verdict,
            first_wrong_step=first_wrong_step,
            comment=comment,
        )
        task = episode.task
        if task.status in (TaskStatus.SUBMITTED, TaskStatus.REVIEWED, TaskStatus.REJECTED):
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
    return review
