"""Real X desktops for tests and benchmarks: Xvfb and openbox in a process group of their own.

``running_desktop(width, height, home)`` starts ``Xvfb :N -screen 0 WxHx24 -nolisten tcp`` as
the leader of a new process group, waits until the display answers, starts openbox and waits
until it manages the screen. Programs started with ``XDesktop.launch`` join the same process
group, with DISPLAY set and HOME in the given directory; leaving the block kills the group.

Display numbers come from ``DISPLAYS``, above the range the desktop pool allocates from
(``TANDEM_DISPLAY_RANGE``), so tests never take a number a local desktop may use. A number
whose lock file exists is skipped; one taken in between makes Xvfb exit, and the next is tried.

The fixtures: ``x_desktop`` is a 1280x800 desktop for one test, ``desktop_factory(w, h)``
starts desktops of other sizes.
"""

import itertools
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from random import Random

import pytest
from PIL import Image, ImageDraw, ImageFont
from Xlib import X, Xatom
from Xlib.display import Display
from Xlib.error import DisplayError, XError
from Xlib.protocol.event import ClientMessage
from Xlib.xobject.drawable import Window as XWindow

from tests.support.services import parallel_process
from vm_pool.actions import Point, ScreenSize

DISPLAYS = range(700, 900)
BUSY_FONT = "DejaVuSans.ttf"
START_TIMEOUT = 10.0
FOCUS_GRACE = 2.0


def desktop_user_processes(display: int) -> list[Path]:
    """The ``/proc`` entries of a sandboxed local desktop's processes: those of the desktop's
    own user (its uid follows its display)."""
    from django.conf import settings

    uid = settings.TANDEM_SANDBOX_UID_BASE + display
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and proc.stat().st_uid == uid:
                found.append(proc)
        except OSError:  # the process ended meanwhile
            continue
    return found


def sandbox_processes(display: int) -> dict[int, str]:
    """The host pids and command lines of a sandboxed local desktop's processes."""
    found = {}
    for proc in desktop_user_processes(display):
        try:
            found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
    return found


def sandbox_xvfb(display: int) -> list[int]:
    """The host pid of a sandboxed desktop's X server (inside, it is display :0)."""
    return [pid for pid, line in sandbox_processes(display).items() if line.startswith("Xvfb ")]


@dataclass(frozen=True)
class Window:
    """A window's id and its rectangle in screen pixels."""

    id: int
    x: int
    y: int
    width: int
    height: int

    @property
    def center(self) -> Point:
        return Point(self.x + self.width // 2, self.y + self.height // 2)


class XDesktop:
    """A running desktop: its display, size, HOME, and helpers to run programs in it."""

    def __init__(self, connection: Display, size: ScreenSize, home: Path, group: int) -> None:
        display = connection.get_display_name()
        self.display = display
        self.size = size
        self.home = home
        self.group = group
        self.env = {
            **os.environ,
            "DISPLAY": display,
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "GSETTINGS_BACKEND": "memory",  # no D-Bus session: keep GTK settings in memory
            "NO_AT_BRIDGE": "1",
        }
        self.env.pop("XAUTHORITY", None)
        self.processes: list[subprocess.Popen[bytes]] = []
        self._x = connection

    def launch(self, *argv: str) -> subprocess.Popen[bytes]:
        """Start a program in the desktop; it is killed with the desktop."""
        process = subprocess.Popen(
            argv,
            env=self.env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            process_group=self.group,
        )
        self.processes.append(process)
        return process

    def run(self, *argv: str, timeout: float = 10.0) -> str:
        """Run a program to completion in the desktop and return its output."""
        done = subprocess.run(
            argv, env=self.env, cwd=self.home, capture_output=True, timeout=timeout, check=True
        )
        return done.stdout.decode()

    def wait_for_window_manager(self, timeout: float = START_TIMEOUT) -> None:
        check = self._x.intern_atom("_NET_SUPPORTING_WM_CHECK")
        root = self._x.screen().root
        deadline = time.monotonic() + timeout
        while root.get_full_property(check, Xatom.WINDOW) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no window manager on {self.display} after {timeout}s")
            time.sleep(0.01)

    def set_wallpaper(self, image: Image.Image) -> None:
        """Paint ``image`` (the screen's size) as the root window's background."""
        screen = self._x.screen()
        width, height = image.size
        pixmap = screen.root.create_pixmap(width, height, screen.root_depth)
        gc = pixmap.create_gc()
        pixels = image.convert("RGB").tobytes("raw", "BGRX")  # a 24-bit ZPixmap's layout
        rows = max(1, 200_000 // (width * 4))  # stay below the core protocol's request size
        for top in range(0, height, rows):
            count = min(rows, height - top)
            data = pixels[top * width * 4 : (top + count) * width * 4]
            pixmap.put_image(gc, 0, top, width, count, X.ZPixmap, screen.root_depth, 0, data)
        screen.root.change_attributes(background_pixmap=pixmap)
        screen.root.clear_area(0, 0, width, height)
        self._x.sync()

    def windows(self) -> list[Window]:
        """The top-level windows openbox manages, oldest first."""
        root = self._x.screen().root
        clients = root.get_full_property(self._x.intern_atom("_NET_CLIENT_LIST"), Xatom.WINDOW)
        ids = list(clients.value) if clients is not None else []
        return [self._window(self._x.create_resource_object("window", i)) for i in ids]

    def wait_for_window(self, wm_class: str, timeout: float = START_TIMEOUT) -> Window:
        """Wait for a managed, mapped window of ``wm_class`` to have the keyboard focus.

        openbox focuses a new window itself; one that is mapped but still unfocused after
        ``FOCUS_GRACE`` seconds (openbox can lose that race on a loaded machine) is asked for
        by an EWMH ``_NET_ACTIVE_WINDOW`` request, as a pager would.
        """
        active = self._x.intern_atom("_NET_ACTIVE_WINDOW")
        root = self._x.screen().root
        start = time.monotonic()
        seen: dict[int, str] = {}
        while time.monotonic() < start + timeout:
            focused = root.get_full_property(active, Xatom.WINDOW)
            focused_ids = list(focused.value) if focused is not None else []
            for window in self.windows():
                resource = self._x.create_resource_object("window", window.id)
                with suppress(XError):
                    classes = resource.get_wm_class() or ()
                    mapped = resource.get_attributes().map_state == X.IsViewable
                    seen[window.id] = f"{'/'.join(classes) or '?'} mapped={mapped}"
                    if wm_class not in classes or not mapped:
                        continue
                    if window.id in focused_ids:
                        return window
                    if time.monotonic() > start + FOCUS_GRACE:
                        self._request_focus(resource)
            time.sleep(0.02)
        alive = [" ".join(map(str, p.args)) for p in self.processes if p.poll() is None]
        raise TimeoutError(
            f"no focused {wm_class} window on {self.display} in {timeout}s; "
            f"windows: {seen or 'none'}; running: {alive}"
        )

    def _request_focus(self, window: XWindow) -> None:
        """Ask the window manager to activate ``window`` (source 2: a pager, not an app)."""
        request = ClientMessage(
            window=window,
            client_type=self._x.intern_atom("_NET_ACTIVE_WINDOW"),
            data=(32, [2, X.CurrentTime, 0, 0, 0]),
        )
        mask = X.SubstructureRedirectMask | X.SubstructureNotifyMask
        self._x.screen().root.send_event(request, event_mask=mask)
        self._x.flush()

    def popups(self) -> list[Window]:
        """Mapped override-redirect windows on the screen: menus, tooltips and the like."""
        found = []
        for child in self._x.screen().root.query_tree().children:
            with suppress(XError):
                attributes = child.get_attributes()
                if attributes.override_redirect and attributes.map_state == X.IsViewable:
                    window = self._window(child)
                    if window.x >= 0 and window.y >= 0 and window.width * window.height > 1:
                        found.append(window)
        return found

    def subwindows(self, window: Window) -> list[Window]:
        """Every mapped window inside ``window``, at any depth, in screen pixels."""
        found: list[Window] = []
        pending = [self._x.create_resource_object("window", window.id)]
        while pending:
            for child in pending.pop().query_tree().children:
                if child.get_attributes().map_state == X.IsViewable:
                    found.append(self._window(child))
                    pending.append(child)
        return found

    def _window(self, window: XWindow) -> Window:
        geometry = window.get_geometry()
        origin = self._x.screen().root.translate_coords(window, 0, 0)
        return Window(window.id, origin.x, origin.y, geometry.width, geometry.height)

    def close(self) -> None:
        with suppress(Exception):  # a lost connection must not keep the processes alive
            self._x.close()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with suppress(ProcessLookupError):
                os.killpg(self.group, sig)
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline and _group_alive(self.group):
                for process in self.processes:
                    process.poll()  # reap what has exited, so the group can empty
                time.sleep(0.02)
            if not _group_alive(self.group):
                break
        for process in self.processes:
            with suppress(subprocess.TimeoutExpired):
                process.wait(timeout=1)
        # A killed Xvfb leaves its lock and socket behind.
        number = self.display.lstrip(":")
        lock = Path(f"/tmp/.X{number}-lock")
        with suppress(OSError, ValueError):
            if int(lock.read_text().strip()) == self.group:
                lock.unlink()
                Path(f"/tmp/.X11-unix/X{number}").unlink(missing_ok=True)


def busy_wallpaper(size: ScreenSize, seed: int = 0) -> Image.Image:
    """A screen full of colour and text, for screenshots that are costly to encode: gradients,
    panels and lines of anti-aliased text in many colours and sizes."""
    random = Random(seed)
    image = Image.linear_gradient("L").resize((size.width, size.height))
    image = Image.merge("RGB", (image, image.rotate(90).resize(image.size), image.transpose(0)))
    draw = ImageDraw.Draw(image)
    fonts = [ImageFont.truetype(BUSY_FONT, points) for points in (11, 13, 16, 22)]
    words = [
        "tandem",
        "annotate",
        "desktop",
        "model",
        "action",
        "step",
        "review",
        "export",
        "queue",
        "lease",
    ]
    for _ in range(size.width * size.height // 20_000):
        x, y = random.randrange(size.width), random.randrange(size.height)
        colour = tuple(random.randrange(256) for _ in range(3))
        draw.rectangle((x, y, x + random.randrange(40, 300), y + random.randrange(20, 120)), colour)
    for y in range(0, size.height, 18):
        x = random.randrange(-200, 0)
        while x < size.width:
            text = " ".join(random.choices(words, k=random.randrange(2, 7)))
            font = random.choice(fonts)
            colour = tuple(random.randrange(256) for _ in range(3))
            draw.text((x, y), text, fill=colour, font=font)
            x += int(draw.textlength(text, font=font)) + random.randrange(10, 60)
    return image


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _connect(display: str) -> Display | None:
    try:
        return Display(display)
    except (DisplayError, OSError):
        return None


def _start_xvfb(size: ScreenSize) -> tuple[Display, subprocess.Popen[bytes]]:
    """Start Xvfb on the first free display of ``DISPLAYS``; return a connection to it.

    The connection stays open for the desktop's life: Xvfb resets itself when its last client
    disconnects, and a client connecting during that reset is dropped.
    """
    # The processes of a parallel run each take a share of the numbers of their own: two
    # racing for one number, the loser could connect to the winner's server before its own
    # exits, and both tests would share a screen. Test runs side by side start at different
    # numbers of the share, so they rarely race for one display.
    process, count = parallel_process()
    share = DISPLAYS[process::count]
    offset = (os.getpid() % 20) * len(share) // 20
    for number in [*share[offset:], *share[:offset]]:
        if Path(f"/tmp/.X{number}-lock").exists():
            continue
        display = f":{number}"
        xvfb = subprocess.Popen(
            ["Xvfb", display, "-screen", "0", f"{size.width}x{size.height}x24", "-nolisten", "tcp"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            process_group=0,  # Xvfb leads the desktop's process group
        )
        deadline = time.monotonic() + START_TIMEOUT
        while xvfb.poll() is None and time.monotonic() < deadline:
            connection = _connect(display) if Path(f"/tmp/.X11-unix/X{number}").exists() else None
            if connection is not None:
                return connection, xvfb
            time.sleep(0.01)
        if xvfb.poll() is None:  # running but silent: give up on this number
            os.killpg(xvfb.pid, signal.SIGKILL)
        xvfb.wait()
    raise RuntimeError(f"no free X display in {share}")


@contextmanager
def running_desktop(width: int, height: int, home: Path) -> Iterator[XDesktop]:
    """A desktop of ``width`` x ``height`` with HOME in ``home``, for the block's duration."""
    home.mkdir(parents=True, exist_ok=True)
    connection, xvfb = _start_xvfb(ScreenSize(width, height))
    desktop = XDesktop(connection, ScreenSize(width, height), home, xvfb.pid)
    desktop.processes.append(xvfb)
    try:
        desktop.launch("openbox")
        desktop.wait_for_window_manager()
        yield desktop
    finally:
        desktop.close()


@pytest.fixture
def desktop_factory(tmp_path: Path) -> Iterator[Callable[[int, int], XDesktop]]:
    numbers = itertools.count()
    with ExitStack() as stack:

        def start(width: int, height: int) -> XDesktop:
            home = tmp_path / f"home-{next(numbers)}"
            return stack.enter_context(running_desktop(width, height, home))

        yield start


@pytest.fixture
def x_desktop(desktop_factory: Callable[[int, int], XDesktop]) -> XDesktop:
    return desktop_factory(1280, 800)
