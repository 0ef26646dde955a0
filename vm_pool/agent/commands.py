"""Running a command on the desktop for its output (the agent's ``/run``).

A command's output is read until the command itself exits, not until every process that holds
its output closes it: ``xterm -title Notes &`` leaves xterm holding the shell's stdout for as
long as it runs, and waiting for that end of file would wait out the whole timeout. Once the
command has exited, what it wrote is already in the pipes and is read at once; a program it left
in the background writes on into pipes nobody reads (a full pipe blocks only that program, which
is the setup's own affair, as with OSWorld's ``Popen``).

Each stream keeps at most ``KEPT_BYTES`` (its end). Past ``timeout`` the command is killed (its
whole process group), and its output so far comes back with the reason.
"""

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass

KEPT_BYTES = 4_000_000
READ_BYTES = 65536


@dataclass(frozen=True)
class Ran:
    returncode: int | None  # None: killed at its timeout
    stdout: bytes
    stderr: bytes


def run_command(argv: list[str], env: Mapping[str, str], cwd: str, timeout: float) -> Ran:
    """Run ``argv`` and collect its output until it exits (see the module's rules); raises
    FileNotFoundError for a program that does not exist."""
    process = subprocess.Popen(
        argv,
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own group: a timeout kills what it started with it
    )
    if process.stdout is None or process.stderr is None:
        raise RuntimeError("the command's output is not piped")
    out, err = process.stdout.fileno(), process.stderr.fileno()
    kept = {out: bytearray(), err: bytearray()}
    deadline = time.monotonic() + timeout
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in kept:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            exited = process.poll() is not None
            left = deadline - time.monotonic()
            if left <= 0 and not exited:
                timed_out = True
                break
            ready = selector.select(0 if exited else min(left, 0.2))
            if exited and not ready:
                break  # all it wrote is read; a background child may hold the pipes on
            for key, _ in ready:
                _read(key.fd, kept[key.fd], selector)
    if not timed_out:  # both pipes closed: the command is ending, or gave its pipes away
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out:
        _kill(process)
    process.stdout.close()
    process.stderr.close()
    return Ran(None if timed_out else process.returncode, bytes(kept[out]), bytes(kept[err]))


def _read(fd: int, kept: bytearray, selector: selectors.BaseSelector) -> None:
    try:
        data = os.read(fd, READ_BYTES)
    except BlockingIOError:
        return
    if not data:
        selector.unregister(fd)
        return
    kept += data
    if len(kept) > KEPT_BYTES:
        del kept[: len(kept) - KEPT_BYTES]


def _kill(process: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
