"""The unified action space: construction, validation, JSON and UI-TARS text."""

import json
import time

import pytest

from vm_pool.actions import (
    ALLOWED_ACTIONS,
    MAX_APP_NAME_CHARS,
    MAX_CONTENT_CHARS,
    MAX_HOTKEY_KEYS,
    MAX_SCROLL_AMOUNT,
    Action,
    ActionType,
    Direction,
    InvalidAction,
    Platform,
    Point,
    ScreenSize,
)
from vm_pool.actions.text import MAX_ACTION_TEXT_CHARS

SCREEN = ScreenSize(1920, 1080)

# One example of every action type, with the exact UI-TARS-1.5 text and JSON it has.
EXAMPLES = [
    (
        Action(ActionType.CLICK, Point(112, 34)),
        "click(start_box='(112,34)')",
        {"type": "click", "point": [112, 34]},
    ),
    (
        Action(ActionType.LEFT_DOUBLE, Point(0, 0)),
        "left_double(start_box='(0,0)')",
        {"type": "left_double", "point": [0, 0]},
    ),
    (
        Action(ActionType.RIGHT_SINGLE, Point(1919, 1079)),
        "right_single(start_box='(1919,1079)')",
        {"type": "right_single", "point": [1919, 1079]},
    ),
    (
        Action(ActionType.DRAG, Point(10, 20), Point(300, 400)),
        "drag(start_box='(10,20)', end_box='(300,400)')",
        {"type": "drag", "point": [10, 20], "end": [300, 400]},
    ),
    (
        Action(ActionType.SCROLL, Point(500, 600), direction=Direction.DOWN),
        "scroll(start_box='(500,600)', direction='down')",
        {"type": "scroll", "point": [500, 600], "direction": "down", "amount": 5},
    ),
    (
        Action(ActionType.SCROLL, Point(5, 6), direction=Direction.LEFT, amount=2),
        "scroll(start_box='(5,6)', direction='left', amount='2')",
        {"type": "scroll", "point": [5, 6], "direction": "left", "amount": 2},
    ),
    (
        Action(ActionType.TYPE, content="hello world\n"),
        "type(content='hello world\\n')",
        {"type": "type", "content": "hello world\n"},
    ),
    (
        Action(ActionType.HOTKEY, keys=("ctrl", "shift", "t")),
        "hotkey(key='ctrl shift t')",
        {"type": "hotkey", "keys": ["ctrl", "shift", "t"]},
    ),
    (Action(ActionType.WAIT), "wait()", {"type": "wait"}),
    (
        Action(ActionType.FINISHED, content="The answer is 42."),
        "finished(content='The answer is 42.')",
        {"type": "finished", "content": "The answer is 42."},
    ),
    (
        Action(ActionType.FINISHED),
        "finished(content='')",
        {"type": "finished", "content": ""},
    ),
    (Action(ActionType.CALL_USER), "call_user()", {"type": "call_user"}),
    (
        Action(ActionType.LONG_PRESS, Point(240, 800)),
        "long_press(start_box='(240,800)')",
        {"type": "long_press", "point": [240, 800]},
    ),
    (
        Action(ActionType.OPEN_APP, app="Google Chrome"),
        "open_app(app_name='Google Chrome')",
        {"type": "open_app", "app": "Google Chrome"},
    ),
    (Action(ActionType.PRESS_HOME), "press_home()", {"type": "press_home"}),
    (Action(ActionType.PRESS_BACK), "press_back()", {"type": "press_back"}),
]
IDS = [f"{action.type}-{i}" for i, (action, _, _) in enumerate(EXAMPLES)]


def test_examples_cover_every_action_type():
    assert {action.type for action, _, _ in EXAMPLES} == set(ActionType)


@pytest.mark.parametrize(("action", "text", "data"), EXAMPLES, ids=IDS)
def test_every_type_writes_the_ui_tars_text_and_reads_it_back(action, text, data):
    assert action.to_text() == text
    assert Action.from_text(text) == action


@pytest.mark.parametrize(("action", "text", "data"), EXAMPLES, ids=IDS)
def test_every_type_writes_its_json_shape_and_reads_it_back(action, text, data):
    assert action.to_json() == data
    assert Action.from_json(json.loads(json.dumps(action.to_json()))) == action


CONTENTS = [
    "Grüße aus Köln — 東京 🚀",
    'it\'s a "quoted" word',
    "C:\\Users\\me\\file.txt",
    "ends with a backslash \\",
    "a literal backslash-n: \\n stays two characters",
    "line one\nline two\n",
    "\n",
    "tab\there, carriage\rreturn",
    "', b='injected",
    "'); wait(",
]


@pytest.mark.parametrize("content", CONTENTS)
def test_typed_content_round_trips_through_text_and_json(content):
    action = Action(ActionType.TYPE, content=content)
    assert Action.from_text(action.to_text()) == action
    assert Action.from_json(action.to_json()) == action


def test_trailing_newline_that_submits_survives_the_text_round_trip():
    action = Action.from_text(Action(ActionType.TYPE, content="search terms\n").to_text())
    assert action.content is not None and action.content.endswith("\n")


def test_text_escapes_backslash_quote_and_newline_like_ui_tars():
    action = Action(ActionType.TYPE, content="a\\b 'c'\nd")
    assert action.to_text() == "type(content='a\\\\b \\'c\\'\\nd')"


@pytest.mark.parametrize("content", CONTENTS)
def test_finished_answer_round_trips_through_text(content):
    action = Action(ActionType.FINISHED, content=content)
    assert Action.from_text(action.to_text()) == action


@pytest.mark.parametrize(
    ("text", "point"),
    [
        ("click(start_box='<|box_start|>(112,34)<|box_end|>')", Point(112, 34)),
        ("click(start_box='[100, 200, 110, 221]')", Point(105, 211)),
        ("click(start_box='<|box_start|>[10,10,13,13]<|box_end|>')", Point(12, 12)),
        ("click(point='<point>640 360</point>')", Point(640, 360)),
        ("click(start_box='<bbox>0 0 20 40</bbox>')", Point(10, 20)),
        ('click(start_box="(7,8)")', Point(7, 8)),
        ("click( start_box = '( 7 , 8 )' )", Point(7, 8)),
        ("click(start_box='[7, 8]')", Point(7, 8)),
        ("click(start_box='(7.5,8.4)')", Point(8, 8)),
    ],
)
def test_point_variants_that_models_emit_parse_to_the_right_point(text, point):
    assert Action.from_text(text).point == point


def test_drag_reads_point_tags_for_both_ends():
    action = Action.from_text(
        "drag(start_point='<point>1 2</point>', end_point='<point>30 40</point>')"
    )
    assert action == Action(ActionType.DRAG, Point(1, 2), Point(30, 40))


def test_scroll_text_without_amount_scrolls_five_clicks():
    action = Action.from_text("scroll(start_box='(1,2)', direction='up')")
    assert action.amount == 5


def test_finished_without_content_reads_as_an_empty_answer():
    assert Action.from_text("finished()") == Action(ActionType.FINISHED, content="")


def test_unescaped_quote_inside_typed_text_is_kept():
    assert Action.from_text("type(content='it's fine')").content == "it's fine"


def test_double_quoted_content_reads_escapes():
    assert Action.from_text('type(content="say \\"hi\\"\\n")').content == 'say "hi"\n'


def test_hotkey_names_are_lowercased_and_aliases_normalised():
    action = Action.from_text("hotkey(key='Cmd Return')")
    assert action.keys == ("super", "enter")
    assert Action(ActionType.HOTKEY, keys=("Meta", "escape")).keys == ("super", "esc")


def test_hotkey_accepts_function_keys_and_punctuation():
    assert Action(ActionType.HOTKEY, keys=("ctrl", "f24")).keys == ("ctrl", "f24")
    assert Action.from_text("hotkey(key='ctrl \\'')").keys == ("ctrl", "'")
    assert Action(ActionType.HOTKEY, keys=("ctrl", "minus")).to_text() == "hotkey(key='ctrl minus')"


def test_point_on_the_last_pixel_is_on_screen():
    Action(ActionType.CLICK, Point(1919, 1079)).validate(Platform.DESKTOP, SCREEN)


@pytest.mark.parametrize("point", [Point(1920, 10), Point(10, 1080), Point(1920, 1080)])
def test_point_at_exactly_the_screen_width_or_height_is_off_screen(point):
    with pytest.raises(InvalidAction, match=r"outside the 1920x1080 screen"):
        Action(ActionType.CLICK, point).validate(Platform.DESKTOP, SCREEN)


def test_drag_end_off_screen_is_refused():
    action = Action(ActionType.DRAG, Point(10, 10), Point(10, 2000))
    with pytest.raises(InvalidAction, match=r"end point \(end_box\) \(10, 2000\) is outside"):
        action.validate(Platform.DESKTOP, SCREEN)


def test_negative_point_is_refused():
    with pytest.raises(InvalidAction, match=r"point \(start_box\) \(-1, 5\) is negative"):
        Action.from_text("click(start_box='(-1,5)')")


def test_text_is_checked_against_the_screen_when_given():
    with pytest.raises(InvalidAction, match="outside the 1920x1080 screen"):
        Action.from_text("click(start_box='(2000,5)')", screen=SCREEN)


def test_click_without_start_box_is_refused():
    with pytest.raises(InvalidAction, match=r"click is missing point \(start_box\)"):
        Action.from_text("click()")


def test_argument_the_type_does_not_take_is_refused():
    with pytest.raises(InvalidAction, match="click does not take content"):
        Action.from_text("click(start_box='(1,2)', content='x')")


def test_hotkey_with_an_unknown_key_is_refused():
    with pytest.raises(InvalidAction, match="unknown key name 'hyperdrive'"):
        Action.from_text("hotkey(key='ctrl hyperdrive')")


def test_empty_hotkey_is_refused():
    with pytest.raises(InvalidAction, match="hotkey needs at least one key"):
        Action.from_text("hotkey(key='')")


def test_scroll_sideways_is_refused():
    with pytest.raises(InvalidAction, match="unknown scroll direction 'sideways'"):
        Action.from_text("scroll(start_box='(1,2)', direction='sideways')")


def test_scroll_amount_below_one_is_refused():
    with pytest.raises(InvalidAction, match="scroll amount must be a whole number of 1 or more"):
        Action.from_json({"type": "scroll", "point": [1, 2], "direction": "up", "amount": 0})


def test_typing_nothing_is_refused():
    with pytest.raises(InvalidAction, match="type needs some content"):
        Action.from_text("type(content='')")


@pytest.mark.parametrize(
    "action_type",
    [ActionType.LONG_PRESS, ActionType.OPEN_APP, ActionType.PRESS_HOME, ActionType.PRESS_BACK],
)
@pytest.mark.parametrize("platform", [Platform.DESKTOP, Platform.WEB])
def test_android_only_action_is_refused_on_desktop_and_web(action_type, platform):
    action = next(a for a, _, _ in EXAMPLES if a.type == action_type)
    with pytest.raises(InvalidAction, match=f"{action_type} is not available on {platform}"):
        action.validate(platform)


@pytest.mark.parametrize(
    "action_type", [ActionType.LEFT_DOUBLE, ActionType.RIGHT_SINGLE, ActionType.HOTKEY]
)
def test_desktop_only_action_is_refused_on_android_and_allowed_on_web(action_type):
    action = next(a for a, _, _ in EXAMPLES if a.type == action_type)
    action.validate(Platform.WEB)
    with pytest.raises(InvalidAction, match=r"only on desktop, web"):
        action.validate(Platform.ANDROID)


def test_every_platform_allows_the_common_actions():
    common = {"click", "drag", "scroll", "type", "wait", "finished", "call_user"}
    for platform in Platform:
        assert common <= ALLOWED_ACTIONS[platform]


def test_platform_given_as_a_plain_string_is_checked():
    with pytest.raises(InvalidAction, match="press_home is not available on desktop"):
        Action.from_json({"type": "press_home"}, platform="desktop")


def test_unknown_type_is_refused_in_text_and_json():
    with pytest.raises(InvalidAction, match="unknown action type 'teleport'"):
        Action.from_text("teleport(start_box='(1,2)')")
    with pytest.raises(InvalidAction, match="unknown action type 'teleport'"):
        Action.from_json({"type": "teleport"})


def test_extra_json_key_is_refused():
    with pytest.raises(InvalidAction, match="unknown key"):
        Action.from_json({"type": "click", "point": [1, 2], "button": "left"})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"type": "click", "point": "(1,2)"}, "point must be"),
        ({"type": "click", "point": [1, 2, 3]}, "point must be"),
        ({"type": "click", "point": [1.5, 2]}, "point must be"),
        ({"type": "click", "point": [True, 2]}, "point must be"),
        ({"type": "scroll", "point": [1, 2], "direction": "up", "amount": True}, "amount must"),
        ({"type": "hotkey", "keys": "ctrl c"}, "keys must be a list"),
        ({"type": "hotkey", "keys": ["ctrl", 5]}, "keys must be a list"),
        ({"type": "type", "content": 5}, "content must be a string"),
        ({"type": 3}, "'type' must be a string"),
        ({"point": [1, 2]}, "'type' must be a string"),
        (["click", [1, 2]], "must be a JSON object"),
    ],
)
def test_json_with_wrong_types_is_refused(data, message):
    with pytest.raises(InvalidAction, match=message):
        Action.from_json(data)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("click(start_box=", "start_box must be a quoted string"),
        ("rm -rf /", "not an action call"),
        ("", "not an action call"),
        ("Action: click(start_box='(1,2)')", "not an action call"),
        ("click(start_box='(1,2)'", "expected ',' or '\\)'"),
        ("click(start_box='(1,2)) ", "not closed"),
        ("click(start_box=(1,2))", "must be a quoted string"),
        ("click(start_box='(1,2)') and more", "unexpected text after the action call"),
        ("click(start_box='(1,2)')\n\nwait()", "unexpected text after the action call"),
        ("click(start_box='(1,2,3)')", "a point has 2 numbers and a box 4, not 3"),
        ("click(start_box='here')", "not a point or a box"),
        ("click(start_box='(1,2)', start_box='(3,4)')", "twice"),
        ("click(start_box='(1,2)', point='(3,4)')", "twice"),
        ("click(target='(1,2)')", "unknown argument 'target'"),
        ("scroll(start_box='(1,2)', direction='up', amount='lots')", "amount must be a whole"),
        ("__import__('os').system('ls')", "unknown action type '__import__'"),
    ],
)
def test_unparseable_text_is_refused_with_the_reason(text, message):
    with pytest.raises(InvalidAction, match=message):
        Action.from_text(text)


def test_absurdly_long_coordinates_are_refused_with_a_short_message():
    with pytest.raises(InvalidAction, match="not a point or a box") as raised:
        Action.from_text("click(start_box='(" + "9" * 5000 + ",1)')")
    assert len(str(raised.value)) < 100


# --- caps -----------------------------------------------------------------------------------


def test_type_content_up_to_the_cap_is_accepted():
    content = "x" * (MAX_CONTENT_CHARS - 1) + "\n"

    action = Action.from_json({"type": "type", "content": content}, platform="desktop")

    assert action.content == content
    assert Action.from_text(action.to_text()) == action


def test_type_content_over_the_cap_is_refused_naming_the_cap():
    with pytest.raises(InvalidAction, match="type content is 10,001 characters, over the cap"):
        Action(ActionType.TYPE, content="x" * (MAX_CONTENT_CHARS + 1))


def test_a_megabyte_to_type_is_refused_at_once_when_a_decision_or_a_proposal_is_read():
    content = "x" * 1_000_000
    started = time.monotonic()
    with pytest.raises(InvalidAction, match="1,000,000 characters, over the cap of 10,000"):
        Action.from_json({"type": "type", "content": content}, platform="desktop", screen=SCREEN)
    with pytest.raises(InvalidAction, match=f"over the cap of {MAX_ACTION_TEXT_CHARS:,}"):
        Action.from_text(f"type(content='{content}')")
    assert time.monotonic() - started < 0.5


def test_finished_answer_over_the_cap_is_refused():
    with pytest.raises(InvalidAction, match="finished content is 10,001 characters"):
        Action.from_text("finished(content='" + "a" * (MAX_CONTENT_CHARS + 1) + "')")


def test_scroll_amount_up_to_the_cap_is_accepted_and_over_it_refused():
    point = Point(5, 5)
    assert Action(ActionType.SCROLL, point, direction="up", amount=MAX_SCROLL_AMOUNT).amount == 50

    with pytest.raises(InvalidAction, match="scroll amount 51 is over the cap of 50 wheel clicks"):
        Action.from_text("scroll(start_box='(5,5)', direction='up', amount='51')")
    with pytest.raises(InvalidAction, match="over the cap of 50"):
        Action.from_json({"type": "scroll", "point": [5, 5], "direction": "up", "amount": 10**9})


def test_hotkey_with_more_keys_than_the_cap_is_refused():
    keys = ("ctrl", "alt", "shift", "super", "a", "b")
    assert len(Action(ActionType.HOTKEY, keys=keys).keys or ()) == MAX_HOTKEY_KEYS

    with pytest.raises(InvalidAction, match="hotkey has 7 keys, over the cap of 6"):
        Action.from_text("hotkey(key='ctrl alt shift super a b c')")
    with pytest.raises(InvalidAction, match="hotkey has 1,000,000 keys"):
        Action.from_json({"type": "hotkey", "keys": ["a"] * 1_000_000})


def test_app_name_over_the_cap_is_refused():
    with pytest.raises(InvalidAction, match=f"over the cap of {MAX_APP_NAME_CHARS}"):
        Action(ActionType.OPEN_APP, app="a" * (MAX_APP_NAME_CHARS + 1))


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f", "\x85"])
def test_typing_a_control_character_no_key_types_is_refused(char):
    with pytest.raises(InvalidAction, match=f"control character U\\+{ord(char):04X}"):
        Action.from_json({"type": "type", "content": f"ab{char}c"})


def test_typing_newlines_tabs_and_carriage_returns_is_allowed():
    assert Action(ActionType.TYPE, content="a\tb\r\nc\n").content == "a\tb\r\nc\n"


def test_actions_are_immutable_and_hashable():
    action = Action(ActionType.HOTKEY, keys=("ctrl", "c"))
    with pytest.raises(AttributeError):
        action.keys = ("alt",)  # type: ignore[misc]
    assert len({action, Action(ActionType.HOTKEY, keys=("Ctrl", "C"))}) == 1
