"""The evaluation jail: where the bytes an evaluator brings back from a desktop are opened.

Everything a getter gathers was made on the desktop (the model's actions, the annotator's
corrections and a task file's setup control it), and the worker that gathers it runs as root
with the platform's secrets, beside every other episode's desktop work. So the worker never
parses it: ``run`` starts one short-lived process per evaluation that does
(``python -P -m vm_pool.evaluation.jailed``, see ``scoring``), and reads back only a small JSON
verdict, size-capped and schema-checked.

The process is a bubblewrap sandbox started by root, which then becomes the jail's own user
(``TANDEM_EVALUATION_UID``: not root, not any desktop's uid) before Python starts:

- new PID, network (loopback only, down), IPC, UTS and cgroup namespaces, a session of its own,
  killed with its parent;
- a root of its own, read-only: the system (``/usr``), the Python installation and its
  packages, the ``vm_pool`` package at ``/opt/tandem`` and the gathered files at
  ``/evaluation/in``; nothing else of the host (no repository, no ``var/``, no ``docker.sock``,
  no desktop's files), and a private ``/tmp`` of ``TANDEM_EVALUATION_TMP_MB`` as the only place to
  write;
- an environment built from nothing (no secret variable reaches it), one thread per library;
- limits (``prlimit``): address space ``TANDEM_EVALUATION_MEMORY_MB``, CPU time
  ``TANDEM_EVALUATION_CPU_S``, file size, processes, no core dumps; and a wall-clock kill after
  ``TANDEM_EVALUATION_WALL_S``.

A worker not running as root (a developer's own account) cannot become another user: the jail
then runs in a user namespace as the worker's own uid, with everything else the same.

Whatever happens inside, ``run`` returns a verdict: the jail's own, or ``not scored`` with the
limit it hit ("time", "cpu", "memory", "output", "file size", …) or why the jail did not answer.
"""

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from vm_pool.evaluation.jailed import INPUT

PACKAGE = Path(__file__).resolve().parents[1]  # vm_pool
CODE = "/opt/tandem"
VERDICT_BYTES = 256 * 1024
TEXT_CHARS = 1000
STDERR_TAIL = 4000
CONJUNCTIONS = ("single", "and", "or")
MEMORY_SIGNS = ("MemoryError", "Cannot allocate memory", "bad_alloc", "out of memory")


@dataclass(frozen=True)
class JailLimits:
    uid: int
    memory_mb: int
    cpu_s: int
    wall_s: float
    tmp_mb: int
    file_mb: int
    processes: int


def limits_from_settings() -> JailLimits:
    from django.conf import settings

    return JailLimits(
        uid=settings.TANDEM_EVALUATION_UID,
        memory_mb=settings.TANDEM_EVALUATION_MEMORY_MB,
        cpu_s=settings.TANDEM_EVALUATION_CPU_S,
        wall_s=settings.TANDEM_EVALUATION_WALL_S,
        tmp_mb=settings.TANDEM_EVALUATION_TMP_MB,
        file_mb=settings.TANDEM_EVALUATION_FILE_MB,
        processes=settings.TANDEM_EVALUATION_PROCESSES,
    )


def not_scored(limit: str | None, reason: str) -> dict[str, Any]:
    return {"scored": False, "limit": limit, "reason": reason[:TEXT_CHARS]}


def _folders(targets: list[str]) -> list[str]:
    """Make the folders above the bind targets searchable by the jail's user (bubblewrap makes
    them as root's alone)."""
    made: list[str] = []
    for target in targets:
        for parent in reversed(Path(target).parents):
            if str(parent) != "/" and str(parent) not in made:
                made.append(str(parent))
    return [arg for folder in made for arg in ("--perms", "0755", "--dir", folder)]


def _system_binds() -> list[str]:
    binds = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            binds += ["--symlink", os.readlink(path), f"/{name}"]
        elif path.is_dir():
            binds += ["--ro-bind", str(path), f"/{name}"]
    if Path("/etc/ld.so.cache").exists():
        binds += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    # The Python that runs the jail, its packages and its interpreter's home (a virtualenv's
    # interpreter is a link into it), wherever they are installed.
    python = Path(sys.executable)
    homes = {Path(sys.prefix), Path(sys.base_prefix), python.resolve().parent.parent}
    own = sorted(str(home) for home in homes if not str(home).startswith("/usr"))
    binds += _folders([*own, f"{CODE}/vm_pool", str(INPUT)])
    for place in own:
        binds += ["--ro-bind", place, place]
    return binds


def command(folder: Path, limits: JailLimits) -> list[str]:
    """The command line that starts the jail over the gathered files in ``folder``."""
    as_root = os.geteuid() == 0
    bwrap = [
        "bwrap",
        "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent", "--new-session",
        *_system_binds(),
        "--ro-bind", str(PACKAGE), f"{CODE}/vm_pool",
        "--ro-bind", str(folder), str(INPUT),
        "--proc", "/proc",
        "--dev", "/dev",
        "--perms", "1777", "--size", str(limits.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp",
        "--remount-ro", "/",
        "--chdir", "/tmp",
        "--clearenv",
        "--setenv", "PATH", "/usr/bin:/bin",
        "--setenv", "HOME", "/tmp",
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "PYTHONPATH", CODE,
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--setenv", "PYTHONHASHSEED", "0",
        "--setenv", "MALLOC_ARENA_MAX", "2",
        "--setenv", "OMP_NUM_THREADS", "1",
        "--setenv", "OPENBLAS_NUM_THREADS", "1",
        "--setenv", "MKL_NUM_THREADS", "1",
    ]  # fmt: skip
    python = [sys.executable, "-P", "-m", "vm_pool.evaluation.jailed"]
    if as_root:
        drop = ["setpriv", f"--reuid={limits.uid}", f"--regid={limits.uid}", "--clear-groups"]
        inside = [*drop, "--no-new-privs", "--", *python]
    else:
        bwrap += ["--unshare-user", "--cap-drop", "ALL"]
        inside = python
    memory = limits.memory_mb * 1024 * 1024
    files = limits.file_mb * 1024 * 1024
    prlimit = [
        "prlimit",
        f"--as={memory}:{memory}",
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
        f"--fsize={files}:{files}",
        f"--nproc={limits.processes}:{limits.processes}",
        "--core=0:0",
        "--",
    ]
    return [*prlimit, *bwrap, "--", *inside]


def _open_to(folder: Path, limits: JailLimits) -> None:
    """Let the jail's user read the gathered files, and no one else."""
    if os.geteuid() != 0:
        folder.chmod(0o755)
        return
    for path in [folder, *folder.iterdir()]:
        os.chown(path, limits.uid, limits.uid)
        path.chmod(0o500 if path.is_dir() else 0o400)


def run(request: dict[str, Any], folder: Path, limits: JailLimits) -> dict[str, Any]:
    """The verdict of the jail on ``request`` over the files in ``folder`` (see the module)."""
    _open_to(folder, limits)
    with (
        tempfile.TemporaryFile() as given,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        given.write(json.dumps(request).encode())
        given.seek(0)
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                command(folder, limits),
                stdin=given,
                stdout=out,
                stderr=err,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},  # nothing of the platform's
                cwd="/",
                start_new_session=True,
            )
        except OSError as error:
            return not_scored(None, f"the evaluation jail cannot start: {error}")
        try:
            code = process.wait(timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            _kill(process)
            return not_scored("time", f"still running after {limits.wall_s:g} s")
        elapsed = time.monotonic() - started
        return _verdict(code, out, err, limits, elapsed, len(request.get("metrics", [])))


def _kill(process: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _tail(stream: IO[bytes]) -> str:
    stream.seek(0, os.SEEK_END)
    stream.seek(max(0, stream.tell() - STDERR_TAIL))
    return stream.read().decode(errors="replace")


def _verdict(
    code: int, out: IO[bytes], err: IO[bytes], limits: JailLimits, elapsed: float, metrics: int
) -> dict[str, Any]:
    out.seek(0)
    raw = out.read(VERDICT_BYTES + 1)
    if len(raw) > VERDICT_BYTES:
        return not_scored("output", f"the verdict is longer than {VERDICT_BYTES} bytes")
    if code != 0 or not raw:
        return _died(code, _tail(err), limits)
    try:
        answer = json.loads(raw)
        return check_verdict(answer, metrics)
    except (ValueError, RecursionError, TypeError) as error:
        return not_scored(None, f"the evaluation jail's verdict is not one: {error}")


def _died(code: int, stderr: str, limits: JailLimits) -> dict[str, Any]:
    """Why the jail ended without a verdict, from its exit and its last words."""
    signalled = code < 0 or code > 128
    number = -code if code < 0 else code - 128
    if signalled and number == signal.SIGXCPU:
        return not_scored("cpu", f"more than {limits.cpu_s} s of CPU time")
    if any(sign in stderr for sign in MEMORY_SIGNS):
        return not_scored("memory", f"more than {limits.memory_mb} MB of memory")
    if signalled and number == signal.SIGXFSZ:
        return not_scored("file size", f"a file past {limits.file_mb} MB")
    last = stderr.strip().splitlines()[-1:] or [""]
    return not_scored(None, f"the evaluation jail ended with code {code}: {last[0][:300]}")


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or len(value) > TEXT_CHARS + 10:
        raise ValueError(f"{what} is not a short text")
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what} is not a number")
    return float(value)


def check_verdict(answer: Any, metrics: int) -> dict[str, Any]:
    """The verdict as the jail may give it, rebuilt from checked parts; ValueError otherwise."""
    if not isinstance(answer, dict) or not isinstance(answer.get("scored"), bool):
        raise ValueError("a verdict is an object with 'scored'")
    if not answer["scored"]:
        limit = answer.get("limit")
        if limit is not None:
            limit = _text(limit, "limit")[:100]
        return not_scored(limit, _text(answer.get("reason"), "reason"))
    details = answer.get("metrics")
    if not isinstance(details, list) or len(details) > metrics:
        raise ValueError("a verdict's metrics are a list, one per metric at most")
    conjunction = answer.get("conjunction")
    if conjunction not in CONJUNCTIONS:
        raise ValueError("a verdict's conjunction is not one")
    return {
        "scored": True,
        "value": _number(answer.get("value"), "the score"),
        "reason": _text(answer.get("reason"), "reason"),
        "conjunction": conjunction,
        "metrics": [_detail(detail) for detail in details],
    }


def _detail(detail: Any) -> dict[str, Any]:
    if not isinstance(detail, dict):
        raise ValueError("a metric's detail is an object")
    checked: dict[str, Any] = {
        "index": int(_number(detail.get("index"), "index")),
        "func": _text(detail.get("func"), "func"),
    }
    score = detail.get("score")
    checked["score"] = "skipped" if score == "skipped" else _number(score, "a metric's score")
    for key in ("result", "expected", "error"):
        if key in detail:
            checked[key] = _text(detail[key], key)
    return checked
