"""A step whose first answer is given: another text, shown at the pace of the model's own.

A honeypot run (``annotation.quality.honeypots``) shows at a gold step what the gold episode was
shown there. The model is asked as for any step, and the given text takes the place of its
first candidate's words as they stream: as many characters of the given text for each piece
the model writes. The given text's last characters are held back until the model ends, and
what is left then streams on at the pace the model kept, in pieces of its size; the answer's
latency counts that time. So the answer comes at a model's pace, carries the model's name,
version and sampling, and the step fails when the model fails. The model's own candidates
follow the given one, as many as were asked for in all, and the completion's token count is
the model's, scaled to the characters shown. No database here: this runs in the proposal
job's event loop.
"""

import asyncio
import dataclasses
import time

from model_serving.proposers.base import (
    Candidate,
    OnText,
    ProposalRequest,
    ProposalResult,
    Proposer,
)

HELD_BACK_CHARS = 8  # the given text's end waits for the model's


async def given_first(
    proposer: Proposer, request: ProposalRequest, given: Candidate, on_text: OnText | None
) -> ProposalResult:
    """``proposer``'s answer to ``request`` with ``given`` in the place of its first candidate
    (the module's rule)."""
    text = given.raw_text
    written = 0  # characters of the given text sent so far
    pieces, model_chars = 0, 0  # the model's pieces of its first candidate, and their size
    first_at = last_at = started = time.monotonic()  # when its first and last pieces came

    async def send(candidate: int, delta: str) -> None:
        if on_text is not None and delta:
            await on_text(candidate, delta)

    async def paced(candidate: int, delta: str) -> None:
        nonlocal written, pieces, model_chars, first_at, last_at
        if candidate == 0:
            pieces, model_chars = pieces + 1, model_chars + len(delta)
            last_at = time.monotonic()
            first_at = last_at if pieces == 1 else first_at
            piece = text[written : min(written + len(delta), len(text) - HELD_BACK_CHARS)]
            written += len(piece)
            await send(0, piece)
        if candidate + 1 < request.candidates:  # the model's own come after the given one
            await send(candidate + 1, delta)

    result = await proposer.propose(request, paced)
    # What is left of the given text streams on as the model streamed: its piece size, its pace.
    elapsed = time.monotonic() - started
    size = max(1, round(model_chars / pieces)) if pieces else HELD_BACK_CHARS
    interval = (last_at - first_at) / (pieces - 1) if pieces > 1 else 0.0
    while written < len(text):
        await asyncio.sleep(interval)
        await send(0, text[written : written + size])
        written += size
    shown = (given, *result.candidates)[: max(1, request.candidates)]
    return dataclasses.replace(
        result,
        candidates=shown,
        completion_tokens=_scaled(result.completion_tokens, result.candidates, shown),
        latency_ms=result.latency_ms + round((time.monotonic() - started - elapsed) * 1000),
    )


def _scaled(
    tokens: int | None, written: tuple[Candidate, ...], shown: tuple[Candidate, ...]
) -> int | None:
    """The model's completion tokens for what it wrote, scaled to the characters shown."""
    wrote = sum(len(c.raw_text) for c in written)
    if tokens is None or wrote == 0:
        return tokens
    return max(1, round(tokens * sum(len(c.raw_text) for c in shown) / wrote))
