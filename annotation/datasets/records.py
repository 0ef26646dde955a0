"""The records of a dataset (design §5): what the pair builder (``pairs``) yields and the
exporters write, and the filters that choose the episodes they come from. Plain data."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from vm_pool.actions import ScreenSize

ReviewStatus = Literal["accepted", "rejected", "unreviewed", "any"]
SftKind = Literal["corrected", "reflection", "accepted", "rollout", "demonstrated"]
Source = Literal["interactive", "rollout"]


# --- records -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryTurn:
    """An earlier step as it finally was: its observation and the final thought and action."""

    step_index: int
    decision: str
    screenshot: str  # sha256 of the step's observation
    screen: ScreenSize
    thought: str
    action_json: dict[str, Any]
    action_text: str  # UI-TARS text, screen pixels of ``screen``


@dataclass(frozen=True, slots=True)
class Context:
    """What the model sees before step τ."""

    instruction: str
    platform: str
    history: tuple[HistoryTurn, ...]
    screenshots: tuple[str, ...]  # the last IMAGE_WINDOW observations, oτ last
    screen_sizes: tuple[ScreenSize, ...]  # one per screenshot
    # The episode's score by its task's evaluator (0–1), None where it was not scored.
    task_success: float | None = None
    # The task the held-out split goes by (``model_serving.evaluation.is_held_out``).
    split_task: int | None = None


@dataclass(frozen=True, slots=True)
class StepTarget:
    thought: str
    action_json: dict[str, Any]
    action_text: str  # UI-TARS text, screen pixels of oτ


@dataclass(frozen=True, slots=True)
class ErrorCorrectionPair:
    episode_id: int
    step_index: int
    context: Context
    chosen: StepTarget
    rejected: StepTarget


@dataclass(frozen=True, slots=True)
class PostReflectionPair:
    episode_id: int
    step_index: int  # τ+1, the reflective step
    context: Context
    chosen: StepTarget
    rejected: StepTarget


@dataclass(frozen=True, slots=True)
class SftSample:
    episode_id: int
    step_index: int
    context: Context
    completion: StepTarget
    kind: SftKind


@dataclass(frozen=True, slots=True)
class CtSample:
    episode_id: int
    instruction: str
    platform: str
    outcome: str
    steps: tuple[HistoryTurn, ...]
    task_success: float | None = None
    split_task: int | None = None  # as ``Context.split_task``


Sample = ErrorCorrectionPair | PostReflectionPair | SftSample | CtSample


@dataclass(frozen=True, slots=True)
class Filters:
    """Which episodes an export reads. Dates bound ``ended_at``: from inclusive, until exclusive."""

    project_id: int
    ended_from: datetime | None = None
    ended_until: datetime | None = None
    model_version: str | None = None
    review_status: ReviewStatus = "any"
    annotator_id: int | None = None
    # Leave out the held-out split (model_serving.evaluation.is_held_out): datasets meant for
    # fine-tuning must, so that offline evaluation scores steps the model never trained on.
    exclude_held_out: bool = False
    # Only episodes their task's evaluator scored at least this (unscored ones are left out).
    min_task_success: float | None = None
    # People's episodes, or rollouts routed by their validation (V=1: SFT, V=0: CT).
    source: Source = "interactive"
    # Leave out, as targets, steps whose action changed nothing it was meant to change
    # (``Step.no_visible_effect``); they stay in later steps' history, where they happened.
    drop_no_visible_effect: bool = False
    # Leave out episodes with demonstrated steps whose thoughts are not all a person's (written,
    # or a draft approved), or whose replay check did not find them replaying.
    require_approved_thoughts: bool = True
    require_replay: bool = False
    # Keep only work of annotators this good, or work they corroborate (``quality.kept``).
    min_gold_accuracy: float | None = None
    min_agreement: float | None = None


@dataclass
class Tally:
    """What a run yielded and what it skipped, by record type and by reason."""

    yielded: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
