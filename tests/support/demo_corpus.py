"""Scripted human-like demonstrations with known intended actions: the corpus the reduction
benchmark and tests measure against.

Each session is a few intended actions of the action space, played as a person's raw input
would come (RFB pointer and key events with their times): curved pointer paths with jitter
between actions, a button held for a human while, a hand that drifts a pixel or two while it
clicks, double clicks at human speed, drags along a path, wheel bursts, typing at an uneven
pace with typos taken back by Backspace (some from a key held down too long, whose repeats are
taken back by a held Backspace), capitals and symbols typed with Shift, runs ended by Enter,
chords, and pauses that make no step. Deterministic for a seed.
"""

import math
import random
import string
from dataclasses import dataclass, field
from typing import Any

from vm_pool.recording.reduce import Event, Key, Pointer

SCREEN = (1280, 800)
LEFT, RIGHT = 1, 4
WHEEL = {"up": 8, "down": 16, "left": 32, "right": 64}
SHIFT, CTRL, ALT = 0xFFE1, 0xFFE3, 0xFFE9
BACKSPACE, ENTER = 0xFF08, 0xFF0D
NAMED = {"tab": 0xFF09, "esc": 0xFF1B, "f5": 0xFFC2, "delete": 0xFFFF, "home": 0xFF50}
WORDS = ("report", "budget", "Quarterly", "hello", "Tandem", "files", "2024", "notes.txt",
         "Q3 summary", "invoice #42", "A&B", "draft")  # fmt: skip
SHIFTED = set('~!@#$%^&*()_+{}|:"<>?')


@dataclass
class Session:
    events: list[Event] = field(default_factory=list)
    intended: list[dict[str, Any]] = field(default_factory=list)


class _Hand:
    def __init__(self, rng: random.Random, region: tuple[int, int, int, int]) -> None:
        self.rng = rng
        self.region = region  # where its actions point: x0, y0, x1, y1
        self.session = Session()
        self.at = 0.0
        self.where = (rng.randrange(region[0], region[2]), rng.randrange(region[1], region[3]))

    def wait(self, low: float, high: float) -> None:
        self.at += self.rng.uniform(low, high)

    def pointer(self, x: float, y: float, buttons: int = 0) -> None:
        x = min(max(round(x), 0), SCREEN[0] - 1)
        y = min(max(round(y), 0), SCREEN[1] - 1)
        self.where = (x, y)
        self.session.events.append(Pointer(self.at, x, y, buttons))

    def key(self, keysym: int, down: bool) -> None:
        self.session.events.append(Key(self.at, keysym, down))

    def travel(self, to: tuple[int, int], buttons: int = 0) -> None:
        """Along a bowed path with jitter, a move every 8 to 20 ms, ending exactly at ``to``."""
        start = self.where
        distance = math.dist(start, to)
        steps = max(3, min(40, int(distance / 25)))
        bow = self.rng.uniform(-0.25, 0.25) * distance
        nx, ny = (-(to[1] - start[1]) / (distance or 1), (to[0] - start[0]) / (distance or 1))
        for n in range(1, steps):
            t = n / steps
            eased = t * t * (3 - 2 * t)
            x = start[0] + (to[0] - start[0]) * eased + nx * bow * math.sin(math.pi * t)
            y = start[1] + (to[1] - start[1]) * eased + ny * bow * math.sin(math.pi * t)
            self.wait(0.008, 0.02)
            self.pointer(x + self.rng.uniform(-1.5, 1.5), y + self.rng.uniform(-1.5, 1.5), buttons)
        self.wait(0.008, 0.02)
        self.pointer(*to, buttons)

    def press_release(self, button: int, drift: bool = True) -> tuple[int, int]:
        at = self.where
        self.wait(0.02, 0.08)
        self.pointer(*at, button)
        self.wait(0.05, 0.14)
        dx, dy = (self.rng.randint(-2, 2), self.rng.randint(-2, 2)) if drift else (0, 0)
        self.pointer(at[0] + dx, at[1] + dy, 0)
        return at

    def tap(self, keysym: int, shift: bool = False) -> None:
        if shift:
            self.key(SHIFT, True)
            self.wait(0.02, 0.06)
        self.key(keysym, True)
        self.wait(0.03, 0.09)
        self.key(keysym, False)
        if shift:
            self.wait(0.01, 0.04)
            self.key(SHIFT, False)
        self.wait(0.04, 0.18)

    def hold(self, keysym: int, repeats: int) -> None:
        """A key held down: the first press, the auto-repeated presses, one release."""
        self.key(keysym, True)
        self.wait(0.4, 0.55)  # the repeat delay
        for _ in range(repeats - 1):
            self.key(keysym, True)
            self.wait(0.03, 0.04)
        self.key(keysym, False)
        self.wait(0.05, 0.2)


def _spot(hand: "_Hand") -> tuple[int, int]:
    x0, y0, x1, y1 = hand.region
    return hand.rng.randrange(x0, x1), hand.rng.randrange(y0, y1)


def _click(hand: _Hand) -> None:
    hand.travel(_spot(hand))
    at = hand.press_release(LEFT)
    hand.session.intended.append({"type": "click", "point": list(at)})


def _double(hand: _Hand) -> None:
    hand.travel(_spot(hand))
    at = hand.press_release(LEFT)
    hand.wait(0.06, 0.2)
    hand.pointer(*at)
    hand.press_release(LEFT)
    hand.session.intended.append({"type": "left_double", "point": list(at)})


def _right(hand: _Hand) -> None:
    hand.travel(_spot(hand))
    at = hand.press_release(RIGHT)
    hand.session.intended.append({"type": "right_single", "point": list(at)})


def _drag(hand: _Hand) -> None:
    hand.travel(_spot(hand))
    start = hand.where
    hand.wait(0.03, 0.08)
    hand.pointer(*start, LEFT)
    angle = hand.rng.uniform(0, 2 * math.pi)
    length = hand.rng.uniform(40, 300)
    x0, y0, x1, y1 = hand.region
    end = (
        min(max(round(start[0] + length * math.cos(angle)), x0), x1),
        min(max(round(start[1] + length * math.sin(angle)), y0), y1),
    )
    if math.dist(start, end) < 20:  # pushed back into the region: a drag still
        end = (x0 if start[0] - x0 > x1 - start[0] else x1, start[1])
    hand.travel(end, LEFT)
    hand.wait(0.05, 0.15)
    hand.pointer(*end, 0)
    hand.session.intended.append({"type": "drag", "point": list(start), "end": list(end)})


def _scroll(hand: _Hand) -> None:
    hand.travel(_spot(hand))
    at = hand.where
    direction = hand.rng.choice(["down", "down", "up", "left", "right"])
    notches = hand.rng.randint(1, 12)
    for _ in range(notches):
        hand.pointer(
            at[0] + hand.rng.randint(-2, 2), at[1] + hand.rng.randint(-2, 2), WHEEL[direction]
        )
        hand.wait(0.005, 0.02)
        hand.pointer(*hand.where, 0)
        hand.wait(0.02, 0.25)  # a burst, with a flick's uneven gaps
    hand.session.intended.append(
        {"type": "scroll", "point": list(at), "direction": direction, "amount": notches}
    )


def _type_text(hand: _Hand) -> None:
    rng = hand.rng
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
    for position, char in enumerate(text):
        if rng.random() < 0.06:  # a typo, seen at once and taken back
            wrong = rng.choice(string.ascii_lowercase)
            hand.tap(ord(wrong))
            hand.wait(0.1, 0.3)
            hand.tap(BACKSPACE)
        if rng.random() < 0.02 and char.isalpha() and char.islower():  # a key held too long
            repeats = rng.randint(3, 5)
            hand.hold(ord(char), repeats)
            hand.wait(0.15, 0.4)
            hand.hold(BACKSPACE, repeats - 1)
            continue
        hand.tap(ord(char), shift=char.isupper() or char in SHIFTED)
        del position
    if rng.random() < 0.3:
        hand.wait(0.1, 0.4)
        hand.tap(ENTER)
        text += "\n"
    hand.session.intended.append({"type": "type", "content": text})


def _chord(hand: _Hand) -> None:
    rng = hand.rng
    modifier, name = rng.choice([(CTRL, "ctrl"), (CTRL, "ctrl"), (ALT, "alt")])
    letter = rng.choice("acvszxf")
    hand.key(modifier, True)
    hand.wait(0.05, 0.15)
    hand.tap(ord(letter))
    hand.key(modifier, False)
    hand.wait(0.05, 0.2)
    hand.session.intended.append({"type": "hotkey", "keys": [name, letter]})


def _named(hand: _Hand) -> None:
    name = hand.rng.choice(list(NAMED))
    hand.tap(NAMED[name])
    hand.session.intended.append({"type": "hotkey", "keys": [name]})


OPERATIONS = (_click, _click, _double, _right, _drag, _scroll, _type_text, _type_text, _chord,
              _named)  # fmt: skip


# What a replayed demonstration does in a text editor: nothing that opens a menu or a dialog.
IN_A_TEXT = (_click, _double, _drag, _scroll, _type_text, _type_text)
EVERYWHERE = (40, 40, SCREEN[0] - 40, SCREEN[1] - 40)


def session(
    seed: int,
    region: tuple[int, int, int, int] = EVERYWHERE,
    operations: tuple[Any, ...] = OPERATIONS,
    actions: tuple[int, int] = (3, 10),
) -> Session:
    """One demonstration of ``actions`` intended actions (see the module), pointing in
    ``region``."""
    rng = random.Random(seed)
    hand = _Hand(rng, region)
    previous = None
    for _ in range(rng.randint(*actions)):
        operation = rng.choice(operations)
        while operation is _type_text and previous is _type_text:
            operation = rng.choice(operations)  # two runs in a row are one run, to anyone
        operation(hand)
        hand.wait(0.6, 1.6)  # a pause: no step
        previous = operation
    return hand.session


def corpus(size: int = 200) -> list[Session]:
    return [session(seed) for seed in range(size)]


def matches(reduced: dict[str, Any], intended: dict[str, Any], pixels: int = 3) -> bool:
    """The reduced action is the intended one: the same type and text, points within
    ``pixels``."""
    if reduced.get("type") != intended.get("type"):
        return False
    for key in ("point", "end"):
        if key in intended:
            got = reduced.get(key)
            if (
                got is None
                or max(abs(a - b) for a, b in zip(got, intended[key], strict=True)) > pixels
            ):
                return False
    others = {k: v for k, v in intended.items() if k not in ("point", "end")}
    return all(reduced.get(k) == v for k, v in others.items())


def accuracy(sessions: list[Session], reduce: Any) -> float:
    """The share of intended actions reduced exactly (in order, position by position)."""
    matched = total = 0
    for one in sessions:
        got = [step.action.to_json() for step in reduce(one.events).steps]
        total += len(one.intended)
        matched += sum(
            1 for position, wanted in enumerate(one.intended)
            if position < len(got) and matches(got[position], wanted)
        )  # fmt: skip
    return matched / total if total else 0.0
