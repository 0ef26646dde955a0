"""The provider interface: start, reset, health, stop a desktop, and control it.

A provider works on plain records, not database rows (``vm_pool.desktop``): the pool
(``vm_pool.pool``) owns the rows and hands a provider a ``DesktopSpec``; the provider answers
with an ``Endpoint`` that says where the desktop can be reached. This keeps providers usable on
hosts without Django.
"""

from abc import ABC, abstractmethod
from typing import ClassVar

from vm_pool.desktop import DesktopControl, DesktopSpec, Endpoint, Health


class DesktopProvider(ABC):
    name: ClassVar[str]
    # What this provider can do, e.g. {"xtest", "view_only_vnc", "home_restore"}.
    capabilities: ClassVar[frozenset[str]]
    # Whether the pool must allocate an X display and ports on the host for each desktop.
    allocates_display: ClassVar[bool] = False

    @abstractmethod
    def start(self, spec: DesktopSpec) -> Endpoint:
        """Start a fresh desktop and return once it accepts VNC and control connections."""

    @abstractmethod
    def reset(self, spec: DesktopSpec) -> Endpoint:
        """Bring a used desktop back to its template state (fresh HOME, a new agent key)."""

    @abstractmethod
    def health(self, spec: DesktopSpec) -> Health:
        """Is the desktop alive and answering? Cheap: called periodically for every desktop."""

    @abstractmethod
    def stop(self, spec: DesktopSpec) -> None:
        """Stop the desktop and free everything it held. Stopping a stopped desktop is fine."""

    @abstractmethod
    def control(self, spec: DesktopSpec, endpoint: Endpoint) -> DesktopControl:
        """A control handle for a running desktop."""
