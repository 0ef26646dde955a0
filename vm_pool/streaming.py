"""Stream tokens: who may open a VNC stream of a desktop through websockify, and until when.

Rules:

- One websockify process fronts every desktop. A browser opens
  ``<TANDEM_WEBSOCKIFY_PUBLIC_URL>/websockify?token=…``; websockify asks
  ``resolve_stream_token`` (through ``vm_pool.websockify_tokens``) where that token leads.
- A token leads to exactly one desktop *and* the generation the desktop had when the token was
  issued. A release bumps the generation, so no token issued before a release opens a stream
  after it, whoever holds the desktop next.
- A stream is view-only, the annotator's own included: a desktop changes only through
  recorded decisions. A token is issued to whoever the caller allows (the API decides who may
  watch), for a desktop that is ready or leased.
- The one exception is a **control stream**: issued only for an open ``Recording`` (a person
  demonstrating), to that recording's user, who holds the desktop's lease. It leads to the
  same view-only VNC server, through the recording gate (``vm_pool.recording.gate``): the
  person's input reaches the desktop only once it is recorded, and only while the recording is
  open and the lease holds.
- View-only is enforced where the token leads, not by the browser: a token resolves to the
  desktop's view-only VNC server (x11vnc ``-viewonly``, on a unix socket for local desktops),
  which ignores every input. The browser holds no VNC secret: the VNC server has no password,
  and only the platform's websockify can reach it.
- A token opens connections for ``TANDEM_STREAM_TOKEN_SECONDS`` (30 s by default): long enough
  to connect; a stream already open outlives it, a new connection after it is refused.
- A release ends the streams already open: the desktop turns ``resetting`` and cannot be leased
  again before its reset has run, and the reset stops the desktop's VNC server first, which
  closes every connection to it.
- Only the SHA-256 of a token is stored. The token has 256 bits of entropy, so a fast hash is
  enough.
"""

import hashlib
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from backend.errors import DomainError
from vm_pool.models import Desktop, DesktopStatus, Recording, StreamToken

# A desktop can be streamed in these states; starting, resetting or broken ones cannot.
STREAMABLE_STATUSES = [DesktopStatus.READY, DesktopStatus.LEASED]


class StreamNotAllowed(DomainError):
    status_code = 403
    code = "stream_not_allowed"


class DesktopNotStreamable(DomainError):
    status_code = 409
    code = "desktop_not_streamable"


def _hash(clear: str) -> str:
    return hashlib.sha256(clear.encode()).hexdigest()


def issue_stream_token(desktop: Desktop, user: Any, view_only: bool) -> tuple[str, StreamToken]:
    """A new token for ``user`` to stream ``desktop`` as it is now; its clear text is not stored.

    The desktop is read again here: its status and generation are taken from its current row,
    never from a caller's stale copy.
    """
    if not view_only:
        raise StreamNotAllowed(
            "Desktops are streamed view-only: every change to a desktop is a recorded decision."
        )
    current = Desktop.objects.filter(pk=desktop.pk, status__in=STREAMABLE_STATUSES).first()
    if current is None:
        raise DesktopNotStreamable("This desktop is not running a session that can be streamed.")
    clear = secrets.token_urlsafe(32)
    token = StreamToken.objects.create(
        token_hash=_hash(clear),
        desktop=current,
        user=user,
        generation=current.generation,
        view_only=view_only,
        expires_at=timezone.now() + timedelta(seconds=settings.TANDEM_STREAM_TOKEN_SECONDS),
    )
    return clear, token


def issue_control_token(recording: Recording) -> tuple[str, StreamToken]:
    """A new control-stream token for the user of an open ``recording``, on the desktop they
    hold the lease of; refused for anyone or anything else."""
    desktop = Desktop.objects.filter(
        recordings=recording,
        status=DesktopStatus.LEASED,
        generation=recording.generation,
        leased_by=recording.user_id,
        lease_ref=recording.lease_ref,
        lease_expires_at__gt=timezone.now(),
    ).first()
    if desktop is None or recording.ended_at is not None:
        raise StreamNotAllowed(
            "A control stream is only for the person recording on the desktop they hold."
        )
    clear = secrets.token_urlsafe(32)
    token = StreamToken.objects.create(
        token_hash=_hash(clear),
        desktop=desktop,
        user_id=recording.user_id,
        generation=desktop.generation,
        view_only=False,
        recording=recording,
        expires_at=timezone.now() + timedelta(seconds=settings.TANDEM_STREAM_TOKEN_SECONDS),
    )
    return clear, token


def resolve_control_token(clear: str) -> tuple[tuple[str, int | str], int] | None:
    """Where a new control connection with this token goes, and its recording; None when it
    may not open one: its lease has lapsed, among others (the gate checks the lease again at the
    stream's start and at every input)."""
    row = (
        StreamToken.objects.filter(
            token_hash=_hash(clear),
            expires_at__gt=timezone.now(),
            generation=F("desktop__generation"),
            desktop__status=DesktopStatus.LEASED,
            desktop__leased_by=F("user"),
            desktop__lease_ref=F("recording__lease_ref"),
            desktop__lease_expires_at__gt=timezone.now(),
            view_only=False,
            recording__ended_at__isnull=True,
            user__is_active=True,
        )
        .values_list("desktop__vnc_socket", "desktop__vnc_host", "desktop__vnc_port", "recording")
        .first()
    )
    if row is None:
        return None
    socket_path, host, port, recording = row
    if socket_path:
        return ("unix_socket", socket_path), recording
    if port is None:
        return None
    return (host, port), recording


def resolve_stream_token(clear: str) -> tuple[str, int | str] | None:
    """Where a new connection with this token goes, or None when it may not open one:
    ``("unix_socket", path)`` (websockify's form for a unix socket) or ``(host, port)``."""
    row = (
        StreamToken.objects.filter(
            token_hash=_hash(clear),
            expires_at__gt=timezone.now(),
            generation=F("desktop__generation"),
            desktop__status__in=STREAMABLE_STATUSES,
            view_only=True,
            user__is_active=True,
        )
        .values_list("desktop__vnc_socket", "desktop__vnc_host", "desktop__vnc_port")
        .first()
    )
    if row is None:
        return None
    socket_path, host, port = row
    if socket_path:
        return "unix_socket", socket_path
    if port is None:
        return None
    return host, port


def open_control_stream(recording: Recording) -> dict[str, Any]:
    """What a browser needs to drive the desktop of ``recording`` through the gate."""
    clear, token = issue_control_token(recording)
    return {
        "url": f"{settings.TANDEM_WEBSOCKIFY_PUBLIC_URL}/websockify?{urlencode({'token': clear})}",
        "token": clear,
        "view_only": False,
        "expires_at": token.expires_at,
    }


def open_stream(desktop: Desktop, user: Any) -> dict[str, Any]:
    """Everything a browser needs to open a view-only stream: the websockify URL and token."""
    clear, token = issue_stream_token(desktop, user, view_only=True)
    return {
        "url": f"{settings.TANDEM_WEBSOCKIFY_PUBLIC_URL}/websockify?{urlencode({'token': clear})}",
        "token": clear,
        "view_only": token.view_only,
        "expires_at": token.expires_at,
    }
