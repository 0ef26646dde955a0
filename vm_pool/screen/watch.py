"""Watching a desktop between an observation and the decision on it.

An observation is taken once the screen settles after an action, but programs may keep
changing the screen after that (a file dialog that starts drawing a second later, a page that
finishes loading). The annotator decides on what the screen shows when they decide, so the
step's observation must be that screen: while a step waits for its decision, its desktop is
watched, and when the screen changes the newer observation replaces the stored one (the
caller's ``on_change`` stores it, tells the browser and asks the model again).

The rule. One thread per process watches every registered desktop: every ``POLL_S`` it grabs a frame
of each and compares it with the frame of the stored observation. A difference counts when its
bounding box is at least ``compare.MIN_EXTENT_PX`` wide and high (a blinking text caret, one or two
pixels wide, does not). The screen is then let settle (``vm_pool.screen.settle``). A settled screen
the watch has already seen for this step (the observation's own, or one it settled on before) is a
toggle, not a change: a blinking border, a spinner or a cursor cycles through a few pictures, and
going back to one of them shows the person nothing new; the watch takes it as its
baseline and goes on. A screen it has not seen is handed to ``on_change``, which answers whether
to go on watching (the step may have been decided meanwhile: then the change is the decided
action's, not the step's; or its observation was replaced as often as it may be). A watch
also ends when ``still_open`` answers False or after ``MAX_WATCH_S``; ``still_open`` (a database
read) is asked only every ``OPEN_CHECK_S``, because the step's execution job stops the watch
itself and ``on_change`` refuses a decided step: it only clears watches of ended episodes.
A desktop reset or stopped under a watch ends it. Grabs go through the caller's ``grab``, which
takes the desktop's lock for the few milliseconds a grab lasts and answers None when a job holds
the desktop: then the watch looks again at the next poll; it never holds a lock while it waits.

Where the desktop's X server reports its damage (``vm_pool.screen.damage``, the watch's
``reports``), nothing is grabbed on a timer: the thread sleeps until a report comes, and looks at a
frame only once the box damaged since its last look is at least ``compare.MIN_EXTENT_PX`` wide and
high (a caret that blinks in place never makes it so; for now the reports' box counts every report
as the whole screen, so a frame is looked at for each, and the comparison ignores the caret); the
frame is then compared as above, and
the screen let settle from the reports. Damage is never less than what changed, so the frames that
are compared are the ones a poll would have found different; a watch whose reports close (its
connection was replaced) goes on by polling.
"""

import hashlib
import logging
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vm_pool.desktop import DesktopError
from vm_pool.screen.capture import Frame, PngEncoder
from vm_pool.screen.compare import MIN_EXTENT_PX, meaningful_change
from vm_pool.screen.damage import DamageLost, DamageReports
from vm_pool.screen.settle import SettleResult, wait_until_quiet, wait_until_settled

logger = logging.getLogger(__name__)

POLL_S = 0.1
OPEN_CHECK_S = 5.0
MAX_WATCH_S = 30 * 60.0
SETTLE_WINDOW_MS = 150.0
SETTLE_MAX_MS = 3000.0
BUSY_GRAB_WAIT_S = 0.2
SEEN_STATES = 32  # the pictures a watch remembers; a cycle longer than this is a video


def picture(frame: Frame) -> bytes:
    """A short digest of a frame's pixels: the same picture, the same digest."""
    return hashlib.blake2b(frame.pixels, digest_size=16).digest()


class _Busy(Exception):
    """A job took the desktop while the watch let the screen settle."""


@dataclass
class Watch:
    key: Any  # one watch per key (a step): registering again replaces it
    grab: Callable[[float], Frame | None]  # (seconds to wait for the desktop) → frame or None
    baseline: Frame
    on_change: Callable[[bytes, float], bool]  # (settled screen as PNG, ms waited) → go on?
    still_open: Callable[[], bool]
    started: float = field(default_factory=time.monotonic)
    checked: float = field(default_factory=time.monotonic)
    seen: dict[bytes, None] = field(default_factory=dict)  # pictures, oldest first
    reports: DamageReports | None = None  # the desktop's damage reports; None: poll frames
    busy: bool = False  # a job held the desktop when the watch last wanted a frame
    # The observation's own picture, digested once another one comes: most watches end with
    # their step's decision before the screen changed, and never need it (a digest reads the
    # whole frame, on the way from the observation to the model's request).
    first: Frame | None = None

    def __post_init__(self) -> None:
        self.first = self.baseline

    def remember(self, frame: Frame) -> bool:
        """Note a picture; whether it was seen before."""
        if self.first is not None:
            self.seen[picture(self.first)] = None
            self.first = None
        digest = picture(frame)
        if digest in self.seen:
            return True
        self.seen[digest] = None
        if len(self.seen) > SEEN_STATES:
            del self.seen[next(iter(self.seen))]
        return False


class ScreenWatcher:
    """The process's watcher thread and its watches."""

    def __init__(self) -> None:
        self._watches: dict[Any, Watch] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._wake_read, self._wake_write = -1, -1  # a pipe that wakes the thread, made with it
        self._encoder = PngEncoder()  # used by the watcher thread only

    def watch(self, watch: Watch) -> None:
        with self._lock:
            self._watches[watch.key] = watch
            if self._thread is None or not self._thread.is_alive():
                self._wake_read, self._wake_write = os.pipe()
                self._thread = threading.Thread(target=self._run, name="screen-watch", daemon=True)
                self._thread.start()
            else:
                os.write(self._wake_write, b"w")  # a sleeping thread takes the new watch in

    def stop(self, key: Any) -> None:
        with self._lock:
            self._watches.pop(key, None)

    def watching(self) -> list[Any]:
        with self._lock:
            return list(self._watches)

    def _run(self) -> None:
        while True:
            with self._lock:
                watches = list(self._watches.values())
            reported = {}
            for watch in watches:
                if watch.reports is not None and watch.reports.closed:
                    watch.reports = None  # its connection was replaced: poll from now on
                if watch.reports is not None and not watch.busy:
                    reported[watch.reports.fileno()] = watch
            polled = len(reported) < len(watches)
            try:
                ready, _, _ = select.select(
                    [self._wake_read, *reported], [], [], POLL_S if polled else OPEN_CHECK_S
                )
            except (OSError, ValueError):  # a connection closed meanwhile: looked at next turn
                ready = []
            if self._wake_read in ready:
                os.read(self._wake_read, 4096)
            woken = {id(reported[fd]) for fd in ready if fd in reported}
            now = time.monotonic()
            for watch in watches:
                # A box read by another reader (a job's settle) wakes nobody: it is due too.
                reports = watch.reports
                due = id(watch) in woken or reports is None or watch.busy
                due = due or (reports is not None and reports.damaged() is not None)
                if not due and now - watch.checked <= OPEN_CHECK_S:
                    continue
                try:
                    if not self._step(watch):
                        self.stop(watch.key)
                except DesktopError as error:  # reset or stopped under the watch: it ends
                    logger.info("the watch of %s ends: %s", watch.key, error)
                    self.stop(watch.key)
                except Exception:  # anything else ends its watch too, never the thread
                    logger.exception("watching %s failed; the watch ends", watch.key)
                    self.stop(watch.key)
            if polled:
                time.sleep(max(0.0, now + POLL_S - time.monotonic()))

    def _step(self, watch: Watch) -> bool:
        now = time.monotonic()
        if now - watch.started > MAX_WATCH_S:
            return False
        if now - watch.checked > OPEN_CHECK_S:
            watch.checked = now
            if not watch.still_open():
                return False
        reports, box = watch.reports, None
        if reports is not None:
            try:
                reports.read()
            except DamageLost:  # its connection was replaced: poll from now on
                watch.reports = reports = None
        if reports is not None:
            damaged = reports.damaged()
            if damaged is None or not damaged.at_least(MIN_EXTENT_PX):
                return True  # nothing, or a caret's blink: no frame to look at
            box = reports.take_box()
        frame = watch.grab(0.0)
        if frame is None:  # a job is using the desktop: look again at the next poll
            if reports is not None:
                reports.give_back(box)
            watch.busy = True
            return True
        watch.busy = False
        if not meaningful_change(watch.baseline, frame):
            # A grabbed frame compares byte for byte with the next grabs (a decoded PNG's
            # padding bytes may differ from the server's): the fast comparison from now on.
            if frame.pixels != watch.baseline.pixels:
                watch.remember(frame)
            watch.baseline = frame
            return True

        def grab() -> Frame:
            grabbed = watch.grab(BUSY_GRAB_WAIT_S)
            if grabbed is None:
                raise _Busy
            return grabbed

        started = time.monotonic()
        try:
            settled: SettleResult[Frame]
            if reports is not None and not reports.closed:
                settled = wait_until_quiet(
                    reports, grab, window_ms=SETTLE_WINDOW_MS, min_ms=0, max_ms=SETTLE_MAX_MS
                )
            else:
                settled = wait_until_settled(
                    grab, window_ms=SETTLE_WINDOW_MS, min_ms=0, max_ms=SETTLE_MAX_MS
                )
        except _Busy:  # decided meanwhile, most likely: still_open will tell
            return True
        waited_ms = (time.monotonic() - started) * 1000
        if watch.remember(settled.frame):  # back to a picture seen already: a toggle
            watch.baseline = settled.frame
            return True
        watch.baseline = settled.frame
        return watch.on_change(self._encoder.encode(settled.frame), waited_ms)


watcher = ScreenWatcher()
