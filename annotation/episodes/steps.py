"""Writing a step: opening it on a screen, and deciding it when nobody does.

Every Step row is opened here, whoever drives the episode: the live loop (``observations``), a
rollout's run (the model alone) and a branch task's replay. A step nobody decided (``auto``: a
rollout's model chose it, or a replay copied it from the rollout) is decided here too, in one
statement, because a decided step is frozen (a PostgreSQL trigger refuses later updates). A
person's decision is the loop's own (``loop.decide``).
"""

from datetime import datetime
from typing import Any

from django.utils import timezone

from annotation.models import Decision, Episode, Proposal, Step
from vm_pool.models import Screenshot


def open_step(episode: Episode, index: int, screenshot: Screenshot, waited_ms: float) -> Step:
    """Step ``index`` of ``episode``, observed on ``screenshot`` after ``waited_ms`` of settling."""
    return Step.objects.create(
        episode=episode, index=index, observation=screenshot, settle_ms=round(waited_ms)
    )


def decide_auto(
    step: Step,
    chosen: Proposal | None,
    thought: str,
    action: dict[str, Any] | None,
    at: datetime | None = None,
) -> None:
    """Decide ``step`` as nobody's (``auto``) with ``chosen``'s thought and action (never
    None: a decided step without an action is refused by the table)."""
    Step.objects.filter(pk=step.pk).update(
        decision=Decision.AUTO,
        chosen_proposal=chosen,
        final_thought=thought,
        final_action=action,
        decided_at=at or timezone.now(),
    )
