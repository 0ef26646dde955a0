"""Task setup: the OSWorld-style steps that prepare a desktop before the first observation.

A task's ``setup`` (and its evaluator's ``postconfig``) is a list of
``{"type": ..., "parameters": {...}}``, with OSWorld's meaning:

- ``launch`` — start a program (``command``: argv list or a string, ``shell``: bool) and wait
  until it maps a window, up to ``window_timeout`` seconds (default 10; 0 does not wait), so
  that the first observation shows it; a program that does not exist, or exits with an error
  before its window shows, fails the setup
- ``execute`` / ``command`` — run a command to completion (``until``: repeat until its exit
  code or output says so); like OSWorld, a non-zero exit is logged and the setup goes on
- ``execute_with_verification`` — run a command, then wait (``max_wait_time``) until its
  ``verification`` holds (``window_exists``, ``command_success``); fails the setup if it never does
- ``open`` — open a file or folder with its default program (``path``)
- ``activate_window`` / ``close_window`` — raise or close the window whose title holds
  ``window_name`` (``strict``: the whole title, case-sensitive; ``by_class``: its class), through
  the window manager (EWMH); like OSWorld, a window that is not there is logged, not fatal
- ``chrome_open_tabs`` / ``chrome_close_tabs`` / ``update_browse_history`` — the running
  browser's tabs and history, over its debugging port (``vm_pool.setup.browser``)
- ``change_wallpaper`` — the desktop's background image (``path``)
- ``file`` — put a file in place (``path`` and ``content`` or ``content_b64``)
- ``download`` — put files in place from ``url``s (``files``: [{url, path, sha256?}]), through the
  task-file cache (by URL, or by content where ``sha256`` is given, which is then checked), fetched
  by the platform under the rules of ``vm_pool.task_files.downloads`` (http and https only, never
  loopback, private, link-local or metadata addresses, limited in size and time) when the cache
  lacks them
- ``sleep`` — wait (``seconds``)

Commands may hold OSWorld's placeholders ``{SCREEN_WIDTH}``, ``{SCREEN_HEIGHT}``,
``{SCREEN_WIDTH_HALF}``, ``{SCREEN_HEIGHT_HALF}`` and ``{CLIENT_PASSWORD}``; arguments that start
with ``~/`` are under the desktop user's HOME.

Everything runs inside the desktop's sandbox as the desktop's user: commands and programs
through its agent, files written by the agent, so a task's paths are the desktop's
(``/home/user/…``, ``~/…``, relative to HOME). A file may be put only under HOME or ``/tmp``.

Every step is checked before any runs: a setup with an unknown step, malformed parameters or a
file path that leaves HOME and ``/tmp`` is refused whole, naming the step. OSWorld's steps that
no desktop here can run (accounts, proxies: ``NOT_RUNNABLE``) are found at import, where the
task is marked with the reason and never claimed.
"""

import base64
import shlex
import time
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from vm_pool.actions import ScreenSize
from vm_pool.desktop import DesktopControl, DesktopError
from vm_pool.setup import browser as setup_browser
from vm_pool.setup import windows
from vm_pool.setup.base import (
    COMMAND_TIMEOUT,
    MAX_SLEEP,
    UNTIL_PAUSE_S,
    UNTIL_TIMEOUT_S,
    SetupFailed,
    SetupRun,
    SetupStep,
    check_desktop_path,
    fetch,
    home_path,
    launch_and_draw,
    seconds,
)


def _argv(run: SetupRun, step: SetupStep, key: str = "command") -> list[str]:
    command = step.parameters.get(key)
    shell = bool(step.parameters.get("shell"))
    if isinstance(command, str) and command.strip():
        command = run.substitute(command)
        return ["bash", "-c", command] if shell else [home_path(a) for a in shlex.split(command)]
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        command = [run.substitute(a) for a in command]
        return ["bash", "-c", " ".join(command)] if shell else [home_path(a) for a in command]
    raise SetupFailed(f"{step.name()}: '{key}' must be a non-empty string or list of strings")


def _file_paths(step: SetupStep) -> list[object]:
    if step.type == "file":
        return [step.parameters.get("path")]
    if step.type == "download" and isinstance(step.parameters.get("files"), list):
        return [f.get("path") for f in step.parameters["files"] if isinstance(f, dict)]
    return []


def _launch(run: SetupRun, step: SetupStep) -> None:
    launch_and_draw(run, step, _argv(run, step))


def _until_met(until: dict[str, Any], returncode: int, stdout: str, stderr: str) -> bool:
    return (
        ("returncode" in until and returncode == until["returncode"])
        or ("stdout" in until and str(until["stdout"]) in stdout)
        or ("stderr" in until and str(until["stderr"]) in stderr)
    )


def _execute(run: SetupRun, step: SetupStep) -> None:
    argv = _argv(run, step)
    timeout = seconds(step, "timeout", COMMAND_TIMEOUT, 600)
    until = step.parameters.get("until") or {}
    if not isinstance(until, dict):
        raise SetupFailed(f"{step.name()}: 'until' must be an object")
    deadline = time.monotonic() + UNTIL_TIMEOUT_S
    while True:
        result = run.control.run(argv, timeout=timeout)
        if not until or _until_met(until, result.returncode, result.stdout, result.stderr):
            break
        if time.monotonic() > deadline:
            run.note(step, f"'until' {until} not met after {UNTIL_TIMEOUT_S:g}s; going on")
            return
        time.sleep(UNTIL_PAUSE_S)
    for stream in ("stdout", "stderr"):
        name = step.parameters.get(stream)
        if isinstance(name, str) and name:
            run.outputs[name] = getattr(result, stream)
    if result.returncode != 0:
        run.note(step, f"exited with {result.returncode}: {result.output[-500:].strip()}")


def _execute_with_verification(run: SetupRun, step: SetupStep) -> None:
    argv = _argv(run, step)
    verification = step.parameters.get("verification") or {}
    if not isinstance(verification, dict):
        raise SetupFailed(f"{step.name()}: 'verification' must be an object")
    wait = seconds(step, "max_wait_time", 10, 120)
    interval = max(seconds(step, "check_interval", 1.0, 30), 0.1)
    result = run.control.run(argv, timeout=COMMAND_TIMEOUT)
    deadline = time.monotonic() + wait
    while True:
        if _verified(run, verification):
            return
        if time.monotonic() > deadline:
            raise SetupFailed(
                f"{step.name()}: {verification} did not hold within {wait:g}s "
                f"(the command exited with {result.returncode}: {result.output[-300:].strip()})"
            )
        time.sleep(interval)


def _verified(run: SetupRun, verification: dict[str, Any]) -> bool:
    if "window_exists" in verification and not windows.window_exists(
        run.control, str(verification["window_exists"])
    ):
        return False
    if "command_success" in verification:
        check = verification["command_success"]
        argv = ["bash", "-c", check] if isinstance(check, str) else [str(a) for a in check]
        if run.control.run(argv, timeout=30).returncode != 0:
            return False
    return True


def _open(run: SetupRun, step: SetupStep) -> None:
    path = step.parameters.get("path")
    if not isinstance(path, str) or not path:
        raise SetupFailed(f"{step.name()}: 'path' must be a non-empty string")
    path = home_path(path)
    # The document's own window, not the program's splash screen: its title names the file.
    launch_and_draw(run, step, ["xdg-open", path], PurePosixPath(path).name)


def _file(run: SetupRun, step: SetupStep) -> None:
    path = check_desktop_path(step, step.parameters.get("path"))
    if isinstance(step.parameters.get("content"), str):
        data = step.parameters["content"].encode()
    elif isinstance(step.parameters.get("content_b64"), str):
        data = base64.b64decode(step.parameters["content_b64"])
    else:
        raise SetupFailed(f"{step.name()}: give 'content' or 'content_b64'")
    run.control.put_file(path, data)


def _download(run: SetupRun, step: SetupStep) -> None:
    files = step.parameters.get("files")
    if not isinstance(files, list) or not files:
        raise SetupFailed(f"{step.name()}: 'files' must be a non-empty list of {{url, path}}")
    for item in files:
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("url", "path")
        ):
            raise SetupFailed(f"{step.name()}: each file needs a 'url' and a 'path'")
        digest = item.get("sha256") if isinstance(item.get("sha256"), str) else None
        data = fetch(step, item["url"], digest)
        run.control.put_file(check_desktop_path(step, item["path"]), data)


def _sleep(run: SetupRun, step: SetupStep) -> None:
    time.sleep(seconds(step, "seconds", 1, MAX_SLEEP))


RUNNERS: dict[str, Callable[[SetupRun, SetupStep], None]] = {
    "launch": _launch,
    "execute": _execute,
    "command": _execute,
    "execute_with_verification": _execute_with_verification,
    "open": _open,
    "file": _file,
    "download": _download,
    "sleep": _sleep,
    "activate_window": windows.activate_window,
    "close_window": windows.close_window,
    "change_wallpaper": windows.change_wallpaper,
    "chrome_open_tabs": setup_browser.open_tabs,
    "chrome_close_tabs": setup_browser.close_tabs,
    "update_browse_history": setup_browser.update_browse_history,
}

# OSWorld's setup types that no desktop here can run, and why. A task that uses one is imported
# and kept, marked with the reason (``Task.cannot_run``), and never claimed: it is not a failure
# waiting to happen at run time.
ACCOUNTS = "needs third-party accounts"
NOT_RUNNABLE: dict[str, str] = {
    "googledrive": f"{ACCOUNTS}: a Google Drive account",
    "login": f"{ACCOUNTS}: a login to a web service",
    "google_sheet_from_template": f"{ACCOUNTS}: a Google account (Sheets)",
    "google_doc_from_template": f"{ACCOUNTS}: a Google account (Docs)",
    "proxy": "needs OSWorld's pool of paid proxies",
    "upload_file": "names a file on the machine that wrote the task ('local_path')",
    "tidy_desktop": "is not implemented by OSWorld itself",
    "act": "is not implemented by OSWorld itself",
    "replay": "is not implemented by OSWorld itself",
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


def run_steps(run: SetupRun, setup: list[dict[str, Any]]) -> None:
    """Run setup steps (a task's setup, an evaluator's postconfig) as part of ``run``."""
    steps = parse_setup(setup)
    for step in steps:
        try:
            RUNNERS[step.type](run, step)
        except DesktopError as error:
            raise SetupFailed(f"{step.name()} failed: {error}") from error


def run_setup(
    control: DesktopControl, setup: list[dict[str, Any]], screen: ScreenSize | None = None
) -> list[str]:
    """Run a task's setup on a desktop; return its log: the failures it went on after, as
    OSWorld does (a command's exit code, a window that was not there)."""
    run = SetupRun(control, screen)
    run_steps(run, setup)
    return run.log
