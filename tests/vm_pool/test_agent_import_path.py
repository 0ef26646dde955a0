"""Nothing a desktop program writes can stand in for a module of the agent.

The agent starts with its working directory in the desktop's HOME (or may), and HOME is where
a desktop's programs write. Each provider's command that starts the agent is run here for real,
from a HOME and working directory holding hostile modules (``json.py``, a ``vm_pool`` package,
a ``.pth`` file and ``usercustomize`` in the user's site-packages), each of which leaves a
marker when imported. The same command without ``-s -P`` shows that the plants would be picked
up; with them, none is, and the agent gets as far as reading its config. Last, one real
sandboxed desktop starts from a HOME template holding the same plants.
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vm_pool import pool
from vm_pool.actions import ScreenSize
from vm_pool.desktop import DesktopSpec
from vm_pool.models import DesktopStatus, DesktopTemplate
from vm_pool.providers import desktop_image
from vm_pool.providers.aws import user_data
from vm_pool.providers.docker import INSIDE_AGENT, container_spec
from vm_pool.providers.local import BUILTIN_HOME_TEMPLATE, desktop_dir
from vm_pool.sandbox import bubblewrap as sandbox
from vm_pool.sandbox.limits import SandboxLimits

SYSTEM_PYTHON = "/usr/bin/python3"
SPEC = DesktopSpec(
    desktop_id=5,
    screen=ScreenSize(800, 600),
    agent_key="0123456789abcdef0123456789abcdef",
    display=5,
)
SAFE_FLAGS = ("-s", "-P")

pytestmark = pytest.mark.skipif(
    not Path(SYSTEM_PYTHON).exists(), reason="the desktops' python3 is not installed"
)


def plant(home: Path, markers: Path, python: str, home_inside: Path | None = None) -> None:
    """Hostile modules in ``home`` (also the working directory) and its user site-packages;
    ``home_inside`` is where the process sees that HOME, if elsewhere (``markers`` is its own)."""

    def leave(name: str) -> str:
        return f"import pathlib; pathlib.Path({str(markers / name)!r}).touch()\n"

    (home / "json.py").write_text(leave("json.py"))
    (home / "vm_pool").mkdir()
    (home / "vm_pool" / "__init__.py").write_text(leave("vm_pool"))
    seen_home = home_inside or home
    user_site = subprocess.run(
        [python, "-c", "import site; print(site.getusersitepackages())"],
        env={"HOME": str(seen_home)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site_packages = home / Path(user_site).relative_to(seen_home)
    site_packages.mkdir(parents=True)
    (site_packages / "hostile.pth").write_text(leave("hostile.pth"))
    (site_packages / "usercustomize.py").write_text(leave("usercustomize"))


def run_agent(argv: list[str], env: dict[str, str], home: Path, config: Path) -> str:
    """Run the agent's command from ``home``; its config, ``{}``, fails once it is read."""
    config.write_text("{}")
    argv = [str(config) if i and argv[i - 1] == "--config" else a for i, a in enumerate(argv)]
    done = subprocess.run(
        argv, env=env, cwd=home, input="{}", capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    return done.stderr


def check_no_plant_is_imported(tmp_path: Path, argv: list[str], env: dict[str, str]) -> None:
    home, markers = tmp_path / "home", tmp_path / "markers"
    home.mkdir()
    markers.mkdir()
    plant(home, markers, argv[0])
    env = {**env, "HOME": str(home)}

    unsafe = [word for word in argv if word not in SAFE_FLAGS]
    run_agent(unsafe, env, home, tmp_path / "agent.json")
    assert list(markers.iterdir()), "the plants are not where a plain python3 finds them"
    for marker in markers.iterdir():
        marker.unlink()

    assert [argv[1], argv[2]] == list(SAFE_FLAGS)
    stderr = run_agent(argv, env, home, tmp_path / "agent.json")
    assert sorted(marker.name for marker in markers.iterdir()) == []
    # It ran the real agent, which imported everything and then refused the empty config.
    assert "vm_pool/agent/server.py" in stderr and "AgentConfig.__init__() missing" in stderr


def test_the_local_sandboxs_agent_imports_nothing_from_home(tmp_path):
    files = sandbox.DesktopFiles(tmp_path / "desktops" / "desktop-5")
    limits = SandboxLimits(processes=100, memory_mb=0)
    with sandbox.sandbox_command(files, 200_005, 5, limits, []) as launch:
        argv = launch.argv
    python = len(argv) - 1 - argv[::-1].index(SYSTEM_PYTHON)
    inside = {argv[i + 2]: argv[i + 1] for i, word in enumerate(argv) if word == "--ro-bind"}
    env = {argv[i + 1]: argv[i + 2] for i, word in enumerate(argv) if word == "--setenv"}
    assert env["PYTHONPATH"] == "/opt/tandem"
    env["PYTHONPATH"] = inside["/opt/tandem"]  # the agent's code, bound read-only there

    check_no_plant_is_imported(tmp_path, argv[python:], env)


def test_the_container_desktops_agent_imports_nothing_from_home(tmp_path):
    files = sandbox.DesktopFiles(tmp_path / "desktops" / "desktop-5")
    spec = container_spec(SPEC, files, 200_005)
    assert spec["working_dir"] == sandbox.INSIDE_HOME
    env = dict(spec["environment"])
    assert env["PYTHONPATH"] == INSIDE_AGENT
    env["PYTHONPATH"] = str(sandbox.agent_code(files.root.parent))  # bind-mounted there

    check_no_plant_is_imported(tmp_path, list(spec["command"]), env)


def test_the_machine_desktops_agent_imports_nothing_from_home(tmp_path):
    (line,) = [line for line in user_data(SPEC).splitlines() if line.startswith("systemd-run")]
    words = shlex.split(line)
    assert f"--setenv=PYTHONPATH={desktop_image.APP_DIR}" in words
    argv = words[words.index(desktop_image.PYTHON) :]
    assert argv == list(desktop_image.AGENT_COMMAND)
    argv[0] = sys.executable  # the image's venv python; this one is a venv python too
    code = sandbox.agent_code(tmp_path / "desktops")  # vm_pool as the image has it
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(code)}

    check_no_plant_is_imported(tmp_path, argv, env)


@pytest.mark.django_db(transaction=True)
def test_a_sandboxed_desktop_starts_clean_from_a_home_holding_hostile_modules(tmp_path, settings):
    if os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("Xvfb") is None:
        pytest.skip("sandboxed desktops need root, bubblewrap and Xvfb")
    home = tmp_path / "home-template"
    shutil.copytree(BUILTIN_HOME_TEMPLATE, home)
    inside = Path(sandbox.INSIDE_HOME)
    plant(home, inside / "planted", SYSTEM_PYTHON, home_inside=inside)
    (home / "planted").mkdir()
    template = DesktopTemplate.objects.create(
        name="planted", width=800, height=600, min_ready=0, home_template=str(home)
    )
    desktop = pool.start_desktop(pool.create_desktop(template, settings.TANDEM_HOST).pk)
    try:
        # Its agent found the real vm_pool, not HOME's, and imported nothing of HOME.
        assert desktop.status == DesktopStatus.READY, desktop.broken_reason
        markers = desktop_dir(desktop.pk) / "home" / "planted"
        assert sorted(marker.name for marker in markers.iterdir()) == []

        # A plain python3 of the desktop, started in HOME, does pick the plants up.
        control = pool.control_for(desktop)
        result = control.run(["python3", "-c", "import json"], timeout=60)
        assert result.returncode == 0, result.output
        assert {"json.py", "hostile.pth", "usercustomize"} <= {m.name for m in markers.iterdir()}
    finally:
        pool.stop_desktop(desktop.pk)
