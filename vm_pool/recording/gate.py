"""The recording gate: a person's input passes here, is written down, then reaches the desktop.

Rules:

- **Only through a recording.** A control stream's token names an open ``Recording``; the gate
  passes input only while the recording is open, its desktop is still the generation it was
  issued for, leased to the recording's user under the recording's lease, and the lease has not
  lapsed. It reads that state again at least every ``RECHECK_S`` and at the lease's expiry, so
  no input passes after the lease lapsed or the recording ended. The stream then closes.
- **Written first, fail closed.** Each input is stored (``RecordedInput``) before the desktop
  gets it, under a lock of its open recording (``end_recording`` takes the same lock): when the
  write fails or the recording has ended, the input does not pass and the stream closes, the
  reason noted on the recording.
- **The screen before the action.** Before an input that may begin a step (``StepStarts``: a
  button press, the first key of a run or a chord), the gate grabs the screen, stores it, and
  only then lets the input through: the frame is the one the person acted on.
- **As the desktop takes it.** A pointer past the screen's edge is recorded on the edge, and
  only the buttons X has (1 to 7), as the desktop's control passes them.
- **Bounded.** Pointer moves with the same buttons pass at most every ``MOVE_INTERVAL_S`` (the
  latest one wins; none is lost before a press or a release). Other inputs pass at most
  ``RATE_PER_S`` a second with a burst of ``BURST``; a client over it is closed with that reason.
  A clipboard paste is at most ``MAX_CLIPBOARD_CHARS`` (``vm_pool.recording.rfb`` refuses a
  longer one before reading it).

The gate runs in the one process that serves the stream (a websockify child, ``proxy.py``): a
client flooding it slows only its own stream.
"""

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from vm_pool.desktop import (
    ClipboardInput,
    DesktopControl,
    DesktopError,
    Input,
    KeyInput,
    PointerInput,
)
from vm_pool.models import DesktopStatus, InputKind, RecordedInput, Recording, Screenshot
from vm_pool.recording.reduce import Key, Pointer, StepStarts
from vm_pool.screen.screenshots import store_screenshot

RECHECK_S = 1.0
MOVE_INTERVAL_S = 0.01
RATE_PER_S = 60.0
BURST = 120.0


class GateClosed(Exception):
    """The gate passes no more input; the message says why (shown to the person)."""


class Gate:
    def __init__(self, recording: Recording, control: DesktopControl) -> None:
        self.recording = recording
        self.control = control
        self._started = recording.started_at
        desktop = recording.desktop
        self._screen = (desktop.width, desktop.height) if desktop else (1, 1)
        self._starts = StepStarts()
        self._index = 0
        for _, event in recorded_events(recording):  # a stream opened again goes on
            self._starts.add(event)
        last = RecordedInput.objects.filter(recording=recording).order_by("-index").first()
        self._index = 0 if last is None else last.index + 1
        self._valid_until = 0.0
        self._buttons: int | None = None
        self._pending_move: PointerInput | None = None
        self._last_move = 0.0
        self._allowance = BURST
        self._allowance_at = time.monotonic()

    # --- the one way in --------------------------------------------------------------------

    def take(self, event: Input) -> None:
        """Record ``event`` and pass it to the desktop; ``GateClosed`` when it may not pass."""
        self._check_open()
        if isinstance(event, PointerInput):
            # Recorded where the desktop puts it: a point past the edge is on the edge.
            x = min(max(event.x, 0), self._screen[0] - 1)
            y = min(max(event.y, 0), self._screen[1] - 1)
            event = PointerInput(x, y, event.buttons & 0x7F)
        if isinstance(event, PointerInput) and event.buttons == self._buttons:
            if time.monotonic() - self._last_move < MOVE_INTERVAL_S:
                self._pending_move = event
                return
            self._pending_move = None  # older than this one: it would move the pointer back
            self._pass(event)
            return
        self._pass_pending_move()
        self._spend()
        self._pass(event)

    def due_in(self) -> float | None:
        """Seconds until the held pointer move may pass; None when none is held."""
        if self._pending_move is None:
            return None
        return max(0.0, MOVE_INTERVAL_S - (time.monotonic() - self._last_move))

    def flush(self) -> None:
        """Pass the latest held pointer move once its interval is over (called when idle)."""
        if self._pending_move is not None and (
            time.monotonic() - self._last_move >= MOVE_INTERVAL_S
        ):
            self._check_open()
            self._pass_pending_move()

    def check(self) -> None:
        """``GateClosed`` once the recording or its lease no longer lets input pass."""
        self._check_open()

    def refuse(self, reason: str) -> None:
        """Note on the recording why its stream stopped passing input."""
        refusal = {"at": timezone.now().isoformat(), "reason": reason}
        Recording.objects.filter(pk=self.recording.pk).update(
            refusals=self.recording.refusals + [refusal]
        )
        self.recording.refusals = [*self.recording.refusals, refusal]

    # --- the rules -------------------------------------------------------------------------

    def _check_open(self) -> None:
        now = time.monotonic()
        if now < self._valid_until:
            return
        row = (
            Recording.objects.filter(pk=self.recording.pk)
            .values(
                "ended_at",
                "desktop__generation",
                "desktop__status",
                "desktop__leased_by",
                "desktop__lease_ref",
                "desktop__lease_expires_at",
            )
            .first()
        )
        wall = timezone.now()
        reason = _closed_reason(self.recording, row, wall)
        if reason:
            raise GateClosed(reason)
        assert row is not None and row["desktop__lease_expires_at"] is not None  # else a reason
        lease_left = (row["desktop__lease_expires_at"] - wall).total_seconds()
        self._valid_until = now + min(RECHECK_S, lease_left)

    def _spend(self) -> None:
        now = time.monotonic()
        self._allowance = min(BURST, self._allowance + (now - self._allowance_at) * RATE_PER_S)
        self._allowance_at = now
        if self._allowance < 1:
            raise GateClosed(f"input over {RATE_PER_S:.0f} events a second")
        self._allowance -= 1

    def _pass_pending_move(self) -> None:
        if self._pending_move is not None:
            move, self._pending_move = self._pending_move, None
            self._pass(move)

    def _pass(self, event: Input) -> None:
        at = (timezone.now() - self._started).total_seconds()
        frame = None
        if not isinstance(event, ClipboardInput) and self._starts.add(_reduce_event(at, event)):
            try:
                frame = store_screenshot(self.control.observe(settle=False).png)
            except (DesktopError, OSError) as error:
                reason = f"the screen could not be read before the input: {error}"
                raise GateClosed(reason) from error
        self._write(at, event, frame)
        try:
            self.control.inject(event)
        except (DesktopError, ValueError, OSError) as error:
            raise GateClosed(f"the desktop did not take the input: {error}") from error
        if isinstance(event, PointerInput):
            self._buttons = event.buttons
            self._last_move = time.monotonic()

    def _write(self, at: float, event: Input, frame: Screenshot | None) -> None:
        row = RecordedInput(recording=self.recording, index=self._index, at=at, frame=frame)
        if isinstance(event, PointerInput):
            row.kind, row.x, row.y, row.buttons = InputKind.POINTER, event.x, event.y, event.buttons
        elif isinstance(event, KeyInput):
            row.kind, row.keysym, row.down = InputKind.KEY, event.keysym, event.down
        else:
            row.kind, row.text = InputKind.CLIPBOARD, event.text
        try:
            with transaction.atomic():
                # Ending a recording locks its row too: once it has ended, nothing more is
                # written, and so nothing more passes.
                if (
                    not Recording.objects.select_for_update()
                    .filter(pk=self.recording.pk, ended_at__isnull=True)
                    .exists()
                ):
                    raise GateClosed("the recording has ended")
                row.save(force_insert=True)
        except DatabaseError as error:
            raise GateClosed(f"the recording could not be written, so the input did not pass: "
                             f"{type(error).__name__}") from error  # fmt: skip
        self._index += 1


def _closed_reason(recording: Recording, row: Mapping[str, Any] | None, now: datetime) -> str:
    if row is None:
        return "the recording is gone"
    if row["ended_at"] is not None:
        return "the recording has ended"
    if (
        row["desktop__generation"] != recording.generation
        or row["desktop__status"] != DesktopStatus.LEASED
        or row["desktop__leased_by"] != recording.user_id
        or row["desktop__lease_ref"] != recording.lease_ref
    ):
        return "the desktop is no longer leased to this recording"
    expires = row["desktop__lease_expires_at"]
    if expires is None or expires <= now:
        return "the lease has lapsed"
    return ""


def _input_of(row: RecordedInput) -> Input:
    if row.kind == InputKind.POINTER:
        return PointerInput(row.x or 0, row.y or 0, row.buttons or 0)
    if row.kind == InputKind.KEY:
        return KeyInput(row.keysym or 0, bool(row.down))
    return ClipboardInput(row.text)


def _reduce_event(at: float, event: Input) -> Pointer | Key:
    if isinstance(event, PointerInput):
        return Pointer(at, event.x, event.y, event.buttons)
    if isinstance(event, KeyInput):
        return Key(at, event.keysym, event.down)
    raise TypeError("a clipboard paste is no pointer or key event")


def recorded_events(recording: Recording) -> list[tuple[int, Pointer | Key]]:
    """The recording's pointer and key inputs as the reducer takes them, with their indexes."""
    rows = RecordedInput.objects.filter(recording=recording).exclude(kind=InputKind.CLIPBOARD)
    return [(row.index, _reduce_event(row.at, _input_of(row))) for row in rows.order_by("index")]


def end_recording(recording_id: int) -> Recording:
    """End a recording: from the commit of this on, the gate writes and passes none of its input
    (the input written before is all there is to reduce)."""
    with transaction.atomic():
        recording = Recording.objects.select_for_update().get(pk=recording_id)
        if recording.ended_at is None:
            recording.ended_at = timezone.now()
            recording.save(update_fields=["ended_at"])
    return recording
