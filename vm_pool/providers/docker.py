"""The ``docker`` provider: each desktop is a container of the desktop image.

A container runs the in-desktop agent (``vm_pool.agent``) as its main process, under ``tini``
(Docker's ``init``) so that the orphans of the desktop's programs are reaped. The agent's
config, which holds the desktop's secrets, is copied into the created container as a file
owned by the desktop's user before the container starts: it is never on a command line nor in
the container's environment, so ``docker inspect`` does not show it. The agent and x11vnc
listen inside the container; the engine publishes them on ``TANDEM_DOCKER_PUBLISH_HOST``
(127.0.0.1, or this host's private address) on ports it picks, read back after the start.

A reset removes the container and creates a new one: HOME is fresh from the image (and the
template's ``home_template`` when it names one), the secrets are new. Every container carries
labels naming its desktop and host, so that a container whose id was never recorded (a worker
that died between create and commit) is still found and removed.

Tested without a Docker engine: the container spec as the Docker SDK turns it into a create
request (image, command, labels, port bindings, limits, no secret in it), the archives copied
in, the error when no engine answers, and that deploy/desktop.Dockerfile installs the desktop
programs and every package the agent imports. Not tested, as no engine runs where the tests
run: that the image builds, that a container starts and its agent answers through the
published ports, that the engine keeps the owner written in the copied archive, the programs
(Chromium without its own sandbox among them) inside a container, and start, reset, health
and stop against an engine.
"""

import io
import json
import os
import re
import tarfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, ClassVar

import docker
import requests
from django.conf import settings
from docker.errors import DockerException, ImageNotFound, NotFound
from docker.models.containers import Container

from vm_pool.agent_client import AgentClient
from vm_pool.providers import desktop_image
from vm_pool.providers.base import DesktopError, DesktopProvider, DesktopSpec, Endpoint, Health

LABEL_DESKTOP = "tandem.desktop"
LABEL_HOST = "tandem.host"
# Chromium keeps renderer memory in /dev/shm; Docker's default of 64 MB makes tabs crash.
SHM_SIZE = "512m"
PIDS_LIMIT = 4096
ENGINE_TIMEOUT = 30  # seconds, for one call to the engine's API
# Publishing on these would open the desktop's VNC and agent to every network of the host.
EVERY_INTERFACE = {"", "0.0.0.0", "::", "[::]"}


def engine_url() -> str:
    return (
        settings.TANDEM_DOCKER_URL or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    )


def container_name(spec: DesktopSpec) -> str:
    host = re.sub(r"[^a-zA-Z0-9_.-]", "-", settings.TANDEM_HOST)
    return f"tandem-{host}-desktop-{spec.desktop_id}"


def container_spec(spec: DesktopSpec) -> dict[str, Any]:
    """The keyword arguments of ``containers.create`` for a desktop. No secret is among them."""
    publish = settings.TANDEM_DOCKER_PUBLISH_HOST
    if publish in EVERY_INTERFACE:
        raise DesktopError(
            f"TANDEM_DOCKER_PUBLISH_HOST={publish!r} would publish VNC on every interface; "
            "use 127.0.0.1 or this host's private address"
        )
    memory = settings.TANDEM_DOCKER_MEMORY
    return {
        "image": spec.image or settings.TANDEM_DESKTOP_IMAGE,
        "command": list(desktop_image.AGENT_COMMAND),
        "name": container_name(spec),
        "hostname": f"desktop-{spec.desktop_id}",
        "user": f"{desktop_image.UID}:{desktop_image.UID}",
        "working_dir": desktop_image.APP_DIR,
        "labels": {LABEL_DESKTOP: str(spec.desktop_id), LABEL_HOST: settings.TANDEM_HOST},
        "ports": {
            f"{desktop_image.VNC_PORT}/tcp": (publish, None),
            f"{desktop_image.CONTROL_PORT}/tcp": (publish, None),
        },
        "mem_limit": memory,
        "memswap_limit": memory,  # no swap beyond the memory limit
        "nano_cpus": int(settings.TANDEM_DOCKER_CPUS * 1_000_000_000),
        "pids_limit": PIDS_LIMIT,
        "shm_size": SHM_SIZE,
        "init": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
    }


def _owned_by_desktop_user(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = desktop_image.UID
    info.uname = info.gname = desktop_image.USER
    return info


def config_archive(spec: DesktopSpec) -> bytes:
    """A tar holding ``agent.json``, readable by the desktop's user only."""
    data = json.dumps(desktop_image.agent_config(spec)).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = _owned_by_desktop_user(tarfile.TarInfo(Path(desktop_image.CONFIG_PATH).name))
        info.size = len(data)
        info.mode = 0o600
        info.mtime = int(time.time())
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def home_archive(template: Path) -> bytes:
    """A tar of a HOME template directory, owned by the desktop's user."""
    if not template.is_dir():
        raise DesktopError(f"the HOME template {template} is not a directory on this host")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(template, arcname=".", filter=_owned_by_desktop_user)
    return buffer.getvalue()


@contextmanager
def _engine_errors() -> Iterator[None]:
    try:
        yield
    except ImageNotFound as error:
        raise DesktopError(
            f"the Docker engine at {engine_url()} has no image {error.explanation or error}; "
            "build it with: docker build -f deploy/desktop.Dockerfile -t tandem-desktop:latest ."
        ) from error
    except (DockerException, requests.RequestException) as error:
        raise DesktopError(f"the Docker engine at {engine_url()} failed: {error}") from error


def _published(container: Container, port: int) -> tuple[str, int]:
    bindings = (container.ports or {}).get(f"{port}/tcp") or []
    if not bindings:
        raise DesktopError(f"container {container.short_id} publishes no port for {port}/tcp")
    return bindings[0]["HostIp"], int(bindings[0]["HostPort"])


def _endpoint(container: Container, spec: DesktopSpec) -> Endpoint:
    vnc_host, vnc_port = _published(container, desktop_image.VNC_PORT)
    control_host, control_port = _published(container, desktop_image.CONTROL_PORT)
    return Endpoint(
        instance_id=container.id or "",
        vnc_host=vnc_host,
        vnc_port=vnc_port,
        screen=spec.screen,
        control_address=f"{control_host}:{control_port}",
    )


class DockerProvider(DesktopProvider):
    name = "docker"
    # Actions, programs and files go through the agent; HOME is restored by recreation.
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"view_only_vnc", "home_restore", "launch", "run", "files"}
    )

    def __init__(self) -> None:
        self._docker: docker.DockerClient | None = None

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
                    f"no Docker engine answers at {engine_url()}: {error}"
                ) from error
            self._docker = client
        return self._docker

    def start(self, spec: DesktopSpec) -> Endpoint:
        create = container_spec(spec)
        client = self._client()
        self._remove(client, spec)  # a container of this desktop left by a worker that died
        with _engine_errors():
            container = client.containers.create(**create)
        try:
            with _engine_errors():
                container.put_archive(desktop_image.CONFIG_DIR, config_archive(spec))
                if spec.home_template is not None:
                    container.put_archive(desktop_image.HOME, home_archive(spec.home_template))
                container.start()
            return self._wait_until_ready(container, spec)
        except BaseException:
            with suppress(DockerException, requests.RequestException):
                container.remove(force=True, v=True)
            raise

    def _wait_until_ready(self, container: Container, spec: DesktopSpec) -> Endpoint:
        timeout = settings.TANDEM_DOCKER_START_TIMEOUT
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with _engine_errors():
                container.reload()
            if container.status != "running":
                with _engine_errors():
                    logs = container.logs(tail=40).decode(errors="replace")
                raise DesktopError(
                    f"desktop {spec.desktop_id}: container {container.status} at start: {logs}"
                )
            endpoint = _endpoint(container, spec)
            agent = AgentClient(endpoint.control_address, spec.agent_key, spec.screen)
            if agent.health(timeout=1.0).ok:
                return endpoint
            time.sleep(0.2)
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
        try:
            endpoint = _endpoint(container, spec)
        except DesktopError as error:
            return Health(False, str(error))
        return AgentClient(endpoint.control_address, spec.agent_key, spec.screen).health()

    def stop(self, spec: DesktopSpec) -> None:
        self._remove(self._client(), spec)

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

    def control(self, spec: DesktopSpec, endpoint: Endpoint) -> AgentClient:
        return AgentClient(endpoint.control_address, spec.agent_key, spec.screen)
