"""An endpoint's API key goes to that endpoint and to no other.

Settings that name an OpenAI-compatible endpoint — a project's model settings, its judge — may
hold the endpoint's ``api_key``. The key is write-only (a read says ``api_key_set``) and bound
to the ``base_url`` it was entered with:

1. A write that gives ``api_key`` stores it; an empty one (``""`` or null) clears it.
2. A write that leaves ``api_key`` out keeps the stored key while ``base_url`` names the same
   endpoint as before (or is still absent). A write that names another endpoint, or none,
   clears it: re-pointing the settings never takes the old key along to the new host.
3. Settings used for another endpoint than their own ``base_url`` — a model version served
   elsewhere — do not carry the key there.

Two base URLs name the same endpoint when their scheme, host, port (the scheme's default when
none is written) and path (less a trailing slash) are equal, scheme and host compared without
case. A base URL is an ``http://`` or ``https://`` URL with a host; anything else names no
endpoint, and no key goes with it.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

API_KEY = "api_key"
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    path: str


def endpoint(base_url: Any) -> Endpoint:
    """The endpoint ``base_url`` names; ``ValueError`` saying what it must be when none."""
    problem = f"must be an http:// or https:// URL with a host, not {base_url!r}"
    if not isinstance(base_url, str) or any(c.isspace() for c in base_url):
        raise ValueError(problem)
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:  # a port that is not a number from 0 to 65535, a broken IPv6 host
        raise ValueError(problem) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(problem)
    return Endpoint(scheme, parts.hostname, port or DEFAULT_PORTS[scheme], parts.path.rstrip("/"))


def same_endpoint(a: Any, b: Any) -> bool:
    """Whether two base URLs name one endpoint; one that names none is no endpoint's."""
    try:
        return endpoint(a) == endpoint(b)
    except ValueError:
        return False


def written(stored: Mapping[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The settings ``given`` in a write as they are stored over ``stored`` (rules 1 and 2):
    the stored key kept or cleared, an empty key dropped."""
    settings = dict(given)
    if API_KEY in settings:
        if settings[API_KEY] in ("", None):
            del settings[API_KEY]
        return settings
    old, new = stored.get("base_url"), settings.get("base_url")
    unmoved = same_endpoint(old, new) or (not old and not new)
    if unmoved and stored.get(API_KEY):
        settings[API_KEY] = stored[API_KEY]
    return settings


def key_for(settings: Mapping[str, Any], base_url: str) -> str:
    """The settings' key when their own ``base_url`` names the endpoint at ``base_url``, else
    no key (rule 3)."""
    if not same_endpoint(settings.get("base_url"), base_url):
        return ""
    return str(settings.get(API_KEY) or "")
