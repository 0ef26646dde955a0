"""What counts as right at a step (``annotation.quality.rules``): each rule of the module, and
the bad gold it refuses with its reason."""

import pytest

from annotation.quality.rules import (
    GoldRefused,
    agree,
    answer_from,
    check_answers,
    is_right,
    wilson,
)
from vm_pool.actions import ScreenSize

SCREEN = ScreenSize(1280, 800)


def test_a_point_is_right_inside_the_region_or_within_the_radius_and_with_the_right_type():
    box = check_answers([{"type": "click", "region": [100, 100, 200, 150]}], SCREEN)
    assert is_right({"type": "click", "point": [100, 150]}, box)  # the edges count
    assert not is_right({"type": "click", "point": [201, 120]}, box)
    assert not is_right({"type": "left_double", "point": [150, 120]}, box)
    near = check_answers([{"type": "click", "point": [640, 400]}], SCREEN)
    assert near[0]["radius"] == 20
    assert is_right({"type": "click", "point": [652, 416]}, near)  # 20 px away
    assert not is_right({"type": "click", "point": [680, 400]}, near)  # 40 px off target


def test_several_right_answers_and_each_kind_of_action():
    gold = check_answers(
        [
            {"type": "type", "text": "Hello  from Tandem", "normalise": "casefold"},
            {"type": "hotkey", "keys": ["S", "ctrl"]},
            {"type": "drag", "point": [10, 10], "end_region": [500, 500, 600, 600]},
            {"type": "scroll", "region": [0, 0, 1279, 799], "direction": "down"},
            {"type": "finished"},
        ],
        SCREEN,
    )
    assert is_right({"type": "type", "content": " hello from  TANDEM"}, gold)
    assert is_right({"type": "hotkey", "keys": ["ctrl", "s"]}, gold)
    assert not is_right({"type": "hotkey", "keys": ["ctrl", "shift", "s"]}, gold)
    assert is_right({"type": "drag", "point": [12, 9], "end": [550, 599]}, gold)
    assert not is_right({"type": "drag", "point": [12, 9], "end": [450, 599]}, gold)
    assert is_right({"type": "scroll", "point": [5, 5], "direction": "down", "amount": 7}, gold)
    assert not is_right({"type": "scroll", "point": [5, 5], "direction": "up", "amount": 1}, gold)
    assert is_right({"type": "finished", "content": "done"}, gold)
    assert not is_right({"type": "call_user"}, gold)
    assert not is_right(None, gold)
    exact = check_answers([{"type": "type", "text": "a b", "normalise": "exact"}], SCREEN)
    assert not is_right({"type": "type", "content": "a  b"}, exact)


def test_two_decisions_agree_by_the_same_rule_both_ways():
    click = {"type": "click", "point": [640, 400]}
    assert agree(click, {"type": "click", "point": [650, 410]})
    assert not agree(click, {"type": "click", "point": [680, 400]})
    assert not agree(click, {"type": "left_double", "point": [640, 400]})
    assert agree({"type": "type", "content": "ls -l\n"}, {"type": "type", "content": "ls  -l"})
    assert answer_from(click) == {"type": "click", "point": [640, 400], "radius": 20}
    assert not agree(click, None)


@pytest.mark.parametrize(
    ("answers", "why"),
    [
        ([], "at least one right answer"),
        ("click", "at least one right answer"),
        ([{"type": "click", "region": [1200, 700, 1400, 790]}], "not a box on the 1280x800"),
        ([{"type": "click", "region": [300, 300, 200, 400]}], "not a box"),
        ([{"type": "click", "point": [1280, 10]}], "off the screen"),
        ([{"type": "click"}], "needs a region or a point"),
        ([{"type": "click", "point": [5, 5], "radius": 0}], "above 0"),
        ([{"type": "type", "text": ""}], "needs the text"),
        ([{"type": "type", "text": "a", "normalise": "loose"}], "normalise is one of"),
        ([{"type": "hotkey", "keys": []}], "needs its keys"),
        ([{"type": "scroll", "point": [5, 5], "direction": "sideways"}], "a scroll goes"),
        ([{"type": "teleport"}], "no action of the space"),
        ([{"type": "click", "point": [5, 5], "colour": "red"}], "fields no answer has: colour"),
        ([{"type": "finished"}] * 11, "at most 10"),
    ],
)
def test_bad_gold_is_refused_with_its_reason(answers, why):
    with pytest.raises(GoldRefused, match=why):
        check_answers(answers, SCREEN)


def test_a_rate_comes_with_its_interval():
    assert wilson(0, 0) is None
    low, high = wilson(3, 3)
    assert high == 1.0 and 0.4 < low < 0.45  # three of three says little
    low, high = wilson(97, 100)
    assert 0.91 < low < 0.92 and 0.98 < high < 0.99
