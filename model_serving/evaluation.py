"""Offline evaluation: the held-out split, and the step success rate of a model version.

**Held-out split.** A task is held out when the first 8 bytes of
``sha256("tandem-held-out:<task id>")``, read as a big-endian integer, fall below ``share`` of
2**64 (``settings.TANDEM_HELD_OUT_SHARE``, 10 % by default), and so is every episode of it: each
annotator's of an overlapped task, every rollout of it and every episode of its branch tasks
(their split is their rollout's task's). Split by episode, those would put the same task's
screens on both sides, and offline evaluation would score states the model trained on. The
split depends on nothing but the id, so it never moves as data arrives, and every process
computes the same one.
Held-out episodes are never training data: dataset exports used for fine-tuning are built with the
pair builder's ``exclude_held_out`` filter (``annotation.datasets.records.Filters``), which honours
``is_held_out``, and the fine-tuning API refuses exports built without it.

**Step success.** A held-out step is given to the version exactly as the live loop gives it
(the same ``ProposalRequest``, the same prompt and history); its answer succeeds when:

- it is a valid action (an answer that does not parse or points off the screen fails);
- its type is the annotator's final action's type;
- every point (``click``, ``left_double``, ``right_single``, ``scroll``, ``long_press``, both
  ends of a ``drag``) lies within ``tolerance`` × the screen's diagonal of the final point;
- ``scroll`` directions, ``type`` content, ``hotkey`` keys and ``open_app`` apps are equal (a
  scroll's amount is not compared).
  ``finished`` content is an answer, not an action argument: it is not compared.

The step success rate is successes / steps scored; a step where the endpoint did not answer at
all counts as a failure too (reason ``model unavailable``), so an outage cannot raise a score.
"""

import asyncio
import hashlib
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from model_serving.proposers.base import (
    Candidate,
    ModelUnavailable,
    ProposalRequest,
    Proposer,
)
from vm_pool.actions import Action, ActionType, Point, ScreenSize

HELD_OUT_SALT = "tandem-held-out:"
DEFAULT_HELD_OUT_SHARE = 0.1
DEFAULT_TOLERANCE = 0.05
MODEL_UNAVAILABLE = "model unavailable"


def is_held_out(task_id: int, share: float | None = None) -> bool:
    """Whether the task (a root task: a branch task's is its rollout's) belongs to the held-out
    split (see the module docstring)."""
    if share is None:
        from django.conf import settings

        share = float(getattr(settings, "TANDEM_HELD_OUT_SHARE", DEFAULT_HELD_OUT_SHARE))
    digest = hashlib.sha256(f"{HELD_OUT_SALT}{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < share * 2**64


@dataclass(frozen=True)
class StepScore:
    success: bool
    reason: str  # why it failed; empty on success
    invalid: bool = False  # the answer could not be executed at all


def _near(proposed: Point | None, expected: Point | None, limit: float) -> bool:
    if proposed is None or expected is None:
        return proposed is expected
    return math.dist((proposed.x, proposed.y), (expected.x, expected.y)) <= limit


def score_step(
    expected: Action, candidate: Candidate, screen: ScreenSize, tolerance: float
) -> StepScore:
    """Whether the model's candidate does what the annotator's final action does."""
    if not candidate.is_valid or candidate.action is None:
        return StepScore(False, f"invalid answer: {candidate.invalid_reason}", invalid=True)
    proposed = candidate.action
    if proposed.type != expected.type:
        return StepScore(False, f"action {proposed.type}, expected {expected.type}")
    limit = tolerance * math.hypot(screen.width, screen.height)
    if not _near(proposed.point, expected.point, limit):
        return StepScore(False, f"point {proposed.point} is over {limit:.0f} px from the target")
    if not _near(proposed.end, expected.end, limit):
        return StepScore(False, f"end point {proposed.end} is over {limit:.0f} px from the target")
    if proposed.type is not ActionType.FINISHED:
        for argument in ("direction", "content", "keys", "app"):
            if getattr(proposed, argument, None) != getattr(expected, argument, None):
                return StepScore(False, f"{argument} differs")
    return StepScore(True, "")


@dataclass(frozen=True)
class HeldOutStep:
    """One step to score: what the live loop would send, and what the annotator did."""

    step_id: int
    request: ProposalRequest
    expected: Action


@dataclass
class EvaluationResult:
    total: int = 0
    succeeded: int = 0
    invalid: int = 0
    by_action: dict[str, dict[str, int]] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def success_rate(self) -> float | None:
        return round(self.succeeded / self.total, 4) if self.total else None


async def evaluate(
    steps: Sequence[HeldOutStep],
    proposer: Proposer,
    tolerance: float = DEFAULT_TOLERANCE,
    concurrency: int = 4,
    on_progress: Callable[[int, int], Awaitable[None]] | None = None,
) -> EvaluationResult:
    """Ask ``proposer`` for every step (``concurrency`` at once) and score the answers."""
    limit = asyncio.Semaphore(concurrency)
    done = [0]

    async def one(step: HeldOutStep) -> tuple[HeldOutStep, StepScore, str]:
        async with limit:
            try:
                answer = await proposer.propose(step.request)
                candidate = answer.candidates[0]
                score = score_step(step.expected, candidate, step.request.screen, tolerance)
                raw = candidate.raw_text
            except ModelUnavailable as error:
                score, raw = StepScore(False, f"{MODEL_UNAVAILABLE}: {error}"), ""
        done[0] += 1
        if on_progress is not None:
            await on_progress(done[0], len(steps))
        return step, score, raw

    scored = await asyncio.gather(*(one(step) for step in steps))
    result = EvaluationResult()
    tally: dict[str, Counter[str]] = {}
    for step, score, raw in scored:
        result.total += 1
        result.succeeded += score.success
        result.invalid += score.invalid
        counts = tally.setdefault(str(step.expected.type), Counter())
        counts["total"] += 1
        counts["succeeded"] += score.success
        result.results.append(
            {
                "step": step.step_id,
                "success": score.success,
                "reason": score.reason,
                "expected": step.expected.to_json(),
                "answer": raw,
            }
        )
    result.by_action = {
        action: {"total": c["total"], "succeeded": c["succeeded"]}
        for action, c in sorted(tally.items())
    }
    return result
