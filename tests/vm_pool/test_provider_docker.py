"""The docker provider's container, as the Docker SDK turns it into the body of
``POST /containers/create`` (built here, not sent), and its errors when no engine answers.

What the container does on a real engine is tests/vm_pool/test_container_desktops.py.
"""

import json
import re
import socket
from dataclasses import replace
from pathlib import Path

import docker
import pytest
from docker.models.containers import _create_container_args

from vm_pool.actions import ScreenSize
from vm_pool.desktop import DesktopError, DesktopSpec, Endpoint
from vm_pool.providers.base import DesktopProvider
from vm_pool.providers.docker import (
    DockerProvider,
    container_spec,
    group_of,
    home_tmpfs,
    passwd_of,
)
from vm_pool.providers.local import LocalControl
from vm_pool.providers.registry import get_provider
from vm_pool.sandbox import bubblewrap

API_VERSION = "1.44"
UID = 200_042
SPEC = DesktopSpec(
    desktop_id=42,
    screen=ScreenSize(1280, 800),
    agent_key="0123456789abcdef0123456789abcdef",
    autostart=(("xterm",),),
    display=42,
)


def create_request(spec: DesktopSpec, root: Path, home: str | None = None) -> tuple[str, dict]:
    """The container name and the JSON body the SDK would send to create this desktop (with
    HOME's tmpfs options, or HOME on the host's disk)."""
    files = bubblewrap.DesktopFiles(root / f"desktop-{spec.desktop_id}")
    spec_args = container_spec(spec, files, UID, home)
    args = _create_container_args({**spec_args, "version": API_VERSION})
    name = args.pop("name")
    return name, docker.APIClient(version=API_VERSION).create_container_config(**args)


@pytest.fixture
def request_body(tmp_path):
    return create_request(SPEC, tmp_path)


def test_the_container_runs_the_platforms_agent_as_the_desktops_own_uid(settings, tmp_path):
    settings.TANDEM_DESKTOP_IMAGE = "tandem-desktop:test"
    _, body = create_request(SPEC, tmp_path)
    assert body["Image"] == "tandem-desktop:test"
    # -s -P: nothing of HOME or the working directory is ever imported
    assert body["Cmd"][:5] == ["/usr/bin/python3", "-s", "-P", "-m", "vm_pool.agent"]
    assert body["Cmd"][5:] == ["--config", "/run/tandem/agent.json", "--remove-config"]
    assert body["User"] == f"{UID}:{UID}"
    assert body["WorkingDir"] == "/home/user"
    assert f"user:x:{UID}:{UID}:" in passwd_of(UID) and f"user:x:{UID}:" in group_of(UID)


def test_a_template_image_wins_over_the_default(tmp_path):
    _, body = create_request(replace(SPEC, image="registry.local/office:3"), tmp_path)
    assert body["Image"] == "registry.local/office:3"


def test_no_secret_and_nothing_of_the_platform_reaches_the_container_spec(request_body):
    name, body = request_body
    assert SPEC.agent_key not in json.dumps(body) + name
    assert sorted(variable.split("=")[0] for variable in body["Env"]) == [
        "HOME", "LANG", "PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH",
    ]  # fmt: skip


def test_the_container_has_no_network_and_publishes_nothing(request_body):
    _, body = request_body
    host = body["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert not host.get("PortBindings") and not body.get("ExposedPorts")
    assert not host.get("PublishAllPorts")


def test_it_sees_only_its_home_its_sockets_and_the_agent_code_read_only(request_body, tmp_path):
    _, body = request_body
    mounts = {m["Target"]: (m["Source"], m["ReadOnly"]) for m in body["HostConfig"]["Mounts"]}
    root = tmp_path / "desktop-42"
    assert mounts == {
        "/home/user": (str(root / "home"), False),
        "/run/tandem": (str(root / "run"), False),
        "/tmp/.X11-unix": (str(root / "x11"), False),
        "/opt/tandem-agent": (str(tmp_path / "agent"), True),
        "/etc/passwd": (str(root / "passwd"), True),
        "/etc/group": (str(root / "group"), True),
    }
    assert body["HostConfig"]["ReadonlyRootfs"] is True
    assert set(body["HostConfig"]["Tmpfs"]) == {"/tmp", "/var/tmp"}


def test_a_home_of_its_own_size_is_a_tmpfs_filled_from_the_template_read_only(tmp_path):
    """HOME as the engine's tmpfs, owned by the desktop's uid as each engine says it; the
    prepared HOME is beside it, read-only, for the agent to copy in."""
    assert home_tmpfs(256, UID, podman=True) == "size=256m,mode=0700,nosuid,nodev,notmpcopyup,U"
    docker_options = home_tmpfs(256, UID, podman=False)
    assert docker_options == f"size=256m,mode=0700,nosuid,nodev,uid={UID},gid={UID}"
    _, body = create_request(SPEC, tmp_path, docker_options)
    mounts = {m["Target"]: (m["Source"], m["ReadOnly"]) for m in body["HostConfig"]["Mounts"]}
    assert "/home/user" not in mounts
    assert mounts["/opt/tandem-home"] == (str(tmp_path / "desktop-42" / "home"), True)
    assert body["HostConfig"]["Tmpfs"]["/home/user"] == docker_options
    config = json.loads(bubblewrap.agent_config(SPEC, "/opt/tandem-home"))
    assert (config["home"], config["home_template"]) == ("/home/user", "/opt/tandem-home")


def test_a_home_as_large_as_the_memory_limit_is_refused_clearly(settings):
    settings.TANDEM_DOCKER_MEMORY, settings.TANDEM_SANDBOX_HOME_MB = "2g", 2048
    with pytest.raises(DesktopError, match="must be below TANDEM_DOCKER_MEMORY"):
        DockerProvider().start(SPEC)


def test_containers_are_named_and_labelled_after_their_desktop_and_host(settings, tmp_path):
    settings.TANDEM_HOST = "desk host.1"
    name, body = create_request(SPEC, tmp_path)
    assert name == "tandem-desk-host.1-desktop-42"
    assert body["Labels"] == {"tandem.desktop": "42", "tandem.host": "desk host.1"}
    assert body["Hostname"] == "desktop-42"


def test_containers_are_limited_and_unprivileged(settings, tmp_path):
    settings.TANDEM_DOCKER_MEMORY = "3g"
    settings.TANDEM_DOCKER_CPUS = 1.5
    _, body = create_request(SPEC, tmp_path)
    host = body["HostConfig"]
    assert host["Memory"] == host["MemorySwap"] == 3 * 1024**3
    assert host["NanoCpus"] == 1_500_000_000
    assert host["PidsLimit"] > 0
    assert {u["Name"] for u in host["Ulimits"]} == {"nofile", "nproc"}
    assert host["ShmSize"] >= 256 * 1024**2
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Init"] is True
    assert not host.get("Privileged")


def test_a_template_that_asks_for_the_internet_is_refused_clearly():
    with pytest.raises(DesktopError, match="container desktops have no network"):
        DockerProvider().start(replace(SPEC, internet=True))


# --- without an engine --------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def no_engine(settings, tmp_path, request):
    urls = {
        "closed-tcp-port": f"tcp://127.0.0.1:{closed_port()}",
        "missing-socket": f"unix://{tmp_path / 'docker.sock'}",
    }
    settings.TANDEM_DOCKER_URL = urls[request.param]
    return settings.TANDEM_DOCKER_URL


@pytest.mark.parametrize("no_engine", ["closed-tcp-port", "missing-socket"], indirect=True)
def test_start_without_an_engine_is_a_desktop_error_naming_the_engine(no_engine):
    with pytest.raises(DesktopError, match=re.escape(no_engine)):
        DockerProvider().start(SPEC)


@pytest.mark.parametrize("no_engine", ["closed-tcp-port"], indirect=True)
def test_stop_without_an_engine_is_a_desktop_error(no_engine):
    with pytest.raises(DesktopError, match=re.escape(no_engine)):
        DockerProvider().stop(replace(SPEC, instance_id="c0ffee"))


@pytest.mark.parametrize("no_engine", ["missing-socket"], indirect=True)
def test_health_without_an_engine_is_unhealthy_with_the_reason(no_engine):
    health = DockerProvider().health(replace(SPEC, instance_id="c0ffee"))
    assert not health.ok
    assert no_engine in health.reason


def test_health_of_a_desktop_without_a_container_is_unhealthy():
    health = DockerProvider().health(SPEC)
    assert not health.ok and "no container" in health.reason


def test_docker_is_a_registered_provider_driven_like_a_local_desktop():
    provider = get_provider("docker")
    assert isinstance(provider, DockerProvider) and isinstance(provider, DesktopProvider)
    assert {"xtest", "view_only_vnc", "home_restore", "launch", "run", "files"} <= (
        provider.capabilities
    )
    assert provider.allocates_display
    endpoint = Endpoint("c0ffee", "", 0, SPEC.screen, ":42", "unix:/x/run/agent.sock")
    assert isinstance(provider.control(SPEC, endpoint), LocalControl)
