"""A person's raw VNC input reduced to steps of the action space (``vm_pool.recording.reduce``):
each rule of the module, and the event each step starts at."""

import random

from tests.support.demo_corpus import corpus, matches
from vm_pool.actions import Action
from vm_pool.recording.reduce import Event, Key, Pointer, StepStarts, reduce_events

A, BACKSPACE, ENTER, TAB, CTRL, SHIFT, ESC = 0x61, 0xFF08, 0xFF0D, 0xFF09, 0xFFE3, 0xFFE1, 0xFF1B


class Input:
    """Events as a noVNC client sends them, with a clock that moves as the person does."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.at = 0.0
        self.where = (0, 0)

    def wait(self, seconds: float) -> "Input":
        self.at += seconds
        return self

    def move(self, x: int, y: int, buttons: int = 0) -> "Input":
        self.at += 0.01
        self.where = (x, y)
        self.events.append(Pointer(self.at, x, y, buttons))
        return self

    def click(self, x: int, y: int, button: int = 1) -> "Input":
        return self.move(x, y).move(x, y, button).move(x, y)

    def wheel(self, x: int, y: int, bit: int = 16) -> "Input":
        return self.move(x, y, bit).move(x, y)

    def press(self, *keysyms: int) -> "Input":
        """Keys pressed in order and released in reverse, as a chord is."""
        for keysym in keysyms:
            self.at += 0.01
            self.events.append(Key(self.at, keysym, True))
        for keysym in reversed(keysyms):
            self.at += 0.01
            self.events.append(Key(self.at, keysym, False))
        return self

    def type(self, text: str) -> "Input":
        for char in text:
            self.press(ord(char))
        return self

    def steps(self) -> list[dict]:
        return [step.action.to_json() for step in reduce_events(self.events).steps]


def test_moves_fold_into_the_click_at_the_point_it_was_pressed():
    person = Input().move(10, 10).move(200, 120).move(400, 300).click(410, 305)
    assert person.steps() == [{"type": "click", "point": [410, 305]}]
    press = next(i for i, e in enumerate(person.events) if isinstance(e, Pointer) and e.buttons)
    assert reduce_events(person.events).steps[0].first_event == press


def test_a_second_click_soon_and_near_makes_a_double_click_and_late_or_far_two_clicks():
    assert Input().click(100, 100).wait(0.1).click(102, 101).steps() == [
        {"type": "left_double", "point": [100, 100]}
    ]
    assert Input().click(100, 100).wait(1.0).click(100, 100).steps() == [
        {"type": "click", "point": [100, 100]},
        {"type": "click", "point": [100, 100]},
    ]
    assert Input().click(100, 100).wait(0.1).click(160, 100).steps() == [
        {"type": "click", "point": [100, 100]},
        {"type": "click", "point": [160, 100]},
    ]
    # A third click soon after is a click of its own, not part of the double.
    triple = Input().click(100, 100).click(100, 100).click(100, 100).steps()
    assert [s["type"] for s in triple] == ["left_double", "click"]


def test_a_press_moved_beyond_the_threshold_is_a_drag_with_both_points():
    person = Input().move(50, 60).move(50, 60, 1).move(120, 90, 1).move(300, 240, 1).move(300, 240)
    assert person.steps() == [{"type": "drag", "point": [50, 60], "end": [300, 240]}]
    jitter = Input().move(50, 60).move(50, 60, 1).move(53, 62, 1).move(53, 62)
    assert jitter.steps() == [{"type": "click", "point": [50, 60]}]


def test_the_right_button_is_a_right_click_and_the_middle_one_is_reported_not_invented():
    assert Input().click(70, 80, button=4).steps() == [{"type": "right_single", "point": [70, 80]}]
    middle = reduce_events(Input().click(70, 80, button=2).events)
    assert middle.steps == [] and "middle click" in middle.skipped[0]


def test_wheel_clicks_at_one_spot_are_one_scroll_with_their_count():
    person = Input()
    for _ in range(3):
        person.wheel(500, 400)
    person.move(900, 100).wheel(900, 100, bit=8).wheel(900, 100, bit=8)
    assert person.steps() == [
        {"type": "scroll", "point": [500, 400], "direction": "down", "amount": 3},
        {"type": "scroll", "point": [900, 100], "direction": "up", "amount": 2},
    ]
    pause = Input().wheel(500, 400).wait(3).wheel(500, 400).steps()
    assert [s["amount"] for s in pause] == [1, 1]


def test_typing_with_a_typo_fixed_by_backspace_types_the_fixed_text_and_enter_ends_it():
    person = Input().click(300, 200).type("Hellp").press(BACKSPACE).type("o World")
    person.press(ENTER)
    assert person.steps() == [
        {"type": "click", "point": [300, 200]},
        {"type": "type", "content": "Hello World\n"},
    ]
    typed = reduce_events(person.events).steps[1]
    first_key = next(i for i, e in enumerate(person.events) if isinstance(e, Key))
    assert typed.first_event == first_key


def test_shift_types_capitals_and_other_characters_are_typed_as_they_are():
    person = Input().press(SHIFT, ord("H")).type("é").press(0x010020AC)
    assert person.steps() == [{"type": "type", "content": "Hé€"}]


def test_chords_and_keys_that_type_nothing_are_hotkeys():
    person = Input().type("ab").press(CTRL, ord("s")).press(SHIFT, TAB).press(ESC)
    person.press(CTRL, SHIFT, ord("T"))
    assert person.steps() == [
        {"type": "type", "content": "ab"},
        {"type": "hotkey", "keys": ["ctrl", "s"]},
        {"type": "hotkey", "keys": ["shift", "tab"]},
        {"type": "hotkey", "keys": ["esc"]},
        {"type": "hotkey", "keys": ["ctrl", "shift", "t"]},
    ]


def test_backspace_and_enter_outside_a_run_are_keys_and_a_run_taken_back_types_nothing():
    person = Input().type("a").press(BACKSPACE).press(BACKSPACE).press(ENTER)
    assert person.steps() == [
        {"type": "hotkey", "keys": ["backspace"]},
        {"type": "hotkey", "keys": ["enter"]},
    ]


def test_a_click_ends_a_run_of_typing_and_a_pause_makes_no_step():
    person = Input().type("ab").wait(5).click(10, 20).wait(30).type("c")
    assert person.steps() == [
        {"type": "type", "content": "ab"},
        {"type": "click", "point": [10, 20]},
        {"type": "type", "content": "c"},
    ]


def test_every_step_is_a_valid_action_of_the_space():
    person = Input().click(5, 5).wheel(5, 5).type("x").press(CTRL, ord("c"))
    for step in reduce_events(person.events).steps:
        assert Action.from_json(step.action.to_json()) == step.action


def test_a_hotkey_and_a_run_typed_with_shift_begin_at_their_first_modifier_press():
    person = Input().click(5, 5)
    ctrl = len(person.events)
    person.press(CTRL, A)
    shift = len(person.events)
    person.at += 0.01
    person.events.append(Key(person.at, SHIFT, True))
    person.type("HI")
    person.events.append(Key(person.at + 0.01, SHIFT, False))
    steps = reduce_events(person.events).steps
    assert [s.action.to_json() for s in steps][1:] == [
        {"type": "hotkey", "keys": ["ctrl", "a"]},
        {"type": "type", "content": "HI"},
    ]
    assert [s.first_event for s in steps][1:] == [ctrl, shift]


def starts_of(events: list[Event]) -> list[int]:
    gate = StepStarts()
    return [index for index, event in enumerate(events) if gate.add(event)]


def test_the_gate_grabs_before_each_step_s_first_event_and_not_inside_a_typing_run():
    person = Input().move(40, 40).click(50, 50).type("hello world").press(ENTER)
    starts = starts_of(person.events)
    first_events = [s.first_event for s in reduce_events(person.events).steps]
    assert first_events == [starts[0], starts[1]]  # the click's press, the run's first key
    assert len(starts) == 2  # the other ten keys of the run and Enter pass without a grab

    for seed in range(200):
        rng = random.Random(seed)
        session = Input()
        for _ in range(rng.randint(1, 25)):
            x, y = rng.randint(0, 600), rng.randint(0, 400)
            match rng.randrange(9):
                case 0:
                    session.move(x, y).click(x, y)
                case 1:
                    session.click(x, y).wait(rng.choice((0.05, 0.8))).click(
                        x + rng.randint(0, 9), y
                    )
                case 2:
                    session.move(x, y, 1).move(x + rng.randint(0, 80), y + 40, 1).move(x, y)
                case 3:
                    for _ in range(rng.randint(1, 12)):
                        session.wheel(x + rng.randint(0, 30), y, rng.choice((8, 16, 32)))
                        session.wait(rng.choice((0.01, 0.3, 1.5)))
                case 4:
                    session.type(rng.choice(("abc", "x y", "42")))
                case 5:
                    session.press(rng.choice((CTRL, SHIFT)), rng.choice((A, TAB, ESC)))
                case 6:
                    session.press(rng.choice((BACKSPACE, ENTER, TAB, ESC)))
                case 7:
                    session.click(x, y, rng.choice((2, 4)))
                case 8:
                    session.events.append(Key(session.at, SHIFT, True))
                    session.type("Ab")
                    session.events.append(Key(session.at + 0.01, SHIFT, False))
        starts = set(starts_of(session.events))
        for step in reduce_events(session.events).steps:
            assert step.first_event in starts, (seed, step)


def test_human_like_sessions_reduce_to_their_intended_actions():
    """The benchmark's corpus (curved paths, jitter, typos, key repeat, wheel bursts): every
    intended action comes back, in order, and each first event is one the gate grabs before."""
    for one in corpus(60):
        reduced = reduce_events(one.events)
        got = [step.action.to_json() for step in reduced.steps]
        assert len(got) == len(one.intended), (got, one.intended)
        for action, wanted in zip(got, one.intended, strict=True):
            assert matches(action, wanted), (action, wanted)
        starts = set(starts_of(one.events))
        assert {step.first_event for step in reduced.steps} <= starts
