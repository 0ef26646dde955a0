"""Personal access tokens: issuing, checking and revoking.

A token is ``tdm_<prefix>_<secret>``. Only ``sha256(secret)`` is stored; the secret has 256
bits of entropy, so a fast hash is enough (a slow password hash would only slow every request).
Scopes name a resource and an access level, ``tasks:read`` or ``tasks:write``; write implies
read of the same resource.
"""

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from backend.accounts.models import AccessToken, User

RESOURCES = ("projects", "tasks", "episodes", "datasets", "models")
SCOPES = tuple(f"{resource}:{level}" for resource in RESOURCES for level in ("read", "write"))
TOKEN_PREFIX = "tdm_"
# How often last_used_at is written; a token used in a tight loop does not write every time.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class TokenError(Exception):
    """A token that cannot be used; the message says why, without revealing which tokens exist."""


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_token(user: User, name: str, scopes: list[str], days: int) -> tuple[AccessToken, str]:
    """Create a token and return it with its clear text, which is never stored."""
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown:
        raise ValueError(f"unknown scopes: {', '.join(unknown)}; known: {', '.join(SCOPES)}")
    if not scopes:
        raise ValueError("a token needs at least one scope")
    if not 1 <= days <= settings.TANDEM_TOKEN_MAX_DAYS:
        raise ValueError(f"expiry must be between 1 and {settings.TANDEM_TOKEN_MAX_DAYS} days")
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    token = AccessToken.objects.create(
        user=user,
        name=name,
        prefix=prefix,
        secret_hash=_hash(secret),
        scopes=sorted(set(scopes)),
        expires_at=timezone.now() + timedelta(days=days),
    )
    return token, f"{TOKEN_PREFIX}{prefix}_{secret}"


def authenticate_token(clear: str) -> AccessToken:
    """Return the active token for this clear text, recording its use, or raise TokenError."""
    if not clear.startswith(TOKEN_PREFIX) or clear.count("_") < 2:
        raise TokenError("malformed access token")
    prefix, _, secret = clear[len(TOKEN_PREFIX) :].partition("_")
    token = AccessToken.objects.select_related("user").filter(prefix=prefix).first()
    if token is None or not hmac.compare_digest(token.secret_hash, _hash(secret)):
        raise TokenError("unknown access token")
    now = timezone.now()
    if token.revoked_at is not None:
        raise TokenError("access token revoked")
    if token.expires_at <= now:
        raise TokenError("access token expired")
    if not token.user.is_active:
        raise TokenError("the token's user is inactive")
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        AccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def token_allows(token: AccessToken, resource: str, write: bool) -> bool:
    if f"{resource}:write" in token.scopes:
        return True
    return not write and f"{resource}:read" in token.scopes


def revoke_token(token: AccessToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
