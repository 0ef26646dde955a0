"""The X server's own reports of what changed on a display (the DAMAGE extension), so that
waiting for a still screen and watching it need no frames grabbed on a timer.

One connection per display, its own: python-xlib's event queue is per connection, and the input
connection's ping reads and drops the events it does not want. A damage object on the root
window reports every drawing on the screen by any client, at the bounding-box level; after each
read the damage is subtracted, so that the next drawing reports again. A change is dated when it
is read, never earlier: a drawing inside a box already reported, made before the subtraction,
is not reported on its own, and reading promptly bounds how late that dating can be. The
pointer is not drawn into the screen (the server's cursor is a sprite): a change of its image is
reported through XFixes and counts as a change of the whole screen (its place is not reported),
so that whoever reads the box looks at a frame.

Two readers may share one display's reports: a job's settle (``vm_pool.screen.settle``) and the
watcher thread (``vm_pool.screen.watch``). Each read updates the things they ask, kept apart so
that neither takes the other's: the moment of the latest change, the moment of the latest
drawing larger than a caret (``drawn_at``: a program's reaction, and what a settle asks of the
reports since its start), and the damaged box since the box was last taken (the watch's, and a
settle's frame). A desktop's control reads the reports right before each action, so that what
was drawn before it is never dated after it. Safe to use from several threads.
"""

import select
import threading
import time
from dataclasses import dataclass

from Xlib.display import Display
from Xlib.error import ConnectionClosedError, DisplayError, XError
from Xlib.ext import damage, xfixes

from vm_pool.desktop import DesktopError
from vm_pool.screen.compare import MIN_EXTENT_PX


@dataclass(frozen=True)
class Box:
    """A rectangle of the screen, in pixels."""

    x: int
    y: int
    width: int
    height: int

    def at_least(self, extent: int) -> bool:
        """Whether the box is at least ``extent`` pixels wide and high (``compare.MIN_EXTENT_PX``:
        more than a blinking caret)."""
        return min(self.width, self.height) >= extent

    def union(self, other: "Box | None") -> "Box":
        if other is None:
            return self
        left, top = min(self.x, other.x), min(self.y, other.y)
        right = max(self.x + self.width, other.x + other.width)
        bottom = max(self.y + self.height, other.y + other.height)
        return Box(left, top, right - left, bottom - top)


class DamageLost(DesktopError):
    """The connection the reports came on is lost (the X server is gone, or it was closed)."""


class DamageReports:
    """The damage reports of one X display. ``reports`` counts the reads that found a change."""

    def __init__(self, display: str) -> None:
        self._x = Display(display)
        try:
            if not self._x.has_extension("DAMAGE") or not self._x.has_extension("XFIXES"):
                raise DesktopError(f"the X server at {display} has no DAMAGE or XFIXES extension")
            # Both extensions refuse every request of a client that did not ask their version.
            self._x.damage_query_version()
            self._x.xfixes_query_version()
            screen = self._x.screen()
            self._screen = Box(0, 0, screen.width_in_pixels, screen.height_in_pixels)
            root = screen.root
            self._damage = root.damage_create(damage.DamageReportBoundingBox)
            self._x.xfixes_select_cursor_input(root, xfixes.XFixesDisplayCursorNotifyMask)
            self._x.sync()
        except Exception:
            self._x.close()
            raise
        self._lock = threading.Lock()
        self._box: Box | None = None
        self.changed_at = time.monotonic()  # the latest change read
        # The latest read that found a drawing larger than a caret (``compare.MIN_EXTENT_PX``
        # wide and high): a program's reaction, where a caret's blink or the pointer is none.
        self.drawn_at = self.changed_at
        self.reports = 0
        self.closed = False

    def fileno(self) -> int:
        return self._x.fileno()

    def read(self, sync: bool = False) -> float:
        """Read the reports that came; with ``sync``, after a round trip, so that every drawing
        the server made before the call is among them. The moment of the latest change."""
        with self._lock:
            if self.closed:
                raise DamageLost("the damage reports were closed")
            try:
                return self._read(sync)
            except (ConnectionClosedError, DisplayError, XError, OSError) as error:
                raise DamageLost(f"the damage reports' X connection failed: {error!r}") from error

    def _read(self, sync: bool) -> float:
        if sync:
            self._x.sync()
        pending = self._x.pending_events()  # reads what the socket holds, never blocks
        if pending:
            drawn: Box | None = None
            for _ in range(pending):
                event = self._x.next_event()
                # python-xlib registers a copy of the event's class with each display: its name
                # tells a damage report, isinstance does not. A change of the cursor's image
                # follows the pointer over windows: no program drew it.
                if type(event).__name__ == damage.DamageNotify.__name__:
                    area = event.area
                    drawn = Box(area.x, area.y, area.width, area.height).union(drawn)
            # What the watch and a settle's frame take: every report as the whole screen.
            self._box = self._screen
            self._x.damage_subtract(self._damage)
            self._x.flush()
            self.changed_at = time.monotonic()
            self.reports += 1
            if drawn is not None and drawn.at_least(MIN_EXTENT_PX):
                self.drawn_at = self.changed_at
        return self.changed_at

    def wait(self, timeout_s: float) -> float:
        """Wait up to ``timeout_s`` for a report and read it; the moment of the latest change.
        Returns as soon as one comes."""
        if timeout_s > 0:
            try:
                select.select([self], [], [], timeout_s)
            except (OSError, ValueError) as error:  # closed by another thread meanwhile
                raise DamageLost(
                    f"the damage reports' X connection is closed: {error!r}"
                ) from error
        return self.read()

    def damaged(self) -> Box | None:
        """The bounding box of what changed since the box was last taken; None for nothing."""
        with self._lock:
            return self._box

    def take_box(self) -> Box | None:
        """The damaged box, forgotten from now on: whoever takes it grabs a frame next, which
        shows what was drawn before."""
        with self._lock:
            box, self._box = self._box, None
            return box

    def give_back(self, box: Box | None) -> None:
        """A box taken but not looked at (the desktop was busy): it counts again."""
        if box is not None:
            with self._lock:
                self._box = box.union(self._box)

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self._x.close()


def damage_reports(display: str) -> DamageReports | None:
    """The display's damage reports; None where its X server lacks the extensions (settling
    and watching grab frames there)."""
    try:
        return DamageReports(display)
    except DesktopError:
        return None
