"""The rules over an autonomous rollout's trajectory: when it stops, and what its rule checks say.

A rollout runs a model version alone on a desktop, step after step. After every step the rollout
runner asks ``stop_reason`` whether to go on; at the end the validation function asks
``rule_checks`` for the rule parts of the trajectory's verdict V(s). Both read the trajectory
as a list of ``StepRecord``: plain data, no database, no desktop.

Screens are compared by identity. Two equal identities mean the same screen; the runner gives
each observation its stored screenshot's sha256, except that an observation within
``SAME_SCREEN_TOLERANCE`` of the screen whose identity is current keeps that identity
(``same_screen``): otherwise a blinking caret or a panel clock would make every observation a
new screen and no loop would ever be seen. Comparing with the observation that gave the
identity, not with the previous one, keeps small changes from adding up unseen.

The words the rules use:

- A step is *invalid* when the model's output gave no action (it is never executed), *executed*
  when its action ran and the screen settled after it (``screen_after`` is known).
- An executed step is *unchanged* when the screen after it is the one it was decided on.
- A *no-op* is an unchanged step whose action was meant to change the screen: not ``wait()``
  (waiting for a slow program is legitimate), not ``finished()`` or ``call_user()``, and not a
  copy (``ctrl c``, ``ctrl insert``), which leaves the screen as it is by design.
- A *loop* is the same action, ``wait()`` aside, proposed ``same_action_repeats`` times in a row
  on the same screen. A waiting model is bounded by the unchanged-steps rule instead.

Invalid outputs are not steps on the screen: they neither count towards nor break a loop or a
run of unchanged steps (they have a rule of their own). A record may be given before its action
runs (``screen_after`` None): a loop then stops the rollout before the repeat runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from vm_pool.actions import Action, ActionType, meant_to_change_screen

__all__ = [
    "DEFAULT_STOP_RULES",
    "MAX_STEPS_LIMIT",
    "InvalidStopRules",
    "PartVerdict",
    "StepRecord",
    "StopReason",
    "StopRules",
    "all_passed",
    "rule_checks",
    "stop_reason",
]

# The largest count any stop rule takes: a rollout longer than this is a runaway, not a budget
# (OSWorld's budgets are 15, 50 and 100 steps).
MAX_STEPS_LIMIT = 500


_ACTION_TEXT_CHARS = 80


class StopReason(StrEnum):
    """Why a rollout stopped. The first two are the model's own ending."""

    FINISHED = "finished"
    CALL_USER = "call_user"
    MAX_STEPS = "max_steps"
    INVALID_OUTPUTS = "invalid_outputs"
    LOOP = "loop"
    NO_SCREEN_CHANGE = "no_screen_change"


_RULE_STOPS = frozenset(
    {
        StopReason.MAX_STEPS,
        StopReason.INVALID_OUTPUTS,
        StopReason.LOOP,
        StopReason.NO_SCREEN_CHANGE,
    }
)


class InvalidStopRules(ValueError):
    """Stop rules with an unknown key or a count out of bounds."""


@dataclass(frozen=True)
class StopRules:
    """When a rollout stops, besides the model's own ``finished()`` or ``call_user()``.

    ``max_steps`` counts the model's answers, invalid ones included: it bounds the model calls
    (the same default as a task's).
    ``invalid_in_row``: that many invalid outputs in a row. ``same_action_repeats``: a loop of
    that length. ``unchanged_steps``: that many executed steps in a row left the screen as it was.
    Every count is a whole number up to ``MAX_STEPS_LIMIT``; a loop needs at least 2 repeats.
    """

    max_steps: int = 30
    invalid_in_row: int = 3
    same_action_repeats: int = 3
    unchanged_steps: int = 5

    def __post_init__(self) -> None:
        for rule in fields(self):
            value = getattr(self, rule.name)
            lowest = 2 if rule.name == "same_action_repeats" else 1
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not lowest <= value <= MAX_STEPS_LIMIT
            ):
                raise InvalidStopRules(
                    f"{rule.name} must be a whole number from {lowest} to {MAX_STEPS_LIMIT},"
                    f" not {value!r}"
                )

    @classmethod
    def from_json(cls, data: Any) -> StopRules:
        """Read rules from JSON; a key left out keeps its default."""
        if not isinstance(data, Mapping):
            raise InvalidStopRules("stop rules must be a JSON object")
        known = {rule.name for rule in fields(cls)}
        unknown = sorted(map(str, set(data) - known))
        if unknown:
            raise InvalidStopRules(
                f"unknown stop rule(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        return cls(**data)

    def as_json(self) -> dict[str, int]:
        return asdict(self)


DEFAULT_STOP_RULES = StopRules()


@dataclass(frozen=True)
class StepRecord:
    """One answer of the model in a rollout, as the rules read it.

    ``index`` is the number of the step it answers, from 1. When an output is invalid the model
    may be asked again on the same step: the next record then has the same index; otherwise it
    has the next one. ``action`` is the action's JSON (``Action.to_json``), kept in its canonical
    form; it is None when the output was invalid, and ``invalid_reason`` (otherwise "") says why.
    ``screen_before`` identifies the observation the step was decided on, ``screen_after`` the
    settled observation after its action ran (None when it did not run); see the module
    docstring for what an identity is.
    """

    index: int
    action: dict[str, Any] | None
    invalid_reason: str
    screen_before: str
    screen_after: str | None

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or not isinstance(self.index, int) or self.index < 1:
            raise ValueError(f"a step's index counts from 1, not {self.index!r}")
        if not isinstance(self.screen_before, str) or not self.screen_before:
            raise ValueError(f"step {self.index} has no screen_before")
        if self.screen_after is not None and not isinstance(self.screen_after, str):
            raise ValueError(f"step {self.index}'s screen_after is not an identity")
        if not isinstance(self.invalid_reason, str):
            raise ValueError(f"step {self.index}'s invalid_reason is not text")
        if self.action is None:
            if not self.invalid_reason:
                raise ValueError(f"step {self.index} has no action and no invalid_reason")
            if self.screen_after is not None:
                raise ValueError(f"step {self.index} is invalid, so it was never executed")
        else:
            if self.invalid_reason:
                raise ValueError(f"step {self.index} has an action and an invalid_reason")
            object.__setattr__(self, "action", Action.from_json(self.action).to_json())

    @classmethod
    def from_json(cls, data: Any) -> StepRecord:
        """Read a record written by ``as_json``."""
        if not isinstance(data, Mapping):
            raise ValueError("a step record must be a JSON object")
        known = {name.name for name in fields(cls)}
        unknown = sorted(map(str, set(data) - known))
        if unknown:
            raise ValueError(f"unknown key(s) in a step record: {', '.join(unknown)}")
        missing = sorted(known - set(data))
        if missing:
            raise ValueError(f"a step record lacks {', '.join(missing)}")
        return cls(**data)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def action_type(self) -> ActionType | None:
        return None if self.action is None else ActionType(self.action["type"])

    @property
    def executed(self) -> bool:
        return self.screen_after is not None

    @property
    def unchanged(self) -> bool:
        """Executed, and the screen after it is the one it was decided on."""
        return self.executed and self.screen_after == self.screen_before

    @property
    def no_op(self) -> bool:
        """An unchanged step whose action was meant to change the screen."""
        return self.action is not None and self.unchanged and meant_to_change_screen(self.action)


@dataclass(frozen=True)
class PartVerdict:
    """One rule part of a trajectory's verdict. ``details`` is JSON, for storing beside it."""

    name: str
    passed: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def stop_reason(
    records: Sequence[StepRecord], rules: StopRules = DEFAULT_STOP_RULES
) -> StopReason | None:
    """Whether the rollout stops after its latest step, and why; None: it goes on.

    The rules are asked in this order, and the first that holds is the answer:

    1. ``finished`` / ``call_user``: the latest action is ``finished()`` / ``call_user()``.
       The model's own ending comes first, even on its last allowed step.
    2. ``invalid_outputs``: the latest ``invalid_in_row`` outputs were all invalid.
    3. ``loop``: the latest valid steps are a loop of ``same_action_repeats`` or more.
    4. ``no_screen_change``: the latest ``unchanged_steps`` executed steps were all unchanged,
       on one screen (``wait()`` included: waiting that long is stuck, too).
    5. ``max_steps``: the model has answered ``max_steps`` times.

    The specific failures come before the step budget because they say what went wrong; a
    loop is a run of unchanged steps as well, and is named as the more precise of the two.
    """
    _check_numbering(records)
    if not records:
        return None
    last = records[-1].action_type
    if last is ActionType.FINISHED:
        return StopReason.FINISHED
    if last is ActionType.CALL_USER:
        return StopReason.CALL_USER
    if _trailing_invalid(records) >= rules.invalid_in_row:
        return StopReason.INVALID_OUTPUTS
    runs = _repeat_runs(records)  # the last run ends at the latest valid step
    if runs and len(runs[-1]) >= rules.same_action_repeats:
        return StopReason.LOOP
    if _trailing_unchanged(records) >= rules.unchanged_steps:
        return StopReason.NO_SCREEN_CHANGE
    if len(records) >= rules.max_steps:
        return StopReason.MAX_STEPS
    return None


def rule_checks(
    records: Sequence[StepRecord],
    outcome: str,
    stop: StopReason | str | None,
    *,
    rules: StopRules = DEFAULT_STOP_RULES,
) -> list[PartVerdict]:
    """The rule parts of a finished rollout's verdict, in this order:

    - ``no_op_actions`` fails when any step was a no-op.
    - ``loops`` fails when the trajectory holds a loop of ``rules.same_action_repeats``,
      wherever it is, even where the rollout did not stop for it.
    - ``invalid_outputs`` fails when any of the model's outputs was invalid.
    - ``call_user`` fails when the model gave up with ``call_user()``.
    - ``stopped_by_rule`` fails when a stop rule ended the rollout (``stop`` is a rule's reason;
      without one, an ``outcome`` of ``max_steps`` or ``stopped``), not the model.

    ``outcome`` is the episode's outcome (``annotation.models.EpisodeOutcome``), ``stop`` what
    ``stop_reason`` answered last (or its text; unknown text raises ``ValueError``); ``rules``
    must be the rules the rollout ran under.
    """
    _check_numbering(records)
    reason = None if stop is None else StopReason(stop)
    return [
        _no_op_actions(records),
        _loops(records, rules),
        _invalid_outputs(records),
        _call_user(records, outcome, reason),
        _stopped_by_rule(records, outcome, reason, rules),
    ]


def all_passed(verdicts: Sequence[PartVerdict]) -> bool:
    """Whether every part passed (no parts: nothing failed)."""
    return all(verdict.passed for verdict in verdicts)


def _check_numbering(records: Sequence[StepRecord]) -> None:
    """Steps are numbered 1, 2, 3…; an invalid output may be followed by another answer to the
    same step."""
    previous: StepRecord | None = None
    for record in records:
        expected = {1} if previous is None else {previous.index + 1}
        if previous is not None and previous.action is None:
            expected.add(previous.index)
        if record.index not in expected:
            after = "first" if previous is None else f"after step {previous.index}"
            raise ValueError(f"step {record.index} comes {after}: steps are numbered 1, 2, 3…")
        previous = record


def _trailing_invalid(records: Sequence[StepRecord]) -> int:
    count = 0
    for record in reversed(records):
        if record.action is not None:
            break
        count += 1
    return count


def _repeat_runs(records: Sequence[StepRecord]) -> list[list[int]]:
    """The runs of one action, ``wait()`` aside, on one screen, over the valid steps: each run
    as its step numbers, runs of one step included."""
    runs: list[list[int]] = []
    previous: StepRecord | None = None
    for record in records:
        if record.action is None:
            continue
        repeats = (
            previous is not None
            and record.action_type is not ActionType.WAIT
            and record.action == previous.action
            and record.screen_before == previous.screen_before
        )
        if repeats:
            runs[-1].append(record.index)
        else:
            runs.append([record.index])
        previous = record
    return runs


def _trailing_unchanged(records: Sequence[StepRecord]) -> int:
    count = 0
    screen: str | None = None
    for record in reversed(records):
        if not record.executed:
            continue
        if not record.unchanged or (screen is not None and record.screen_before != screen):
            break
        screen = record.screen_before
        count += 1
    return count


def _no_op_actions(records: Sequence[StepRecord]) -> PartVerdict:
    steps = [record.index for record in records if record.no_op]
    if not steps:
        return PartVerdict("no_op_actions", True, "Every action changed the screen.", {"steps": []})
    return PartVerdict(
        "no_op_actions",
        False,
        f"The screen did not change after the action of {_steps_text(steps)}.",
        {"steps": steps},
    )


def _loops(records: Sequence[StepRecord], rules: StopRules) -> PartVerdict:
    by_index = {record.index: record for record in records}
    loops = [run for run in _repeat_runs(records) if len(run) >= rules.same_action_repeats]
    if not loops:
        return PartVerdict(
            "loops",
            True,
            f"No action was repeated {rules.same_action_repeats} times on an unchanged screen.",
            {"loops": []},
        )
    parts = [f"{_steps_text(run)} repeat {_action_text(by_index[run[0]].action)}" for run in loops]
    return PartVerdict(
        "loops",
        False,
        _capitalised(f"{_joined(parts, '; ')} on an unchanged screen."),
        {"loops": [{"steps": run, "action": by_index[run[0]].action} for run in loops]},
    )


def _invalid_outputs(records: Sequence[StepRecord]) -> PartVerdict:
    invalid = [record for record in records if record.action is None]
    if not invalid:
        return PartVerdict(
            "invalid_outputs", True, "Every output of the model was a valid action.", {"steps": []}
        )
    steps = list(dict.fromkeys(record.index for record in invalid))  # retries share a step
    return PartVerdict(
        "invalid_outputs",
        False,
        f"The model's output was invalid at {_steps_text(steps)}.",
        {
            "steps": steps,
            "outputs": [{"step": r.index, "reason": r.invalid_reason} for r in invalid],
        },
    )


def _call_user(records: Sequence[StepRecord], outcome: str, stop: StopReason | None) -> PartVerdict:
    step = next((r.index for r in reversed(records) if r.action_type is ActionType.CALL_USER), None)
    if step is None and stop is not StopReason.CALL_USER and outcome != "call_user":
        return PartVerdict("call_user", True, "The model did not call the user.", {"step": None})
    where = f" at step {step}" if step is not None else ""
    return PartVerdict(
        "call_user", False, f"The model gave up and called the user{where}.", {"step": step}
    )


def _stopped_by_rule(
    records: Sequence[StepRecord], outcome: str, stop: StopReason | None, rules: StopRules
) -> PartVerdict:
    details = {"stop": None if stop is None else str(stop), "outcome": outcome}
    if stop is None and outcome == "max_steps":
        stop = StopReason.MAX_STEPS
    if stop not in _RULE_STOPS and not (stop is None and outcome == "stopped"):
        return PartVerdict(
            "stopped_by_rule", True, "No stop rule ended the rollout before the model did.", details
        )
    at = f"at step {records[-1].index}" if records else "before its first step"
    if stop is StopReason.INVALID_OUTPUTS:
        reason = (
            f"The rollout was stopped {at} after {rules.invalid_in_row} invalid outputs in a row."
        )
    elif stop is StopReason.LOOP:
        reason = f"The rollout was stopped {at} for repeating an action on an unchanged screen."
    elif stop is StopReason.NO_SCREEN_CHANGE:
        reason = (
            f"The rollout was stopped {at} after {rules.unchanged_steps} steps"
            " that left the screen unchanged."
        )
    elif stop is StopReason.MAX_STEPS:
        reason = f"The rollout reached its step limit {at} without finishing."
    else:
        reason = f"The rollout was stopped {at} by a stop rule."
    return PartVerdict("stopped_by_rule", False, reason, details)


def _steps_text(steps: Sequence[int]) -> str:
    """``step 4``, ``steps 4 and 7``, ``steps 2-5, 8 and 11``: runs of three or more as ranges."""
    groups: list[list[int]] = []
    for step in steps:
        if groups and step == groups[-1][-1] + 1:
            groups[-1].append(step)
        else:
            groups.append([step])
    words: list[str] = []
    for group in groups:
        if len(group) >= 3:
            words.append(f"{group[0]}-{group[-1]}")
        else:
            words.extend(map(str, group))
    noun = "step" if len(steps) == 1 else "steps"
    return f"{noun} {_joined(words, ', ')}"


def _joined(words: Sequence[str], separator: str) -> str:
    if len(words) == 1:
        return words[0]
    return f"{separator.join(words[:-1])} and {words[-1]}"


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _action_text(action: dict[str, Any] | None) -> str:
    text = Action.from_json(action).to_text()
    if len(text) <= _ACTION_TEXT_CHARS:
        return text
    return text[: _ACTION_TEXT_CHARS - 1] + "…"
