"""The environment's surface: a desktop's control and the plain records everything speaks.

The control surface of a desktop is Gymnasium-shaped: ``execute(action)`` then
``observe()``; plus what task setup needs (launch a program, run a command, put a file).
The records (``DesktopSpec``, ``Endpoint``, ``Observation``, ...) are plain data, not database
rows, so the sandbox, the screen code and the providers stand on them without Django. The
bottom floor of ``vm_pool``: it imports only the action space.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

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
