"""What every setup step shares: the step, the run it belongs to, its failure, and the tools
every step may use (a download through the task-file cache, a checked desktop path).

``vm_pool.setup.runner`` runs a task's steps; the steps that act on windows and the browser
live in ``vm_pool.setup.windows`` and ``vm_pool.setup.browser``.
"""

import logging
import time
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from backend.errors import DomainError
from vm_pool.actions import ScreenSize
from vm_pool.desktop import DesktopControl
from vm_pool.task_files.downloads import DownloadRefused, fetch_task_file

logger = logging.getLogger(__name__)

COMMAND_TIMEOUT = 120.0
WINDOW_TIMEOUT = 10.0
MAX_SLEEP = 60.0
# ``until``: how long a command is repeated before the setup goes on without it.
UNTIL_TIMEOUT_S = 60.0
UNTIL_PAUSE_S = 0.3
# A program's window is mapped before its content is drawn (LibreOffice pauses for a second or
# more in between): after a launch that waited for its window, the setup waits until two
# settled screens DRAW_QUIET_S apart are the same, for DRAW_TIMEOUT_S at most.
DRAW_QUIET_S = 1.0
DRAW_TIMEOUT_S = 15.0
HOME = "/home/user"  # the desktop user's HOME inside every desktop (OSWorld's convention)
WRITABLE = ("/home/user", "/tmp")
# OSWorld's ``{CLIENT_PASSWORD}``: the password of its desktop user. Tandem's desktop user has
# no password and no sudo (the desktop is a sandbox), so commands that pipe it to ``sudo -S``
# fail, are logged, and the setup goes on, as OSWorld does with any failing command.
CLIENT_PASSWORD = "password"


class SetupFailed(DomainError):
    status_code = 422
    code = "setup_failed"


@dataclass(frozen=True)
class SetupStep:
    number: int  # counting from 1, as people read a task file
    type: str
    parameters: dict[str, Any]

    def name(self) -> str:
        return f"setup step {self.number} ({self.type})"


@dataclass
class SetupRun:
    """One setup running on one desktop, and what it logged (failures it went on after)."""

    control: DesktopControl
    screen: ScreenSize | None = None
    log: list[str] = field(default_factory=list)
    # What commands wrote to their ``stdout``/``stderr`` files (OSWorld's cache directory),
    # by file name: an evaluator's ``cache_file`` getter reads them.
    outputs: dict[str, str] = field(default_factory=dict)

    def note(self, step: SetupStep, message: str) -> None:
        line = f"{step.name()}: {message}"
        logger.info("%s", line)
        self.log.append(line[:1000])

    def placeholders(self) -> dict[str, str]:
        if self.screen is None:
            self.screen = self.control.observe(settle=False).screen
        width, height = self.screen.width, self.screen.height
        return {
            "{CLIENT_PASSWORD}": CLIENT_PASSWORD,
            "{SCREEN_WIDTH_HALF}": str(width // 2),
            "{SCREEN_HEIGHT_HALF}": str(height // 2),
            "{SCREEN_WIDTH}": str(width),
            "{SCREEN_HEIGHT}": str(height),
        }

    def substitute(self, text: str) -> str:
        if "{" not in text:
            return text
        for placeholder, value in self.placeholders().items():
            text = text.replace(placeholder, value)
        return text


def home_path(argument: str) -> str:
    """``~`` and ``~/…`` as the desktop user's HOME: no shell expands an argv's words."""
    return HOME + argument[1:] if argument == "~" or argument.startswith("~/") else argument


def window_timeout(step: SetupStep) -> float:
    value = step.parameters.get("window_timeout", WINDOW_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 120:
        raise SetupFailed(f"{step.name()}: 'window_timeout' must be a number of seconds, 0 to 120")
    return float(value)


def seconds(step: SetupStep, key: str, default: float, limit: float) -> float:
    value = step.parameters.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= limit:
        raise SetupFailed(f"{step.name()}: '{key}' must be a number from 0 to {limit:g}")
    return float(value)


def until_drawn(control: DesktopControl) -> None:
    from vm_pool.screen.capture import frame_of_png  # weight: the capture's encoder
    from vm_pool.screen.compare import meaningful_change  # weight: numpy and the PNG decoder

    deadline = time.monotonic() + DRAW_TIMEOUT_S
    last = frame_of_png(control.observe(settle=True).png)
    while time.monotonic() < deadline:
        time.sleep(DRAW_QUIET_S)
        now = frame_of_png(control.observe(settle=True).png)
        if not meaningful_change(last, now):  # a blinking caret is no drawing
            return
        last = now


def launch_and_draw(
    run: SetupRun, step: SetupStep, argv: list[str], window_title: str = ""
) -> None:
    launched = run.control.launch(argv, window_timeout(step), window_title)
    if launched.window:
        until_drawn(run.control)
    elif launched.exited:  # OSWorld starts it and goes on: the failure is logged
        run.note(step, f"{argv[0]} exited with {launched.exited}")


def fetch(step: SetupStep, url: str, sha256: str | None = None) -> bytes:
    try:
        return fetch_task_file(url, sha256)
    except DownloadRefused as error:
        raise SetupFailed(f"{step.name()}: {url}: {error}") from error


def check_desktop_path(step: SetupStep, path: object) -> str:
    """A file path of the desktop that stays in HOME or /tmp, as far as its text shows (the
    agent checks symlinks where the file is written)."""
    if not isinstance(path, str) or not path.strip():
        raise SetupFailed(f"{step.name()}: 'path' must be a non-empty string")
    if "\x00" in path:
        raise SetupFailed(f"{step.name()}: {path!r} holds a NUL character")
    parts = PurePosixPath(path).parts
    if ".." in parts:
        raise SetupFailed(f"{step.name()}: {path!r}: '..' is not allowed in a desktop path")
    if path.startswith("/") and not any(
        path == root or path.startswith(root + "/") for root in WRITABLE
    ):
        raise SetupFailed(
            f"{step.name()}: {path!r} is outside the desktop user's HOME ({HOME}) and /tmp"
        )
    return path
