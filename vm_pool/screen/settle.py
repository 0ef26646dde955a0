"""Settle detection: after an action, wait until the screen stops changing.

The rule. Frames are grabbed one after another, every ``poll_ms`` at most. Each grab is
compared with the previous one (plain equality of the raw pixels: a ``memcmp``). The screen is
*settled* when the frames grabbed over the last ``window_ms`` are all equal: the latest frame
was grabbed at least ``window_ms`` after the first grab that showed the same picture. On a screen
that has not changed since the call, the answer is not given before ``min_ms`` either: the time a
program takes to start drawing its reaction to the action. A screen that changed and went still
for ``window_ms`` has reacted and is settled then, whatever ``min_ms``. After ``max_ms`` the wait
ends without the screen having settled (a video, a spinner, a blinking caret faster than the
window), and the result says so: the caller still gets the latest frame, taken as the
observation.

On a static screen this returns after ``max(window_ms, min_ms)`` plus one grab, not after a
fixed multi-second sleep; a screen that animates for a while is waited out, up to ``max_ms``.
The frame type is the caller's: anything that compares with ``==``. ``tests/bench/reaction.py``
measures the programs' reaction times and replays them under this rule for each ``min_ms`` and
``window_ms``.

Where the X server reports its damage (``vm_pool.screen.damage``), ``wait_until_quiet`` keeps the
same rule and learns the changes from the reports instead of from frames: a report is a change,
dated when it is read; the screen is settled when no report came for ``window_ms``, and, unless
something at least ``compare.MIN_EXTENT_PX`` wide and high was drawn since the call (a caret's
blink is no reaction), not before ``min_ms``; before answering, a round trip makes sure that no
report is still on its way, and one frame is grabbed: the observation. Its ``frames`` count the
pictures compared: the one at the start, one per report read, and the frame grabbed; ``grabs``
the frames grabbed.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from vm_pool.screen.damage import Box

DEFAULT_WINDOW_MS = 150.0
DEFAULT_MIN_MS = 100.0
DEFAULT_MAX_MS = 3000.0
DEFAULT_POLL_MS = 20.0

FrameT = TypeVar("FrameT")


@dataclass(frozen=True)
class SettleResult(Generic[FrameT]):
    settled: bool  # False: max_ms passed while the screen was still changing
    waited_ms: float  # from the call to the return
    frames: int  # frames grabbed and compared
    frame: FrameT  # the latest frame: what the screen shows now
    grabs: int  # frames grabbed: ``frames`` where frames are compared, one with damage reports


class ChangeReports(Protocol):
    """What the server tells of a display's changes (``vm_pool.screen.damage.DamageReports``)."""

    def read(self, sync: bool = False) -> float: ...

    def wait(self, timeout_s: float) -> float: ...

    def take_box(self) -> Box | None: ...

    @property
    def drawn_at(self) -> float: ...


def wait_until_settled(
    grab: Callable[[], FrameT],
    *,
    window_ms: float = DEFAULT_WINDOW_MS,
    min_ms: float = DEFAULT_MIN_MS,
    max_ms: float = DEFAULT_MAX_MS,
    poll_ms: float = DEFAULT_POLL_MS,
) -> SettleResult[FrameT]:
    """Grab frames with ``grab`` until the screen has settled or ``max_ms`` has passed."""
    if not 0 <= min_ms <= max_ms or window_ms <= 0 or poll_ms <= 0:
        raise ValueError("settle needs 0 <= min_ms <= max_ms and positive window_ms, poll_ms")
    start = time.monotonic()
    window, earliest, latest = window_ms / 1000, start + min_ms / 1000, start + max_ms / 1000
    grabbed_at = time.monotonic()
    frame = grab()
    frames = 1
    unchanged_since, reacted = grabbed_at, False  # reacted: a change seen since the call
    while True:
        settled = grabbed_at - unchanged_since >= window and (reacted or grabbed_at >= earliest)
        if settled or grabbed_at >= latest:
            waited_ms = (time.monotonic() - start) * 1000
            return SettleResult(settled, waited_ms, frames, frame, frames)
        # Grab again after poll_ms, or sooner when that is the moment the rule can be met.
        ready = unchanged_since + window if reacted else max(unchanged_since + window, earliest)
        due = min(grabbed_at + poll_ms / 1000, ready, latest)
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        grabbed_at = time.monotonic()
        previous, frame = frame, grab()
        frames += 1
        if frame != previous:
            unchanged_since, reacted = grabbed_at, True


def wait_until_quiet(
    reports: ChangeReports,
    grab: Callable[[], FrameT],
    *,
    window_ms: float = DEFAULT_WINDOW_MS,
    min_ms: float = DEFAULT_MIN_MS,
    max_ms: float = DEFAULT_MAX_MS,
) -> SettleResult[FrameT]:
    """The settle rule measured from the server's damage reports; one frame grabbed, at the
    end (see the module)."""
    if not 0 <= min_ms <= max_ms or window_ms <= 0:
        raise ValueError("settle needs 0 <= min_ms <= max_ms and a positive window_ms")
    reports.read()  # what was drawn before the call is in the picture the rule starts from
    start = time.monotonic()
    window, earliest, latest = window_ms / 1000, start + min_ms / 1000, start + max_ms / 1000
    unchanged_since, pictures = start, 1
    while True:
        now = time.monotonic()
        reacted = reports.drawn_at > start  # more than a caret was drawn since the call
        quiet = now - unchanged_since >= window and (reacted or now >= earliest)
        if quiet or now >= latest:
            changed_at = reports.read(sync=True)  # nothing drawn before now is still on its way
            if changed_at > unchanged_since:
                unchanged_since, pictures, quiet = changed_at, pictures + 1, False
                if now < latest:
                    continue
            reports.take_box()  # what was drawn so far is in the frame grabbed now
            frame = grab()
            waited_ms = (time.monotonic() - start) * 1000
            return SettleResult(quiet, waited_ms, pictures + 1, frame, 1)
        ready = unchanged_since + window if reacted else max(unchanged_since + window, earliest)
        changed_at = reports.wait(min(ready, latest) - now)
        if changed_at > unchanged_since:
            unchanged_since, pictures = changed_at, pictures + 1
