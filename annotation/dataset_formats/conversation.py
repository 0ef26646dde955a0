"""The conversation every export format writes, in UI-TARS-1.5's order (design §4, §5).

One place builds it; each format only renders it (LLaMA-Factory as sharegpt turns with
``<image>`` tags, TRL as chat messages with ``{"type": "image"}`` parts). The turns are those
``model_serving.uitars.build_messages`` sends the model at inference, so training sees what
serving sees:

- system ``SYSTEM_PROMPT``; a user turn with the prompt (instruction included);
- for each earlier step: a user turn holding its screenshot when that screenshot is among the
  last ``IMAGE_WINDOW`` ones, then an assistant turn with the step's final
  ``Thought: …\\nAction: …``;
- a user turn holding oτ.

Actions are written in the model's coordinate convention with box tokens, as the model writes
them (``model_serving.uitars.assistant_text``). A continual-pretraining trajectory is the same
conversation over the whole episode, every step's screenshot included.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from annotation.datasets import Context, CtSample, HistoryTurn, StepTarget
from model_serving.uitars import SYSTEM_PROMPT, assistant_text, prompt_text
from vm_pool.actions import Action, ScreenSize

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Turn:
    """One message: text, or (a user turn) exactly one screenshot, by its sha256."""

    role: Role
    text: str = ""
    screenshot: str | None = None


def answer_text(target: StepTarget, screen: ScreenSize, style: str) -> str:
    """A step's thought and action as the model writes them on a screenshot of ``screen``."""
    return assistant_text(target.thought, Action.from_json(target.action_json), screen, style)


def _history_text(turn: HistoryTurn, style: str) -> str:
    action = json.dumps(turn.action_json, sort_keys=True)
    return _cached_answer_text(turn.thought, action, turn.screen, style)


@lru_cache(maxsize=1024)
def _cached_answer_text(thought: str, action_json: str, screen: ScreenSize, style: str) -> str:
    # Every later step of an episode repeats the earlier ones in its context: render each once.
    return assistant_text(thought, Action.from_json(json.loads(action_json)), screen, style)


def _opening(instruction: str, platform: str) -> list[Turn]:
    return [Turn("system", SYSTEM_PROMPT), Turn("user", prompt_text(instruction, platform))]


def prompt_turns(context: Context, style: str) -> list[Turn]:
    """The conversation up to and including the user turn of oτ."""
    images = len(context.screenshots)
    if images < 1 or len(context.screen_sizes) != images:
        raise ValueError("a context needs its screenshots, oτ last, each with its screen size")
    history = context.history
    first_with_image = len(history) - (images - 1)
    if first_with_image < 0:
        raise ValueError("a context has more screenshots than observations")
    for turn, sha in zip(history[first_with_image:], context.screenshots[:-1], strict=True):
        if turn.screenshot != sha:
            raise ValueError(f"step {turn.step_index}'s screenshot is not the context's {sha}")
    turns = _opening(context.instruction, context.platform)
    for index, turn in enumerate(history):
        if index >= first_with_image:
            turns.append(Turn("user", screenshot=turn.screenshot))
        turns.append(Turn("assistant", _history_text(turn, style)))
    turns.append(Turn("user", screenshot=context.screenshots[-1]))
    return turns


def trajectory_turns(sample: CtSample, style: str) -> list[Turn]:
    """A whole episode: the opening, then each step's screenshot and its final step."""
    if not sample.steps:
        raise ValueError(f"episode {sample.episode_id} has no decided step to write")
    turns = _opening(sample.instruction, sample.platform)
    for step in sample.steps:
        turns.append(Turn("user", screenshot=step.screenshot))
        turns.append(Turn("assistant", _history_text(step, style)))
    return turns


def screenshots(turns: list[Turn]) -> list[str]:
    """The screenshots of a conversation, in the order they appear."""
    return [t.screenshot for t in turns if t.screenshot is not None]
