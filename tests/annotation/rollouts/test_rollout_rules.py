"""The rules over a rollout's trajectory: stop rules, rule checks and the screen difference."""

import io
import json
from typing import Any

import pytest
from PIL import Image, ImageDraw, UnidentifiedImageError

from annotation.rollouts.rules import (
    DEFAULT_STOP_RULES,
    MAX_STEPS_LIMIT,
    InvalidStopRules,
    PartVerdict,
    StepRecord,
    StopReason,
    StopRules,
    all_passed,
    rule_checks,
    stop_reason,
)
from tests.support.pngs import solid_png
from vm_pool.actions import InvalidAction
from vm_pool.screen.capture import Frame, PngEncoder
from vm_pool.screen.compare import same_screen, screen_difference

CLICK_OK = {"type": "click", "point": [100, 200]}
CLICK_CANCEL = {"type": "click", "point": [300, 200]}
SCROLL_DOWN = {"type": "scroll", "point": [640, 400], "direction": "down"}
TYPE_NAME = {"type": "type", "content": "report.txt"}
SAVE = {"type": "hotkey", "keys": ["ctrl", "s"]}
COPY = {"type": "hotkey", "keys": ["ctrl", "c"]}
WAIT = {"type": "wait"}
FINISHED = {"type": "finished", "content": ""}
CALL_USER = {"type": "call_user"}


def record(
    index: int,
    action: dict[str, Any] | None,
    before: str = "desktop",
    after: str | None = None,
    invalid: str = "",
) -> StepRecord:
    return StepRecord(index, action, invalid, before, after)


class Trajectory:
    """Builds step records on a screen that changes only when a step says so."""

    def __init__(self, screen: str = "desktop") -> None:
        self.records: list[StepRecord] = []
        self.screen = screen

    def next_index(self, again: bool = False) -> int:
        if not self.records:
            return 1
        return self.records[-1].index + (0 if again else 1)

    def act(
        self, action: dict[str, Any], to: str | None = None, again: bool = False
    ) -> "Trajectory":
        """An executed step; ``to`` is the screen it leads to (None: the screen stays);
        ``again``: it answers the step of the invalid output before it."""
        after = to or self.screen
        self.records.append(record(self.next_index(again), action, self.screen, after))
        self.screen = after
        return self

    def repeat(self, action: dict[str, Any], times: int) -> "Trajectory":
        for _ in range(times):
            self.act(action)
        return self

    def invalid(
        self, reason: str = "the output has no Action: line", again: bool = False
    ) -> "Trajectory":
        self.records.append(record(self.next_index(again), None, self.screen, invalid=reason))
        return self

    def end(self, action: dict[str, Any]) -> "Trajectory":
        """finished() or call_user(): proposed, nothing runs on the desktop."""
        self.records.append(record(self.next_index(), action, self.screen))
        return self

    def seen(self, screen: str) -> "Trajectory":
        """The screen changed by itself before the next step was decided."""
        self.screen = screen
        return self

    def stop(self, rules: StopRules = DEFAULT_STOP_RULES) -> StopReason | None:
        return stop_reason(self.records, rules)

    def checks(
        self,
        outcome: str = "finished",
        stop: StopReason | None = StopReason.FINISHED,
        rules: StopRules = DEFAULT_STOP_RULES,
    ) -> dict[str, PartVerdict]:
        verdicts = rule_checks(self.records, outcome, stop, rules=rules)
        return {verdict.name: verdict for verdict in verdicts}


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def desktop(width: int = 1280, height: int = 800) -> Image.Image:
    """A desktop-like screen: a panel and lines of text."""
    picture = Image.new("RGB", (width, height), (236, 236, 236))
    draw = ImageDraw.Draw(picture)
    draw.rectangle((0, 0, width, 28), fill=(40, 40, 48))
    for line in range(30):
        draw.text((20, 40 + line * 20), "The quick brown fox jumps over the lazy dog", fill=0)
    return picture


def captured(picture: Image.Image) -> bytes:
    """The picture as the desktop's capture encoder writes it (rows without filters)."""
    frame = Frame(picture.width, picture.height, picture.tobytes("raw", "BGRX"))
    return PngEncoder().encode(frame)


# Stop rules


def test_the_default_stop_rules():
    assert StopRules().as_json() == {
        "max_steps": 30,
        "invalid_in_row": 3,
        "same_action_repeats": 3,
        "unchanged_steps": 5,
    }


def test_stop_rules_left_out_of_the_json_keep_their_defaults():
    rules = StopRules.from_json({"max_steps": 50})
    assert rules == StopRules(max_steps=50)


def test_stop_rules_round_trip_through_json():
    rules = StopRules(max_steps=100, invalid_in_row=1, same_action_repeats=4, unchanged_steps=8)
    assert StopRules.from_json(json.loads(json.dumps(rules.as_json()))) == rules


def test_an_unknown_stop_rule_is_refused_by_name():
    with pytest.raises(InvalidStopRules, match="unknown stop rule.*max_step\\b"):
        StopRules.from_json({"max_step": 50})


def test_stop_rules_must_be_a_json_object():
    with pytest.raises(InvalidStopRules, match="JSON object"):
        StopRules.from_json([["max_steps", 50]])


@pytest.mark.parametrize(
    ("rule", "value"),
    [
        ("max_steps", 0),
        ("max_steps", -5),
        ("max_steps", MAX_STEPS_LIMIT + 1),
        ("max_steps", 12.5),
        ("max_steps", "30"),
        ("max_steps", None),
        ("invalid_in_row", 0),
        ("invalid_in_row", True),
        ("same_action_repeats", 1),
        ("unchanged_steps", 0),
        ("unchanged_steps", 10_000),
    ],
)
def test_a_stop_rule_out_of_bounds_is_refused(rule, value):
    with pytest.raises(InvalidStopRules, match=rule):
        StopRules.from_json({rule: value})


@pytest.mark.parametrize(
    "rules",
    [
        {"max_steps": 1},
        {"max_steps": MAX_STEPS_LIMIT},
        {"invalid_in_row": 1},
        {"same_action_repeats": 2},
        {"unchanged_steps": 1},
    ],
)
def test_stop_rules_at_their_bounds_are_accepted(rules):
    assert StopRules.from_json(rules).as_json().items() >= rules.items()


def test_stop_rules_built_in_code_are_checked_too():
    with pytest.raises(InvalidStopRules, match="from 2 to"):
        StopRules(same_action_repeats=1)


def test_invalid_stop_rules_are_a_value_error():
    with pytest.raises(ValueError):
        StopRules.from_json({"max_steps": 0})


# Step records


def test_a_step_keeps_its_action_in_canonical_form():
    scroll = record(1, {"type": "scroll", "point": [5, 6], "direction": "DOWN"}, "a", "b")
    assert scroll.action == {"type": "scroll", "point": [5, 6], "direction": "down", "amount": 5}


def test_a_step_with_a_malformed_action_is_refused():
    with pytest.raises(InvalidAction):
        record(1, {"type": "click"}, "a", "a")


def test_a_step_without_an_action_needs_its_invalid_reason():
    with pytest.raises(ValueError, match="invalid_reason"):
        record(1, None, "a")


def test_a_valid_step_has_no_invalid_reason():
    with pytest.raises(ValueError, match="invalid_reason"):
        record(1, WAIT, "a", invalid="odd")


def test_an_invalid_step_was_never_executed():
    with pytest.raises(ValueError, match="never executed"):
        record(1, None, "a", "a", invalid="x")


@pytest.mark.parametrize("index", [0, -1, True])
def test_steps_count_from_one(index):
    with pytest.raises(ValueError, match="counts from 1"):
        record(index, WAIT, "a", "a")


def test_a_step_needs_the_screen_it_was_decided_on():
    with pytest.raises(ValueError, match="screen_before"):
        record(1, WAIT, "", "a")


def test_a_step_record_round_trips_through_json():
    trajectory = Trajectory().act(SCROLL_DOWN, to="list").invalid().act(CLICK_OK, again=True)
    stored = json.loads(json.dumps([r.as_json() for r in trajectory.records]))
    assert [StepRecord.from_json(data) for data in stored] == trajectory.records
    assert stored[1] == {
        "index": 2,
        "action": None,
        "invalid_reason": "the output has no Action: line",
        "screen_before": "list",
        "screen_after": None,
    }


def test_a_stored_step_record_with_an_unknown_key_is_refused():
    data = {**record(1, WAIT, "a", "a").as_json(), "thought": "hm"}
    with pytest.raises(ValueError, match="unknown key.*thought"):
        StepRecord.from_json(data)


def test_a_stored_step_record_lacking_a_key_is_refused():
    data = record(1, WAIT, "a", "a").as_json()
    del data["screen_after"]
    with pytest.raises(ValueError, match="lacks screen_after"):
        StepRecord.from_json(data)


@pytest.mark.parametrize(
    "data",
    [
        [1, None, "x", "a", None],
        {
            "index": "1",
            "action": None,
            "invalid_reason": "x",
            "screen_before": "a",
            "screen_after": None,
        },
        {
            "index": 1,
            "action": WAIT,
            "invalid_reason": None,
            "screen_before": "a",
            "screen_after": "a",
        },
        {"index": 1, "action": WAIT, "invalid_reason": "", "screen_before": 7, "screen_after": "a"},
        {"index": 1, "action": WAIT, "invalid_reason": "", "screen_before": "a", "screen_after": 7},
    ],
)
def test_a_malformed_stored_step_record_is_refused(data):
    with pytest.raises(ValueError):
        StepRecord.from_json(data)


def test_another_answer_to_the_step_of_an_invalid_output_keeps_its_number():
    trajectory = Trajectory().invalid().invalid(again=True).act(CLICK_OK, to="menu", again=True)
    assert [r.index for r in trajectory.records] == [1, 1, 1]
    assert trajectory.stop() is None


def test_a_valid_answer_is_not_answered_again():
    records = [record(1, CLICK_OK, "a", "b"), record(1, CLICK_OK, "b", "c")]
    with pytest.raises(ValueError, match="numbered"):
        stop_reason(records)


def test_steps_must_start_at_one():
    with pytest.raises(ValueError, match="step 2 comes first"):
        stop_reason([record(2, CLICK_OK, "a", "b")])


def test_steps_out_of_order_are_refused():
    records = Trajectory().act(CLICK_OK, to="b").act(CLICK_OK, to="c").records
    with pytest.raises(ValueError, match="numbered"):
        stop_reason(records[::-1])
    with pytest.raises(ValueError, match="numbered"):
        rule_checks(records[1:], "finished", None)


# Stopping


def test_a_rollout_without_steps_goes_on():
    assert stop_reason([]) is None


def test_a_rollout_that_changes_the_screen_goes_on():
    trajectory = Trajectory().act(CLICK_OK, to="menu").act(CLICK_CANCEL, to="dialog")
    assert trajectory.stop() is None


def test_finished_stops_the_rollout():
    assert Trajectory().act(CLICK_OK, to="saved").end(FINISHED).stop() is StopReason.FINISHED


def test_call_user_stops_the_rollout():
    assert Trajectory().act(CLICK_OK, to="login").end(CALL_USER).stop() is StopReason.CALL_USER


def test_three_invalid_outputs_in_a_row_stop_the_rollout():
    trajectory = Trajectory().act(CLICK_OK, to="menu").invalid().invalid().invalid()
    assert trajectory.stop() is StopReason.INVALID_OUTPUTS


def test_two_invalid_outputs_in_a_row_do_not_stop_the_rollout():
    assert Trajectory().invalid().invalid().stop() is None


def test_a_valid_step_resets_the_invalid_count():
    trajectory = Trajectory().invalid().invalid().act(CLICK_OK, to="menu").invalid().invalid()
    assert trajectory.stop() is None


def test_a_single_invalid_output_stops_under_strict_rules():
    assert Trajectory().invalid().stop(StopRules(invalid_in_row=1)) is StopReason.INVALID_OUTPUTS


def test_the_same_click_on_an_unchanged_screen_three_times_is_a_loop():
    assert Trajectory().repeat(CLICK_OK, 3).stop() is StopReason.LOOP


def test_the_same_click_twice_is_not_yet_a_loop():
    assert Trajectory().repeat(CLICK_OK, 2).stop() is None


def test_a_changing_screen_breaks_the_loop_count():
    trajectory = Trajectory().repeat(CLICK_OK, 2).act(CLICK_OK, to="menu").repeat(CLICK_OK, 1)
    assert trajectory.stop() is None


def test_a_screen_changed_by_itself_breaks_the_loop_count():
    trajectory = Trajectory().repeat(CLICK_OK, 2).seen("dialog").act(CLICK_OK)
    assert trajectory.stop() is None


def test_the_same_click_at_another_point_is_another_action():
    trajectory = Trajectory().act(CLICK_OK).act(CLICK_CANCEL).act(CLICK_OK)
    assert trajectory.stop() is None


def test_the_same_action_written_differently_is_the_same_action():
    trajectory = (
        Trajectory()
        .act({"type": "hotkey", "keys": ["Control", "S"]})
        .act({"type": "hotkey", "keys": ["ctrl", "s"]})
        .act(SAVE)
    )
    assert trajectory.stop() is StopReason.LOOP


def test_an_invalid_output_between_repeats_does_not_break_the_loop():
    trajectory = Trajectory().act(CLICK_OK).invalid().act(CLICK_OK).act(CLICK_OK)
    assert trajectory.stop() is StopReason.LOOP


def test_another_action_between_repeats_breaks_the_loop():
    trajectory = Trajectory().repeat(CLICK_OK, 2).act(WAIT).act(CLICK_OK)
    assert trajectory.stop() is None


def test_the_loop_length_follows_the_rules():
    rules = StopRules(same_action_repeats=4)
    assert Trajectory().repeat(CLICK_OK, 3).stop(rules) is None
    assert Trajectory().repeat(CLICK_OK, 4).stop(rules) is StopReason.LOOP


def test_repeated_waits_on_an_unchanged_screen_are_not_a_loop():
    assert Trajectory().repeat(WAIT, 4).stop() is None


def test_waits_on_an_unchanged_screen_still_stop_after_the_unchanged_steps():
    assert Trajectory().repeat(WAIT, 5).stop() is StopReason.NO_SCREEN_CHANGE


def test_five_steps_that_leave_the_screen_unchanged_stop_the_rollout():
    trajectory = (
        Trajectory()
        .act(CLICK_OK, to="form")
        .act(CLICK_CANCEL)
        .act(SCROLL_DOWN)
        .act(CLICK_OK)
        .act(WAIT)
        .act(SAVE)
    )
    assert trajectory.stop() is StopReason.NO_SCREEN_CHANGE


def test_four_steps_that_leave_the_screen_unchanged_do_not_stop_the_rollout():
    trajectory = Trajectory().act(CLICK_CANCEL).act(SCROLL_DOWN).act(CLICK_OK).act(WAIT)
    assert trajectory.stop() is None


def test_a_screen_changed_between_steps_breaks_the_unchanged_count():
    trajectory = (
        Trajectory().act(CLICK_CANCEL).act(SCROLL_DOWN).act(WAIT).seen("toast").act(CLICK_OK)
    )
    trajectory.act(SAVE)
    assert trajectory.stop() is None


def test_invalid_outputs_neither_count_nor_break_the_unchanged_steps():
    trajectory = Trajectory().act(CLICK_CANCEL).act(SCROLL_DOWN).invalid().act(WAIT).invalid()
    assert trajectory.stop() is None
    trajectory.act(CLICK_OK).act(SAVE)
    assert trajectory.stop() is StopReason.NO_SCREEN_CHANGE


def test_the_step_budget_stops_the_rollout():
    trajectory = Trajectory()
    for screen in range(30):
        trajectory.act(CLICK_OK, to=f"page {screen}")
    assert trajectory.stop() is StopReason.MAX_STEPS
    assert stop_reason(trajectory.records[:29]) is None


def test_invalid_answers_to_the_same_step_stop_the_rollout_too():
    trajectory = Trajectory().act(CLICK_OK, to="menu").invalid().invalid(again=True)
    assert trajectory.stop() is None
    assert trajectory.invalid(again=True).stop() is StopReason.INVALID_OUTPUTS


def test_every_answer_counts_towards_the_step_budget():
    trajectory = Trajectory().invalid().act(CLICK_OK, to="menu", again=True)
    assert trajectory.stop(StopRules(max_steps=2)) is StopReason.MAX_STEPS


def test_invalid_outputs_count_towards_the_step_budget():
    trajectory = Trajectory().act(CLICK_OK, to="menu").invalid().act(CLICK_OK, to="dialog")
    assert trajectory.stop(StopRules(max_steps=3)) is StopReason.MAX_STEPS


def test_finished_stops_before_any_other_rule():
    trajectory = Trajectory().repeat(CLICK_OK, 4).end(FINISHED)
    assert trajectory.stop(StopRules(max_steps=5)) is StopReason.FINISHED


def test_call_user_on_the_last_allowed_step_is_the_models_own_ending():
    trajectory = Trajectory().act(CLICK_OK, to="login").end(CALL_USER)
    assert trajectory.stop(StopRules(max_steps=2)) is StopReason.CALL_USER


def test_invalid_outputs_are_named_before_the_step_budget():
    trajectory = Trajectory().invalid().invalid().invalid()
    assert trajectory.stop(StopRules(max_steps=3)) is StopReason.INVALID_OUTPUTS


def test_a_loop_is_named_before_no_screen_change():
    rules = StopRules(same_action_repeats=5, unchanged_steps=5)
    assert Trajectory().repeat(CLICK_OK, 5).stop(rules) is StopReason.LOOP


def test_a_loop_is_named_before_the_step_budget():
    assert Trajectory().repeat(CLICK_OK, 3).stop(StopRules(max_steps=3)) is StopReason.LOOP


def test_no_screen_change_is_named_before_the_step_budget():
    trajectory = Trajectory().act(CLICK_CANCEL).act(SCROLL_DOWN).act(CLICK_OK).act(WAIT)
    trajectory.act(SAVE)
    assert trajectory.stop(StopRules(max_steps=5)) is StopReason.NO_SCREEN_CHANGE


def test_stop_reasons_are_their_names_as_text():
    assert [str(reason) for reason in StopReason] == [
        "finished",
        "call_user",
        "max_steps",
        "invalid_outputs",
        "loop",
        "no_screen_change",
    ]


# Rule checks


def clean() -> Trajectory:
    return (
        Trajectory()
        .act(CLICK_OK, to="menu")
        .act(WAIT, to="dialog")
        .act(TYPE_NAME, to="named")
        .act(COPY)
        .act(SAVE, to="saved")
        .end(FINISHED)
    )


def test_a_clean_rollout_passes_every_rule_check():
    verdicts = rule_checks(clean().records, "finished", StopReason.FINISHED)
    assert [verdict.name for verdict in verdicts] == [
        "no_op_actions",
        "loops",
        "invalid_outputs",
        "call_user",
        "stopped_by_rule",
    ]
    assert all(verdict.passed for verdict in verdicts)
    assert all_passed(verdicts)
    assert all(verdict.reason.endswith(".") for verdict in verdicts)


def test_an_action_that_leaves_the_screen_unchanged_is_a_no_op():
    trajectory = Trajectory().act(CLICK_OK, to="menu").act(CLICK_CANCEL).act(SAVE, to="saved")
    trajectory.act(SCROLL_DOWN).end(FINISHED)
    verdict = trajectory.checks()["no_op_actions"]
    assert not verdict.passed
    assert verdict.reason == "The screen did not change after the action of steps 2 and 4."
    assert verdict.details == {"steps": [2, 4]}


def test_a_single_no_op_is_named_as_one_step():
    verdict = Trajectory().act(CLICK_OK).end(FINISHED).checks()["no_op_actions"]
    assert verdict.reason == "The screen did not change after the action of step 1."


def test_runs_of_no_op_steps_are_named_as_ranges():
    trajectory = Trajectory().act(CLICK_OK, to="a").act(CLICK_CANCEL).act(SCROLL_DOWN)
    trajectory.act(CLICK_OK).act(SAVE, to="b").act(SCROLL_DOWN).end(FINISHED)
    verdict = trajectory.checks()["no_op_actions"]
    assert verdict.reason == "The screen did not change after the action of steps 2-4 and 6."


def test_a_wait_that_leaves_the_screen_unchanged_is_not_a_no_op():
    assert Trajectory().act(WAIT).act(WAIT).end(FINISHED).checks()["no_op_actions"].passed


def test_a_copy_that_leaves_the_screen_unchanged_is_not_a_no_op():
    trajectory = Trajectory().act(COPY).act({"type": "hotkey", "keys": ["ctrl", "insert"]})
    assert trajectory.end(FINISHED).checks()["no_op_actions"].passed


def test_finished_on_an_unchanged_screen_is_not_a_no_op():
    trajectory = Trajectory()
    trajectory.records.append(record(1, FINISHED, "desktop", "desktop"))
    assert trajectory.checks()["no_op_actions"].passed


def test_invalid_outputs_are_not_no_ops():
    assert Trajectory().invalid().end(FINISHED).checks()["no_op_actions"].passed


def test_a_loop_fails_the_loop_check_even_when_the_rollout_did_not_stop_for_it():
    trajectory = (
        Trajectory()
        .act(CLICK_OK, to="form")
        .repeat(SAVE, 3)
        .act(CLICK_CANCEL, to="closed")
        .end(FINISHED)
    )
    verdict = trajectory.checks(rules=StopRules(same_action_repeats=4))["loops"]
    assert verdict.passed
    verdict = trajectory.checks()["loops"]
    assert not verdict.passed
    assert verdict.reason == "Steps 2-4 repeat hotkey(key='ctrl s') on an unchanged screen."
    assert verdict.details == {"loops": [{"steps": [2, 3, 4], "action": SAVE}]}


def test_a_repeat_that_finally_changes_the_screen_still_counts_in_the_loop():
    trajectory = Trajectory().repeat(SAVE, 2).act(SAVE, to="saved").end(FINISHED)
    assert trajectory.checks()["loops"].details["loops"][0]["steps"] == [1, 2, 3]


def test_every_loop_of_a_rollout_is_named():
    trajectory = (
        Trajectory().repeat(CLICK_OK, 3).act(CLICK_OK, to="menu").repeat(SCROLL_DOWN, 3)
    ).end(FINISHED)
    verdict = trajectory.checks()["loops"]
    assert verdict.reason == (
        "Steps 1-4 repeat click(start_box='(100,200)') and steps 5-7 repeat"
        " scroll(start_box='(640,400)', direction='down') on an unchanged screen."
    )
    assert [loop["steps"] for loop in verdict.details["loops"]] == [[1, 2, 3, 4], [5, 6, 7]]


def test_a_long_repeated_action_is_cut_short_in_the_reason():
    typing = {"type": "type", "content": "x" * 500}
    verdict = Trajectory().repeat(typing, 3).end(FINISHED).checks()["loops"]
    assert "…" in verdict.reason
    assert len(verdict.reason) < 150
    assert verdict.details["loops"][0]["action"] == typing


def test_repeated_waits_pass_the_loop_check():
    assert Trajectory().repeat(WAIT, 4).act(CLICK_OK, to="done").checks()["loops"].passed


def test_invalid_outputs_fail_with_their_steps_and_reasons():
    trajectory = Trajectory().invalid("no Action: line").act(CLICK_OK, to="menu")
    trajectory.invalid("point (2000, 10) is outside the 1280x800 screen").end(FINISHED)
    verdict = trajectory.checks()["invalid_outputs"]
    assert not verdict.passed
    assert verdict.reason == "The model's output was invalid at steps 1 and 3."
    assert verdict.details["outputs"] == [
        {"step": 1, "reason": "no Action: line"},
        {"step": 3, "reason": "point (2000, 10) is outside the 1280x800 screen"},
    ]


def test_invalid_answers_to_one_step_name_it_once():
    trajectory = Trajectory().invalid("no Action: line").invalid("unknown action 'tap'", again=True)
    trajectory.act(CLICK_OK, to="menu", again=True).end(FINISHED)
    verdict = trajectory.checks()["invalid_outputs"]
    assert verdict.reason == "The model's output was invalid at step 1."
    assert verdict.details["steps"] == [1]
    assert len(verdict.details["outputs"]) == 2


def test_calling_the_user_fails_the_call_user_check():
    trajectory = Trajectory().act(CLICK_OK, to="login").end(CALL_USER)
    verdict = trajectory.checks("call_user", StopReason.CALL_USER)["call_user"]
    assert not verdict.passed
    assert verdict.reason == "The model gave up and called the user at step 2."
    assert verdict.details == {"step": 2}


def test_an_outcome_of_call_user_fails_the_call_user_check_without_its_step():
    verdict = Trajectory().act(CLICK_OK, to="login").checks("call_user", None)["call_user"]
    assert not verdict.passed
    assert verdict.reason == "The model gave up and called the user."


@pytest.mark.parametrize(
    ("stop", "reason"),
    [
        (StopReason.INVALID_OUTPUTS, "The rollout was stopped at step 2 after 3 invalid"),
        (StopReason.LOOP, "The rollout was stopped at step 2 for repeating an action"),
        (StopReason.NO_SCREEN_CHANGE, "The rollout was stopped at step 2 after 5 steps"),
        (StopReason.MAX_STEPS, "The rollout reached its step limit at step 2 without finishing."),
    ],
)
def test_a_rollout_ended_by_a_stop_rule_fails_the_stopped_by_rule_check(stop, reason):
    trajectory = Trajectory().act(CLICK_OK, to="menu").act(CLICK_OK, to="dialog")
    verdict = trajectory.checks("stopped", stop)["stopped_by_rule"]
    assert not verdict.passed
    assert verdict.reason.startswith(reason)
    assert verdict.details == {"stop": str(stop), "outcome": "stopped"}


def test_a_finished_rollout_passes_the_stopped_by_rule_check():
    assert clean().checks("finished", StopReason.FINISHED)["stopped_by_rule"].passed


def test_a_rollout_that_called_the_user_passes_the_stopped_by_rule_check():
    trajectory = Trajectory().act(CLICK_OK, to="login").end(CALL_USER)
    assert trajectory.checks("call_user", StopReason.CALL_USER)["stopped_by_rule"].passed


def test_an_outcome_of_max_steps_without_a_stop_reason_fails_the_stopped_by_rule_check():
    trajectory = Trajectory().act(CLICK_OK, to="menu")
    verdict = trajectory.checks("max_steps", None)["stopped_by_rule"]
    assert not verdict.passed
    assert verdict.reason == "The rollout reached its step limit at step 1 without finishing."


def test_an_outcome_of_stopped_without_a_stop_reason_fails_the_stopped_by_rule_check():
    verdict = Trajectory().act(CLICK_OK, to="menu").checks("stopped", None)["stopped_by_rule"]
    assert verdict.reason == "The rollout was stopped at step 1 by a stop rule."


def test_a_stop_reason_read_back_as_text_is_understood():
    verdict = Trajectory().repeat(CLICK_OK, 3).checks("stopped", "loop")["stopped_by_rule"]
    assert not verdict.passed
    assert "repeating an action" in verdict.reason


def test_an_unknown_stop_reason_is_refused():
    with pytest.raises(ValueError):
        rule_checks(clean().records, "stopped", "bored")


def test_verdicts_are_json():
    trajectory = Trajectory().invalid().repeat(CLICK_OK, 3).end(CALL_USER)
    verdicts = rule_checks(trajectory.records, "call_user", StopReason.CALL_USER)
    stored = json.loads(json.dumps([verdict.as_json() for verdict in verdicts]))
    assert stored[1]["name"] == "loops"
    assert stored[1]["passed"] is False
    assert stored[1]["details"]["loops"][0]["steps"] == [2, 3, 4]


def test_one_failing_part_fails_them_all():
    verdicts = rule_checks(clean().invalid().records, "finished", StopReason.FINISHED)
    assert [verdict.name for verdict in verdicts if not verdict.passed] == ["invalid_outputs"]
    assert not all_passed(verdicts)


def test_no_parts_means_nothing_failed():
    assert all_passed([])


# Screen difference


def test_identical_screenshots_do_not_differ():
    screenshot = solid_png(64, 48)
    assert screen_difference(screenshot, screenshot) == 0.0


def test_the_same_picture_encoded_differently_does_not_differ():
    picture = Image.new("RGB", (64, 48), (40, 90, 200))
    assert screen_difference(solid_png(64, 48), png(picture)) == 0.0


def test_one_changed_pixel_is_its_share_of_the_screen():
    picture = Image.new("RGB", (40, 30), (40, 90, 200))
    picture.putpixel((7, 3), (40, 90, 201))
    assert screen_difference(solid_png(40, 30), png(picture)) == pytest.approx(1 / 1200)


def test_screenshots_of_different_sizes_differ_entirely():
    assert screen_difference(solid_png(64, 48), solid_png(48, 64)) == 1.0


def test_screenshots_of_different_colours_differ_entirely():
    assert screen_difference(solid_png(64, 48), solid_png(64, 48, (255, 255, 255))) == 1.0


def test_a_palette_screenshot_compares_by_its_colours():
    picture = Image.new("RGB", (32, 32), (40, 90, 200)).convert("P", palette=Image.Palette.ADAPTIVE)
    assert screen_difference(solid_png(32, 32), png(picture)) == 0.0


def test_the_alpha_channel_is_not_compared():
    picture = Image.new("RGBA", (32, 32), (40, 90, 200, 10))
    assert screen_difference(solid_png(32, 32), png(picture)) == 0.0


def test_bytes_that_are_not_a_png_are_refused():
    with pytest.raises(UnidentifiedImageError):
        screen_difference(solid_png(8, 8), b"not a picture")
    jpeg = io.BytesIO()
    Image.new("RGB", (8, 8)).save(jpeg, "JPEG")
    with pytest.raises(UnidentifiedImageError):
        screen_difference(solid_png(8, 8), jpeg.getvalue())


def test_a_damaged_screenshot_is_refused():
    screenshot = solid_png(64, 48)
    with pytest.raises(OSError):
        screen_difference(screenshot, screenshot[:60])


def test_a_captured_screenshot_reads_as_pillow_reads_it():
    assert screen_difference(captured(desktop()), png(desktop())) == 0.0


def test_captured_and_pillow_screenshots_measure_the_same_difference():
    changed = desktop()
    ImageDraw.Draw(changed).rectangle((10, 10, 209, 59), fill=(255, 0, 0))
    expected = 200 * 50 / (1280 * 800)
    assert screen_difference(png(desktop()), png(changed)) == pytest.approx(expected, rel=0.05)
    assert screen_difference(captured(desktop()), captured(changed)) == screen_difference(
        png(desktop()), png(changed)
    )
    assert screen_difference(captured(desktop()), png(changed)) == screen_difference(
        png(desktop()), captured(changed)
    )


def test_one_changed_pixel_of_a_captured_1080p_screen_is_measured():
    changed = desktop(1920, 1080)
    changed.putpixel((1919, 1079), (1, 2, 3))
    assert screen_difference(captured(desktop(1920, 1080)), captured(changed)) == pytest.approx(
        1 / (1920 * 1080)
    )


def test_a_blinking_caret_is_the_same_screen():
    with_caret = desktop()
    ImageDraw.Draw(with_caret).line((300, 100, 300, 116), fill=(0, 0, 0))
    assert 0 < screen_difference(png(desktop()), png(with_caret)) < 0.0001
    assert same_screen(png(desktop()), png(with_caret))


def test_a_tooltip_is_another_screen():
    with_tooltip = desktop()
    ImageDraw.Draw(with_tooltip).rectangle((400, 300, 600, 330), fill=(255, 255, 220))
    assert not same_screen(png(desktop()), png(with_tooltip))
    assert same_screen(png(desktop()), png(with_tooltip), tolerance=0.01)
