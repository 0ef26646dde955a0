"""The in-desktop agent: the session leader of one desktop, and its control endpoint.

Run as ``python3 -s -P -m vm_pool.agent --config -`` with its config as JSON on standard input,
so that no secret is ever in a file, on a command line or in an environment; ``-P`` and ``-s``
keep the working directory (HOME) and HOME's site-packages off the import path, so nothing a
desktop program writes can stand in for a module (``vm_pool`` is on a read-only PYTHONPATH).
The local provider starts it inside the desktop's sandbox (``vm_pool.sandbox.bubblewrap``) as the
desktop's own user; a container or cloud machine runs it as its main process. It starts a
session D-Bus with the AT-SPI accessibility bus on it (where the desktop's programs show their
accessibility trees), Xvfb, the window manager, a view-only x11vnc and the template's autostart
programs as its own children, so that the whole desktop ends with it. It then serves its control
endpoint (``vm_pool.agent.endpoint``), on a unix socket (local desktops) or a TCP port
(containers, machines), for whoever owns the desktop.

Every request must carry the desktop's agent key in ``X-Tandem-Agent-Key`` (the agent refuses
to start with one shorter than ``MIN_KEY_CHARS``). Programs get an environment built from
nothing: the agent's own environment is never passed on.

The agent imports only the standard library at start (python-xlib for window lists, the
capture stack for ``/observe``, on first use), so the system's ``python3`` runs it.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vm_pool.agent import accessibility
from vm_pool.agent.commands import run_command
from vm_pool.agent.endpoint import host_port, make_handler, serve, unix_path
from vm_pool.agent.files import SCRATCH, read_inside, write_inside
from vm_pool.agent.windows import wait_for_window_manager
from vm_pool.desktop import TERMINAL_RESOURCES, ClipboardInput, input_from_json

# A loaded machine's Xvfb has been seen not to answer within 10 s; the platform's own start
# deadline (60 s by default) bounds the whole start.
X_READY_TIMEOUT = 30.0
WM_READY_TIMEOUT = 20.0
WINDOW_POLL_S = 0.05
SEARCH_PATH = "/usr/local/bin:/usr/bin:/bin"
NOT_FOUND = 127  # the exit code of a shell asked for a program that does not exist
MIN_KEY_CHARS = 32  # the platform's keys are 16 random bytes in hex
# The tails of a command's output ``/run`` sends back, in characters (stderr, the two joined).
RUN_STDOUT_CHARS = 1_000_000
RUN_OUTPUT_CHARS = 20_000
XTERM_RESOURCES = "xterm-resources"


@dataclass(frozen=True)
class AgentConfig:
    display: int
    width: int
    height: int
    listen: str  # "unix:/path" or "host:port"
    vnc_listen: str  # the view-only VNC server: "unix:/path" or "host:port"
    agent_key: str
    home: str
    work_dir: str  # logs
    autostart: list[list[str]]
    window_manager: list[str]
    user: str = "user"
    home_template: str = ""  # copied into HOME before anything starts (a container's tmpfs)

    def __post_init__(self) -> None:
        if len(self.agent_key) < MIN_KEY_CHARS:
            raise ValueError(f"the agent key must have at least {MIN_KEY_CHARS} characters")

    @classmethod
    def load(cls, source: str) -> "AgentConfig":
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
        return cls(**json.loads(text))


def clean_environment(config: AgentConfig) -> dict[str, str]:
    """The environment of the desktop's programs, made from nothing."""
    runtime = f"{SCRATCH}/runtime-{config.user}"
    return {
        "PATH": SEARCH_PATH,
        "HOME": config.home,
        "USER": config.user,
        "LOGNAME": config.user,
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "DISPLAY": f":{config.display}",
        "TMPDIR": SCRATCH,
        "XDG_RUNTIME_DIR": runtime,
        "GSETTINGS_BACKEND": "memory",  # no dconf: keep GTK settings in memory
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={runtime}/bus",
        # Programs show their accessibility trees (read by ``vm_pool.agent.accessibility``):
        # GTK 2's bridge is a module (GTK 3 has it built in and skips these names), Mozilla's
        # programs, Chromium and Qt turn theirs on when told.
        "GTK_MODULES": "gail:atk-bridge",
        "GNOME_ACCESSIBILITY": "1",
        "ACCESSIBILITY_ENABLED": "1",
        "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
        # xterm's screen text on a key, for evaluators (``vm_pool.desktop``'s terminal section).
        "XENVIRONMENT": f"{config.work_dir}/{XTERM_RESOURCES}",
    }


class Desktop:
    """The processes of one desktop, all children of this agent."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.env = clean_environment(config)
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.lock = threading.Lock()
        self.agent_key = config.agent_key
        self._control: Any = None
        self._windows_display: Any = None
        self._windows_lock = threading.Lock()

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(Path(self.config.work_dir) / f"{name}.log", "ab")  # noqa: SIM115
        try:
            process = subprocess.Popen(
                argv,
                env=self.env,
                cwd=self.config.home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        finally:
            log.close()
        self.children[name] = process
        return process

    def start(self) -> None:
        c = self.config
        Path(self.env["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, parents=True, exist_ok=True)
        Path(c.work_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
        Path(self.env["XENVIRONMENT"]).write_text(TERMINAL_RESOURCES)
        self.spawn("dbus", accessibility.session_bus_command(self.env["DBUS_SESSION_BUS_ADDRESS"]))
        self.spawn(
            "xvfb",
            [
                "Xvfb",
                f":{c.display}",
                "-screen",
                "0",
                f"{c.width}x{c.height}x24",
                "-nolisten",
                "tcp",
                # Without it the server resets whenever its last client leaves: the probe below
                # leaving makes the next client (the window manager) fail to connect, and a
                # program that leaves sees its root window settings undone.
                "-noreset",
            ],
        )
        self._wait_for_x()
        self._start_accessibility_bus()
        self.spawn("wm", c.window_manager)
        wait_for_window_manager(f":{c.display}", WM_READY_TIMEOUT)
        # View-only and without a password: who may watch is decided by who can reach the
        # socket (the platform's websockify), and no one controls the desktop through VNC.
        vnc = ["x11vnc", "-display", f":{c.display}", "-viewonly", "-nopw", "-forever"]
        vnc += ["-shared", "-noxdamage", "-quiet", "-noxrecord"]
        vnc_socket = unix_path(c.vnc_listen)
        if vnc_socket is not None:
            vnc += ["-rfbport", "0", "-unixsock", vnc_socket]
        else:
            host, port = host_port(c.vnc_listen)
            vnc += ["-rfbport", str(port), "-listen", host]
        self.spawn("x11vnc", vnc)
        for i, argv in enumerate(c.autostart):
            self.spawn(f"autostart-{i}", argv)

    def _wait_for_x(self) -> None:
        socket_path = Path(f"/tmp/.X11-unix/X{self.config.display}")
        deadline = time.monotonic() + X_READY_TIMEOUT
        seen = "its socket never appeared"
        while time.monotonic() < deadline:
            if self.children["xvfb"].poll() is not None:
                log = self._log("xvfb")
                raise RuntimeError(f"Xvfb :{self.config.display} exited at start: {log}")
            if socket_path.exists():
                left = max(0.1, min(5.0, deadline - time.monotonic()))
                try:
                    probe = subprocess.run(
                        ["xdpyinfo"], env=self.env, capture_output=True, timeout=left, check=False
                    )
                except subprocess.TimeoutExpired:
                    seen = "xdpyinfo got no answer"
                    continue  # a loaded machine's Xvfb answers late: ask again, to the deadline
                if probe.returncode == 0:
                    return
                seen = "xdpyinfo: " + probe.stderr.decode(errors="replace").strip()[-200:]
            time.sleep(0.02)
        raise RuntimeError(
            f"Xvfb :{self.config.display} did not answer in {X_READY_TIMEOUT}s ({seen}); "
            f"its log: {self._log('xvfb')}"
        )

    def _start_accessibility_bus(self) -> None:
        """Start the AT-SPI bus on the session bus, with assistive technology on (the call
        starts ``at-spi-bus-launcher`` by D-Bus activation and returns once it is done)."""
        deadline = time.monotonic() + accessibility.BUS_READY_TIMEOUT_S
        while True:
            done = self.run(accessibility.ENABLE_COMMAND, accessibility.BUS_READY_TIMEOUT_S)
            if done["returncode"] == 0:
                return
            if time.monotonic() > deadline or self.children["dbus"].poll() is not None:
                raise RuntimeError(
                    f"the accessibility bus did not start: {done['output'][-400:].strip()}; "
                    f"the session bus's log: {self._log('dbus')}"
                )
            time.sleep(0.05)  # the session bus is not listening yet

    def _log(self, name: str) -> str:
        """The end of a child's log, for an error that says why it did not start."""
        try:
            tail = (Path(self.config.work_dir) / f"{name}.log").read_bytes()[-400:]
        except OSError:
            return "(no log)"
        return tail.decode(errors="replace").strip() or "(empty)"

    def health(self) -> dict[str, Any]:
        alive = {name: self.children[name].poll() is None for name in ("xvfb", "wm", "x11vnc")}
        alive["vnc_listening"] = _serves_vnc(self.config.vnc_listen)
        return {"ok": all(alive.values()), **alive}

    def control(self) -> Any:
        if self._control is None:
            from vm_pool.x11.controller import X11Controller  # here: it needs a running X server

            self._control = X11Controller(f":{self.config.display}")
        return self._control

    def launch(
        self, argv: list[str], window_timeout: float = 0.0, window_title: str = ""
    ) -> dict[str, Any]:
        """Start a program; with a timeout, wait until a new window is mapped (one whose title
        holds ``window_title``, when given: a document's, not its program's splash screen).

        A program draws nothing while it starts (often a second or more), and a settled screen
        taken in that time would show the desktop without it: the task's first observation must
        show the programs its setup opened.
        """
        before = self.client_windows() if window_timeout > 0 else set()
        name = f"launch-{len(self.children)}-{Path(argv[0]).name}"
        process = self.spawn(name, argv)
        deadline = time.monotonic() + window_timeout
        while time.monotonic() < deadline:
            if process.poll() == NOT_FOUND:  # a shell's "command not found"
                log = (Path(self.config.work_dir) / f"{name}.log").read_bytes()[-500:]
                raise RuntimeError(
                    f"{argv[0]} exited with {NOT_FOUND} before showing a window: "
                    + log.decode(errors="replace").strip()
                )
            if process.returncode is not None:  # done, as a command with no window is
                return {"pid": process.pid, "window": False, "exited": process.returncode}
            new = self.client_windows() - before
            if new and (not window_title or any(window_title in t for t in self.titles(new))):
                return {"pid": process.pid, "window": True}
            time.sleep(WINDOW_POLL_S)
        return {"pid": process.pid, "window": False}

    def inject(self, data: Any) -> None:
        """Pass one input of a person driving the desktop, which the platform recorded first."""
        event = input_from_json(data)
        if isinstance(event, ClipboardInput):
            # xclip stays behind to serve the selection: it must not hold the output pipes.
            script = 'printf %s "$1" | xclip -selection clipboard -i >/dev/null 2>&1'
            self.run(["sh", "-c", script, "sh", event.text], timeout=10)
            return
        with self.lock:
            self.control().inject(event)

    def titles(self, windows: set[int]) -> list[str]:
        """The titles of these windows (EWMH ``_NET_WM_NAME``, else ``WM_NAME``)."""
        from Xlib import X, error

        found = []
        with self._windows_lock:
            x = self._windows_display
            utf8 = x.intern_atom("_NET_WM_NAME")
            for window_id in windows:
                window = x.create_resource_object("window", window_id)
                try:
                    name = window.get_full_property(utf8, X.AnyPropertyType)
                    value = name.value if name is not None else window.get_wm_name()
                except error.XError:  # closed meanwhile
                    continue
                if isinstance(value, bytes):
                    value = value.decode(errors="replace")
                found.append(value or "")
        return found

    def client_windows(self) -> set[int]:
        """The top-level windows the window manager manages (EWMH ``_NET_CLIENT_LIST``)."""
        from Xlib import X
        from Xlib.display import Display

        with self._windows_lock:
            if self._windows_display is None:
                self._windows_display = Display(f":{self.config.display}")
            x = self._windows_display
            prop = x.screen().root.get_full_property(
                x.intern_atom("_NET_CLIENT_LIST"), X.AnyPropertyType
            )
            return set(prop.value) if prop is not None else set()

    def run(self, argv: list[str], timeout: float) -> dict[str, Any]:
        try:
            done = run_command(argv, self.env, str(self.config.home), timeout)
        except FileNotFoundError as error:
            return {"returncode": 127, "output": str(error)}
        if done.returncode is None:
            # 4 characters a byte at most
            tail = (done.stdout + done.stderr)[-RUN_OUTPUT_CHARS // 4 :]
            return {"returncode": -1, "output": f"timed out after {timeout}s: {tail!r}"}
        stdout = done.stdout.decode(errors="replace")
        stderr = done.stderr.decode(errors="replace")
        return {
            "returncode": done.returncode,
            "output": (stdout + stderr)[-RUN_OUTPUT_CHARS:],
            "stdout": stdout[-RUN_STDOUT_CHARS:],
            "stderr": stderr[-RUN_OUTPUT_CHARS:],
        }

    def put_file(self, path: str, data: bytes) -> str:
        return write_inside(path, self.config.home, data)

    def read_file(self, path: str) -> bytes | None:
        return read_inside(path, self.config.home)

    def stop(self) -> None:
        for process in reversed(list(self.children.values())):
            if process.poll() is None:
                process.terminate()
        for process in self.children.values():
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                process.kill()


def _serves_vnc(address: str) -> bool:
    """Whether the VNC server greets a new connection ("RFB 003.008"): x11vnc listens before
    its screen setup is done, and greets a viewer only once it serves one."""
    path = unix_path(address)
    family = socket.AF_UNIX if path is not None else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            if path is not None:
                probe.connect(path)
            else:
                host, port = host_port(address)
                probe.connect(("127.0.0.1" if host in ("", "0.0.0.0") else host, port))
            return probe.recv(12).startswith(b"RFB ")
        except OSError:
            return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--config", required=True, help="the AgentConfig fields as JSON: a file, or - for stdin"
    )
    parser.add_argument(
        "--remove-config",
        action="store_true",
        help="delete the config file once read (it holds the agent key)",
    )
    args = parser.parse_args(argv)
    config = AgentConfig.load(args.config)
    if args.remove_config and args.config != "-":
        Path(args.config).unlink()
    if config.home_template:  # HOME is empty (a container's tmpfs): its files come first
        shutil.copytree(config.home_template, config.home, symlinks=True, dirs_exist_ok=True)
    desktop = Desktop(config)
    server = serve(config.listen, make_handler(desktop))

    def shut_down(signum: int, frame: Any) -> None:
        desktop.stop()
        os._exit(0)

    signal.signal(signal.SIGTERM, shut_down)
    signal.signal(signal.SIGINT, shut_down)
    try:
        desktop.start()
    except Exception as error:  # report any start failure, then leave nothing running
        print(f"desktop failed to start: {error}", file=sys.stderr, flush=True)
        desktop.stop()
        sys.exit(1)
    print("ready", flush=True)
    server.serve_forever()
