"""Gold steps: a manager marks the right answers of a finished episode's steps.

Rules:

- Only an episode that is known to be right may give gold: its latest review accepted it
  (source ``review``), or its task's evaluator scored it 1 (source ``evaluator``). A rejected,
  unreviewed-and-unscored or running episode gives none.
- Each step named must be a decided step of the episode; its answers are checked against that
  step's screen (``rules.check_answers``). Without answers, a step's gold is the answer its own
  final action makes (``rules.answer_from``). Without steps named, every decided step is gold
  that way.
- All or nothing: one bad step refuses the whole request, and nothing is stored. Gold set again
  for a step replaces it.
- Managers of the project set and read gold; nothing an annotator reads holds it.
"""

from typing import Any

from django.db import transaction

from annotation.models import Episode, GoldStep, Review, Step
from annotation.quality.rules import GoldRefused, answer_from, check_answers
from backend.accounts.models import User
from backend.errors import DomainError
from vm_pool.actions import ScreenSize


class GoldNotAllowed(DomainError):
    status_code = 409
    code = "gold_not_allowed"


class BadGold(DomainError):
    status_code = 400
    code = "bad_gold"


def source_of(episode: Episode) -> str:
    """Why the episode may give gold (``GoldStep.Source``); ``GoldNotAllowed`` when it may not."""
    if episode.ended_at is None:
        raise GoldNotAllowed("A running episode gives no gold: wait until it ends.")
    latest = Review.objects.filter(episode=episode).order_by("-created_at", "-id").first()
    if latest is not None and latest.verdict == Review.Verdict.ACCEPTED:
        return GoldStep.Source.REVIEW
    if latest is None and episode.task_success == 1.0:
        return GoldStep.Source.EVALUATOR
    raise GoldNotAllowed(
        "Gold comes from an episode known to be right: one whose latest review accepted it, or "
        "one its task's evaluator scored 1 (and nobody rejected)."
    )


def set_gold(episode: Episode, user: User, steps: list[dict[str, Any]] | None) -> list[GoldStep]:
    """The episode's gold steps after setting ``steps`` (``[{step, answers?}]``; all decided
    steps when None). See the module's rules."""
    source = source_of(episode)
    decided = {
        s.index: s
        for s in Step.objects.filter(episode=episode, decided_at__isnull=False).select_related(
            "observation"
        )
    }
    wanted = [{"step": index} for index in sorted(decided)] if steps is None else steps
    if not wanted:
        raise BadGold("Name at least one step to make gold.")
    checked: list[tuple[Step, list[dict[str, Any]]]] = []
    for entry in wanted:
        index = entry.get("step") if isinstance(entry, dict) else None
        step = decided.get(index) if isinstance(index, int) else None
        if step is None:
            raise BadGold(f"Step {index!r} is not a decided step of episode {episode.pk}.")
        screen = ScreenSize(step.observation.width, step.observation.height)
        answers = entry.get("answers")
        if answers is None:
            assert step.final_action is not None  # decided steps have one
            answers = [answer_from(step.final_action)]
        try:
            checked.append((step, check_answers(answers, screen)))
        except GoldRefused as error:
            raise BadGold(f"Step {index}: {error}") from error
    with transaction.atomic():
        for step, answers in checked:
            GoldStep.objects.update_or_create(
                step=step, defaults={"answers": answers, "source": source, "created_by": user}
            )
    return list(GoldStep.objects.filter(step__episode=episode).select_related("step"))
