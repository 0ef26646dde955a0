"""What a proposer is asked for a step: the task's instruction, the episode's decided steps
so far (the last ``IMAGE_WINDOW - 1`` with their screenshots) and the step's observation. One
builder for every caller (the live loop's job, a rollout's run, an offline evaluation), so a
model is always asked the same way; a module of its own, light to import, so that a rollout's
run does not load the exports' libraries with it.
"""

from functools import lru_cache

from django.core.files.storage import default_storage

from annotation.episodes.thoughts import thought_of
from annotation.models import Decision, Step
from model_serving.proposers.base import IMAGE_WINDOW, HistoryStep, ProposalRequest
from vm_pool.actions import Action, ScreenSize


@lru_cache(maxsize=16)
def _stored_png(name: str) -> bytes:
    # Screenshots are content-addressed and never change: consecutive steps of an episode
    # share four of their five images, so each is read from storage once, not five times.
    with default_storage.open(name, "rb") as f:
        return f.read()


def _png(step: Step) -> bytes:
    return _stored_png(step.observation.file.name)


def proposal_request(step: Step) -> ProposalRequest:
    """What the proposer sees for ``step``: the instruction, the history, the observation."""
    episode = step.episode
    earlier = list(
        episode.steps.filter(index__lt=step.index, decided_at__isnull=False)
        .select_related("observation")
        .order_by("index")
    )
    with_image = {s.pk for s in earlier[-(IMAGE_WINDOW - 1) :]}
    history = tuple(
        HistoryStep(
            screenshot_png=_png(s) if s.pk in with_image else b"",
            screen=ScreenSize(s.observation.width, s.observation.height),
            # A demonstrated step's thought came after it, as a revision (``thoughts``).
            thought=thought_of(s).text if s.decision == Decision.DEMONSTRATED else s.final_thought,
            action=Action.from_json(s.final_action),
        )
        for s in earlier
    )
    project = episode.task.project
    return ProposalRequest(
        instruction=episode.task.instruction,
        platform=project.platform,
        screenshot_png=_png(step),
        screen=ScreenSize(step.observation.width, step.observation.height),
        history=history,
        candidates=int(project.model_settings.get("candidates", 1)),
    )
