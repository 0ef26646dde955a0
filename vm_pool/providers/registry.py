"""The provider registry.

Providers are registered by dotted path in ``settings.TANDEM_DESKTOP_PROVIDERS`` and loaded
once; ``get_provider(name)`` returns the shared instance.
"""

from functools import cache

from django.conf import settings
from django.utils.module_loading import import_string

from vm_pool.providers.base import DesktopProvider


@cache
def get_provider(name: str) -> DesktopProvider:
    try:
        path = settings.TANDEM_DESKTOP_PROVIDERS[name]
    except KeyError:
        known = ", ".join(sorted(settings.TANDEM_DESKTOP_PROVIDERS))
        raise LookupError(f"unknown desktop provider {name!r}; known: {known}") from None
    provider = import_string(path)()
    if not isinstance(provider, DesktopProvider):
        raise TypeError(f"{path} is not a DesktopProvider")
    return provider
