"""Pointer and keyboard input on an X11 desktop, injected in-process through XTEST.

Every event is a ``fake_input`` request on one connection, so the server processes them in the
order they were sent; ``sync`` waits for a round trip, after which the server has handled all
of them. A click is a motion, a press and a release with no hold in between.

Typing maps each character to its keysym and the keysym to a keycode of the current keyboard
map (with Shift for a keysym on a key's second level). A character no key produces is typed by
borrowing a keycode (one with no keysym, then one that only carries multimedia keysyms): it is
mapped to the keysym, pressed, and given back when the input closes.

The catch is that a client translates a key press with the keyboard map it fetches *after*
the press reaches it: remap a keycode too early and an earlier press of it comes out as the
new character. So a borrowed keycode stays mapped while it may be needed again, and is only
remapped (when all of them are taken: least recently used first) or given back once its
presses have been read: the focused client answered a ``_NET_WM_PING`` sent after them (GTK,
Qt, browsers, Electron answer pings, in the order of their events), or, for a client that
does not take pings, ``REMAP_GRACE_S`` after its last press. About a hundred keycodes can be
borrowed, so a text needs that many distinct unmapped characters before any wait happens.
"""

import select
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from Xlib import XK, X
from Xlib.display import Display
from Xlib.ext import xtest
from Xlib.protocol import event

from vm_pool.actions import Direction, InvalidAction, Point

LEFT_BUTTON = 1
RIGHT_BUTTON = 3
SCROLL_BUTTONS = {Direction.UP: 4, Direction.DOWN: 5, Direction.LEFT: 6, Direction.RIGHT: 7}
# A drag moves the pointer in steps, with a short pause each, as a hand would: toolkits start a
# drag-and-drop only after motion events beyond a threshold.
DRAG_STEPS = 10
DRAG_STEP_S = 0.01
PING_TIMEOUT_S = 2.0
REMAP_GRACE_S = 0.5
# Keycodes that carry only these keysyms (volume, mail, browser keys…) may be borrowed for
# typing: no action of the space presses them. The desktop gets them back when input closes.
_MULTIMEDIA_KEYSYMS = frozenset(range(0x1008FF00, 0x10090000))

# Key names of the action space (``vm_pool.actions.KEY_NAMES``) whose X keysym has another name.
# Single characters, ``f1``…``f24`` and the punctuation names (``minus``, ``comma``…) need none.
X_KEYSYM_NAMES = {
    "ctrl": "Control_L",
    "alt": "Alt_L",
    "shift": "Shift_L",
    "super": "Super_L",
    "enter": "Return",
    "esc": "Escape",
    "tab": "Tab",
    "space": "space",
    "backspace": "BackSpace",
    "delete": "Delete",
    "insert": "Insert",
    "home": "Home",
    "end": "End",
    "pageup": "Prior",
    "pagedown": "Next",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "capslock": "Caps_Lock",
    "printscreen": "Print",
}
_TYPED_CONTROLS = {"\n": XK.XK_Return, "\t": XK.XK_Tab}
_UNICODE_KEYSYM = 0x01000000


def keysym_for_char(char: str) -> int:
    """The keysym that types ``char``: Latin-1 keysyms are the code point, others are the
    code point in X's Unicode keysym range. A newline is Return and a tab is Tab."""
    if char in _TYPED_CONTROLS:
        return _TYPED_CONTROLS[char]
    code = ord(char)
    if code < 0x20 or 0x7F <= code < 0xA0:
        raise InvalidAction(f"cannot type the control character U+{code:04X}")
    if code <= 0xFF:
        return code
    return _UNICODE_KEYSYM | code


def keysym_for_key(name: str) -> int:
    """The keysym of a key name of the action space (``ctrl``, ``f5``, ``c``, ``comma``…)."""
    if len(name) == 1:
        return keysym_for_char(name)
    x_name = X_KEYSYM_NAMES.get(name) or (name.upper() if name[0] == "f" else name)
    keysym = XK.string_to_keysym(x_name)
    if keysym == X.NoSymbol:
        raise InvalidAction(f"no X keysym for the key {name!r}")
    return keysym


class XTestInput:
    """Injects pointer and keyboard events into one X display. Not thread-safe: one user."""

    def __init__(self, display: Display) -> None:
        if not display.has_extension("XTEST"):
            raise RuntimeError("the X server has no XTEST extension")
        self.display = display
        first = display.display.info.min_keycode
        count = display.display.info.max_keycode - first + 1
        mapping = display.get_keyboard_mapping(first, count)
        # Keycodes that may be borrowed, with their keysyms to give back.
        self._originals: dict[int, tuple[int, ...]] = {}
        empty, multimedia = [], []
        for offset, keysyms in enumerate(mapping):
            symbols = {keysym for keysym in keysyms if keysym != X.NoSymbol}
            if not symbols:
                empty.append(first + offset)
            elif symbols <= _MULTIMEDIA_KEYSYMS:
                multimedia.append(first + offset)
            else:
                continue
            self._originals[first + offset] = tuple(keysyms)
        self._free = multimedia[::-1] + empty[::-1]  # empty keycodes are taken first
        # keysym -> (keycode, needs Shift) for the other keys; the first level wins.
        self._keys: dict[int, tuple[int, bool]] = {}
        for level in (0, 1):
            for offset, keysyms in enumerate(mapping):
                keysym = keysyms[level] if len(keysyms) > level else X.NoSymbol
                if keysym != X.NoSymbol and first + offset not in self._originals:
                    self._keys.setdefault(keysym, (first + offset, level == 1))
        # keysym -> (borrowed keycode, monotonic time of its last use), least recent first.
        self._borrowed: OrderedDict[int, tuple[int, float]] = OrderedDict()
        # Every key event sent before this monotonic time has been read by its client.
        self._handled_before = 0.0
        self._pings = 0
        self._shift = self._keycode(XK.XK_Shift_L)[0]

    # --- pointer ---------------------------------------------------------------------------

    def move(self, point: Point) -> None:
        xtest.fake_input(self.display, X.MotionNotify, x=point.x, y=point.y)

    def click(self, point: Point, button: int = LEFT_BUTTON, count: int = 1) -> None:
        self.move(point)
        for _ in range(count):
            xtest.fake_input(self.display, X.ButtonPress, button)
            xtest.fake_input(self.display, X.ButtonRelease, button)

    def drag(self, start: Point, end: Point) -> None:
        self.move(start)
        xtest.fake_input(self.display, X.ButtonPress, LEFT_BUTTON)
        for step in range(1, DRAG_STEPS + 1):
            self.display.flush()
            time.sleep(DRAG_STEP_S)
            x = start.x + (end.x - start.x) * step // DRAG_STEPS
            y = start.y + (end.y - start.y) * step // DRAG_STEPS
            self.move(Point(x, y))
        xtest.fake_input(self.display, X.ButtonRelease, LEFT_BUTTON)

    def scroll(self, point: Point, direction: Direction, amount: int) -> None:
        self.click(point, SCROLL_BUTTONS[direction], count=amount)

    # --- keyboard --------------------------------------------------------------------------

    def hotkey(self, keys: Iterable[str]) -> None:
        """Press the keys in order, then release them in reverse order."""
        names = list(keys)
        pressed: list[int] = []
        for name in names:
            keycode, needs_shift = self._keycode(keysym_for_key(name))
            if needs_shift and "shift" not in names and self._shift not in pressed:
                pressed.append(self._shift)
            pressed.append(keycode)
        for keycode in pressed:
            xtest.fake_input(self.display, X.KeyPress, keycode)
        for keycode in reversed(pressed):
            xtest.fake_input(self.display, X.KeyRelease, keycode)

    def type_text(self, text: str) -> None:
        """Type ``text`` character by character; each newline presses Return."""
        for char in text.replace("\r\n", "\n").replace("\r", "\n"):
            keycode, needs_shift = self._keycode(keysym_for_char(char))
            if needs_shift:
                xtest.fake_input(self.display, X.KeyPress, self._shift)
            xtest.fake_input(self.display, X.KeyPress, keycode)
            xtest.fake_input(self.display, X.KeyRelease, keycode)
            if needs_shift:
                xtest.fake_input(self.display, X.KeyRelease, self._shift)

    def sync(self) -> None:
        """Return once the server has processed every request sent so far."""
        self.display.sync()

    def close(self) -> None:
        """Give the borrowed keycodes back, once their last presses have been read."""
        if not self._borrowed:
            return
        self._wait_until_handled(max(used_at for _, used_at in self._borrowed.values()))
        for keycode, _ in self._borrowed.values():
            self.display.change_keyboard_mapping(keycode, [self._originals[keycode]])
        self._borrowed.clear()
        self.sync()

    def _keycode(self, keysym: int) -> tuple[int, bool]:
        if keysym in self._keys:
            return self._keys[keysym]
        # A lookup is followed at once by a press: it counts as the borrowed keycode's use.
        if keysym in self._borrowed:
            keycode = self._borrowed[keysym][0]
            self._borrowed[keysym] = (keycode, time.monotonic())
            self._borrowed.move_to_end(keysym)
            return keycode, False
        if self._free:
            keycode = self._free.pop()
        elif self._borrowed:
            _, (keycode, used_at) = self._borrowed.popitem(last=False)
            self._wait_until_handled(used_at)
        else:
            raise InvalidAction(f"no keycode can be borrowed to type keysym 0x{keysym:x}")
        # Both levels carry the keysym, so the Shift state cannot change what is typed.
        self.display.change_keyboard_mapping(keycode, [(keysym, keysym)])
        self._borrowed[keysym] = (keycode, time.monotonic())
        return keycode, False

    def _wait_until_handled(self, used_at: float) -> None:
        """Wait until the key events sent up to ``used_at`` have been read by their client:
        the focused client's answer to a ping, or else ``REMAP_GRACE_S`` after ``used_at``."""
        if used_at < self._handled_before:
            return
        asked_at = time.monotonic()
        if self._ping_focused_client():
            self._handled_before = asked_at
            return
        time.sleep(max(0.0, REMAP_GRACE_S - (time.monotonic() - used_at)))
        self._handled_before = time.monotonic() - REMAP_GRACE_S

    def _ping_focused_client(self) -> bool:
        """Ping the focused window's client (EWMH ``_NET_WM_PING``) and wait for its answer.

        A client reads its events in order, so its answer comes after it has read, and
        translated, every key event sent before the ping. False when the client does not
        take pings or did not answer within ``PING_TIMEOUT_S``.
        """
        client = self._focused_client()
        if client is None:
            return False
        self._pings += 1
        root = self.display.screen().root
        ping_atom = self.display.intern_atom("_NET_WM_PING")
        ping = event.ClientMessage(
            window=client,
            client_type=self.display.intern_atom("WM_PROTOCOLS"),
            data=(32, [ping_atom, self._pings, client.id, 0, 0]),
        )
        # The answer is sent to the root window, to whoever selected its substructure.
        root.change_attributes(event_mask=X.SubstructureNotifyMask)
        client.send_event(ping)
        self.display.flush()
        deadline = time.monotonic() + PING_TIMEOUT_S
        answered = False
        try:
            while not answered and time.monotonic() < deadline:
                if not self.display.pending_events():
                    select.select([self.display], [], [], deadline - time.monotonic())
                while not answered and self.display.pending_events():
                    got = self.display.next_event()
                    answered = got.type == X.ClientMessage and list(got.data[1][:3]) == [
                        ping_atom,
                        self._pings,
                        client.id,
                    ]
        finally:
            root.change_attributes(event_mask=X.NoEventMask)
            self.sync()
            while self.display.pending_events():
                self.display.next_event()
        return answered

    def _focused_client(self) -> Any:
        """The top-level window that has the keyboard focus, if it takes pings."""
        window = self.display.get_input_focus().focus
        root = self.display.screen().root
        ping_atom = self.display.intern_atom("_NET_WM_PING")
        while not isinstance(window, int) and window.id != root.id:
            protocols = window.get_wm_protocols()
            if protocols:
                return window if ping_atom in protocols else None
            window = window.query_tree().parent
        return None
