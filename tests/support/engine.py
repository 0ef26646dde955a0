"""The container engine for tests: podman's Docker-compatible API service, started here when
it is not running (as ``make`` starts it for a deployment), and the desktop image, which
``make desktop-image`` builds (``deploy/dev.sh``)."""

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
from django.conf import settings

SOCKET = Path("/run/podman/podman.sock")
URL = f"unix://{SOCKET}"
ROOT = Path(__file__).resolve().parents[2]


def _answers() -> bool:
    try:
        docker.DockerClient(base_url=URL, timeout=5).ping()
    except Exception:
        return False
    return True


@contextmanager
def container_engine() -> Iterator[str]:
    """The engine's API address, with the desktop image present. The service is left running
    for the next test run when this run started it (it holds nothing of a test's)."""
    if shutil.which("podman") is None:
        raise RuntimeError("podman is not installed: make test installs it (deploy/dev.sh)")
    if not _answers():
        SOCKET.parent.mkdir(parents=True, exist_ok=True)
        subprocess.Popen(  # from /: its helpers leave files (an "oom" mark) in their cwd
            ["podman", "system", "service", "--time=0", URL],
            cwd="/",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while not _answers():
            if time.monotonic() > deadline:
                raise RuntimeError(f"podman's API service did not answer at {URL}")
            time.sleep(0.2)
    subprocess.run([str(ROOT / "deploy" / "dev.sh"), "desktop-image"], check=True)
    assert settings.TANDEM_DESKTOP_IMAGE
    yield URL
