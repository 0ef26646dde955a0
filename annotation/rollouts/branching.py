"""Marking a rollout's first wrong step and sending it to annotators (reflection tuning on
online traces, as UI-TARS does it).

**Marking.** A reviewer names step τ of an ended rollout as its first wrong one
(``send_to_annotators``). The rollout's review in force becomes a rejection naming τ, so the
steps before τ stay usable as data (the valid prefix: SFT samples of ``source=rollout``), and
the rollout is validated again. The project gets a *branch task*: the rollout's task, to be
worked from τ. Marking the same step again answers the same task.

How the branch task's episode replays the rollout and hands it over is
``annotation.episodes.replay``.
"""

from django.db import transaction

from annotation.episodes.reviews import submit_review
from annotation.models import Episode, EpisodeMode, Review, Task, TaskEvent
from backend.accounts.models import User
from backend.errors import DomainError


class BranchRefused(DomainError):
    status_code = 409
    code = "branch_refused"


def send_to_annotators(
    episode: Episode, reviewer: User, step: int, comment: str = ""
) -> tuple[Task, bool]:
    """Mark ``step`` as the rollout's first wrong one and offer the rollout from there: the
    branch task, and whether it is new (the step was not sent before)."""
    if episode.mode != EpisodeMode.AUTONOMOUS:
        raise BranchRefused(
            f"Episode {episode.pk} is a person's; only a rollout is branched from a wrong step."
        )
    if episode.ended_at is None:
        raise BranchRefused(f"Rollout episode {episode.pk} is still running.")
    if not episode.steps.filter(index=step).exists():
        raise BranchRefused(f"Rollout episode {episode.pk} has no step {step}.")
    prefix = episode.steps.filter(index__lt=step, decided_at__isnull=False).count()
    if prefix != step - 1:
        raise BranchRefused(f"The steps before {step} did not all run, so they cannot be replayed.")
    source = episode.task
    with transaction.atomic():
        submit_review(episode, reviewer, Review.Verdict.REJECTED, step, comment)
        task, created = Task.objects.get_or_create(
            branch_of=episode,
            branch_step=step,
            defaults={
                "project_id": source.project_id,
                "external_id": f"{source.external_id[:150]}~episode-{episode.pk}-step-{step}",
                "instruction": source.instruction,
                "setup": source.setup,
                "evaluator": source.evaluator,
                "related_apps": source.related_apps,
                "max_steps": source.max_steps,
                "priority": source.priority,
                "source": {
                    "branch_of": {"task": source.external_id, "episode": episode.pk, "step": step}
                },
            },
        )
        if created:
            TaskEvent.objects.create(
                task=task,
                kind=TaskEvent.Kind.BRANCHED,
                actor=reviewer,
                reason=f"rollout episode {episode.pk} from its first wrong step {step}",
            )
    return task, created
