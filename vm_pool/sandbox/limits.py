"""The limits of a local desktop: cgroups for its memory and processes (v1 or v2).

Every process of a desktop's sandbox — and its user-mode networking, when it has one — joins
the desktop's cgroups before it starts (``in_cgroups``), so that ``TANDEM_SANDBOX_MEMORY_MB``
bounds the memory of them all together (the kernel kills inside the desktop when it is
exceeded) and stopping the desktop can kill whatever is left in them. The number of processes
is bounded twice: by the pids cgroup and by the kernel's per-user count (``prlimit``), exact
because a desktop's uid is its own. On a host with cgroup v1, a desktop also joins a cgroup of
the unified hierarchy where one is mounted beside it: no limits, the kernel's accounting of its
processes' work together (``vm_pool.sandbox.activity``), as a v2 host's cgroup has it.
"""

import os
import signal
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from vm_pool.desktop import DesktopError

CGROUP_ROOT = Path("/sys/fs/cgroup")
UNIFIED = CGROUP_ROOT / "unified"  # cgroup v2 beside v1 (a hybrid host)


@dataclass(frozen=True)
class SandboxLimits:
    processes: int
    memory_mb: int  # 0: no memory limit


def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup path for a v1 controller ("" for v2's unified hierarchy)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (controller == "" and controllers == "") or controller in controllers.split(","):
            return path
    return None


def _cgroup_name(display: int) -> str:
    """A desktop's cgroup's name in every hierarchy. Cgroups are the host's, so it is named
    after the desktop's display, which is the host's too (its X lock file), as its uid is: two
    deployments or test runs on one host never share one."""
    return f"tandem-display-{display}"


def accounting_root() -> Path | None:
    """The root of the unified hierarchy (cgroup v2), where the kernel accounts a desktop's
    processes' work together (``vm_pool.sandbox.activity``): the host's cgroupfs on a v2 host,
    the one mounted beside v1 on a hybrid host; None on cgroup v1 alone."""
    for root in (CGROUP_ROOT, UNIFIED):
        if (root / "cgroup.controllers").exists():
            return root
    return None


def cgroup_dirs(display: int) -> list[Path]:
    """The cgroup directories that hold one desktop (memory and pids; v1 or v2)."""
    name = _cgroup_name(display)
    accounting = accounting_root()
    if accounting == CGROUP_ROOT:
        return [CGROUP_ROOT / "tandem" / name]
    dirs = []
    for controller in ("memory", "pids"):
        own = _own_cgroup(controller)
        if own is not None and (CGROUP_ROOT / controller).is_dir():
            dirs.append(CGROUP_ROOT / controller / own.lstrip("/") / name)
    if dirs and accounting is not None:
        dirs.append(accounting / "tandem" / name)  # no limits: its accounting (``activity``)
    return dirs


def activity_cgroup(display: int) -> Path | None:
    """The desktop's cgroup of the unified hierarchy (``accounting_root``); None where there is
    none (cgroup v1 alone, or the desktop is not running)."""
    root = accounting_root()
    if root is None:
        return None
    directory = root / "tandem" / _cgroup_name(display)
    return directory if directory.is_dir() else None


def make_cgroups(display: int, limits: SandboxLimits) -> list[Path]:
    """Create the desktop's cgroups with its limits; return the ``cgroup.procs`` files to join."""
    dirs = cgroup_dirs(display)
    if not dirs:
        raise DesktopError("no memory or pids cgroup to limit the desktop with")
    try:
        if accounting_root() == CGROUP_ROOT:
            parent = dirs[0].parent
            parent.mkdir(exist_ok=True)
            (CGROUP_ROOT / "cgroup.subtree_control").write_text("+memory +pids")
            (parent / "cgroup.subtree_control").write_text("+memory +pids")
        for directory in dirs:
            remove_cgroup(directory)
            directory.parent.mkdir(exist_ok=True)
            directory.mkdir()
            if (directory / "pids.max").exists():
                (directory / "pids.max").write_text(str(limits.processes))
            if limits.memory_mb:
                memory = str(limits.memory_mb * 1024 * 1024)
                for knob in ("memory.max", "memory.limit_in_bytes"):
                    if (directory / knob).exists():
                        (directory / knob).write_text(memory)
                if (directory / "memory.swap.max").exists():
                    (directory / "memory.swap.max").write_text("0")
    except OSError as error:
        raise DesktopError(
            f"cannot make the desktop's cgroup ({error}); set TANDEM_SANDBOX_MEMORY_MB=0 to run "
            "desktops without a memory limit"
        ) from error
    return [directory / "cgroup.procs" for directory in dirs]


def kill_cgroups(display: int) -> None:
    """Kill whatever is still in the desktop's cgroups and remove them."""
    for directory in cgroup_dirs(display):
        remove_cgroup(directory)


def remove_cgroup(directory: Path, kill: int = signal.SIGKILL) -> None:
    """Kill what is left in a desktop's cgroup, then remove it (a cgroup must be empty)."""
    if not directory.exists():
        return
    for _ in range(100):
        procs = (directory / "cgroup.procs").read_text().split()
        if not procs:
            break
        for pid in procs:
            with suppress(ProcessLookupError):
                os.kill(int(pid), kill)
        time.sleep(0.02)
    with suppress(OSError):
        directory.rmdir()


def in_cgroups(cgroup_procs: list[Path], argv: list[str]) -> list[str]:
    join = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 111; shift; done; shift; exec "$@"'
    return ["/bin/sh", "-c", join, "tandem-desktop", *map(str, cgroup_procs), "--", *argv]
