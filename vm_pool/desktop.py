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


# The accessibility tree's bounds, kept by the agent (``vm_pool.agent.accessibility``) and
# checked again where its XML is read.
MAX_TREE_BYTES = 16 * 1024 * 1024
TREE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class AccessibilityTree:
    """The desktop's AT-SPI tree as OSWorld's XML (``vm_pool.agent.accessibility``), or why it
    was refused: a bound it crossed, or a read past its time."""

    xml: str | None
    refused: str = ""


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


@dataclass(frozen=True)
class PointerInput:
    """A person's pointer as one RFB PointerEvent gives it: where, and which buttons are held
    (bit n is button n + 1: 1 left, 2 middle, 4 right, 8 to 64 the wheel)."""

    x: int
    y: int
    buttons: int


@dataclass(frozen=True)
class KeyInput:
    """A person's key as one RFB KeyEvent gives it: its keysym, pressed or released."""

    keysym: int
    down: bool


@dataclass(frozen=True)
class ClipboardInput:
    """Text a person's client puts on the desktop's clipboard (RFB ClientCutText)."""

    text: str


Input = PointerInput | KeyInput | ClipboardInput
# The most clipboard text one input may carry (RFB sends it as Latin-1, a byte a character):
# a paste, not a file transfer.
MAX_CLIPBOARD_CHARS = 64 * 1024


def input_to_json(event: Input) -> dict[str, Any]:
    if isinstance(event, PointerInput):
        return {"pointer": [event.x, event.y, event.buttons]}
    if isinstance(event, KeyInput):
        return {"key": [event.keysym, event.down]}
    return {"clipboard": event.text}


def input_from_json(data: Any) -> Input:
    """An input from its JSON; ``ValueError`` for anything else, before anything happens."""
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError("an input is one of pointer, key or clipboard")
    ((kind, value),) = data.items()
    if kind == "pointer" and isinstance(value, list) and len(value) == 3:
        x, y, buttons = value
        if all(type(n) is int for n in value) and 0 <= buttons < 256:
            return PointerInput(x, y, buttons)
    elif kind == "key" and isinstance(value, list) and len(value) == 2:
        keysym, down = value
        if type(keysym) is int and 0 <= keysym < 2**32 and type(down) is bool:
            return KeyInput(keysym, down)
    elif kind == "clipboard" and isinstance(value, str):
        if len(value) > MAX_CLIPBOARD_CHARS:
            raise ValueError(f"clipboard text over {MAX_CLIPBOARD_CHARS} characters")
        return ClipboardInput(value)
    raise ValueError(f"not an input: {kind!r}")


class DesktopControl(Protocol):
    """Acts on one running desktop."""

    def execute(self, action: Action) -> None: ...

    def observe(self, settle: bool = True) -> Observation: ...

    def inject(self, event: Input) -> None:
        """Pass one input of a person driving the desktop (a recorded demonstration's)."""
        ...

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

    def accessibility_tree(self) -> AccessibilityTree:
        """The accessibility tree of the desktop's programs, as OSWorld's XML."""
        ...

    def close(self) -> None: ...


# --- the active terminal's text, OSWorld's vm_terminal_output: the agent binds the key, the
# evaluator's getter runs the script ---------------------------------------------------------
# The text the desktop's active terminal shows, OSWorld's ``vm_terminal_output``. OSWorld reads it
# over AT-SPI: the text of the focused terminal of GNOME Terminal's active window (VTE's
# accessible text, the visible screen), with trailing whitespace cut, or nothing when no terminal
# window is active. The desktops' terminal here is xterm, which has no AT-SPI; its own equivalent
# is its ``print-immediate`` action, which writes the text of the screen, without attributes, to a
# file. The agent loads ``TERMINAL_RESOURCES`` into the X server at start, binding the action to
# ``TERMINAL_PRINT_KEYS`` in every xterm; ``TERMINAL_READ_SCRIPT``, run on the desktop, presses
# them when the active window is an xterm and prints the file; it exits ``NO_TERMINAL`` when no
# xterm is active.

TERMINAL_PRINT_KEYS = "ctrl+shift+alt+F12"
TERMINAL_FOLDER = "/tmp/.tandem-terminal"
TERMINAL_RESOURCES = f"""\
XTerm*printFileImmediate: {TERMINAL_FOLDER}/screen
XTerm*printModeImmediate: 0
XTerm*VT100.translations: #override Ctrl Shift Alt <Key>F12: print-immediate()
"""
NO_TERMINAL = 3
TERMINAL_PRINT_TIMEOUT_S = 5.0
TERMINAL_READ_SCRIPT = f"""\
window=$(xdotool getactivewindow 2>/dev/null) || exit {NO_TERMINAL}
case $(xprop -id "$window" WM_CLASS 2>/dev/null) in
  *'"XTerm"'*) ;;
  *) exit {NO_TERMINAL} ;;
esac
rm -rf {TERMINAL_FOLDER} && mkdir -p {TERMINAL_FOLDER} || exit 1
xdotool key --clearmodifiers {TERMINAL_PRINT_KEYS}
for _ in $(seq {int(TERMINAL_PRINT_TIMEOUT_S * 10)}); do
  for file in {TERMINAL_FOLDER}/screen*; do
    [ -f "$file" ] && sleep 0.1 && exec cat "$file"
  done
  sleep 0.1
done
echo "xterm wrote no screen text in {TERMINAL_PRINT_TIMEOUT_S:g}s" >&2
exit 1
"""
