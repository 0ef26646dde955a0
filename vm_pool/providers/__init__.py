"""Desktop providers: where desktops run (local process groups, containers, cloud machines).

Providers are registered by dotted path in ``settings.TANDEM_DESKTOP_PROVIDERS`` and loaded
once; ``get_provider(name)`` returns the shared instance.
"""

from functools import cache

from vm_pool.providers.base import DesktopProvider


@cache
def get_provider(name: str) -> DesktopProvider:
    # Django is imported here, not at the top: the in-desktop agent imports provider modules
    # on machines that run no Django.
    from django.conf import settings
    from django.utils.module_loading import import_string

    try:
        path = settings.TANDEM_DESKTOP_PROVIDERS[name]
    except KeyError:
        known = ", ".join(sorted(settings.TANDEM_DESKTOP_PROVIDERS))
        raise LookupError(f"unknown desktop provider {name!r}; known: {known}") from None
    provider = import_string(path)()
    if not isinstance(provider, DesktopProvider):
        raise TypeError(f"{path} is not a DesktopProvider")
    return provider
