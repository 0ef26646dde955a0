"""Task setup: the OSWorld-style steps that prepare a desktop before the first observation.

A task's ``setup`` is a list of ``{"type": ..., "parameters": {...}}``. The steps that make
sense on a desktop Tandem controls are supported:

- ``launch`` — start a program (``command``: argv list or a string, ``shell``: bool) and wait
  until it maps a window, up to ``window_timeout`` seconds (default 10; 0 does not wait), so
  that the first observation shows it
- ``execute`` / ``command`` — run a command to completion; a non-zero exit fails the setup
- ``open`` — open a file or folder with its default program (``path``)
- ``chrome_open_tabs`` — open URLs in the desktop's browser (``urls_to_open``)
- ``file`` — put a file in place (``path`` and ``content`` or ``content_b64``)
- ``download`` — put files in place from ``url``s (``files``: [{url, path}]), fetched by the
  platform under the rules of ``vm_pool.downloads`` (http and https only, never loopback,
  private, link-local or metadata addresses, limited in size and time) through the task-file
  cache, so each file is fetched once
- ``sleep`` — wait (``seconds``)

Everything runs inside the desktop's sandbox as the desktop's user: commands and programs
through its agent, files written by the agent, so a task's paths are the desktop's
(``/home/user/…``, ``~/…``, relative to HOME). A file may be put only under HOME or ``/tmp``.

Every step is checked before any runs: a setup with an unsupported step (OSWorld's
``googledrive``, ``login``, …), malformed parameters or a file path that leaves HOME and
``/tmp`` is refused whole, naming the step.
"""

import base64
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from backend.errors import DomainError
from vm_pool.downloads import DownloadRefused, fetch_task_file
from vm_pool.providers.base import DesktopControl, DesktopError

BROWSER = ["chromium", "--no-first-run", "--no-default-browser-check", "--no-sandbox",
           "--disable-gpu", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--password-store=basic"]  # fmt: skip
COMMAND_TIMEOUT = 120.0
WINDOW_TIMEOUT = 10.0
MAX_SLEEP = 60.0
# A program's window is mapped before its content is drawn (LibreOffice pauses for a second or
# more in between): after a launch that waited for its window, the setup waits until two
# settled screens DRAW_QUIET_S apart are the same, for DRAW_TIMEOUT_S at most.
DRAW_QUIET_S = 1.0
DRAW_TIMEOUT_S = 15.0
HOME = "/home/user"  # the desktop user's HOME inside every desktop (OSWorld's convention)
WRITABLE = ("/home/user", "/tmp")


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


def _argv(step: SetupStep, key: str = "command") -> list[str]:
    command = step.parameters.get(key)
    if isinstance(command, str) and command.strip():
        return ["bash", "-c", command] if step.parameters.get("shell") else shlex.split(command)
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        if step.parameters.get("shell"):
            return ["bash", "-c", " ".join(command)]
        return list(command)
    raise SetupFailed(f"{step.name()}: '{key}' must be a non-empty string or list of strings")


def _fetch(step: SetupStep, url: str) -> bytes:
    try:
        return fetch_task_file(url)
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


def _file_paths(step: SetupStep) -> list[object]:
    if step.type == "file":
        return [step.parameters.get("path")]
    if step.type == "download" and isinstance(step.parameters.get("files"), list):
        return [f.get("path") for f in step.parameters["files"] if isinstance(f, dict)]
    return []


def _window_timeout(step: SetupStep) -> float:
    value = step.parameters.get("window_timeout", WINDOW_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 120:
        raise SetupFailed(f"{step.name()}: 'window_timeout' must be a number of seconds, 0 to 120")
    return float(value)


def _until_drawn(control: DesktopControl) -> None:
    from vm_pool.screen_watch import meaningful_change
    from vm_pool.x11_capture import frame_of_png

    deadline = time.monotonic() + DRAW_TIMEOUT_S
    last = frame_of_png(control.observe(settle=True).png)
    while time.monotonic() < deadline:
        time.sleep(DRAW_QUIET_S)
        now = frame_of_png(control.observe(settle=True).png)
        if not meaningful_change(last, now):  # a blinking caret is no drawing
            return
        last = now


def _launch_and_draw(
    control: DesktopControl, step: SetupStep, argv: list[str], window_title: str = ""
) -> None:
    if control.launch(argv, _window_timeout(step), window_title).window:
        _until_drawn(control)


def _launch(control: DesktopControl, step: SetupStep) -> None:
    _launch_and_draw(control, step, _argv(step))


def _execute(control: DesktopControl, step: SetupStep) -> None:
    result = control.run(
        _argv(step), timeout=float(step.parameters.get("timeout", COMMAND_TIMEOUT))
    )
    if result.returncode != 0:
        raise SetupFailed(f"{step.name()} exited with {result.returncode}: {result.output[-500:]}")


def _open(control: DesktopControl, step: SetupStep) -> None:
    path = step.parameters.get("path")
    if not isinstance(path, str) or not path:
        raise SetupFailed(f"{step.name()}: 'path' must be a non-empty string")
    if path == "~" or path.startswith("~/"):  # no shell expands it: the desktop's HOME is known
        path = HOME + path[1:]
    # The document's own window, not the program's splash screen: its title names the file.
    _launch_and_draw(control, step, ["xdg-open", path], PurePosixPath(path).name)


def _open_tabs(control: DesktopControl, step: SetupStep) -> None:
    urls = step.parameters.get("urls_to_open")
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
        raise SetupFailed(f"{step.name()}: 'urls_to_open' must be a non-empty list of URLs")
    _launch_and_draw(control, step, [*BROWSER, *urls])


def _file(control: DesktopControl, step: SetupStep) -> None:
    path = check_desktop_path(step, step.parameters.get("path"))
    if isinstance(step.parameters.get("content"), str):
        data = step.parameters["content"].encode()
    elif isinstance(step.parameters.get("content_b64"), str):
        data = base64.b64decode(step.parameters["content_b64"])
    else:
        raise SetupFailed(f"{step.name()}: give 'content' or 'content_b64'")
    control.put_file(path, data)


def _download(control: DesktopControl, step: SetupStep) -> None:
    files = step.parameters.get("files")
    if not isinstance(files, list) or not files:
        raise SetupFailed(f"{step.name()}: 'files' must be a non-empty list of {{url, path}}")
    for item in files:
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("url", "path")
        ):
            raise SetupFailed(f"{step.name()}: each file needs a 'url' and a 'path'")
        control.put_file(check_desktop_path(step, item["path"]), _fetch(step, item["url"]))


def _sleep(control: DesktopControl, step: SetupStep) -> None:
    seconds = step.parameters.get("seconds", 1)
    if not isinstance(seconds, int | float) or not 0 <= seconds <= MAX_SLEEP:
        raise SetupFailed(f"{step.name()}: 'seconds' must be a number from 0 to {MAX_SLEEP:g}")
    time.sleep(seconds)


RUNNERS: dict[str, Callable[[DesktopControl, SetupStep], None]] = {
    "launch": _launch,
    "execute": _execute,
    "command": _execute,
    "open": _open,
    "chrome_open_tabs": _open_tabs,
    "file": _file,
    "download": _download,
    "sleep": _sleep,
}


def parse_setup(setup: list[dict[str, Any]]) -> list[SetupStep]:
    """Check every step before anything runs; refuse the whole setup naming the first bad step."""
    steps = []
    for number, raw in enumerate(setup, start=1):
        kind = raw.get("type") if isinstance(raw, dict) else None
        parameters = raw.get("parameters", {}) if isinstance(raw, dict) else None
        if not isinstance(kind, str) or not isinstance(parameters, dict):
            raise SetupFailed(f"setup step {number} is not {{'type': …, 'parameters': {{…}}}}")
        step = SetupStep(number, kind, parameters)
        if kind not in RUNNERS:
            raise SetupFailed(
                f"{step.name()} is not supported on this desktop; supported: "
                + ", ".join(sorted(RUNNERS))
            )
        for path in _file_paths(step):
            check_desktop_path(step, path)
        steps.append(step)
    return steps


def run_setup(control: DesktopControl, setup: list[dict[str, Any]]) -> int:
    """Run a task's setup on a desktop; return the number of steps run."""
    steps = parse_setup(setup)
    for step in steps:
        try:
            RUNNERS[step.type](control, step)
        except DesktopError as error:
            raise SetupFailed(f"{step.name()} failed: {error}") from error
    return len(steps)
