"""The provider interface: start, reset, health, stop a desktop, and control it.

A provider works on plain records, not database rows: the pool (``vm_pool.pool``) owns the
rows and hands a provider a ``DesktopSpec``; the provider answers with an ``Endpoint`` that
says where the desktop can be reached. This keeps providers usable on hosts without Django.

The control surface of a desktop is Gymnasium-shaped: ``execute(action)`` then
``observe()``; plus what task setup needs (launch a program, run a command, put a file).
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from vm_pool.actions import Action, ScreenSize


class DesktopError(RuntimeError):
    """A desktop could not do what was asked; the message says what and why."""


@dataclass(frozen=True)
class DesktopSpec:
    """Everything a provider needs to know about one desktop."""

    desktop_id: int
    screen: ScreenSize
    agent_key: str
    display: int | None = None  # allocated by the pool when the provider needs one
    home_template: Path | None = None
    autostart: tuple[tuple[str, ...], ...] = ()
    image: str = ""
    instance_id: str = ""  # the provider's handle of a running desktop
    internet: bool = False  # its programs may reach the internet (never the platform)


@dataclass(frozen=True)
class Endpoint:
    """Where a running desktop is reached."""

    instance_id: str
    vnc_host: str
    vnc_port: int  # 0 where VNC is a unix socket
    screen: ScreenSize
    display: str = ""  # the X display, for providers whose desktops share this host's X
    control_address: str = ""  # the in-desktop agent: "host:port" or "unix:/path"
    vnc_socket: str = ""  # the view-only VNC server's unix socket on this host


@dataclass(frozen=True)
class Health:
    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class Launched:
    pid: int
    window: bool  # a new window was mapped before the launch's window timeout
    exited: int | None = None  # the program ended (with this code) before any window showed


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    output: str  # standard output and error together, as a person reads them
    stdout: str = ""
    stderr: str = ""


@dataclass(frozen=True)
class Observation:
    png: bytes
    screen: ScreenSize
    settled: bool = True
    waited_ms: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)
    # The raw frame the PNG was made from, where it was grabbed in this process: watching the
    # screen afterwards compares with it (``vm_pool.screen.watch``).
    frame: Any = None


class DesktopControl(Protocol):
    """Acts on one running desktop."""

    def execute(self, action: Action) -> None: ...

    def observe(self, settle: bool = True) -> Observation: ...

    def launch(
        self, argv: list[str], window_timeout: float = 0.0, window_title: str = ""
    ) -> Launched: ...

    def run(self, argv: list[str], timeout: float) -> CommandResult: ...

    def put_file(self, path: str, data: bytes) -> None: ...

    def read_file(self, path: str) -> bytes | None:
        """A file of the desktop's HOME or /tmp; None when there is none."""
        ...

    def devtools(self, request: dict[str, Any]) -> dict[str, Any]:
        """A request to the desktop browser's debugging port (``vm_pool.devtools``)."""
        ...

    def close(self) -> None: ...


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
