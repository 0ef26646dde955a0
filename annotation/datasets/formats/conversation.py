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

from dataclasses import dataclass
from typing import Literal

from annotation.datasets.records import Context, CtSample, HistoryTurn, StepTarget
from model_serving.uitars import SYSTEM_PROMPT, assistant_text, prompt_text
from vm_pool.actions import Action, ScreenSize

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One message: text, or (a user turn) exactly one screenshot, by its sha256."""

    role: Role
    text: str = ""
    screenshot: str | None = None


class Renderer:
    """Renders the conversations of one export's records in one coordinate style.

    Every later sample of an episode repeats the episode's earlier steps as history, so each
    history step's turns are rendered once and reused while the episode's records follow one
    another: kept by step index, and reused only for the very turn object they were rendered
    from (the pair builder hands all records of an episode the same turns). Holding that object
    keeps its identity from being reused, so a turn of another episode is always rendered
    afresh.
    """

    def __init__(self, style: str) -> None:
        self.style = style
        self._history: dict[int, tuple[HistoryTurn, Turn, Turn]] = {}
        self._opening: tuple[tuple[str, str], tuple[Turn, Turn]] | None = None

    def answer_text(self, target: StepTarget, screen: ScreenSize) -> str:
        """A step's thought and action as the model writes them on a screenshot of ``screen``."""
        action = Action.from_json(target.action_json)
        return assistant_text(target.thought, action, screen, self.style)

    def prompt_turns(self, context: Context) -> list[Turn]:
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
        turns = self._opening_turns(context.instruction, context.platform)
        for index, turn in enumerate(history):
            screenshot, answer = self._history_turns(turn)
            if index >= first_with_image:
                turns.append(screenshot)
            turns.append(answer)
        turns.append(Turn("user", screenshot=context.screenshots[-1]))
        return turns

    def trajectory_turns(self, sample: CtSample) -> list[Turn]:
        """A whole episode: the opening, then each step's screenshot and its final step."""
        if not sample.steps:
            raise ValueError(f"episode {sample.episode_id} has no decided step to write")
        turns = self._opening_turns(sample.instruction, sample.platform)
        for step in sample.steps:
            turns.extend(self._history_turns(step))
        return turns

    def _history_turns(self, turn: HistoryTurn) -> tuple[Turn, Turn]:
        """An earlier step's screenshot turn and assistant turn."""
        kept = self._history.get(turn.step_index)
        if kept is not None and kept[0] is turn:
            return kept[1], kept[2]
        action = Action.from_json(turn.action_json)
        text = assistant_text(turn.thought, action, turn.screen, self.style)
        screenshot, answer = Turn("user", screenshot=turn.screenshot), Turn("assistant", text)
        self._history[turn.step_index] = (turn, screenshot, answer)
        return screenshot, answer

    def _opening_turns(self, instruction: str, platform: str) -> list[Turn]:
        if self._opening is None or self._opening[0] != (instruction, platform):
            prompt = prompt_text(instruction, platform)
            opening = (Turn("system", SYSTEM_PROMPT), Turn("user", prompt))
            self._opening = ((instruction, platform), opening)
        return list(self._opening[1])


def screenshots(turns: list[Turn]) -> list[str]:
    """The screenshots of a conversation, in the order they appear."""
    return [t.screenshot for t in turns if t.screenshot is not None]
