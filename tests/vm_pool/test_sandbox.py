"""A desktop is a security boundary: probes run as desktop programs and try to leave it.

Two real desktops from the pool, sandboxed local ones and then containers (the same probes and
the same answers); the probe (tests/support/sandbox_probe.py) is put into
desktop A and run there through its agent, as a task's program would run. Every attempt to
reach the platform's services, the host, the repository or desktop B must fail; the same probe
shows it can reach what is its own (HOME, /tmp, its display), so a broken probe cannot pass.
"""

import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from tests.support.desktops import sandbox_processes
from tests.support.services import BIN, SHARED, child_env, free_port, port_open, running
from vm_pool import pool
from vm_pool.desktop import DesktopControl
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate
from vm_pool.providers.local import desktop_dir
from vm_pool.providers.registry import get_provider

PROBE = Path(__file__).resolve().parents[1] / "support" / "sandbox_probe.py"
SECRET = "TANDEM_PROBE_SECRET"

pytestmark = pytest.mark.django_db(transaction=True)  # websockify reads committed rows


@pytest.fixture
def limits(settings) -> None:
    """Small limits, so that the fork bomb and the memory hog meet them quickly."""
    settings.TANDEM_SANDBOX_MAX_PROCESSES = 200
    settings.TANDEM_SANDBOX_MEMORY_MB = 768
    settings.TANDEM_SANDBOX_HOME_MB = 256
    settings.TANDEM_DOCKER_MEMORY = "768m"


@pytest.fixture(params=["local", pytest.param("docker", marks=SHARED)])  # docker: the engine
def desktops(request, limits, monkeypatch) -> Iterator[tuple[Desktop, Desktop]]:
    """Two desktops of one provider: sandboxed local ones, then containers."""
    if request.param == "docker":
        request.getfixturevalue("container_desktops")
    # A secret in the environment of the process that starts desktops: none may see it.
    monkeypatch.setenv(SECRET, "the-platform-secret")
    template = DesktopTemplate.objects.create(
        name="probed", provider=request.param, width=800, height=600, min_ready=0
    )
    started = []
    for _ in range(2):
        desktop = pool.start_desktop(pool.create_desktop(template, settings.TANDEM_HOST).pk)
        assert desktop.status == DesktopStatus.READY, desktop.broken_reason
        started.append(desktop)
    yield started[0], started[1]
    stop_all()


def stop_all() -> None:
    for pk in Desktop.objects.exclude(status=DesktopStatus.STOPPED).values_list("pk", flat=True):
        pool.stop_desktop(pk)


@pytest.fixture
def host_listener() -> Iterator[int]:
    """A TCP service on every interface of the host, standing in for the web server."""
    server = socket.create_server(("0.0.0.0", 0))
    accepted: list[object] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    assert not accepted, "a desktop program connected to the host's service"


@pytest.fixture
def websockify(django_db_setup) -> Iterator[int]:
    port = free_port()
    command = [str(BIN / "websockify"), "--token-plugin", "vm_pool.websockify_tokens.TandemTokens"]
    with running([*command, f"127.0.0.1:{port}"], child_env(), port_open(port)):
        yield port


def control_of(desktop: Desktop) -> DesktopControl:
    desktop.refresh_from_db()
    return get_provider(desktop.provider).control(pool.spec_for(desktop), pool.endpoint_of(desktop))


def host_addresses() -> list[str]:
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout
    return [a for a in out.split() if ":" not in a] or ["127.0.0.1"]


def run_probe(control: DesktopControl, targets: dict) -> dict[str, str]:
    control.put_file("probe.py", PROBE.read_bytes())
    result = control.run(["python3", "probe.py", json.dumps(targets)], timeout=120)
    assert result.returncode == 0, result.output
    return json.loads(result.output.strip().splitlines()[-1])


def test_a_desktop_program_reaches_nothing_of_the_platform_the_host_or_another_desktop(
    desktops, host_listener, websockify
):
    a, b = desktops
    control_a, control_b = control_of(a), control_of(b)
    control_b.put_file("secret.txt", b"desktop B's file")
    b_files = desktop_dir(b.pk)
    assert a.display is not None and b.display is not None
    tcp = {
        "postgresql": ("127.0.0.1", 5432),
        "redis": ("127.0.0.1", 6379),
        "websockify": ("127.0.0.1", websockify),
        "web server": ("127.0.0.1", host_listener),
    }
    for address in host_addresses():
        tcp[f"postgresql via {address}"] = (address, 5432)
        tcp[f"web server via {address}"] = (address, host_listener)
    targets = {
        "tcp": tcp,
        "unix": [
            b.vnc_socket,
            b.control_address.removeprefix("unix:"),
            f"/tmp/.X11-unix/X{b.display}",
            f"\0/tmp/.X11-unix/X{b.display}",  # X's abstract socket on the host's network
            "/var/run/postgresql/.s.PGSQL.5432",
        ],
        "read": [
            str(b_files / "home" / "secret.txt"),
            str(Path(settings.BASE_DIR) / "backend" / "settings.py"),
            str(Path(settings.BASE_DIR) / "pyproject.toml"),
            f"/proc/{os.getpid()}/environ",
            "/etc/shadow",
        ],
        "write": [
            "/etc/tandem-probe",
            "/usr/tandem-probe",
            "/tandem-probe",
            "/home/tandem-probe",
            "/opt/tandem/vm_pool/agent/server.py",
            "/run/tandem/agent.sock",
            "/tmp/.X11-unix/X0",
            str(b_files / "home" / "from-a.txt"),
            str(Path(settings.BASE_DIR) / "tandem-probe"),
            # What is the desktop's own, to show the probe works:
            "/home/user/mine.txt",
            "/tmp/mine.txt",
        ],
        "displays": [f":{b.display}", f":{a.display}", ":0"],
    }
    results = run_probe(control_a, targets)

    own = {"write /home/user/mine.txt", "write /tmp/mine.txt", "display :0"}
    for name in own:
        assert results[name].startswith("REACHED"), (name, results[name])
    leaks = {
        name: result
        for name, result in results.items()
        if name not in own and not result.startswith("blocked")
    }
    assert not leaks, leaks
    assert len(results) == sum(map(len, targets.values())) + 2  # + processes, variables
    # And nothing was written where the probe was refused.
    assert not (b_files / "home" / "from-a.txt").exists()
    assert not (Path(settings.BASE_DIR) / "tandem-probe").exists()
    assert not Path("/etc/tandem-probe").exists()
    assert control_b.read_file("from-a.txt") is None
    assert control_a.read_file("mine.txt") == b"probe"


def test_desktop_programs_run_as_the_desktops_own_user_with_an_environment_from_nothing(
    desktops,
):
    a, b = desktops
    identity = control_of(a).run(["sh", "-c", "id -un; id -u; echo $HOME; env"], timeout=10)
    name, uid, home, *environment = identity.output.splitlines()
    # Inside a local sandbox the desktop's uid is mapped to 1000; a container shows the host's.
    inside = 1000 if a.provider == "local" else settings.TANDEM_SANDBOX_UID_BASE + a.display
    assert (name, uid, home) == ("user", str(inside), "/home/user")
    assert not [line for line in environment if line.startswith(("TANDEM", "AWS", "DJANGO"))]
    # On the host each desktop is a user of its own, and none is root.
    uids = {
        d.pk: {Path(f"/proc/{pid}").stat().st_uid for pid in sandbox_processes(d.display)}
        for d in (a, b)
        if d.display is not None
    }
    assert uids[a.pk] == {settings.TANDEM_SANDBOX_UID_BASE + a.display}
    assert uids[b.pk] == {settings.TANDEM_SANDBOX_UID_BASE + b.display}
    assert 0 not in uids[a.pk] | uids[b.pk]


def test_no_tcp_port_of_a_desktop_listens_on_the_host(desktops):
    listening_uids = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                listening_uids.add(int(fields[7]))
    desktop_uids = {settings.TANDEM_SANDBOX_UID_BASE + d.display for d in desktops}
    assert not listening_uids & desktop_uids
    for desktop in desktops:
        assert desktop.vnc_port is None and desktop.control_address.startswith("unix:")


FORK_BOMB = """
import os, time
children = []
try:
    while len(children) < 5000:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
except OSError as error:
    print("stopped after", len(children), error.strerror)
for pid in children:
    os.kill(pid, 9)
"""

MEMORY_HOG = """
hog = []
for _ in range(64):
    hog.append(bytearray(64 * 1024 * 1024))  # touches every page: resident, not just reserved
print("allocated", len(hog) * 64, "MB")
"""

DISK_FILLER = """
import os
written = 0
try:
    with open(os.path.expanduser("~/fill"), "wb") as out:
        while written < 8 * 1024**3:
            out.write(bytes(1024 * 1024))
            out.flush()
            written += 1024 * 1024
except OSError as error:
    print("stopped after", written // (1024 * 1024), "MiB:", error.strerror)
os.remove(os.path.expanduser("~/fill"))
print(os.statvfs(os.path.expanduser("~")).f_blocks * os.statvfs(os.path.expanduser("~")).f_frsize)
"""


def test_a_fork_bomb_a_memory_hog_and_a_disk_filler_stay_inside_their_desktop(settings, desktops):
    a, b = desktops
    control_a, control_b = control_of(a), control_of(b)
    limit = settings.TANDEM_SANDBOX_MAX_PROCESSES
    bomb = control_a.run(["python3", "-c", FORK_BOMB], timeout=120)
    assert "stopped after" in bomb.output, bomb.output
    assert int(bomb.output.split()[2]) < limit
    provider = get_provider(a.provider)
    assert provider.health(pool.spec_for(b)).ok
    assert provider.health(pool.spec_for(a)).ok  # the bomb's desktop too

    hog = control_a.run(["python3", "-c", MEMORY_HOG], timeout=120)
    # 4 GiB asked for, more than the desktop's memory limit: the kernel kills the hog.
    assert settings.TANDEM_SANDBOX_MEMORY_MB < 4096
    assert hog.returncode == -9 and "allocated" not in hog.output, hog
    assert provider.health(pool.spec_for(b)).ok
    assert control_b.observe(settle=False).png.startswith(b"\x89PNG")
    assert subprocess.run(["true"], check=False).returncode == 0  # the host still forks

    filler = control_a.run(["python3", "-c", DISK_FILLER], timeout=120)
    # 8 GiB asked for: HOME, a tmpfs of its own, is full at its size.
    stopped, size = filler.output.strip().splitlines()
    assert stopped.endswith("No space left on device"), filler.output
    assert int(stopped.split()[2]) < settings.TANDEM_SANDBOX_HOME_MB
    assert int(size) == settings.TANDEM_SANDBOX_HOME_MB * 1024 * 1024
    assert provider.health(pool.spec_for(a)).ok
    home, root = desktop_dir(a.pk) / "home", desktop_dir(a.pk)
    if a.provider == "local":  # the platform mounts it on the host
        assert os.stat(home).st_dev != os.stat(root).st_dev  # not the host's disk
        pool.stop_desktop(a.pk)
        assert os.stat(home).st_dev == os.stat(root).st_dev  # unmounted with the desktop
    else:  # the engine's own tmpfs; the host's folder is the template it was filled from
        assert os.stat(home).st_dev == os.stat(root).st_dev  # nothing mounted by the platform
        listed = control_a.run(["ls", "-A", "/home/user"], timeout=10).output.split()
        assert {".config", "Desktop", "Documents"} <= set(listed)  # the template, copied in


def test_a_desktop_allowed_the_internet_still_reaches_no_private_or_host_address(settings):
    """Without internet here, the way out is shown by an address the deployment allows (a
    proxy on the private network): reached through user-mode networking, while every other
    private, loopback, metadata and host address stays unreachable."""
    address = host_addresses()[0]
    service = socket.create_server((address, 0))
    service.settimeout(10)
    port = service.getsockname()[1]
    template = DesktopTemplate.objects.create(name="online", internet=True, min_ready=0)
    targets = {
        "tcp": {
            "the allowed proxy": (address, port),
            "postgresql on the host": (address, 5432),
            "host loopback through the gateway": ("10.0.2.2", 5432),
            "own loopback": ("127.0.0.1", 5432),
            "cloud metadata": ("169.254.169.254", 80),
            "a private network": ("10.1.2.3", 80),
            "another private network": ("192.168.1.1", 80),
        },
        "unix": [],
        "read": [],
        "write": [],
        "displays": [],
    }
    try:
        settings.TANDEM_SANDBOX_INTERNET_ALLOW = [address]
        allowed = pool.start_desktop(pool.create_desktop(template, settings.TANDEM_HOST).pk)
        assert allowed.status == DesktopStatus.READY, allowed.broken_reason
        through = run_probe(control_of(allowed), targets)
        connection, _ = service.accept()  # the connection really arrived
        connection.close()
        assert through.pop(f"tcp the allowed proxy {address}:{port}").startswith("REACHED")

        settings.TANDEM_SANDBOX_INTERNET_ALLOW = []
        closed = pool.start_desktop(pool.create_desktop(template, settings.TANDEM_HOST).pk)
        assert closed.status == DesktopStatus.READY, closed.broken_reason
        shut = run_probe(control_of(closed), targets)
    finally:
        service.close()
        stop_all()
    assert shut.pop(f"tcp the allowed proxy {address}:{port}").startswith("blocked")
    for results in (through, shut):
        reached = {k: v for k, v in results.items() if k.startswith("tcp") and "blocked" not in v}
        assert not reached, reached
        # The firewall answers, not a missing route: the way out exists and is filtered.
        assert "No route to host" in results["tcp a private network 10.1.2.3:80"]


def test_only_the_platform_opens_a_desktops_display_from_the_host(desktops):
    a, _ = desktops

    def xdpyinfo(*user: str) -> int:
        command = [*user, "xdpyinfo", "-display", f":{a.display}"]
        return subprocess.run(command, capture_output=True, timeout=10, check=False).returncode

    assert xdpyinfo() == 0  # the platform (root) reaches it through the display's socket link
    # Another user of the host, or another desktop's user, cannot even reach the socket.
    for uid in (65534, settings.TANDEM_SANDBOX_UID_BASE + a.display + 1):
        assert xdpyinfo("setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups") != 0
