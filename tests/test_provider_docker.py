"""The docker provider, without a Docker engine: the container it asks for, the files it copies
in, the error when no engine answers, and the desktop image's Dockerfile.

The container spec is checked as the Docker SDK turns it into the body of
``POST /containers/create`` (built by the SDK, not sent). What needs an engine (the image
building, a container starting and answering) is listed in vm_pool/providers/docker.py.
"""

import ast
import importlib.metadata
import io
import json
import re
import shlex
import socket
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import docker
import pytest
from docker.models.containers import _create_container_args

from vm_pool.actions import ScreenSize
from vm_pool.agent import AgentConfig
from vm_pool.agent_client import AgentClient
from vm_pool.providers import desktop_image
from vm_pool.providers.base import DesktopError, DesktopProvider, DesktopSpec, Endpoint
from vm_pool.providers.docker import (
    DockerProvider,
    config_archive,
    container_spec,
    home_archive,
)
from vm_pool.providers.local import BUILTIN_HOME_TEMPLATE
from vm_pool.providers.registry import get_provider

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "deploy" / "desktop.Dockerfile"
API_VERSION = "1.44"

SPEC = DesktopSpec(
    desktop_id=42,
    screen=ScreenSize(1280, 800),
    agent_key="0123456789abcdef0123456789abcdef",
    autostart=(("xterm",),),
)
SECRETS = [SPEC.agent_key]


def create_request(spec: DesktopSpec) -> tuple[str, dict]:
    """The container name and the JSON body the SDK would send to create this desktop."""
    args = _create_container_args({**container_spec(spec), "version": API_VERSION})
    name = args.pop("name")
    return name, docker.APIClient(version=API_VERSION).create_container_config(**args)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the container ------------------------------------------------------------------------------


def test_container_runs_the_agent_of_the_default_image(settings):
    settings.TANDEM_DESKTOP_IMAGE = "tandem-desktop:test"
    _, body = create_request(SPEC)
    assert body["Image"] == "tandem-desktop:test"
    assert body["Cmd"] == [
        desktop_image.PYTHON,
        "-m",
        "vm_pool.agent",
        "--config",
        desktop_image.CONFIG_PATH,
    ]
    assert body["Entrypoint"] is None
    assert body["User"] == "1000:1000"


def test_a_template_image_wins_over_the_default():
    _, body = create_request(replace(SPEC, image="registry.local/office:3"))
    assert body["Image"] == "registry.local/office:3"


def test_no_secret_reaches_the_container_spec_or_its_environment():
    name, body = create_request(SPEC)
    sent = json.dumps(body) + name
    assert not [secret for secret in SECRETS if secret in sent]
    assert body["Env"] is None


def test_vnc_and_agent_are_published_on_localhost_only_on_ports_the_engine_picks():
    _, body = create_request(SPEC)
    assert set(body["ExposedPorts"]) == {"5900/tcp", "7000/tcp"}
    assert body["HostConfig"]["PortBindings"] == {
        "5900/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}],
        "7000/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}],
    }
    assert not body["HostConfig"].get("PublishAllPorts")


def test_ports_can_be_published_on_a_private_address(settings):
    settings.TANDEM_DOCKER_PUBLISH_HOST = "10.0.3.7"
    _, body = create_request(SPEC)
    assert {b[0]["HostIp"] for b in body["HostConfig"]["PortBindings"].values()} == {"10.0.3.7"}


@pytest.mark.parametrize("everywhere", ["0.0.0.0", "", "::"])
def test_publishing_on_every_interface_is_refused(settings, everywhere):
    settings.TANDEM_DOCKER_PUBLISH_HOST = everywhere
    with pytest.raises(DesktopError, match="every interface"):
        container_spec(SPEC)


def test_containers_are_named_and_labelled_after_their_desktop_and_host(settings):
    settings.TANDEM_HOST = "desk host.1"
    name, body = create_request(SPEC)
    assert name == "tandem-desk-host.1-desktop-42"
    assert body["Labels"] == {"tandem.desktop": "42", "tandem.host": "desk host.1"}
    assert body["Hostname"] == "desktop-42"


def test_containers_are_limited_and_unprivileged(settings):
    settings.TANDEM_DOCKER_MEMORY = "3g"
    settings.TANDEM_DOCKER_CPUS = 1.5
    _, body = create_request(SPEC)
    host = body["HostConfig"]
    assert host["Memory"] == host["MemorySwap"] == 3 * 1024**3
    assert host["NanoCpus"] == 1_500_000_000
    assert host["PidsLimit"] > 0
    assert host["ShmSize"] >= 256 * 1024**2
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Init"] is True
    assert not host.get("Privileged")
    assert host["NetworkMode"] == "default"


# --- what is copied into a new container --------------------------------------------------------


def test_the_agent_config_is_copied_in_as_a_file_only_the_desktop_user_reads():
    with tarfile.open(fileobj=io.BytesIO(config_archive(SPEC))) as archive:
        (member,) = archive.getmembers()
        config = json.loads(archive.extractfile(member).read())
    assert member.name == "agent.json"
    assert (member.uid, member.gid, member.mode) == (desktop_image.UID, desktop_image.UID, 0o600)
    assert config == desktop_image.agent_config(SPEC)


def test_the_agent_config_binds_inside_the_container_and_loads_in_the_agent():
    config = AgentConfig(**desktop_image.agent_config(SPEC))
    assert config.listen == f"0.0.0.0:{desktop_image.CONTROL_PORT}"
    assert config.vnc_listen == f"0.0.0.0:{desktop_image.VNC_PORT}"  # view-only, no password
    assert (config.width, config.height) == (1280, 800)
    assert config.agent_key == SPEC.agent_key
    assert config.autostart == [["xterm"]]
    assert config.home == desktop_image.HOME


def test_a_home_template_is_copied_in_owned_by_the_desktop_user():
    with tarfile.open(fileobj=io.BytesIO(home_archive(BUILTIN_HOME_TEMPLATE))) as archive:
        members = archive.getmembers()
    assert "./.config/openbox/rc.xml" in {m.name for m in members}
    assert {(m.uid, m.gid) for m in members} == {(desktop_image.UID, desktop_image.UID)}


def test_a_missing_home_template_is_a_clear_error(tmp_path):
    with pytest.raises(DesktopError, match="not a directory"):
        home_archive(tmp_path / "nowhere")


# --- without an engine --------------------------------------------------------------------------


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
    with pytest.raises(DesktopError) as raised:
        DockerProvider().start(SPEC)
    assert f"no Docker engine answers at {no_engine}" in str(raised.value)


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


# --- the provider -------------------------------------------------------------------------------


def test_docker_is_a_registered_provider_that_controls_through_the_agent():
    provider = get_provider("docker")
    assert isinstance(provider, DockerProvider) and isinstance(provider, DesktopProvider)
    assert {"view_only_vnc", "home_restore", "launch", "run", "files"} <= provider.capabilities
    assert "xtest" not in provider.capabilities  # actions go through the agent, not this process
    endpoint = Endpoint("c0ffee", "127.0.0.1", 32768, SPEC.screen, control_address="127.0.0.1:1")
    control = provider.control(SPEC, endpoint)
    assert isinstance(control, AgentClient)
    assert control.address == "127.0.0.1:1" and control.key == SPEC.agent_key


# --- the desktop image --------------------------------------------------------------------------


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of deploy/desktop.Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def run_commands() -> list[list[str]]:
    """Each RUN split into its shell commands (on &&), each command into words."""
    return [
        shlex.split(command)
        for keyword, rest in instructions()
        if keyword == "RUN"
        for command in rest.split("&&")
    ]


def test_the_image_is_debian_bookworm():
    (base,) = [rest for keyword, rest in instructions() if keyword == "FROM"]
    assert re.fullmatch(r"debian:bookworm(-slim)?", base)


def test_the_image_installs_the_desktop_stack():
    installed = {
        word
        for words in run_commands()
        if words[:2] == ["apt-get", "install"]
        for word in words[2:]
        if not word.startswith("-")
    }
    needed = {
        "xvfb",
        "openbox",
        "x11vnc",
        "x11-utils",  # xdpyinfo: the agent waits for X with it
        "xdotool",
        "xterm",
        "mousepad",
        "pcmanfm",
        "chromium",
        "python3",
        "python3-venv",
    }
    assert needed <= installed, needed - installed
    assert any(package.startswith("fonts-") for package in installed)


def imported_third_party(roots: list[str]) -> set[str]:
    """Top-level modules outside vm_pool and the standard library that these vm_pool modules
    import, following imports into vm_pool (in functions too, and through package inits)."""
    seen: set[str] = set()
    todo = list(roots)
    found: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        base = ROOT / name.replace(".", "/")
        path = next(
            (p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None
        )
        if path is None:  # an attribute (vm_pool.actions.Action), not a module
            continue
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for imported in names:
                top = imported.split(".")[0]
                if top == "vm_pool":
                    todo.append(imported)
                elif top not in sys.stdlib_module_names and top != "__future__":
                    found.add(top)
    return found


def test_the_agent_environment_has_everything_the_agent_imports():
    pip = [words for words in run_commands() if words[0] == f"{desktop_image.APP_DIR}/venv/bin/pip"]
    installed = {re.split(r"[<>=]", word)[0].lower() for words in pip for word in words[2:]}
    distributions = importlib.metadata.packages_distributions()
    imported = imported_third_party(["vm_pool.agent"])
    needed = {distributions.get(top, [top])[0].lower() for top in imported}
    assert {"docker", "requests"} <= imported_third_party(["vm_pool.providers.docker"])
    assert needed <= installed, needed - installed
    assert ["python3", "-m", "venv", f"{desktop_image.APP_DIR}/venv"] in run_commands()


def test_the_image_runs_as_the_desktop_user_the_provider_expects():
    (useradd,) = [words for words in run_commands() if words[0] == "useradd"]
    assert useradd[-1] == desktop_image.USER
    assert useradd[useradd.index("--uid") + 1] == str(desktop_image.UID)
    assert useradd[useradd.index("--home-dir") + 1] == desktop_image.HOME
    users = [rest for keyword, rest in instructions() if keyword == "USER"]
    assert users == [desktop_image.USER]
    install_dirs = [words for words in run_commands() if words[:2] == ["install", "-d"]]
    owned = next(words for words in install_dirs if desktop_image.CONFIG_DIR in words)
    assert desktop_image.WORK_DIR in owned and "0700" in owned


def test_the_image_carries_vm_pool_and_the_home_template():
    copies = [rest.split() for keyword, rest in instructions() if keyword == "COPY"]
    assert ["vm_pool", f"{desktop_image.APP_DIR}/vm_pool"] in copies
    assert ["--chown=1000:1000", "vm_pool/home_template/", f"{desktop_image.HOME}/"] in copies
    workdir = [rest for keyword, rest in instructions() if keyword == "WORKDIR"]
    assert workdir == [desktop_image.APP_DIR]


def test_the_image_default_command_is_the_providers():
    (cmd,) = [rest for keyword, rest in instructions() if keyword == "CMD"]
    assert json.loads(cmd) == list(desktop_image.AGENT_COMMAND)
