"""Settle detection: after an action, wait until the screen stops changing.

The rule. Frames are grabbed one after another, every ``poll_ms`` at most. Each grab is
compared with the previous one (plain equality of the raw pixels: a ``memcmp``). The screen is
*settled* when the frames grabbed over the last ``window_ms`` are all equal: the latest frame
was grabbed at least ``window_ms`` after the first grab that showed the same picture. Even on a
screen that never changes, the answer is not given before ``min_ms``, so that a program has
the time to start reacting to the action. After ``max_ms`` the wait ends without the screen
having settled (a video, a spinner, a blinking caret faster than the window), and the result
says so: the caller still gets the latest frame, taken as the observation.

On a static screen this returns after ``max(window_ms, min_ms)`` plus one grab, not after a
fixed multi-second sleep; a screen that animates for a while is waited out, up to ``max_ms``.
The frame type is the caller's: anything that compares with ``==``.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

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
    unchanged_since = grabbed_at
    while True:
        settled = grabbed_at - unchanged_since >= window and grabbed_at >= earliest
        if settled or grabbed_at >= latest:
            waited_ms = (time.monotonic() - start) * 1000
            return SettleResult(settled, waited_ms, frames, frame)
        # Grab again after poll_ms, or sooner when that is the moment the rule can be met.
        due = min(grabbed_at + poll_ms / 1000, max(unchanged_since + window, earliest), latest)
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        grabbed_at = time.monotonic()
        previous, frame = frame, grab()
        frames += 1
        if frame != previous:
            unchanged_since = grabbed_at
