"""The ``docker`` provider: each desktop is a container of the desktop image, on this host's
container engine (Docker, or podman's Docker-compatible API service).

A container desktop keeps the rules of a sandboxed local desktop (``vm_pool.sandbox.bubblewrap``),
with the engine in bubblewrap's place:

- it runs as the desktop's own host uid (``TANDEM_SANDBOX_UID_BASE`` + its display), seen inside
  as ``user`` with HOME ``/home/user``; its root file system is the image, read-only; it writes
  only to HOME and a private ``/tmp``; every capability is dropped, no new privileges;
- its HOME is the engine's tmpfs of ``TANDEM_SANDBOX_HOME_MB`` (counted in the container's
  memory, so it must stay below ``TANDEM_DOCKER_MEMORY``): a program that fills it fills
  nothing of the host's disk. The HOME prepared from the template is mounted read-only beside
  it and the agent copies it in before anything starts. With ``TANDEM_SANDBOX_HOME_MB=0``, HOME
  is the prepared folder itself, on the host's disk;
- it has **no network** (``network_mode=none``): not the platform's services, not the host, not
  the other desktops. Its agent and view-only VNC server are unix sockets in the desktop's run
  directory on this host, bind-mounted in, and its X socket is linked as this host's
  ``:display``, so the platform reaches the desktop exactly as a local one (``LocalControl``:
  XTEST and XShm in-process, programs and files through the agent) and nothing else does;
- its environment holds nothing of the platform's; the agent's config (with the agent key) is
  a file the agent deletes once read; the agent's code is the platform's own, bind-mounted
  read-only, so platform and desktop never disagree on the action space;
- memory, processes (pids) and open files are limited by the engine, and the process limit
  per uid is exact because the uid is the desktop's alone;
- the work of its processes is read from the container's cgroup of the unified hierarchy
  (``vm_pool.sandbox.activity``), where the engine is this host's: the cgroup its first process
  is in, taken only where that names the container.

A reset removes the container and creates a new one from the image with a fresh HOME (from
the template's ``home_template`` when it names one) and a new agent key. Every container
carries labels naming its desktop and host, so that a container whose id was never recorded
(a worker that died between create and commit) is still found and removed. A template that
asks for the internet gets a clear error here: container desktops have no way out yet.
"""

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, ClassVar

import docker
import requests
from django.conf import settings
from docker.errors import DockerException, ImageNotFound, NotFound
from docker.types import Mount, Ulimit
from docker.utils import parse_bytes

from vm_pool.agent_client import AgentClient
from vm_pool.desktop import DesktopError, DesktopSpec, Endpoint, Health
from vm_pool.providers.base import DesktopProvider
from vm_pool.providers.local import BUILTIN_HOME_TEMPLATE, LocalControl, desktop_files
from vm_pool.sandbox import bubblewrap as sandbox
from vm_pool.sandbox import limits as sandbox_limits

LABEL_DESKTOP = "tandem.desktop"
LABEL_HOST = "tandem.host"
# Chromium and LibreOffice keep shared memory in /dev/shm; 64 MB makes them crash.
SHM_SIZE = "512m"
PIDS_LIMIT = 1024
OPEN_FILES = 8192  # at or below the host's hard limit: the engine cannot raise it here
ENGINE_TIMEOUT = 30  # seconds, for one call to the engine's API
INSIDE_AGENT = "/opt/tandem-agent"  # the platform's agent code, read-only
INSIDE_HOME_TEMPLATE = "/opt/tandem-home"  # the prepared HOME, read-only: copied into the tmpfs
CONFIG_NAME = "agent.json"
BUILD_HINT = "build it with: make desktop-image"


def engine_url() -> str:
    return (
        settings.TANDEM_DOCKER_URL or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    )


def container_name(spec: DesktopSpec) -> str:
    host = re.sub(r"[^a-zA-Z0-9_.-]", "-", settings.TANDEM_HOST)
    return f"tandem-{host}-desktop-{spec.desktop_id}"


def passwd_of(uid: int) -> str:
    """The container's /etc/passwd: its user is the desktop's host uid, named ``user``."""
    return sandbox.PASSWD.replace(
        f"{sandbox.INSIDE_USER}:x:{sandbox.INSIDE_UID}:{sandbox.INSIDE_UID}:",
        f"{sandbox.INSIDE_USER}:x:{uid}:{uid}:",
    )


def group_of(uid: int) -> str:
    return sandbox.GROUP.replace(
        f"{sandbox.INSIDE_USER}:x:{sandbox.INSIDE_UID}:", f"{sandbox.INSIDE_USER}:x:{uid}:"
    )


def home_tmpfs(size_mb: int, uid: int, podman: bool) -> str:
    """The options of HOME's tmpfs, empty and owned by the desktop's uid: podman chowns it to
    the container's user with ``U`` (it refuses ``uid=``) and would copy the image's
    ``/home/user`` into it, owned by another uid, without ``notmpcopyup``; Docker hands
    ``uid=``/``gid=`` to the kernel, copies nothing, and knows neither option."""
    owner = "notmpcopyup,U" if podman else f"uid={uid},gid={uid}"
    return f"size={size_mb}m,mode=0700,nosuid,nodev,{owner}"


def container_spec(
    spec: DesktopSpec, files: sandbox.DesktopFiles, uid: int, home: str | None = None
) -> dict[str, Any]:
    """The keyword arguments of ``containers.create`` for a desktop; ``home``: the options of
    HOME's tmpfs (``home_tmpfs``), None for HOME on the host's disk. No secret is among them."""
    memory = settings.TANDEM_DOCKER_MEMORY
    code = sandbox.agent_code(files.root.parent)

    def bind(source: Path, target: str, read_only: bool = False) -> Mount:
        return Mount(target, str(source), type="bind", read_only=read_only)

    tmpfs = {"/tmp": "size=1g,mode=1777", "/var/tmp": "size=256m,mode=1777"}
    if home is None:
        home_mount = bind(files.home, sandbox.INSIDE_HOME)
    else:
        home_mount = bind(files.home, INSIDE_HOME_TEMPLATE, read_only=True)
        tmpfs[sandbox.INSIDE_HOME] = home

    return {
        "image": spec.image or settings.TANDEM_DESKTOP_IMAGE,
        "command": [
            "/usr/bin/python3",
            "-s",  # nothing of HOME or the working directory on the import path (vm_pool.agent)
            "-P",
            "-m",
            "vm_pool.agent",
            "--config",
            f"{sandbox.INSIDE_RUN}/{CONFIG_NAME}",
            "--remove-config",
        ],  # fmt: skip
        "name": container_name(spec),
        "hostname": f"desktop-{spec.desktop_id}",
        "user": f"{uid}:{uid}",
        "working_dir": sandbox.INSIDE_HOME,
        "environment": {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": sandbox.INSIDE_HOME,
            "LANG": "C.UTF-8",
            "PYTHONPATH": INSIDE_AGENT,
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        "labels": {LABEL_DESKTOP: str(spec.desktop_id), LABEL_HOST: settings.TANDEM_HOST},
        "network_mode": "none",
        "mounts": [
            home_mount,
            bind(files.run, sandbox.INSIDE_RUN),
            bind(files.x11, "/tmp/.X11-unix"),
            bind(code, INSIDE_AGENT, read_only=True),
            bind(files.root / "passwd", "/etc/passwd", read_only=True),
            bind(files.root / "group", "/etc/group", read_only=True),
        ],
        "read_only": True,
        "tmpfs": tmpfs,
        "mem_limit": memory,
        "memswap_limit": memory,  # no swap beyond the memory limit
        "nano_cpus": int(settings.TANDEM_DOCKER_CPUS * 1_000_000_000),
        "pids_limit": PIDS_LIMIT,
        "ulimits": [
            Ulimit(name="nofile", soft=OPEN_FILES, hard=OPEN_FILES),
            Ulimit(
                name="nproc",
                soft=settings.TANDEM_SANDBOX_MAX_PROCESSES,
                hard=settings.TANDEM_SANDBOX_MAX_PROCESSES,
            ),
        ],  # fmt: skip
        "shm_size": SHM_SIZE,
        "init": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
    }


@contextmanager
def _engine_errors() -> Iterator[None]:
    try:
        yield
    except ImageNotFound as error:
        raise DesktopError(
            f"the container engine at {engine_url()} has no image "
            f"{error.explanation or error}; {BUILD_HINT}"
        ) from error
    except (DockerException, requests.RequestException) as error:
        raise DesktopError(f"the container engine at {engine_url()} failed: {error}") from error


def _write_private(path: Path, text: str, uid: int, mode: int) -> None:
    path.write_text(text)
    os.chown(path, uid, uid)
    path.chmod(mode)


class DockerProvider(DesktopProvider):
    name = "docker"
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"xtest", "view_only_vnc", "home_restore", "launch", "run", "files", "sandbox"}
    )
    allocates_display = True

    def __init__(self) -> None:
        self._docker: docker.DockerClient | None = None
        self._podman: bool | None = None

    def _client(self) -> docker.DockerClient:
        if self._docker is None:
            try:
                if settings.TANDEM_DOCKER_URL:
                    client = docker.DockerClient(
                        base_url=settings.TANDEM_DOCKER_URL, timeout=ENGINE_TIMEOUT
                    )
                else:
                    client = docker.from_env(timeout=ENGINE_TIMEOUT)
            except DockerException as error:
                raise DesktopError(
                    f"no container engine answers at {engine_url()}: {error}"
                ) from error
            self._docker = client
        return self._docker

    def start(self, spec: DesktopSpec) -> Endpoint:
        if spec.display is None:
            raise DesktopError("the docker provider needs a display")
        if spec.internet:
            raise DesktopError(
                "container desktops have no network; this template asks for the internet "
                "(use the local provider for it)"
            )
        memory = settings.TANDEM_DOCKER_MEMORY
        if parse_bytes(memory) <= settings.TANDEM_SANDBOX_HOME_MB * 1024 * 1024:
            raise DesktopError(
                f"TANDEM_SANDBOX_HOME_MB ({settings.TANDEM_SANDBOX_HOME_MB}) must be below "
                f"TANDEM_DOCKER_MEMORY ({memory}): the files of a desktop's HOME are counted in "
                "its memory"
            )
        sandbox.require_root()
        client = self._client()
        self._remove(client, spec)  # a container of this desktop left by a worker that died
        files = desktop_files(spec.desktop_id)
        uid = sandbox.desktop_uid(settings.TANDEM_SANDBOX_UID_BASE, spec.display)
        home = self._home_tmpfs(client, uid)
        sandbox.prepare_files(files, uid, spec.home_template or BUILTIN_HOME_TEMPLATE)
        _write_private(files.root / "passwd", passwd_of(uid), 0, 0o644)
        _write_private(files.root / "group", group_of(uid), 0, 0o644)
        config = sandbox.agent_config(spec, INSIDE_HOME_TEMPLATE if home else "")
        _write_private(files.run / CONFIG_NAME, config, uid, 0o600)
        with _engine_errors():
            container = client.containers.create(**container_spec(spec, files, uid, home))
        try:
            with _engine_errors():
                container.start()
            endpoint = sandbox.endpoint(files, spec, container.id or "")
            self._wait_until_ready(container, spec, endpoint)
        except BaseException:
            with suppress(DockerException, requests.RequestException):
                container.remove(force=True, v=True)
            raise
        sandbox.seal(files)
        sandbox.link_display(files, spec.display)
        return endpoint

    def _home_tmpfs(self, client: docker.DockerClient, uid: int) -> str | None:
        """HOME's tmpfs options (``home_tmpfs``) for this engine; None with a HOME size of 0."""
        size_mb = settings.TANDEM_SANDBOX_HOME_MB
        if not size_mb:
            return None
        if self._podman is None:
            with _engine_errors():
                components = client.version().get("Components") or []
            self._podman = any(c.get("Name") == "Podman Engine" for c in components)
        return home_tmpfs(size_mb, uid, self._podman)

    def _wait_until_ready(self, container: Any, spec: DesktopSpec, endpoint: Endpoint) -> None:
        timeout = settings.TANDEM_DOCKER_START_TIMEOUT
        agent = AgentClient(endpoint.control_address, spec.agent_key, spec.screen)
        socket = Path(endpoint.control_address.removeprefix("unix:"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if socket.exists() and agent.health(timeout=0.5).ok:
                return
            with _engine_errors():
                container.reload()
            if container.status not in ("created", "running"):
                with _engine_errors():
                    logs = container.logs(tail=40).decode(errors="replace")
                raise DesktopError(
                    f"desktop {spec.desktop_id}: container {container.status} at start: {logs}"
                )
            time.sleep(0.05)
        raise DesktopError(f"desktop {spec.desktop_id} did not become healthy in {timeout}s")

    def reset(self, spec: DesktopSpec) -> Endpoint:
        self.stop(spec)
        return self.start(spec)

    def health(self, spec: DesktopSpec) -> Health:
        if not spec.instance_id:
            return Health(False, "no container recorded for this desktop")
        try:
            client = self._client()
            with _engine_errors():
                try:
                    container = client.containers.get(spec.instance_id)
                except NotFound:
                    return Health(False, f"container {spec.instance_id[:12]} is gone")
        except DesktopError as error:
            return Health(False, str(error))
        if container.status != "running":
            return Health(False, f"container {container.short_id} is {container.status}")
        socket = desktop_files(spec.desktop_id).agent_socket
        return AgentClient(f"unix:{socket}", spec.agent_key, spec.screen).health()

    def stop(self, spec: DesktopSpec) -> None:
        self._remove(self._client(), spec)
        if spec.display is not None:
            sandbox.unlink_display(spec.display)

    def _remove(self, client: docker.DockerClient, spec: DesktopSpec) -> None:
        labels = [f"{LABEL_DESKTOP}={spec.desktop_id}", f"{LABEL_HOST}={settings.TANDEM_HOST}"]
        with _engine_errors():
            found = client.containers.list(all=True, filters={"label": labels})
            ids = {container.id for container in found}
            if spec.instance_id:
                ids.add(spec.instance_id)
            for container_id in ids:
                with suppress(NotFound):
                    client.api.remove_container(container_id, force=True, v=True)

    def control(self, spec: DesktopSpec, endpoint: Endpoint) -> LocalControl:
        return LocalControl(spec, endpoint, lambda: self._accounting_cgroup(spec))

    def _accounting_cgroup(self, spec: DesktopSpec) -> Path | None:
        """The container's cgroup of the unified hierarchy, from its first process's
        ``/proc/<pid>/cgroup``; None where there is none, or where that path does not name the
        container (an engine on another host or in another pid namespace: the pid is not ours
        to read)."""
        root = sandbox_limits.accounting_root()
        if root is None or not spec.instance_id:
            return None
        try:
            with _engine_errors():
                state = self._client().api.inspect_container(spec.instance_id)["State"]
            lines = Path(f"/proc/{int(state['Pid'])}/cgroup").read_text().splitlines()
        except (DesktopError, OSError, KeyError, TypeError, ValueError):
            return None
        for line in lines:
            if line.startswith("0::") and spec.instance_id in line:
                directory = root / line.removeprefix("0::").lstrip("/")
                return directory if directory.is_dir() else None
        return None
