"""Stream tokens: who may open a VNC stream of a desktop through websockify, and until when.

Rules:

- One websockify process fronts every desktop. A browser opens
  ``<TANDEM_WEBSOCKIFY_PUBLIC_URL>/websockify?token=…``; websockify asks
  ``resolve_stream_token`` (through ``vm_pool.websockify_tokens``) where that token leads.
- A token leads to exactly one desktop *and* the generation the desktop had when the token was
  issued. A release bumps the generation, so no token issued before a release opens a stream
  after it, whoever holds the desktop next.
- A control token is issued only to the user holding the desktop's lease. A view-only token is
  issued to whoever the caller allows (the API decides who may watch), for a desktop that is
  ready or leased.
- View-only is enforced by the VNC server, not by the browser: a control token comes with the
  desktop's full VNC password, a view-only token with its view-only password, and x11vnc
  ignores every input of a client that authenticated with the latter.
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
from vm_pool.models import Desktop, DesktopStatus, StreamToken

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

    The desktop is read again here: the lease holder, the generation and the VNC passwords are
    taken together from its current row, never from a caller's stale copy.
    """
    current = Desktop.objects.filter(pk=desktop.pk, status__in=STREAMABLE_STATUSES).first()
    if current is None:
        raise DesktopNotStreamable("This desktop is not running a session that can be streamed.")
    if not view_only and (
        current.status != DesktopStatus.LEASED or current.leased_by_id != user.pk
    ):
        raise StreamNotAllowed("Only the user holding this desktop's lease may control it.")
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


def stream_password(token: StreamToken) -> str:
    """The VNC password that goes with ``token``: the view-only one for a view-only token."""
    desktop = token.desktop
    return desktop.vnc_view_password if token.view_only else desktop.vnc_password


def resolve_stream_token(clear: str) -> tuple[str, int] | None:
    """Where a new connection with this token goes, or None when it may not open one."""
    row = (
        StreamToken.objects.filter(
            token_hash=_hash(clear),
            expires_at__gt=timezone.now(),
            generation=F("desktop__generation"),
            desktop__status__in=STREAMABLE_STATUSES,
            desktop__vnc_port__isnull=False,
            user__is_active=True,
        )
        .values_list("desktop__vnc_host", "desktop__vnc_port")
        .first()
    )
    if row is None:
        return None
    host, port = row
    assert port is not None  # excluded by the filter
    return host, port


def open_stream(desktop: Desktop, user: Any, view_only: bool) -> dict[str, Any]:
    """Everything a browser needs to open a stream: the websockify URL, token and password."""
    clear, token = issue_stream_token(desktop, user, view_only)
    return {
        "url": f"{settings.TANDEM_WEBSOCKIFY_PUBLIC_URL}/websockify?{urlencode({'token': clear})}",
        "token": clear,
        "password": stream_password(token),
        "view_only": token.view_only,
        "expires_at": token.expires_at,
    }
