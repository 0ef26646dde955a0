"""Recording a step's proposals and telling its workspace: a model's answer (the live loop's
job, a rollout's run), the model being unavailable, and proposals recorded for a rollout offered
again on a branch task's step. One module writes Proposal rows and announces them.

Ranks are counted under the step's row lock, so two answers stored at once never take the same
rank. An answer for an observation the screen has replaced since is stored superseded and not
offered; as it was the step's one answer in flight, it asks for the newer screen in its place
(``observations.ask_model``). An answer that comes once the step is decided (the annotator
corrected it without waiting) or its episode ended is stored superseded too: no one saw it, so
it is no one's rejected answer in a pair.
"""

from typing import Any

from django.db import transaction

from annotation.episodes import observations
from annotation.episodes.events import proposal_json, tell
from annotation.models import Episode, Proposal, Step


def record_proposals(step_id: int, result: Any, observation: str | None = None) -> list[Proposal]:
    """Store a proposer's answer (``model_serving`` ProposalResult) for a step, in rank order.

    An answer for an observation the screen has replaced since (``observation``, the one the
    request showed) is stored as superseded and not offered; as it was the step's one answer in
    flight, it asks for the newer screen in its place (``observations``). Ranks are counted
    under the step's row lock: two answers stored at once never take the same rank."""
    with transaction.atomic():
        step = Step.objects.select_for_update().select_related("episode").get(pk=step_id)
        late = _too_late(step)
        superseded = late or (observation is not None and observation != step.observation_id)
        first_rank = step.proposals.count()
        rows = [
            Proposal(
                step=step,
                rank=first_rank + i,
                raw_text=candidate.raw_text,
                thought=candidate.thought,
                action=candidate.action.to_json() if candidate.is_valid else None,
                invalid_reason=""
                if candidate.is_valid
                else (candidate.invalid_reason or "no action"),
                model_name=result.model_name,
                model_version=result.model_version,
                sampling=result.sampling,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                latency_ms=result.latency_ms,
                superseded=superseded,
            )
            for i, candidate in enumerate(result.candidates)
        ]
        Proposal.objects.bulk_create(rows)
        if superseded:
            if not late:
                _ask_again(step)
            return rows
        Episode.objects.filter(pk=step.episode_id, model_version="").update(
            model_name=result.model_name, model_version=result.model_version
        )
        tell(
            step.episode_id,
            "proposal",
            {"step": step.index, "candidates": [proposal_json(p) for p in rows]},
        )
    return rows


def _too_late(step: Step) -> bool:
    """The step was decided, or its episode ended, before the answer came: nothing offers it."""
    return step.decided_at is not None or step.episode.ended_at is not None


def _ask_again(step: Step) -> None:
    """An answer came for a screen replaced since: the newer one is asked for, the step being
    open."""
    observations.ask_model(step.pk)


def record_model_unavailable(step_id: int, reason: str, observation: str | None = None) -> None:
    """The model could not answer: the annotator is told to write the step themselves."""
    with transaction.atomic():
        step = Step.objects.select_for_update().select_related("episode").get(pk=step_id)
        late = _too_late(step)
        superseded = late or (observation is not None and observation != step.observation_id)
        Proposal.objects.create(
            step=step,
            rank=step.proposals.count(),
            raw_text="",
            invalid_reason=f"model unavailable: {reason}"[:500],
            superseded=superseded,
        )
        if superseded:
            if not late:
                _ask_again(step)
            return
        tell(step.episode_id, "model_unavailable", {"step": step.index, "reason": reason})


def copy_proposals(original: Step, step: Step) -> list[Proposal]:
    return Proposal.objects.bulk_create(
        proposal.copied_to(step)
        for proposal in original.proposals.filter(superseded=False).order_by("rank")
    )


def offer_recorded_proposals(original: Step, step: Step) -> None:
    """Within a transaction: the proposals recorded for ``original`` (a rollout's step) as the
    open step's, announced to its workspace."""
    copies = copy_proposals(original, step)
    Episode.objects.filter(pk=step.episode_id, model_version="").update(
        model_name=copies[0].model_name if copies else "",
        model_version=copies[0].model_version if copies else "",
    )
    tell(
        step.episode_id,
        "proposal",
        {"step": step.index, "candidates": [proposal_json(p) for p in copies]},
    )
