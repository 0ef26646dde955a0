"""The proposer interface: what a policy is given for one step, and what it answers.

Points in requests and answers are screen pixels of the observation they refer to; each
proposer converts to and from its model's own coordinate convention. A proposer never
executes anything: it only proposes. An answer that cannot be used (it does not parse, or it
points off the screen) is still returned, as a candidate with an ``invalid_reason``.
"""

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from vm_pool.actions import Action, ScreenSize


class ModelUnavailable(RuntimeError):
    """The model could not answer (unreachable, timed out, server errors after retries)."""


# How many screenshots a request carries, the current one included (UI-TARS keeps 5).
IMAGE_WINDOW = 5


@dataclass(frozen=True)
class HistoryStep:
    """An earlier step as it was executed: its observation, and the final thought and action.

    Only the last ``IMAGE_WINDOW - 1`` history steps need their screenshot; older ones may
    carry empty bytes, so that a long episode does not read every screenshot at every step.
    """

    screenshot_png: bytes
    screen: ScreenSize
    thought: str
    action: Action


@dataclass(frozen=True)
class ProposalRequest:
    instruction: str
    platform: str  # "desktop", "web" or "android"
    screenshot_png: bytes  # the current observation
    screen: ScreenSize
    history: tuple[HistoryStep, ...] = ()
    candidates: int = 1  # best-of-N: how many sampled candidates to return
    language: str = "English"


@dataclass(frozen=True)
class Candidate:
    raw_text: str
    thought: str
    action: Action | None
    invalid_reason: str = ""  # empty when the action can be executed

    @property
    def is_valid(self) -> bool:
        return self.action is not None and not self.invalid_reason


@dataclass(frozen=True)
class ProposalResult:
    candidates: tuple[Candidate, ...]
    model_name: str
    model_version: str
    sampling: dict[str, Any] = field(default_factory=dict)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: int = 0


# Called with (candidate index, text delta) as the model generates.
OnText = Callable[[int, str], Awaitable[None]]


class Proposer(ABC):
    name: ClassVar[str]
    # A baseline is labelled as such wherever its proposals are shown; it never poses as UI-TARS.
    is_baseline: ClassVar[bool] = False

    @abstractmethod
    async def propose(
        self, request: ProposalRequest, on_text: OnText | None = None
    ) -> ProposalResult:
        """Propose the next step. Raise ModelUnavailable when the model cannot answer."""

    async def draft_thought(self, request: ProposalRequest, action: Action) -> str:
        """The thought a person's ``action`` at ``request``'s screen would have come with, as
        this model would write it. Raise ModelUnavailable when it cannot answer (or drafts
        nothing, as a proposer that is no chat model)."""
        raise ModelUnavailable(f"the {self.name} proposer drafts no thoughts")
