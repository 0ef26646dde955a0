"""The ``local`` provider: each desktop is a sandbox on this host (see
``vm_pool.sandbox.bubblewrap``).

The sandbox's first process is the in-desktop agent (``vm_pool.agent``), running as the
desktop's own user; it starts Xvfb, openbox, a view-only x11vnc on a unix socket and the
template's programs. Stopping the desktop is one ``killpg`` of the sandbox's launcher (the
sandbox dies with it) and the removal of its cgroups; a reset stops it, restores HOME from the
template directory and starts it again.

Displays come from the pool (allocated in PostgreSQL), never from probing sockets; a display
also names the desktop's host user.
"""

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings
from mss.exception import ScreenShotError
from Xlib.error import ConnectionClosedError, DisplayError, XError

from vm_pool.actions import Action, ActionType
from vm_pool.agent_client import AgentClient
from vm_pool.desktop import (
    AccessibilityTree,
    ClipboardInput,
    CommandResult,
    DesktopError,
    DesktopSpec,
    Endpoint,
    Health,
    Input,
    Launched,
    Observation,
)
from vm_pool.providers.base import DesktopProvider
from vm_pool.sandbox import bubblewrap as sandbox
from vm_pool.sandbox import limits as sandbox_limits
from vm_pool.sandbox import network
from vm_pool.sandbox.activity import DesktopActivity

if TYPE_CHECKING:
    from vm_pool.screen.capture import Frame
    from vm_pool.screen.damage import DamageReports
    from vm_pool.x11.controller import X11Controller

logger = logging.getLogger(__name__)

BUILTIN_HOME_TEMPLATE = Path(__file__).resolve().parent.parent / "home_template"
START_TIMEOUT = 20.0
# What a lost X connection raises: python-xlib's errors and its socket's for the input
# connection, mss's for the capture connection (which fails an assert on a reply that never came).
X_CONNECTION_ERRORS = (
    ConnectionClosedError,
    DisplayError,
    XError,
    OSError,
    ScreenShotError,
    AssertionError,
)
# A job waits this long at most for another job of the same desktop; longer, that one is stuck.
BUSY_WAIT_S = 120.0
# An action that does nothing on the desktop: executing it is one round trip to the X server.
_NOTHING = Action(ActionType.FINISHED)


def desktop_dir(desktop_id: int) -> Path:
    return Path(settings.TANDEM_DESKTOP_ROOT) / f"desktop-{desktop_id}"


def desktop_files(desktop_id: int) -> sandbox.DesktopFiles:
    return sandbox.DesktopFiles(desktop_dir(desktop_id))


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LocalControl:
    """Actions and screenshots in-process through XTEST; programs and files through the agent.

    The X connection is made on first use and used by one call at a time: two jobs of the
    desktop never interleave their events, and jobs of other desktops never wait for them. A
    lost connection is replaced, never fatal on its own: an observation is taken again on a new
    one; an action runs on a new one only when the old one was found dead before anything of it
    was sent, so that no action runs twice. When the X server itself is gone, the call fails
    with a ``DesktopError`` that says so.
    """

    def __init__(
        self,
        spec: DesktopSpec,
        endpoint: Endpoint,
        find_activity: Callable[[], Path | None] = lambda: None,
    ) -> None:
        self.agent = AgentClient(endpoint.control_address, spec.agent_key, spec.screen)
        # The desktop's cgroup is looked for when its work is first asked for (``activity``),
        # not here: the annotator's steps never ask, and a container's takes an engine call.
        self._find_activity = find_activity
        self._activity: DesktopActivity | None = None
        self._activity_found = False
        self.desktop_id = spec.desktop_id
        self.display = endpoint.display
        self.screen = spec.screen
        self._x11: X11Controller | None = None
        self._turn = threading.Lock()
        self._closed = False

    def execute(self, action: Action) -> None:
        with self._serialised():
            x11 = self._connection()
            try:
                x11.execute(_NOTHING)  # a round trip: is the connection alive before the action?
            except X_CONNECTION_ERRORS as error:
                self._disconnect(error)
                x11 = self._connection()
            try:
                x11.execute(action)
            except X_CONNECTION_ERRORS as error:
                self._disconnect(error)
                raise DesktopError(
                    f"desktop {self.desktop_id}: its X connection failed during the "
                    f"{action.type} action, which may have run in part, so it is not repeated "
                    f"({_describe(error)})"
                ) from error

    def observe(self, settle: bool = True) -> Observation:
        with self._serialised():
            try:
                return self._connection().observe(settle=settle)
            except X_CONNECTION_ERRORS as error:
                self._disconnect(error)
            # An observation only reads the screen: taking it again on a new connection is safe.
            try:
                return self._connection().observe(settle=settle)
            except X_CONNECTION_ERRORS as error:
                self._disconnect(error)
                raise DesktopError(
                    f"desktop {self.desktop_id}: its screen at {self.display} cannot be read "
                    f"({_describe(error)})"
                ) from error

    def inject(self, event: Input) -> None:
        if isinstance(event, ClipboardInput):
            self.agent.inject(event)
            return
        with self._serialised():
            try:
                self._connection().inject(event)
            except X_CONNECTION_ERRORS as error:
                self._disconnect(error)
                raise DesktopError(
                    f"desktop {self.desktop_id}: its X connection failed passing an input "
                    f"({_describe(error)})"
                ) from error

    def grab_frame(self, wait_s: float = 0.0) -> "Frame | None":
        """The screen as it is now, raw, for watching it between steps; None when a job holds
        the desktop for longer than ``wait_s`` (the watcher looks again later, never waits)."""
        acquired = self._turn.acquire(timeout=wait_s) if wait_s > 0 else self._turn.acquire(False)
        if not acquired:
            return None
        try:
            return self._connection().grab_frame()
        except X_CONNECTION_ERRORS as error:
            self._disconnect(error)
            raise DesktopError(
                f"desktop {self.desktop_id}: its screen at {self.display} cannot be read "
                f"({_describe(error)})"
            ) from error
        finally:
            self._turn.release()
            self._disconnect_if_closed()

    def damage_reports(self) -> "DamageReports | None":
        """The X server's damage reports of the desktop, for watching it and waiting for it to
        stay quiet without grabbing frames; None where its server gives none, or before the
        first action or observation connected. They close with the connection."""
        x11 = self._x11
        return x11.damage if x11 is not None else None

    def activity(self) -> DesktopActivity | None:
        """The work of the desktop's processes, where the kernel accounts it
        (``vm_pool.sandbox.activity``): a local or container desktop's cgroup."""
        if not self._activity_found:
            self._activity = DesktopActivity.of(self._find_activity())
            self._activity_found = True
        return self._activity

    def launch(
        self, argv: list[str], window_timeout: float = 0.0, window_title: str = ""
    ) -> Launched:
        return self.agent.launch(argv, window_timeout, window_title)

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        return self.agent.run(argv, timeout)

    def put_file(self, path: str, data: bytes) -> None:
        self.agent.put_file(path, data)

    def read_file(self, path: str) -> bytes | None:
        return self.agent.read_file(path)

    def devtools(self, request: dict[str, Any]) -> dict[str, Any]:
        return self.agent.devtools(request)

    def accessibility_tree(self) -> AccessibilityTree:
        return self.agent.accessibility_tree()

    def close(self) -> None:
        """Close the X connection and refuse X calls from now on. Never raises for a connection
        that is already lost; a call in flight on another thread closes it when it returns."""
        self._closed = True
        self._disconnect_if_closed()

    @contextlib.contextmanager
    def _serialised(self) -> Iterator[None]:
        if not self._turn.acquire(timeout=BUSY_WAIT_S):
            raise DesktopError(
                f"desktop {self.desktop_id} has been busy with another job for {BUSY_WAIT_S:.0f}s"
            )
        try:
            yield
        finally:
            self._turn.release()
            self._disconnect_if_closed()

    def _connection(self) -> "X11Controller":
        if self._closed:
            raise DesktopError(
                f"desktop {self.desktop_id}: this control was closed "
                "(its desktop was reset or stopped)"
            )
        if self._x11 is None:
            from vm_pool.x11.controller import X11Controller  # weight: python-xlib

            try:
                self._x11 = X11Controller(
                    self.display,
                    settle_window_ms=settings.TANDEM_SETTLE_WINDOW_MS,
                    settle_min_ms=settings.TANDEM_SETTLE_MIN_MS,
                )
            except X_CONNECTION_ERRORS as error:
                raise DesktopError(
                    f"desktop {self.desktop_id}: its X server at {self.display} does not answer; "
                    f"the desktop is gone or broken ({_describe(error)})"
                ) from error
        return self._x11

    def _disconnect(self, cause: BaseException | None = None) -> None:
        x11, self._x11 = self._x11, None
        if x11 is None:
            return
        if cause is not None:
            logger.warning(
                "desktop %s: X connection to %s lost (%s)",
                self.desktop_id,
                self.display,
                _describe(cause),
            )
        try:
            x11.close()
        except X_CONNECTION_ERRORS as error:  # a lost connection cannot be closed cleanly
            logger.info("desktop %s: closed a lost X connection (%s)", self.desktop_id, error)

    def _disconnect_if_closed(self) -> None:
        if self._closed and self._turn.acquire(blocking=False):
            try:
                self._disconnect()
            finally:
                self._turn.release()


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class LocalProvider(DesktopProvider):
    name = "local"
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"xtest", "view_only_vnc", "home_restore", "launch", "run", "files", "sandbox"}
    )
    allocates_display = True

    def start(self, spec: DesktopSpec) -> Endpoint:
        if spec.display is None:
            raise DesktopError("the local provider needs a display")
        sandbox.require_root()
        files = desktop_files(spec.desktop_id)
        uid = sandbox.desktop_uid(settings.TANDEM_SANDBOX_UID_BASE, spec.display)
        limits = sandbox_limits.SandboxLimits(
            settings.TANDEM_SANDBOX_MAX_PROCESSES, settings.TANDEM_SANDBOX_MEMORY_MB
        )
        home_mb = settings.TANDEM_SANDBOX_HOME_MB
        if limits.memory_mb and home_mb >= limits.memory_mb:
            raise DesktopError(
                f"TANDEM_SANDBOX_HOME_MB ({home_mb}) must be below TANDEM_SANDBOX_MEMORY_MB "
                f"({limits.memory_mb}): the files of a desktop's HOME are counted in its memory"
            )
        home = spec.home_template or BUILTIN_HOME_TEMPLATE
        try:
            sandbox.prepare_files(files, uid, home, home_mb)
            procs = sandbox_limits.make_cgroups(spec.display, limits)
            config = sandbox.agent_config(spec)
            log = files.root / "agent.log"
            info_read, info_write = os.pipe() if spec.internet else (None, None)
            with sandbox.sandbox_command(
                files, uid, spec.desktop_id, limits, procs, info_write
            ) as launch:
                process = sandbox.start_process(launch, config, log)
        except BaseException:
            self.stop(spec)  # nothing of it left behind: its cgroups, its HOME's mount
            raise
        # Written before anything waits: a worker that dies now still leaves the group findable.
        (files.root / "agent.pid").write_text(str(process.pid))
        if info_read is not None:
            try:
                first = network.read_first_pid(info_read)
                network.connect_internet(first, procs, settings.TANDEM_SANDBOX_INTERNET_ALLOW, log)
            except DesktopError:
                self.stop(spec)
                raise
        sandbox.link_display(files, spec.display)
        endpoint = sandbox.endpoint(files, spec, str(process.pid))
        agent = AgentClient(endpoint.control_address, spec.agent_key, spec.screen)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                tail = log.read_text(errors="replace")[-1500:]
                self.stop(spec)
                raise DesktopError(f"desktop {spec.desktop_id} failed to start: {tail}")
            if files.agent_socket.exists() and agent.health(timeout=0.5).ok:
                sandbox.seal(files)
                return endpoint
            time.sleep(0.02)
        self.stop(spec)
        raise DesktopError(f"desktop {spec.desktop_id} did not become healthy in {START_TIMEOUT}s")

    def reset(self, spec: DesktopSpec) -> Endpoint:
        self.stop(spec)
        return self.start(spec)

    def health(self, spec: DesktopSpec) -> Health:
        if not spec.instance_id or not _alive(int(spec.instance_id)):
            return Health(False, "the desktop's processes are gone")
        socket = desktop_files(spec.desktop_id).agent_socket
        return AgentClient(f"unix:{socket}", spec.agent_key, spec.screen).health()

    def stop(self, spec: DesktopSpec) -> None:
        pidfile = desktop_dir(spec.desktop_id) / "agent.pid"
        groups = {int(spec.instance_id)} if spec.instance_id else set()
        if pidfile.exists():
            groups.add(int(pidfile.read_text()))
        for pgid in groups:
            self._kill(pgid)
        pidfile.unlink(missing_ok=True)
        if spec.display is not None:
            sandbox_limits.kill_cgroups(spec.display)
            sandbox.unlink_display(spec.display)
        sandbox.release_files(desktop_files(spec.desktop_id))

    def control(self, spec: DesktopSpec, endpoint: Endpoint) -> LocalControl:
        display = spec.display
        if display is None:
            return LocalControl(spec, endpoint)
        return LocalControl(spec, endpoint, lambda: sandbox_limits.activity_cgroup(display))

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
