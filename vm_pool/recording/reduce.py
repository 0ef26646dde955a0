"""A person's raw input, as the desktop's VNC stream carries it, reduced to actions of the
action space: the steps of a demonstration. Pure: events in, actions out.

The events are RFB's client messages in the order the desktop received them, each with the
time it arrived (``Pointer``: the button mask and where the pointer is; ``Key``: a keysym
pressed or released). The rules, in the spirit of AgentNet's reducer:

- **The pointer.** Moves with no button held make no step: they are folded into the next
  press, whose point is where the pointer was when pressed. A left press released within
  ``DRAG_PX`` of where it went down is a ``click`` at the press; released farther, a ``drag``
  from the press to the release. A second left click that goes down within ``DOUBLE_CLICK_S``
  of the first one's release and within ``DOUBLE_CLICK_PX`` of it makes the pair one
  ``left_double`` (at the first click's point). A right press and release is a
  ``right_single`` at the press. The middle button has no action in the space: its clicks are
  reported as ``skipped``, never turned into something else.
- **The wheel.** Each wheel click (RFB's buttons 4 to 7) at one spot and in one direction joins
  the scroll before it while the pointer stays within ``WHEEL_PX`` and the clicks come within
  ``WHEEL_GAP_S`` of each other: one ``scroll`` with its direction and the number of clicks as
  its amount (at most ``MAX_SCROLL_AMOUNT``; more start another scroll).
- **Typing.** Printable keys pressed in a run (Shift allowed: the keysym is the shifted
  character) are one ``type`` of their text. Backspace inside a run takes back the run's last
  character, so a typo fixed at once types the fixed text; an Enter ends the run with ``\\n``,
  the convention ``type`` executes as Enter. A run ends at any other step (a click, a scroll,
  a hotkey).
- **Keys.** A key pressed while Ctrl, Alt or Super is held is a ``hotkey`` of the held modifiers
  (in the order ctrl, alt, shift, super) and the key. A key that types nothing (Tab, Escape,
  the arrows, the function keys, Delete, and Backspace or Enter outside a run) is a ``hotkey``
  of itself, with Shift when it is held. Releases and modifiers alone make no step.
- **Time.** A pause makes no step (no ``wait``): only input does.

Each step names the index of the first event that belongs to it (``first_event``): the press
that began it, or for a hotkey or a run typed with Shift the modifier pressed first. The screen
the person acted on is the one before that event reached the desktop: the recording gate grabs
it before every input that ``StepStarts`` says may begin a step, a superset of these.
"""

from dataclasses import dataclass, field
from math import dist

from vm_pool.actions import (
    MAX_CONTENT_CHARS,
    MAX_SCROLL_AMOUNT,
    Action,
    ActionType,
    Direction,
    InvalidAction,
    Point,
)

DRAG_PX = 5.0
DOUBLE_CLICK_S = 0.5
DOUBLE_CLICK_PX = 5.0
WHEEL_PX = 20.0
WHEEL_GAP_S = 1.0

LEFT, MIDDLE, RIGHT = 1, 2, 4
WHEEL = {8: Direction.UP, 16: Direction.DOWN, 32: Direction.LEFT, 64: Direction.RIGHT}
MODIFIERS = {
    0xFFE1: "shift", 0xFFE2: "shift", 0xFFE3: "ctrl", 0xFFE4: "ctrl", 0xFFE9: "alt",
    0xFFEA: "alt", 0xFFE7: "super", 0xFFE8: "super", 0xFFEB: "super", 0xFFEC: "super",
}  # fmt: skip
MODIFIER_ORDER = ("ctrl", "alt", "shift", "super")
# Keys that type nothing, by keysym, with their names in the action space.
NAMED_KEYS = {
    0xFF08: "backspace", 0xFF09: "tab", 0xFE20: "tab", 0xFF0D: "enter", 0xFF8D: "enter",
    0xFF1B: "esc", 0xFFFF: "delete", 0xFF63: "insert", 0xFF50: "home", 0xFF57: "end",
    0xFF55: "pageup", 0xFF56: "pagedown", 0xFF51: "left", 0xFF52: "up", 0xFF53: "right",
    0xFF54: "down", 0xFFE5: "capslock", 0xFF61: "printscreen",
    **{0xFFBE + n: f"f{n + 1}" for n in range(24)},
}  # fmt: skip
# AltGr types characters (its keysyms are the characters): it is no modifier of a hotkey.
ALTGR = 0xFE03


@dataclass(frozen=True)
class Pointer:
    at: float  # seconds, as the events arrived
    x: int
    y: int
    buttons: int  # RFB's button mask: 1 left, 2 middle, 4 right, 8/16/32/64 the wheel


@dataclass(frozen=True)
class Key:
    at: float
    keysym: int
    down: bool


Event = Pointer | Key


@dataclass(frozen=True)
class Demonstrated:
    action: Action
    first_event: int  # the index of the first event of the step


@dataclass
class Reduced:
    steps: list[Demonstrated] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # input the action space cannot hold


def character(keysym: int) -> str | None:
    """The character a keysym types, or None for a key that types nothing."""
    if 0x20 <= keysym <= 0x7E or 0xA0 <= keysym <= 0xFF:
        return chr(keysym)
    if 0x01000100 <= keysym <= 0x0110FFFF:
        return chr(keysym - 0x01000000)
    return None


def reduce_events(events: list[Event]) -> Reduced:
    """The steps a person's input makes (see the module's rules)."""
    return _Reducer().run(events)


@dataclass
class _Press:
    button: int
    point: tuple[int, int]
    at: float
    index: int


@dataclass
class _Click:
    point: tuple[int, int]
    released: float
    step: int  # its position in the steps


class _Reducer:
    def __init__(self) -> None:
        self.out = Reduced()
        self.buttons = 0
        self.press: _Press | None = None
        self.last_click: _Click | None = None
        self.text: list[str] = []
        self.text_from = 0
        self.wheel: tuple[Direction, tuple[int, int], float, int, int] | None = None
        self.held: set[str] = set()
        # The first modifier pressed since the last step, while one is held: a hotkey's (or a
        # Shift run's) first event.
        self.chord_from: int | None = None

    def run(self, events: list[Event]) -> Reduced:
        for index, event in enumerate(events):
            if isinstance(event, Pointer):
                self.pointer(event, index)
            else:
                self.key(event, index)
        self.end_text()
        self.end_wheel()
        return self.out

    # --- steps -------------------------------------------------------------------------------

    def add(self, action: Action, first_event: int) -> None:
        self.out.steps.append(Demonstrated(action, first_event))
        self.last_click = None
        self.chord_from = None

    def end_text(self) -> None:
        """The run typed so far as one ``type`` (as several, past ``MAX_CONTENT_CHARS``)."""
        text = "".join(self.text)
        for start in range(0, len(text), MAX_CONTENT_CHARS):
            self.add(Action(ActionType.TYPE, content=text[start : start + MAX_CONTENT_CHARS]),
                     self.text_from)  # fmt: skip
        self.text = []

    def end_wheel(self) -> None:
        if self.wheel is not None:
            direction, (x, y), _, amount, first = self.wheel
            self.add(Action(ActionType.SCROLL, Point(x, y), direction=direction, amount=amount),
                     first)  # fmt: skip
            self.wheel = None

    def hotkey(self, name: str, index: int) -> None:
        first = self.chord_from if self.chord_from is not None else index
        self.end_text()
        self.end_wheel()
        keys = tuple(m for m in MODIFIER_ORDER if m in self.held) + (name,)
        try:
            action = Action(ActionType.HOTKEY, keys=keys)
        except InvalidAction as error:
            self.out.skipped.append(f"the keys {'+'.join(keys)}: {error}")
            return
        self.add(action, first)

    # --- the pointer -------------------------------------------------------------------------

    def pointer(self, event: Pointer, index: int) -> None:
        pressed = event.buttons & ~self.buttons
        released = self.buttons & ~event.buttons
        self.buttons = event.buttons
        here = (event.x, event.y)
        for bit, direction in WHEEL.items():
            if pressed & bit:
                self.wheel_click(direction, here, event.at, index)
        for button in (LEFT, MIDDLE, RIGHT):
            if pressed & button and self.press is None:
                self.end_text()
                self.end_wheel()
                self.press = _Press(button, here, event.at, index)
            elif released & button and self.press is not None and self.press.button == button:
                self.release(self.press, here, event.at)
                self.press = None

    def wheel_click(
        self, direction: Direction, here: tuple[int, int], at: float, index: int
    ) -> None:
        self.end_text()
        if self.wheel is not None:
            same, point, last, amount, first = self.wheel
            joins = (
                same == direction
                and dist(point, here) <= WHEEL_PX
                and at - last <= WHEEL_GAP_S
                and amount < MAX_SCROLL_AMOUNT
            )
            if joins:
                self.wheel = (same, point, at, amount + 1, first)
                return
            self.end_wheel()
        self.wheel = (direction, here, at, 1, index)

    def release(self, press: _Press, here: tuple[int, int], at: float) -> None:
        point = Point(*press.point)
        if press.button == MIDDLE:
            self.out.skipped.append(f"a middle click at {press.point} (no such action)")
            return
        if press.button == RIGHT:
            self.add(Action(ActionType.RIGHT_SINGLE, point), press.index)
            return
        if dist(press.point, here) > DRAG_PX:
            self.add(Action(ActionType.DRAG, point, end=Point(*here)), press.index)
            return
        before = self.last_click
        double = (
            before is not None
            and before.step == len(self.out.steps) - 1
            and press.at - before.released <= DOUBLE_CLICK_S
            and dist(before.point, press.point) <= DOUBLE_CLICK_PX
        )
        if double and before is not None:
            first = self.out.steps[before.step]
            self.out.steps[before.step] = Demonstrated(
                Action(ActionType.LEFT_DOUBLE, Point(*before.point)), first.first_event
            )
            self.last_click = None
            return
        self.add(Action(ActionType.CLICK, point), press.index)
        self.last_click = _Click(press.point, at, len(self.out.steps) - 1)

    # --- keys --------------------------------------------------------------------------------

    def key(self, event: Key, index: int) -> None:
        modifier = MODIFIERS.get(event.keysym)
        if modifier is not None:
            if event.down:
                if self.chord_from is None and not (self.text and modifier == "shift"):
                    self.chord_from = index
                self.held.add(modifier)
            else:
                self.held.discard(modifier)
                if not self.held:
                    self.chord_from = None
            return
        if not event.down or event.keysym == ALTGR:
            return
        typed = character(event.keysym)
        chord = self.held & {"ctrl", "alt", "super"}
        if chord:
            name = NAMED_KEYS.get(event.keysym) or _key_name(typed)
            if name is None:
                self.out.skipped.append(f"a chord with keysym {event.keysym:#x} (no key name)")
                return
            self.hotkey(name, index)
            return
        if typed is not None:
            first = self.chord_from if self.chord_from is not None else index
            self.end_wheel()
            if not self.text:
                self.text_from = first
                self.chord_from = None
            self.text.append(typed)
            self.last_click = None
            return
        name = NAMED_KEYS.get(event.keysym)
        if name is None:
            self.out.skipped.append(f"keysym {event.keysym:#x} (no key of the action space)")
            return
        if name == "backspace" and self.text:
            self.text.pop()
            if not self.text:  # the whole run taken back: nothing was typed
                self.text_from = 0
            return
        if name == "enter" and self.text:
            self.text.append("\n")
            self.end_text()
            return
        self.hotkey(name, index)


def _key_name(typed: str | None) -> str | None:
    """A typed character as a hotkey's key (letters in lower case: Shift is in the chord)."""
    if typed is None:
        return None
    if typed == " ":
        return "space"
    return typed.lower() if len(typed) == 1 and typed.isascii() and typed.isprintable() else None


class StepStarts:
    """Online, as inputs come: whether each may be the first event of a step, so that the gate
    grabs the screen before it. Every step's ``first_event`` is such an input; a press that
    only continues the step already open (a key of a typing run, a wheel click joining its
    scroll, a key of a chord whose modifier began it) is not, and passes without a grab."""

    def __init__(self) -> None:
        self._reducer = _Reducer()
        self._index = 0

    def add(self, event: Event) -> bool:
        r = self._reducer
        starts = _may_start(r, event)
        if isinstance(event, Pointer):
            r.pointer(event, self._index)
        else:
            r.key(event, self._index)
        self._index += 1
        return starts


def _may_start(r: _Reducer, event: Event) -> bool:
    if isinstance(event, Pointer):
        pressed = event.buttons & ~r.buttons
        if pressed & (LEFT | MIDDLE | RIGHT):
            return True
        for bit, direction in WHEEL.items():
            if pressed & bit:
                if r.wheel is None:
                    return True
                same, point, last, amount, _ = r.wheel
                joins = (
                    same == direction
                    and dist(point, (event.x, event.y)) <= WHEEL_PX
                    and event.at - last <= WHEEL_GAP_S
                    and amount < MAX_SCROLL_AMOUNT
                )
                if not joins:
                    return True
        return False
    if not event.down:
        return False
    modifier = MODIFIERS.get(event.keysym)
    if modifier is not None:
        return r.chord_from is None and not (r.text and modifier == "shift")
    if r.held & {"ctrl", "alt", "super"}:
        return r.chord_from is None
    if character(event.keysym) is not None or (
        NAMED_KEYS.get(event.keysym) in ("backspace", "enter") and r.text
    ):
        return not r.text and r.chord_from is None
    return r.chord_from is None
