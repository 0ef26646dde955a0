"""A desktop's activity read from a real cgroup of the unified hierarchy: a process at work
keeps it busy, one asleep lets it go idle, a cgroup that is gone reads as busy."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from vm_pool.sandbox import activity as activity_rules
from vm_pool.sandbox.activity import DesktopActivity
from vm_pool.sandbox.limits import accounting_root, remove_cgroup

BUSY = "import time\nwhile True: pass"
ASLEEP = "import time\nwhile True: time.sleep(1)"


@pytest.fixture
def cgroup():
    base = accounting_root()
    assert base is not None, "this host has no unified cgroup hierarchy to account desktops in"
    directory = base / "tandem" / "activity-test"
    directory.parent.mkdir(exist_ok=True)
    remove_cgroup(directory)
    directory.mkdir()
    yield directory
    remove_cgroup(directory)


def start_in(cgroup: Path, program: str) -> subprocess.Popen:
    join = 'echo $$ > "$1" && shift && exec "$@"'
    argv = [sys.executable, "-c", program]
    return subprocess.Popen(["/bin/sh", "-c", join, "join", str(cgroup / "cgroup.procs"), *argv])


def idle_within(activity: DesktopActivity, seconds: float) -> bool:
    """Sample as the wait for a reaction does, for ``seconds``: whether it went idle."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if activity.idle():
            return True
        time.sleep(activity_rules.SAMPLE_MS / 1000)
    return False


def test_a_program_at_work_keeps_the_desktop_busy_and_one_asleep_lets_it_go_idle(cgroup):
    activity = DesktopActivity.of(cgroup)
    assert activity is not None
    asleep = start_in(cgroup, ASLEEP)
    try:
        activity.start()
        assert idle_within(activity, 10.0)  # the interpreter's start is work too: over now
        activity.start()
        assert not activity.idle()  # busy from the action on, until IDLE_MS passed
        assert idle_within(activity, 1.0)

        busy = start_in(cgroup, BUSY)
        try:
            activity.start()
            assert not idle_within(activity, 1.0)
        finally:
            busy.kill()
            busy.wait()
        activity.start()
        assert idle_within(activity, 1.0)
    finally:
        asleep.kill()
        asleep.wait()


def test_a_cgroup_that_is_gone_reads_as_busy_and_none_where_nothing_is_accounted(cgroup, tmp_path):
    activity = DesktopActivity.of(cgroup)
    assert activity is not None
    activity.start()
    remove_cgroup(cgroup)
    time.sleep(activity_rules.IDLE_MS / 1000)
    assert not activity.idle()  # never idle: its counters cannot be read
    assert DesktopActivity.of(None) is None
    assert DesktopActivity.of(tmp_path) is None  # no cpu.stat, no pressure
