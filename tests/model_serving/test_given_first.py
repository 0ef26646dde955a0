"""A step whose first answer is given (``model_serving.proposers.given``), with the real OpenAI
proposer against the fake OpenAI-compatible server: the given text streams at the model's
pace and in its pieces, the result is the model's (name, sampling, tokens scaled to what is
shown), the model's own candidates follow, and the step fails when the model fails."""

import asyncio

import pytest

from model_serving.proposers.base import (
    Candidate,
    ModelUnavailable,
    ProposalRequest,
    ProposalResult,
)
from model_serving.proposers.given import given_first
from model_serving.registry import get_proposer
from tests.support.fake_model_server import DEFAULT_MODEL, Reply, serving
from tests.support.pngs import solid_png
from vm_pool.actions import Action, ScreenSize

GIVEN = Candidate(
    "Thought: Click the logo.\nAction: click(start_box='<|box_start|>(200,150)<|box_end|>')",
    "Click the logo.",
    Action.from_json({"type": "click", "point": [200, 150]}),
)
OWN = ("Thought: Wait for it.\nAction: wait()", "Thought: Done.\nAction: finished(content='')",
       "Thought: Scroll.\nAction: scroll(direction='down')")  # fmt: skip


def answer(
    server, candidates: int, streamed: list[tuple[int, str]] | None = None
) -> tuple[ProposalResult, list[tuple[int, str]]]:
    """The answer with ``GIVEN`` first, and the (candidate, text) pieces streamed meanwhile."""
    streamed = [] if streamed is None else streamed
    proposer = get_proposer({"base_url": server.base_url, "model": DEFAULT_MODEL})
    request = ProposalRequest(
        instruction="Click the logo",
        platform="desktop",
        screenshot_png=solid_png(1280, 800),
        screen=ScreenSize(1280, 800),
        candidates=candidates,
    )

    async def on_text(candidate: int, delta: str) -> None:
        streamed.append((candidate, delta))

    return asyncio.run(given_first(proposer, request, GIVEN, on_text)), streamed


def text_of(streamed: list[tuple[int, str]], candidate: int) -> str:
    return "".join(delta for c, delta in streamed if c == candidate)


def test_the_given_answer_streams_at_the_models_pace_and_the_models_own_follow_it():
    with serving() as server:
        server.script(Reply.text(*OWN, chunk_chars=5, prompt_tokens=777))
        result, streamed = answer(server, candidates=3)
    # The given text arrives in the model's pieces, while the model still writes.
    given_pieces = [delta for c, delta in streamed if c == 0]
    assert "".join(given_pieces) == GIVEN.raw_text and len(given_pieces) > 5
    first_piece = streamed.index((0, given_pieces[0]))
    assert first_piece < max(i for i, (c, _) in enumerate(streamed) if c == 1)
    assert all(len(piece) <= 5 for piece in given_pieces)  # the model's piece size
    # The model's own first two answers come after it; its third is not shown.
    assert (text_of(streamed, 1), text_of(streamed, 2)) == OWN[:2]
    assert {c for c, _ in streamed} == {0, 1, 2}
    assert [c.raw_text for c in result.candidates] == [GIVEN.raw_text, *OWN[:2]]
    assert (result.candidates[0].thought, result.candidates[0].action) == (
        GIVEN.thought,
        GIVEN.action,
    )
    # The answer is the model's: its name, sampling and counts, its tokens (a piece each here)
    # scaled to the characters shown.
    assert (result.model_name, result.prompt_tokens) == (DEFAULT_MODEL, 777)
    assert result.sampling["n"] == 3 and result.latency_ms > 0
    tokens = sum(-(-len(text) // 5) for text in OWN)
    shown = len(GIVEN.raw_text) + len(OWN[0]) + len(OWN[1])
    assert result.completion_tokens == round(tokens * shown / sum(map(len, OWN)))


def test_what_the_model_did_not_pace_streams_on_in_its_pieces_after_it_ends():
    short = "Thought: Ok.\nAction: wait()"  # the model writes less than the given text
    with serving() as server:
        server.script(Reply.text(short, chunk_chars=4))
        result, streamed = answer(server, candidates=1)
    assert {c for c, _ in streamed} == {0}
    assert text_of(streamed, 0) == GIVEN.raw_text
    assert len(streamed) == -(-len(GIVEN.raw_text) // 4)  # in the model's pieces throughout
    assert [c.raw_text for c in result.candidates] == [GIVEN.raw_text]


def test_when_the_model_fails_the_step_fails_as_any_does():
    """A 503 before any word: nothing given is shown. A stream cut short: the step fails, with
    no more of the given text than the model had written, as a model's own answer would."""
    refused: list[tuple[int, str]] = []
    cut: list[tuple[int, str]] = []
    with serving() as server:
        server.default = Reply.error(503, "overloaded")  # a retry is refused too
        with pytest.raises(ModelUnavailable, match="503"):
            answer(server, candidates=3, streamed=refused)
        # The first chunks name each choice's role; six more carry text.
        server.script(Reply.text(*OWN, chunk_chars=5, cut_after_chunks=3 + 6))
        with pytest.raises(ModelUnavailable):
            answer(server, candidates=3, streamed=cut)
    assert refused == []
    assert 0 < len(text_of(cut, 0)) <= 10 and GIVEN.raw_text.startswith(text_of(cut, 0))
