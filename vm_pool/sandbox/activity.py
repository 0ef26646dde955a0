"""Whether a local desktop's programs are at work, from the kernel's accounting of its cgroup.

After an action on which nothing was drawn, a run without a person waits for a program's late
reaction (``annotation.episodes.observations.settled_quietly``). A program that has not drawn
its reaction yet is working on it: running on a core, waiting for one (the machine is loaded:
the case that makes reactions late), or waiting for the disk. The kernel counts all three for
the desktop's processes together in the desktop's cgroup (cgroup v2, the unified hierarchy:
``cpu.stat``'s ``usage_usec``, and the "some" totals of ``cpu.pressure`` and ``io.pressure``,
the time during which some process of the cgroup waited for a core or for I/O). The desktop is
*idle* once none of these grew by more than ``BUSY_US`` in any sample for ``IDLE_MS``: nothing
on it is working on a reaction, so none is coming from its own programs.

The X server's own work is left out: reading a frame and answering the platform's round trips
are the platform's doing, not a reaction. Its CPU and its wait for a core are read from
``/proc/<pid>/schedstat`` and subtracted. The X server is the desktop's process named ``Xvfb``
that started first (it starts before anything else of the desktop, so a later process that
names itself so is never taken for it: at worst such a program hides its own work, and its own
desktop's wait ends early).

A container desktop's processes are accounted in the container's own cgroup, which the engine
makes in the unified hierarchy too (``vm_pool.providers.docker``); a local desktop's is made by
the sandbox (``vm_pool.sandbox.limits``).

What is not seen: a reaction after a pause of the program's own making (a timer, an answer over
the network) is preceded by a program asleep. Such a reaction is seen by the next observation,
not by this one. Where the hierarchy or its pressure files are missing (cgroup v1 alone, a
kernel without pressure accounting, a container engine on another host, a cloud desktop), there
is no activity to read and the wait is bounded by time alone.
"""

import time
from pathlib import Path
from typing import Any

SAMPLE_MS = 25.0  # how often the counters are read while waiting
# This long with no sample above BUSY_US: the desktop is idle. ``tests/bench/reaction.py``
# replays real programs' reactions (xterm, mousepad's menus and Save As, xmessage, Chromium;
# idle and with both cores busy): every sample between an action and its reaction's first
# drawing held work (the longest stretch without any: 0 ms), so no candidate from 50 to 250 ms
# missed one; four samples leave a margin for programs not measured.
IDLE_MS = 100.0
BUSY_US = 1000  # more work than this in one sample is a program at work (a blinking caret, an
# idle VNC server's wake-up stay under it)


class DesktopActivity:
    """The work of one desktop's processes, from its cgroup directory (cgroup v2)."""

    def __init__(self, cgroup: Path) -> None:
        self._cgroup = cgroup
        # Which pressure files the kernel keeps is decided once: I/O pressure may be missing.
        pressure = (cgroup / "cpu.pressure", cgroup / "io.pressure")
        self._pressure = [path for path in pressure if path.is_file()]
        self._x_server: Path | None = None  # its schedstat: found at the first read, and again
        # whenever a read fails (the X server is gone)
        self._last = 0
        self.busy_at = time.monotonic()

    @classmethod
    def of(cls, cgroup: Path | None) -> "DesktopActivity | None":
        """The activity of the cgroup at ``cgroup``; None where the kernel does not account it
        (see the module)."""
        if cgroup is None:
            return None
        if not all((cgroup / name).is_file() for name in ("cpu.stat", "cpu.pressure")):
            return None
        return cls(cgroup)

    def start(self) -> None:
        """An action was just sent: the desktop counts as busy from now, and the work it does
        from now is measured."""
        self.busy_at = time.monotonic()
        self._last = self.work_us()

    def idle(self) -> bool:
        """Read the counters (a sample): whether nothing worked for ``IDLE_MS`` (see the
        module). Never raises: a cgroup that is gone (the desktop stopped) counts as busy."""
        now = time.monotonic()
        try:
            work = self.work_us()
        except (OSError, ValueError):
            self.busy_at = now
            return False
        grown, self._last = work - self._last, work
        if grown > BUSY_US:
            self.busy_at = now
        return now - self.busy_at >= IDLE_MS / 1000

    def work_us(self) -> int:
        """The desktop's work so far, in microseconds: its CPU and its waits for a core and for
        I/O, less the X server's CPU and wait."""
        work = _field(self._cgroup / "cpu.stat", "usage_usec")
        work += sum(_some_total(path) for path in self._pressure)
        return max(0, work - self._x_server_us())

    def _x_server_us(self) -> int:
        if self._x_server is None:
            self._x_server = self._find_x_server()
            if self._x_server is None:
                return 0
        try:
            ran_ns, waited_ns = self._x_server.read_text().split()[:2]
        except (OSError, ValueError):
            self._x_server = None
            return 0
        return (int(ran_ns) + int(waited_ns)) // 1000

    def _find_x_server(self) -> Path | None:
        """The schedstat file of the desktop's first-started ``Xvfb`` (see the module)."""
        first: tuple[int, Path] | None = None
        for pid in (self._cgroup / "cgroup.procs").read_text().split():
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() != "Xvfb":
                    continue
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            # The start time is the 22nd field; the name (2nd, in parentheses) may hold spaces.
            started = int(stat.rsplit(")", 1)[1].split()[19])
            if first is None or started < first[0]:
                first = (started, Path(f"/proc/{pid}/schedstat"))
        return first[1] if first else None


def activity_of(control: Any) -> DesktopActivity | None:
    """The desktop's activity, where its control has it (a local or container desktop's)."""
    activity = getattr(control, "activity", None)
    return activity() if activity is not None else None


def wait_until_idle(activity: DesktopActivity, limit_s: float) -> float | None:
    """Sample ``activity`` from now until the desktop is idle: the seconds that took, or None
    when it was still at work after ``limit_s``."""
    activity.start()
    started = time.monotonic()
    while not activity.idle():
        if time.monotonic() - started >= limit_s:
            return None
        time.sleep(SAMPLE_MS / 1000)
    return time.monotonic() - started


def _field(path: Path, name: str) -> int:
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return int(value)
    raise ValueError(f"{path} has no {name}")


def _some_total(path: Path) -> int:
    """The "some" line's total of a pressure file, in microseconds."""
    for line in path.read_text().splitlines():
        if line.startswith("some "):
            return int(line.rsplit("total=", 1)[1])
    raise ValueError(f"{path} has no 'some' line")
