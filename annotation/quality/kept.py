"""Which people's episodes a dataset keeps, by the quality of the work (exports' filters).

Rules:

- Honeypot runs are never ordinary data: every export leaves them out.
- A held episode (``QualityHold``) counts only once its latest review accepted it. So does,
  in a project with a gold threshold, any episode of an annotator whose gold accuracy there is
  below it now: the hold is also read when the data is, not only written when an episode ends
  (an export may run before the episode's check, and work done before the annotator's first
  missed gold is no better for having come first).
- ``min_gold_accuracy``: an annotator *passes* when their gold accuracy in the project (all
  their scored gold steps) is at least it; one with no scored gold step does not (nothing is
  known, and wrong data is worse than none). An episode is kept when its annotator passes, or
  when it is *corroborated*: compared with a passing annotator's episode of the same task
  (``overlap``) and in agreement at every compared step with everyone it was compared with.
- ``min_agreement``: an episode is kept only when its annotator's agreement in the project
  (agreeing over compared step pairs, with anyone) is at least it; one never compared is not.
- Both given: both must hold. The manifest names the thresholds, the passing annotators and
  how many episodes each rule left out.
"""

from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from annotation.models import Agreement, Episode, GoldVerdict
from backend.accounts.models import User


def _gold_accuracies(project_id: int) -> dict[int, float]:
    """Each annotator's gold accuracy in the project, where they have a scored gold step (the
    same share as ``checks.gold_accuracy``)."""
    rows = (
        GoldVerdict.objects.filter(run__episode__task__project_id=project_id)
        .values("annotator_id")
        .annotate(total=Count("id"), right=Count("id", filter=Q(right=True)))
    )
    return {r["annotator_id"]: r["right"] / r["total"] for r in rows if r["total"]}


def gold_passing(project_id: int, minimum: float) -> set[int]:
    """The annotators whose gold accuracy in the project is at least ``minimum``."""
    return {who for who, share in _gold_accuracies(project_id).items() if share >= minimum}


def gold_failing(project_id: int, threshold: float) -> set[int]:
    """The annotators whose gold accuracy in the project is below ``threshold`` (one without a
    scored gold step is not: nothing is known)."""
    return {who for who, share in _gold_accuracies(project_id).items() if share < threshold}


def agreement_passing(project_id: int, minimum: float) -> set[int]:
    """The annotators whose agreement in the project is at least ``minimum``."""
    totals: dict[int, list[int]] = {}
    for side in ("annotator_a_id", "annotator_b_id"):
        rows = (
            Agreement.objects.filter(task__project_id=project_id)
            .values(side)
            .annotate(total=Count("id"), agreed=Count("id", filter=Q(agree=True)))
        )
        for row in rows:
            seen = totals.setdefault(row[side], [0, 0])
            seen[0] += row["agreed"]
            seen[1] += row["total"]
    return {who for who, (agreed, total) in totals.items() if total and agreed / total >= minimum}


def _corroborated(passing: set[int]) -> Q:
    """Episodes compared with a passing annotator's, and agreeing at every compared step."""
    mine = Q(step_a__episode=OuterRef("pk")) | Q(step_b__episode=OuterRef("pk"))
    with_passing = Agreement.objects.filter(mine).filter(
        Q(annotator_a_id__in=passing) | Q(annotator_b_id__in=passing)
    )
    disagreed = Agreement.objects.filter(mine, agree=False)
    return Q(Exists(with_passing)) & ~Q(Exists(disagreed))


def kept(
    episodes: QuerySet[Episode],
    project_id: int,
    min_gold_accuracy: float | None,
    min_agreement: float | None,
) -> QuerySet[Episode]:
    """``episodes`` (people's, of one project) less what the module's rules leave out."""
    if min_gold_accuracy is not None:
        passing = gold_passing(project_id, min_gold_accuracy)
        episodes = episodes.filter(Q(annotator_id__in=passing) | _corroborated(passing))
    if min_agreement is not None:
        episodes = episodes.filter(annotator_id__in=agreement_passing(project_id, min_agreement))
    return episodes


def summary(
    episodes: QuerySet[Episode],
    project_id: int,
    min_gold_accuracy: float | None,
    min_agreement: float | None,
) -> dict[str, Any]:
    """What the quality rules kept of ``episodes``, for an export's manifest."""
    out: dict[str, Any] = {
        "honeypot_runs_left_out": episodes.filter(honeypot_run__isnull=False).count(),
    }
    if min_gold_accuracy is None and min_agreement is None:
        return out
    ordinary = episodes.filter(honeypot_run__isnull=True)
    keeping = kept(ordinary, project_id, min_gold_accuracy, min_agreement)
    if min_gold_accuracy is not None:
        passing = gold_passing(project_id, min_gold_accuracy)
        out["min_gold_accuracy"] = min_gold_accuracy
        out["gold_passing_annotators"] = _names(passing)
        out["corroborated_episodes"] = keeping.exclude(annotator_id__in=passing).count()
    if min_agreement is not None:
        out["min_agreement"] = min_agreement
        out["agreement_passing_annotators"] = _names(agreement_passing(project_id, min_agreement))
    out["episodes_kept"] = keeping.count()
    out["episodes_left_out"] = ordinary.count() - out["episodes_kept"]
    return out


def _names(ids: set[int]) -> list[str]:
    return sorted(User.objects.filter(pk__in=ids).values_list("username", flat=True))
