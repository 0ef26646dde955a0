"""What quality control does when a person's episode ends (the ``check_quality`` job).

Rules, in order:

1. A honeypot run is scored against gold (``honeypots.score_run``).
2. Any other submitted episode is compared with its task's other annotators'
   (``overlap.compare``).
3. In a project with a gold threshold, the episode of an annotator whose gold accuracy there
   (all their scored gold steps so far, this run's included) is below it is held: it waits
   for a review that accepts it before it counts (``QualityHold``; exports leave held
   episodes out until then, and the review queue shows them first). An annotator without a
   scored gold step yet is not held: nothing is known.
"""

from django.db.models import Count, Q

from annotation.models import Episode, GoldVerdict, HoneypotRun, QualityHold
from annotation.quality import honeypots, overlap


def check_quality(episode_id: int) -> None:
    """Run the module's rules once for an ended episode; running them again changes nothing."""
    episode = Episode.objects.select_related("task__project").get(pk=episode_id)
    if episode.ended_at is None:
        return
    if HoneypotRun.objects.filter(episode=episode).exists():
        honeypots.score_run(episode.pk)
    else:
        overlap.compare(episode.pk)
    threshold = episode.task.project.gold_threshold
    if threshold is None:
        return
    accuracy = gold_accuracy(episode.task.project_id, episode.annotator_id)
    if accuracy is not None and accuracy < threshold:
        QualityHold.objects.get_or_create(
            episode=episode, defaults={"gold_accuracy": accuracy, "threshold": threshold}
        )


def gold_accuracy(project_id: int, annotator_id: int) -> float | None:
    """The share of an annotator's scored gold steps in a project that were right."""
    counts = GoldVerdict.objects.filter(
        annotator_id=annotator_id, run__episode__task__project_id=project_id
    ).aggregate(total=Count("id"), right=Count("id", filter=Q(right=True)))
    return counts["right"] / counts["total"] if counts["total"] else None
