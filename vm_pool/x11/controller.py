"""The desktop controller of the ``local`` provider: actions and observations on an X display.

``X11Controller`` connects to the display once and does everything in-process: actions go
through XTEST (``vm_pool.x11.xtest``), frames come through MIT-SHM and are encoded as PNG
(``vm_pool.screen.capture``), and an observation waits for the screen to settle
(``vm_pool.screen.settle``): from the server's damage reports where it gives them
(``vm_pool.screen.damage``, on a connection of their own), one frame grabbed then; from frames
compared where it does not. When ``execute`` returns, the X server has processed every event of the
action; what the programs do with them is what settle detection waits for.

Per action type: ``click``, ``left_double`` and ``right_single`` move the pointer and press and
release at once; ``drag`` holds the left button over a few motion steps; ``scroll`` turns the
wheel ``amount`` clicks at the point; ``type`` types the text, each newline pressing Return
and a trailing one submitting once the program has taken in the text (``vm_pool.x11.xtest``);
``hotkey`` holds the keys in order and releases them in reverse. ``wait`` pauses for
``wait_s`` (one second by default): the model asks for it when something is loading that may
not show on the screen, so settle detection alone would not wait. ``finished`` and
``call_user`` end the episode and do nothing on the desktop. Android actions are refused.

Every action is bounded: ``execute`` returns, or raises, within ``ACTION_TIMEOUT_S``. The
arguments are capped by the action space (``vm_pool.actions.space``: type length, scroll clicks,
hotkey keys; points on the screen), a drag takes ``DRAG_STEPS`` fixed steps, a wait is at most
the bound, and typing goes at the pace its program reads it, each wait cut short at the
action's deadline. A type that cannot finish by then (the program stopped reading its input)
raises ``InputTimeout``, a ``DesktopError``: the step fails rather than being recorded as done.
"""

import time
from types import TracebackType

from Xlib.display import Display

from vm_pool.actions import ACTION_TIMEOUT_S, Action, ActionType, Platform
from vm_pool.desktop import KeyInput, Observation, PointerInput
from vm_pool.screen.capture import Frame, PngEncoder, ScreenGrabber
from vm_pool.screen.damage import DamageLost, DamageReports, damage_reports
from vm_pool.screen.settle import (
    DEFAULT_MAX_MS,
    DEFAULT_MIN_MS,
    DEFAULT_WINDOW_MS,
    SettleResult,
    wait_until_quiet,
    wait_until_settled,
)
from vm_pool.x11.xtest import RIGHT_BUTTON, XTestInput

WAIT_S = 1.0


class X11Controller:
    """Executes actions on one X display and observes it. Not thread-safe: one user at a time."""

    def __init__(
        self,
        display: str,
        *,
        wait_s: float = WAIT_S,
        settle_window_ms: float = DEFAULT_WINDOW_MS,
        settle_min_ms: float = DEFAULT_MIN_MS,
    ) -> None:
        if not 0 <= wait_s <= ACTION_TIMEOUT_S:
            raise ValueError(f"wait_s must be between 0 and {ACTION_TIMEOUT_S}, not {wait_s}")
        self.display = display
        self.wait_s = wait_s
        self.settle_window_ms = settle_window_ms
        self.settle_min_ms = settle_min_ms
        self._closed = False
        self._x = Display(display)
        try:
            self._input = XTestInput(self._x)
            self._grabber = ScreenGrabber(display)
            self._encoder = PngEncoder()
            self.damage: DamageReports | None = damage_reports(display)
        except Exception:
            self._x.close()
            raise
        self.screen = self._grabber.size

    def execute(self, action: Action) -> None:
        """Run one action within ``ACTION_TIMEOUT_S``; raises ``InvalidAction`` for an Android
        action or a point off the screen, before anything happens on the desktop, and
        ``InputTimeout`` for typing the focused program did not read in time."""
        action.validate(Platform.DESKTOP, self.screen)
        self._read_damage()  # what was drawn before the action is dated before it
        deadline = time.monotonic() + ACTION_TIMEOUT_S
        # An Action always carries the arguments of its type: the asserts only narrow types.
        match action.type:
            case ActionType.CLICK:
                assert action.point is not None
                self._input.click(action.point)
            case ActionType.LEFT_DOUBLE:
                assert action.point is not None
                self._input.click(action.point, count=2)
            case ActionType.RIGHT_SINGLE:
                assert action.point is not None
                self._input.click(action.point, RIGHT_BUTTON)
            case ActionType.DRAG:
                assert action.point is not None and action.end is not None
                self._input.drag(action.point, action.end)
            case ActionType.SCROLL:
                assert action.point is not None and action.direction is not None
                self._input.scroll(action.point, action.direction, action.amount or 1)
            case ActionType.TYPE:
                self._input.type_text(action.content or "", deadline)
            case ActionType.HOTKEY:
                self._input.hotkey(action.keys or (), deadline)
            case ActionType.WAIT:
                time.sleep(self.wait_s)
        self._input.sync()

    def inject(self, event: PointerInput | KeyInput) -> None:
        """Pass one pointer or key event of a person driving the desktop, as it came."""
        if isinstance(event, PointerInput):
            x = min(max(event.x, 0), self.screen.width - 1)
            y = min(max(event.y, 0), self.screen.height - 1)
            self._input.pointer_state(x, y, event.buttons & 0x7F)
        else:
            self._input.key_state(event.keysym, event.down, time.monotonic() + ACTION_TIMEOUT_S)

    def grab_frame(self, cursor: bool = True) -> Frame:
        """The screen as it is now, raw; with the cursor drawn in unless ``cursor`` is False."""
        return self._grabber.grab(cursor)

    def screenshot(self) -> bytes:
        """The screen as it is now, as PNG with the cursor drawn in."""
        return self._encoder.encode(self._grabber.grab())

    def encode_png(self, frame: Frame) -> bytes:
        """A grabbed frame as lossless PNG."""
        return self._encoder.encode(frame)

    def settle(
        self,
        *,
        window_ms: float = DEFAULT_WINDOW_MS,
        min_ms: float = DEFAULT_MIN_MS,
        max_ms: float = DEFAULT_MAX_MS,
    ) -> SettleResult[Frame]:
        """Wait until the screen stops changing (see ``vm_pool.screen.settle`` for the rule)."""
        if self.damage is not None:
            try:
                return wait_until_quiet(
                    self.damage,
                    self._grabber.grab,
                    window_ms=window_ms,
                    min_ms=min_ms,
                    max_ms=max_ms,
                )
            except DamageLost:
                self._lose_damage()
        return wait_until_settled(
            self._grabber.grab, window_ms=window_ms, min_ms=min_ms, max_ms=max_ms
        )

    def _read_damage(self) -> None:
        """Read the damage reports that came, with a round trip: drawn before now, dated now."""
        if self.damage is not None:
            try:
                self.damage.read(sync=True)
            except DamageLost:
                self._lose_damage()

    def _lose_damage(self) -> None:
        """This connection's damage reports are gone: frames are compared from now on."""
        if self.damage is not None:
            self.damage.close()
            self.damage = None

    def observe(self, settle: bool = True) -> Observation:
        """A PNG observation, taken once the screen has settled unless ``settle`` is False."""
        if not settle:
            return Observation(png=self.screenshot(), screen=self.screen)
        result = self.settle(window_ms=self.settle_window_ms, min_ms=self.settle_min_ms)
        started = time.perf_counter()
        png = self._encoder.encode(result.frame)
        encode_ms = (time.perf_counter() - started) * 1000
        return Observation(
            png=png,
            screen=self.screen,
            settled=result.settled,
            waited_ms=result.waited_ms,
            extra={
                "frames": float(result.frames),
                "grabs": float(result.grabs),
                "encode_ms": encode_ms,
            },
            frame=result.frame,
        )

    def close(self) -> None:
        """Give back borrowed keycodes and close the connections. Closing twice is fine."""
        if self._closed:
            return
        self._closed = True
        try:
            self._input.close()
        finally:
            self._grabber.close()
            self._x.close()
            if self.damage is not None:
                self.damage.close()

    def __enter__(self) -> "X11Controller":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
