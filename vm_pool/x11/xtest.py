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

Typing is paced by the program that reads it: the text goes out in chunks of
``TYPE_CHUNK_CHARS``, and the next chunk only once the focused client answered a ping sent after
the last one (or, for a client that takes no pings, once the server has processed it), so a
program that answers pings never has more than a chunk waiting. The keycodes a chunk borrows are
mapped before it in one go (a request per run of consecutive keycodes), since every keymap
change makes every client reload its keymap; a chunk ends early rather than need more keycodes
than can be borrowed.

A trailing newline is a submit, and it is pressed as a person presses it: after the program
has taken in the text (a ping) and ``SUBMIT_PAUSE_S`` more. Programs act on typed text after a
delay of their own; GTK's file chooser, for one, makes its Save button sensitive (the default
that Return activates) 150 ms after the name last changed, so a Return that follows the name at
once falls on an insensitive button and is lost. Newlines inside the text are typed without a
pause: they are line breaks, not submits.

Each action that waits is given a deadline (``time.monotonic()``): every wait is cut short at
it, and typing raises ``InputTimeout`` before the next chunk once it has passed (and rather than
remap a keycode early), so an action never outlives its deadline by more than the sending of
one chunk (milliseconds).
"""

import select
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

from Xlib import XK, X
from Xlib.display import Display
from Xlib.ext import xtest
from Xlib.protocol import event

from vm_pool.actions import Direction, InvalidAction, Point
from vm_pool.desktop import DesktopError

LEFT_BUTTON = 1
RIGHT_BUTTON = 3
SCROLL_BUTTONS = {Direction.UP: 4, Direction.DOWN: 5, Direction.LEFT: 6, Direction.RIGHT: 7}
# A drag moves the pointer in steps, with a short pause each, as a hand would: toolkits start a
# drag-and-drop only after motion events beyond a threshold.
DRAG_STEPS = 10
DRAG_STEP_S = 0.01
PING_TIMEOUT_S = 2.0
REMAP_GRACE_S = 0.5
# Characters typed between two waits for the program to read them: large enough that the waits
# cost little (a ping is a millisecond or two), small enough that a chunk is read at once.
TYPE_CHUNK_CHARS = 100
# The pause before a submitting newline, after the text before it has been read: twice the
# longest delay we know of a program acting on typed text (GTK's file chooser, 150 ms).
SUBMIT_PAUSE_S = 0.3
# A window manager's own combinations (openbox's Alt+Tab window switcher): it takes the keyboard
# with an active grab once it has read the key's press, and ends the switch when it sees the
# modifier's release. Released at once, the modifier goes to the window instead, the switcher
# stays up with the keyboard, and every key after it is swallowed. So such a combination is
# held as a hand holds it, and its key released before its modifiers.
MODIFIERS = frozenset({"ctrl", "alt", "shift", "super"})
WINDOW_MANAGER_KEYS = frozenset({"tab"})
WINDOW_MANAGER_HOLD_S = 0.1
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


class InputTimeout(DesktopError):
    """Input did not finish by its deadline: the focused program stopped reading it."""


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
        self._shift = self._keycode(XK.XK_Shift_L, time.monotonic() + PING_TIMEOUT_S)[0]
        self._held_buttons = 0  # the RFB button mask a person's events left pressed
        self._person_shift = False  # the person holds a Shift key
        self._shifted: set[int] = set()  # keys pressed inside a Shift of the input's own

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

    def pointer_state(self, x: int, y: int, buttons: int) -> None:
        """Put the pointer where a person's RFB pointer event says, with its buttons (RFB's
        mask: bit n is button n + 1) pressed or released to match."""
        xtest.fake_input(self.display, X.MotionNotify, x=x, y=y)
        changed = buttons ^ self._held_buttons
        for bit in range(8):
            if changed & (1 << bit):
                kind = X.ButtonPress if buttons & (1 << bit) else X.ButtonRelease
                xtest.fake_input(self.display, kind, bit + 1)
        self._held_buttons = buttons
        self.display.flush()

    def key_state(self, keysym: int, down: bool, deadline: float) -> None:
        """Press or release the key of ``keysym``, as a person's RFB key event says. The keysym
        is the one the person's keyboard made: a character on a key's shifted level sent while
        the person holds no Shift (a client that sends characters, not keys) is pressed inside
        a Shift of its own, so that the desktop gets that character."""
        keycode, needs_shift = self._keycode(keysym, deadline)
        if keysym in (XK.XK_Shift_L, XK.XK_Shift_R):
            self._person_shift = down
        shifted = needs_shift and not self._person_shift
        if down and shifted:
            xtest.fake_input(self.display, X.KeyPress, self._shift)
        xtest.fake_input(self.display, X.KeyPress if down else X.KeyRelease, keycode)
        if down and shifted:
            self._shifted.add(keycode)
        if not down and keycode in self._shifted:
            self._shifted.discard(keycode)
            xtest.fake_input(self.display, X.KeyRelease, self._shift)
        self.display.flush()

    # --- keyboard --------------------------------------------------------------------------

    def hotkey(self, keys: Iterable[str], deadline: float) -> None:
        """Press the keys in order, then release them in reverse order; a window manager's
        combination is held, and its modifiers released last (see ``WINDOW_MANAGER_KEYS``)."""
        names = list(keys)
        pressed: list[int] = []
        for name in names:
            keycode, needs_shift = self._keycode(keysym_for_key(name), deadline)
            if needs_shift and "shift" not in names and self._shift not in pressed:
                pressed.append(self._shift)
            pressed.append(keycode)
        for keycode in pressed:
            xtest.fake_input(self.display, X.KeyPress, keycode)
        if not (WINDOW_MANAGER_KEYS & set(names) and MODIFIERS & set(names)):
            for keycode in reversed(pressed):
                xtest.fake_input(self.display, X.KeyRelease, keycode)
            return
        modifiers = [self._keycode(keysym_for_key(n), deadline)[0] for n in names if n in MODIFIERS]
        self._hold(deadline)
        for keycode in reversed([k for k in pressed if k not in modifiers]):
            xtest.fake_input(self.display, X.KeyRelease, keycode)
        self._hold(deadline)
        for keycode in reversed(modifiers):
            xtest.fake_input(self.display, X.KeyRelease, keycode)

    def _hold(self, deadline: float) -> None:
        """Let the server and the window manager handle what was sent before going on."""
        self.sync()
        time.sleep(max(0.0, min(WINDOW_MANAGER_HOLD_S, deadline - time.monotonic())))

    def type_text(self, text: str, deadline: float) -> None:
        """Type ``text`` character by character, in chunks the program has read before the next
        goes out; each newline presses Return, and a trailing one submits (see the module)."""
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        keysyms = [keysym_for_char(char) for char in text]  # refuses before typing anything
        body, submit = (keysyms[:-1], True) if text.endswith("\n") else (keysyms, False)
        for number, chunk in enumerate(self._chunks(body)):
            if number:
                self._wait_until_read(deadline)
            self._check_deadline(deadline)
            self._borrow(chunk, deadline)
            for keysym in chunk:
                self._press(keysym, deadline)
        if submit:
            if body:
                self._wait_until_read(deadline)
                time.sleep(max(0.0, min(SUBMIT_PAUSE_S, deadline - time.monotonic())))
                # Read by the program after the pause: its timers of the pause have fired.
                self._wait_until_read(deadline)
            self._check_deadline(deadline)
            self._press(XK.XK_Return, deadline)

    def sync(self) -> None:
        """Return once the server has processed every request sent so far."""
        self.display.sync()

    def close(self) -> None:
        """Give the borrowed keycodes back, once their last presses have been read."""
        if not self._borrowed:
            return
        last_used = max(used_at for _, used_at in self._borrowed.values())
        self._wait_until_handled(last_used, time.monotonic() + PING_TIMEOUT_S)
        self._map({keycode: self._originals[keycode] for keycode, _ in self._borrowed.values()})
        self._borrowed.clear()
        self.sync()

    def _chunks(self, keysyms: list[int]) -> Iterator[list[int]]:
        """``keysyms`` cut into chunks of at most ``TYPE_CHUNK_CHARS``, each needing no more
        keycodes to borrow than there are."""
        chunk: list[int] = []
        unmapped: set[int] = set()
        for keysym in keysyms:
            new = keysym not in self._keys and keysym not in unmapped
            full = len(chunk) == TYPE_CHUNK_CHARS or (new and len(unmapped) == len(self._originals))
            if chunk and full:
                yield chunk
                chunk, unmapped = [], set()
            chunk.append(keysym)
            if keysym not in self._keys:
                unmapped.add(keysym)
        if chunk:
            yield chunk

    def _press(self, keysym: int, deadline: float) -> None:
        keycode, needs_shift = self._keycode(keysym, deadline)
        if needs_shift:
            xtest.fake_input(self.display, X.KeyPress, self._shift)
        xtest.fake_input(self.display, X.KeyPress, keycode)
        xtest.fake_input(self.display, X.KeyRelease, keycode)
        if needs_shift:
            xtest.fake_input(self.display, X.KeyRelease, self._shift)

    def _keycode(self, keysym: int, deadline: float) -> tuple[int, bool]:
        if keysym in self._keys:
            return self._keys[keysym]
        self._borrow([keysym], deadline)
        # A lookup is followed at once by a press: it counts as the borrowed keycode's use.
        keycode = self._borrowed[keysym][0]
        self._borrowed[keysym] = (keycode, time.monotonic())
        self._borrowed.move_to_end(keysym)
        return keycode, False

    def _borrow(self, keysyms: list[int], deadline: float) -> None:
        """Map each of ``keysyms`` that no key produces to a borrowed keycode, all in one go:
        every keymap change makes each client reload its keymap, so they are batched."""
        needed = dict.fromkeys(keysyms)  # in order: the first typed is borrowed first
        unmapped = [keysym for keysym in needed if keysym not in self._keys]
        missing = [keysym for keysym in unmapped if keysym not in self._borrowed]
        if not missing:
            return
        if len(unmapped) > len(self._originals):
            raise InvalidAction(
                f"cannot type {len(unmapped)} characters that are on no key at once:"
                f" {len(self._originals)} keycodes can be borrowed"
            )
        lent: dict[int, tuple[int, ...]] = {}
        last_use = 0.0
        for keysym in missing:
            if self._free:
                keycode = self._free.pop()
            else:
                # The least recently used keycode this batch does not need.
                taken = next(k for k in self._borrowed if k not in needed)
                keycode, used_at = self._borrowed.pop(taken)
                last_use = max(last_use, used_at)
            # Both levels carry the keysym, so the Shift state cannot change what is typed.
            lent[keycode] = (keysym, keysym)
        if last_use:
            self._wait_until_handled(last_use, deadline)
            self._check_deadline(deadline)  # a wait cut short: remapping could change a press
        self._map(lent)
        now = time.monotonic()
        for keycode, (keysym, _) in lent.items():
            self._borrowed[keysym] = (keycode, now)

    def _map(self, keysyms: dict[int, tuple[int, ...]]) -> None:
        """Map keycodes to keysyms, one request per run of consecutive keycodes."""
        run: list[int] = []
        for keycode in sorted(keysyms):
            if run and keycode != run[-1] + 1:
                self._map_run(run, keysyms)
                run = []
            run.append(keycode)
        if run:
            self._map_run(run, keysyms)

    def _map_run(self, run: list[int], keysyms: dict[int, tuple[int, ...]]) -> None:
        width = max(len(keysyms[keycode]) for keycode in run)
        rows = [keysyms[k] + (X.NoSymbol,) * (width - len(keysyms[k])) for k in run]
        self.display.change_keyboard_mapping(run[0], rows)

    def _wait_until_handled(self, used_at: float, deadline: float) -> None:
        """Wait until the key events sent up to ``used_at`` have been read by their client:
        the focused client's answer to a ping, or else ``REMAP_GRACE_S`` after ``used_at``;
        no later than ``deadline``."""
        if used_at < self._handled_before:
            return
        if self._wait_until_read(deadline):
            return
        grace_ends = min(used_at + REMAP_GRACE_S, deadline)
        time.sleep(max(0.0, grace_ends - time.monotonic()))
        self._handled_before = time.monotonic() - REMAP_GRACE_S

    def _wait_until_read(self, deadline: float) -> bool:
        """Wait until the focused client has read every event sent so far; False when it
        does not take pings or did not answer by ``deadline``."""
        asked_at = time.monotonic()
        timeout = min(PING_TIMEOUT_S, deadline - asked_at)
        if timeout <= 0 or not self._ping_focused_client(timeout):
            self.sync()
            return False
        self._handled_before = asked_at
        return True

    def _check_deadline(self, deadline: float) -> None:
        if time.monotonic() >= deadline:
            raise InputTimeout(
                "typing did not finish in time: the focused program stopped reading its input,"
                " or reads it too slowly"
            )

    def _ping_focused_client(self, timeout: float) -> bool:
        """Ping the focused window's client (EWMH ``_NET_WM_PING``) and wait for its answer.

        A client reads its events in order, so its answer comes after it has read, and
        translated, every key event sent before the ping. False when the client does not
        take pings or did not answer within ``timeout`` seconds.
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
        deadline = time.monotonic() + timeout
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
