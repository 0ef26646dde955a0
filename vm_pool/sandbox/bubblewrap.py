"""The sandbox of a local desktop: its own user, namespaces, files and limits.

A local desktop is a security boundary (design §6). Everything on it — Xvfb, the window
manager, the view-only VNC server, the in-desktop agent, the task's setup and programs, the
model's and the annotator's actions — runs inside one bubblewrap sandbox:

- as the desktop's own host user (uid ``TANDEM_SANDBOX_UID_BASE`` + its display: no two live
  desktops share one, and none is a user of the host), seen inside as ``user`` (uid 1000);
- in new user, PID, mount, IPC, UTS, cgroup and network namespaces: it sees only its own
  processes, has only a loopback interface of its own (no route to PostgreSQL, Redis, the web
  server, websockify, other desktops or the host's loopback), and no abstract socket of the
  host;
- with the system read-only (``/usr``, ``/etc`` with a ``passwd`` of its own), HOME at
  ``/home/user`` and a private ``/tmp`` as the only places it can write, no view of the
  repository, the platform's environment, ``var/`` or other desktops' files; HOME is a tmpfs
  of ``TANDEM_SANDBOX_HOME_MB`` of its own (counted in its memory cgroup as it is written), so
  a program that fills it fills nothing of the host's disk;
- with an environment built from nothing: no ``TANDEM_*``, database, Redis, cloud or other
  secret variable ever reaches it, not even bubblewrap's own process (PID 1 inside);
- with limits: at most ``TANDEM_SANDBOX_MAX_PROCESSES`` processes and threads (the kernel's
  per-user count, exact because the uid is the desktop's alone, and the pids cgroup), and
  ``TANDEM_SANDBOX_MEMORY_MB`` of memory for all its processes together (a memory cgroup);
  a fork bomb or a memory hog stays inside.

A template may allow its desktops the internet: ``vm_pool.sandbox.network`` gives such a
desktop a firewalled way out. The limits are set in ``vm_pool.sandbox.limits``.

The platform reaches the desktop through three unix sockets in directories only the desktop's
user (and root) can open, bound into the sandbox: the X server's socket (linked as
``/tmp/.X11-unix/X<display>`` on the host, for the in-process XTEST executor and screenshots),
the agent's HTTP API and the view-only VNC server. No TCP port of a desktop listens on the host.

bubblewrap mounts a desktop's directories as the desktop's user, so the desktops' directory
(``TANDEM_DESKTOP_ROOT``) and its parents must be searchable by other users (``o+x``); the
desktop's own directory lets in only root and the desktop's group. The agent's code is copied
beside them: the sandbox never sees the repository.
"""

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from vm_pool.desktop import DesktopError, DesktopSpec, Endpoint
from vm_pool.sandbox.limits import SandboxLimits, in_cgroups
from vm_pool.sandbox.network import SLIRP_DNS

INSIDE_UID = 1000
INSIDE_USER = "user"
INSIDE_HOME = "/home/user"
INSIDE_RUN = "/run/tandem"
INSIDE_DISPLAY = 0
AGENT_SOCKET = "agent.sock"
VNC_SOCKET = "vnc.sock"
TMP_SIZE = 1024 * 1024 * 1024  # the private /tmp is memory, counted in the memory cgroup too
PACKAGE = Path(__file__).resolve().parents[1]  # vm_pool, where the agent's modules are
# What the agent imports of vm_pool: its own package, the action space, the records of a
# desktop's inputs and the browser's debugging protocol (the capture stack for /observe is the
# desktop image's).
AGENT_CODE = ("__init__.py", "desktop.py", "devtools.py", "agent", "actions")
HOST_X11_DIR = Path("/tmp/.X11-unix")
# The folders of a desktop user's HOME on the systems OSWorld's tasks were written for (a task
# that puts a file on ~/Desktop finds the folder there).
HOME_FOLDERS = ("Desktop", "Documents", "Downloads", "Music", "Pictures", "Videos")
PASSWD = (
    "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    f"{INSIDE_USER}:x:{INSIDE_UID}:{INSIDE_UID}:Desktop user:{INSIDE_HOME}:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
GROUP = f"root:x:0:\n{INSIDE_USER}:x:{INSIDE_UID}:\nnogroup:x:65534:\n"


@dataclass(frozen=True)
class DesktopFiles:
    """Where one desktop's parts live on the host, under a directory only root can open."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def x11(self) -> Path:
        return self.root / "x11"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def agent_socket(self) -> Path:
        return self.run / AGENT_SOCKET

    @property
    def vnc_socket(self) -> Path:
        return self.run / VNC_SOCKET

    @property
    def x_socket(self) -> Path:
        return self.x11 / f"X{INSIDE_DISPLAY}"


def desktop_uid(base: int, display: int) -> int:
    return base + display


def require_root() -> None:
    if os.geteuid() != 0:
        raise DesktopError(
            "the local provider runs every desktop as a user of its own and needs root "
            "(run the desktop worker as root, or use the docker provider)"
        )
    if shutil.which("bwrap") is None:
        raise DesktopError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")


def prepare_files(files: DesktopFiles, uid: int, home_template: Path, home_mb: int = 0) -> None:
    """A fresh HOME from the template and empty socket directories, owned by the desktop. With
    ``home_mb``, HOME is a tmpfs of that size (``release_files`` unmounts it): its files are
    counted in the desktop's memory, so it must be well below the memory limit."""
    _require_searchable(files.root.parent)
    files.root.mkdir(parents=True, exist_ok=True)
    os.chown(files.root, 0, uid)
    files.root.chmod(0o710)  # root and the desktop's group only
    release_files(files)  # a HOME left mounted by a worker that died
    for path in (files.home, files.x11, files.run):
        if path.exists():
            shutil.rmtree(path)
    if home_mb:
        _mount_home(files.home, uid, home_mb)
    shutil.copytree(home_template, files.home, symlinks=True, dirs_exist_ok=True)
    for folder in HOME_FOLDERS:  # a desktop user's usual folders, as tasks expect them
        (files.home / folder).mkdir(exist_ok=True)
    files.run.mkdir()
    files.x11.mkdir()
    for path in (files.home, files.run, files.x11):
        path.chmod(0o700)
    for directory, dirs, names in os.walk(files.home):
        for name in [*dirs, *names]:
            os.lchown(os.path.join(directory, name), uid, uid)
    for path in (files.home, files.run, files.x11):
        os.chown(path, uid, uid)


def _mount_home(home: Path, uid: int, size_mb: int) -> None:
    home.mkdir()
    options = f"size={size_mb}m,mode=0700,uid={uid},gid={uid},nosuid,nodev"
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tandem-home", str(home)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        raise DesktopError(
            f"cannot mount the desktop's HOME ({mounted.stderr.strip()}); set "
            "TANDEM_SANDBOX_HOME_MB=0 to keep HOME on the host's disk"
        )


def release_files(files: DesktopFiles) -> None:
    """Unmount a stopped desktop's HOME tmpfs (lazily: a process of the platform may still be
    reading a file of it); its contents go with it."""
    if os.path.ismount(files.home):
        unmounted = subprocess.run(
            ["umount", "-l", str(files.home)], capture_output=True, text=True, timeout=30,
            check=False,
        )  # fmt: skip
        if os.path.ismount(files.home):  # its files must not be removed through the mount
            raise DesktopError(f"cannot unmount the desktop's HOME: {unmounted.stderr.strip()}")


def seal(files: DesktopFiles) -> None:
    """Once the desktop's sockets exist, its socket directories become root's: its programs
    can still connect to them but never replace them."""
    for path in (files.run, files.x11):
        os.chown(path, 0, 0)
        path.chmod(0o711)


def _require_searchable(desktops: Path) -> None:
    desktops.mkdir(parents=True, exist_ok=True)
    desktops.chmod(0o711)
    for directory in [desktops, *desktops.parents]:
        if not directory.stat().st_mode & 0o001:
            raise DesktopError(
                f"{directory} is not searchable by other users (chmod o+x), so a desktop's user "
                f"cannot reach its files under {desktops}; or set TANDEM_DESKTOP_ROOT elsewhere"
            )


def agent_code(desktops: Path) -> Path:
    """A read-only copy of the agent's code for the sandboxes, refreshed when it changes."""
    target = desktops / "agent" / "vm_pool"
    target.mkdir(parents=True, exist_ok=True)
    for directory in (target.parent, target):
        directory.chmod(0o755)
    for name in AGENT_CODE:
        source = PACKAGE / name
        for path in sorted(source.glob("*.py")) if source.is_dir() else [source]:
            copy = target / path.relative_to(PACKAGE)
            if not copy.parent.is_dir():
                copy.parent.mkdir()
                copy.parent.chmod(0o755)
            data = path.read_bytes()
            if not copy.exists() or copy.read_bytes() != data:
                partial = copy.with_suffix(".partial")
                partial.write_bytes(data)
                partial.chmod(0o644)
                partial.replace(copy)
    return target.parent


def endpoint(files: DesktopFiles, spec: DesktopSpec, instance_id: str) -> Endpoint:
    """Where the platform reaches a sandboxed desktop (a container one too): its agent's and
    VNC's sockets, and its X socket as this host's ``:display``."""
    return Endpoint(
        instance_id=instance_id,
        vnc_host="",
        vnc_port=0,
        vnc_socket=str(files.vnc_socket),
        screen=spec.screen,
        display=f":{spec.display}",
        control_address=f"unix:{files.agent_socket}",
    )


def link_display(files: DesktopFiles, display: int) -> None:
    """Make the desktop's X socket the host's ``:display`` (for the platform's executor only:
    the link leads into a directory other host users cannot enter)."""
    HOST_X11_DIR.mkdir(mode=0o1777, exist_ok=True)
    link = HOST_X11_DIR / f"X{display}"
    unlink_display(display)
    link.symlink_to(files.x_socket)


def unlink_display(display: int) -> None:
    for path in (Path(f"/tmp/.X{display}-lock"), HOST_X11_DIR / f"X{display}"):
        with suppress(FileNotFoundError):
            path.unlink()


# --- the bubblewrap command line ---------------------------------------------------------------


@dataclass
class Launch:
    """The command that starts a sandboxed agent, and the descriptors it needs open."""

    argv: list[str]
    pass_fds: list[int]


def _data_fd(text: str) -> int:
    read, write = os.pipe()
    os.write(write, text.encode())  # small: fits in the pipe's buffer
    os.close(write)
    return read


@contextmanager
def sandbox_command(
    files: DesktopFiles,
    uid: int,
    desktop_id: int,
    limits: SandboxLimits,
    cgroup_procs: list[Path],
    info_fd: int | None = None,
) -> Iterator[Launch]:
    """The command that starts the agent in a new sandbox (its config comes on stdin).

    It is started by root: a shell joins the desktop's cgroups, then ``prlimit`` sets the
    process limit, ``setpriv`` becomes the desktop's user and ``bwrap`` builds the sandbox.
    The sandbox outlives the worker that started it (a restarted worker finds its desktops
    running); it is stopped by killing everything in its cgroups.
    """
    fds: list[int] = [info_fd] if info_fd is not None else []  # closed here once handed on
    try:
        code = agent_code(files.root.parent)
        passwd, group = _data_fd(PASSWD), _data_fd(GROUP)
        hostname = f"desktop-{desktop_id}"
        hosts = _data_fd(f"127.0.0.1 localhost {hostname}\n::1 localhost\n")
        resolv = _data_fd(f"nameserver {SLIRP_DNS}\n")  # slirp4netns's DNS, if it has a way out
        fds += [passwd, group, hosts, resolv]
        bwrap = [
            "bwrap",
            "--unshare-all",  # user, PID, network, IPC, UTS and cgroup namespaces
            "--new-session",
            "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID),
            "--hostname", hostname,
            "--ro-bind", "/usr", "/usr",
            "--ro-bind", "/etc", "/etc",
            "--ro-bind-data", str(passwd), "/etc/passwd",
            "--ro-bind-data", str(group), "/etc/group",
            "--ro-bind-data", str(hosts), "/etc/hosts",
            "--ro-bind-data", str(resolv), "/etc/resolv.conf",
        ]  # fmt: skip
        if info_fd is not None:  # bubblewrap writes the sandbox's first pid there
            bwrap += ["--info-fd", str(info_fd)]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = Path("/") / name
            if path.is_symlink():
                bwrap += ["--symlink", os.readlink(path), f"/{name}"]
            elif path.is_dir():
                bwrap += ["--ro-bind", str(path), f"/{name}"]
        bwrap += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--tmpfs", "/dev/shm",
            "--size", str(TMP_SIZE), "--tmpfs", "/tmp",
            "--symlink", "/tmp", "/var/tmp",
            "--bind", str(files.x11), "/tmp/.X11-unix",
            "--bind", str(files.home), INSIDE_HOME,
            "--bind", str(files.run), INSIDE_RUN,
            "--ro-bind", str(code), "/opt/tandem",
            # The sandbox's own root, /run, /var and /dev hold nothing to write to.
            "--remount-ro", "/dev",
            "--remount-ro", "/",
            "--chdir", INSIDE_HOME,
            "--clearenv",
            "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
            "--setenv", "HOME", INSIDE_HOME,
            "--setenv", "LANG", "C.UTF-8",
            "--setenv", "PYTHONPATH", "/opt/tandem",
            "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
            "/usr/bin/python3", "-s", "-P", "-m", "vm_pool.agent", "--config", "-",
        ]  # fmt: skip
        argv = ["prlimit", f"--nproc={limits.processes}:{limits.processes}", "--"]
        argv += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        argv += ["--no-new-privs", "--", *bwrap]
        argv = in_cgroups(cgroup_procs, argv)
        yield Launch(argv, fds)
    finally:
        for fd in fds:
            with suppress(OSError):
                os.close(fd)


def agent_config(spec: DesktopSpec, home_template: str = "") -> str:
    """The agent's config, as JSON; paths are the sandbox's own (a container's too);
    ``home_template``: a read-only folder the agent copies into an empty HOME first."""
    return json.dumps(
        {
            "display": INSIDE_DISPLAY,
            "width": spec.screen.width,
            "height": spec.screen.height,
            "listen": f"unix:{INSIDE_RUN}/{AGENT_SOCKET}",
            "vnc_listen": f"unix:{INSIDE_RUN}/{VNC_SOCKET}",
            "agent_key": spec.agent_key,
            "home": INSIDE_HOME,
            "work_dir": "/tmp/.tandem-log",  # the desktop's own: gone with it
            "autostart": [list(argv) for argv in spec.autostart],
            "window_manager": [
                "openbox", "--config-file", f"{INSIDE_HOME}/.config/openbox/rc.xml",
            ],
            "user": INSIDE_USER,
            "home_template": home_template,
        }
    )  # fmt: skip


def start_process(launch: Launch, config: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        process = subprocess.Popen(
            launch.argv,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},  # nothing of the platform's
            cwd="/",
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=out,
            pass_fds=launch.pass_fds,
            start_new_session=True,  # one killpg stops the sandbox from the outside
        )
    assert process.stdin is not None
    process.stdin.write(config.encode())
    process.stdin.close()
    return process
