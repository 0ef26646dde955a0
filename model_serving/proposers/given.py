"""A step whose first answer is given: another text, shown at the pace of the model's own.

A honeypot run (``annotation.quality.honeypots``) shows at a gold step what the gold episode was
shown there. The model is asked as for any step, and the given text takes the place of its
first candidate's words as they stream: as many characters of the given text for each piece
the model writes, the rest when the model ends. So the answer comes at the model's pace and
carries the model's name, version, sampling, token counts and latency, and the step fails when
the model fails. The model's own candidates follow the given one, as many as were asked for in
all. No database here: this runs in the proposal job's event loop.
"""

import dataclasses
from dataclasses import dataclass

from model_serving.proposers.base import (
    Candidate,
    OnText,
    ProposalRequest,
    ProposalResult,
    Proposer,
)
from vm_pool.actions import Action


@dataclass(frozen=True)
class GivenAnswer:
    """The text shown first, as the model writes it, with its thought and action."""

    raw_text: str
    thought: str
    action: Action


async def given_first(
    proposer: Proposer, request: ProposalRequest, given: GivenAnswer, on_text: OnText | None
) -> ProposalResult:
    """``proposer``'s answer to ``request`` with ``given`` in the place of its first candidate
    (the module's rule)."""
    written = 0  # characters of the given text sent so far

    async def paced(candidate: int, delta: str) -> None:
        nonlocal written
        if on_text is None:
            return
        if candidate == 0 and written < len(given.raw_text):
            piece = given.raw_text[written : written + len(delta)]
            written += len(piece)
            await on_text(0, piece)
        if candidate + 1 < request.candidates:  # the model's own come after the given one
            await on_text(candidate + 1, delta)

    result = await proposer.propose(request, paced)
    if on_text is not None and written < len(given.raw_text):
        await on_text(0, given.raw_text[written:])
    first = Candidate(given.raw_text, given.thought, given.action)
    candidates = (first, *result.candidates)[: max(1, request.candidates)]
    return dataclasses.replace(result, candidates=candidates)
