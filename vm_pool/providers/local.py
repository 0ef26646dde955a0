"""The ``local`` provider: each desktop is one process group on this host.

The group's leader is the in-desktop agent (``vm_pool.agent``), started in a new session;
it starts Xvfb, openbox, x11vnc (bound to 127.0.0.1, per-desktop passwords, a view-only one
among them) and the template's programs. Stopping the desktop is one ``killpg``; a reset
stops it, restores HOME from the template directory and starts it again.

Displays and ports come from the pool (allocated in PostgreSQL), never from probing sockets.
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

from django.conf import settings

from vm_pool.actions import Action
from vm_pool.agent_client import AgentClient
from vm_pool.providers.base import (
    CommandResult,
    DesktopError,
    DesktopProvider,
    DesktopSpec,
    Endpoint,
    Health,
    Launched,
    Observation,
)

BUILTIN_HOME_TEMPLATE = Path(__file__).resolve().parent.parent / "home_template"
START_TIMEOUT = 20.0


def desktop_dir(desktop_id: int) -> Path:
    return Path(settings.TANDEM_DESKTOP_ROOT) / f"desktop-{desktop_id}"


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LocalControl:
    """Actions and screenshots in-process through XTEST; programs and files through the agent."""

    def __init__(self, spec: DesktopSpec, endpoint: Endpoint) -> None:
        self.agent = AgentClient(endpoint.control_address, spec.agent_key, spec.screen)
        self.display = endpoint.display
        self.screen = spec.screen
        self._x11: Any = None

    @property
    def x11(self) -> Any:
        if self._x11 is None:  # connects to the X server on first use
            from vm_pool.x11 import X11Controller

            self._x11 = X11Controller(
                self.display,
                settle_window_ms=settings.TANDEM_SETTLE_WINDOW_MS,
                settle_min_ms=settings.TANDEM_SETTLE_MIN_MS,
            )
        return self._x11

    def execute(self, action: Action) -> None:
        self.x11.execute(action)

    def observe(self, settle: bool = True) -> Observation:
        return self.x11.observe(settle=settle)

    def launch(self, argv: list[str], window_timeout: float = 0.0) -> Launched:
        return self.agent.launch(argv, window_timeout)

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        return self.agent.run(argv, timeout)

    def put_file(self, path: str, data: bytes) -> None:
        self.agent.put_file(path, data)

    def close(self) -> None:
        if self._x11 is not None:
            self._x11.close()


class LocalProvider(DesktopProvider):
    name = "local"
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"xtest", "view_only_vnc", "home_restore", "launch", "run", "files"}
    )
    allocates_display = True

    def start(self, spec: DesktopSpec) -> Endpoint:
        if spec.display is None or spec.vnc_port is None or spec.control_port is None:
            raise DesktopError("the local provider needs a display, a VNC port and a control port")
        work = desktop_dir(spec.desktop_id)
        work.mkdir(parents=True, exist_ok=True)
        home = work / "home"
        self._restore_home(home, spec.home_template or BUILTIN_HOME_TEMPLATE)
        self._clear_stale_display(spec.display)
        config = {
            "display": spec.display,
            "width": spec.screen.width,
            "height": spec.screen.height,
            "vnc_port": spec.vnc_port,
            "vnc_listen": "localhost",
            "control_host": "127.0.0.1",
            "control_port": spec.control_port,
            "vnc_password": spec.vnc_password,
            "vnc_view_password": spec.vnc_view_password,
            "agent_key": spec.agent_key,
            "home": str(home),
            "work_dir": str(work),
            "autostart": [list(argv) for argv in spec.autostart],
            "window_manager": ["openbox", "--config-file", str(home / ".config/openbox/rc.xml")],
        }
        config_path = work / "agent.json"
        config_path.write_text(json.dumps(config))
        config_path.chmod(0o600)
        log = open(work / "agent.log", "ab")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-m", "vm_pool.agent", "--config", str(config_path)],
            cwd=str(Path(__file__).resolve().parent.parent.parent),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # the agent leads its own process group: one killpg stops all
        )
        # Written before anything waits: a worker that dies now still leaves the group findable.
        (work / "agent.pid").write_text(str(process.pid))
        endpoint = Endpoint(
            instance_id=str(process.pid),
            vnc_host="127.0.0.1",
            vnc_port=spec.vnc_port,
            screen=spec.screen,
            display=f":{spec.display}",
            control_address=f"127.0.0.1:{spec.control_port}",
        )
        agent = AgentClient(endpoint.control_address, spec.agent_key, spec.screen)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                tail = (work / "agent.log").read_text(errors="replace")[-1500:]
                raise DesktopError(f"desktop {spec.desktop_id} failed to start: {tail}")
            if agent.health(timeout=0.5).ok:
                return endpoint
            time.sleep(0.05)
        self._kill(process.pid)
        raise DesktopError(f"desktop {spec.desktop_id} did not become healthy in {START_TIMEOUT}s")

    def reset(self, spec: DesktopSpec) -> Endpoint:
        self.stop(spec)
        return self.start(spec)

    def health(self, spec: DesktopSpec) -> Health:
        if not spec.instance_id or not _alive(int(spec.instance_id)):
            return Health(False, "the desktop's processes are gone")
        if spec.control_port is None:
            return Health(False, "no control port")
        agent = AgentClient(f"127.0.0.1:{spec.control_port}", spec.agent_key, spec.screen)
        return agent.health()

    def stop(self, spec: DesktopSpec) -> None:
        pidfile = desktop_dir(spec.desktop_id) / "agent.pid"
        groups = {int(spec.instance_id)} if spec.instance_id else set()
        if pidfile.exists():
            groups.add(int(pidfile.read_text()))
        for pgid in groups:
            self._kill(pgid)
        pidfile.unlink(missing_ok=True)
        if spec.display is not None:
            self._clear_stale_display(spec.display)

    def control(self, spec: DesktopSpec, endpoint: Endpoint) -> LocalControl:
        return LocalControl(spec, endpoint)

    @staticmethod
    def _kill(pgid: int) -> None:
        for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                # Reap the leader if it is our child; it is gone when its group is empty.
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pgid, os.WNOHANG)
                if not _alive(pgid):
                    return
                time.sleep(0.02)

    @staticmethod
    def _restore_home(home: Path, template: Path) -> None:
        if home.exists():
            shutil.rmtree(home)
        shutil.copytree(template, home, symlinks=True)

    @staticmethod
    def _clear_stale_display(display: int) -> None:
        """Remove the X lock and socket a killed Xvfb left behind (it cannot remove them)."""
        for path in (Path(f"/tmp/.X{display}-lock"), Path(f"/tmp/.X11-unix/X{display}")):
            path.unlink(missing_ok=True)
