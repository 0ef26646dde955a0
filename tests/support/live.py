"""The live loop's real processes for tests: a Celery worker owning a test host's desktops and
the model queue, the ASGI server, websockify with Tandem's token plugin, and a WebSocket client of
an episode. Each process uses the test database, its own Redis database for channel groups and
its own Celery broker, so no other worker takes the test's jobs."""

import json
from pathlib import Path

from django.conf import settings
from websockets.sync.client import connect

from tests.support.services import BIN, celery_worker, child_env, port_open, running, worker_answers
from vm_pool.models import host_queue, rollout_queue

CSRF = "t" * 32
# A terminal showing two words the baseline can read and click, one after the other.
TERMINAL = ["xterm", "-fa", "DejaVu Sans Mono", "-fs", "24", "-geometry", "40x6+100+100", "-e",
            "sh", "-c", "echo Archive Reports; exec sh"]  # fmt: skip
BROKER = "redis://127.0.0.1:6379/13"
CHANNELS = "redis://127.0.0.1:6379/14"


def service_env(host: str, broker: str = BROKER, channels: str = CHANNELS) -> dict[str, str]:
    """A suite that may run beside another one passes Redis databases of its own: the
    ``model`` queue and the episodes' channel groups are not named after the host."""
    low, high = settings.TANDEM_DISPLAY_RANGE
    engine = {"TANDEM_DOCKER_URL": settings.TANDEM_DOCKER_URL} if settings.TANDEM_DOCKER_URL else {}
    return child_env(
        **engine,
        TANDEM_HOST=host,
        TANDEM_DESKTOP_ROOT=str(settings.TANDEM_DESKTOP_ROOT),
        TANDEM_DISPLAY_MIN=str(low),
        TANDEM_DISPLAY_MAX=str(high),
        TANDEM_REDIS_URL=channels,  # the test's own channel groups
        TANDEM_CELERY_BROKER_URL=broker,  # and its own queues: no other worker takes its jobs
    )


def worker(
    host: str,
    broker: str = BROKER,
    channels: str = CHANNELS,
    queues: str = "",
    beat: Path | None = None,
    **extra: str,
):
    """The host's worker of the live loop, its rollouts' too; ``queues`` adds more (``default``:
    rollout batches), and ``beat`` (its schedule file) runs Celery beat in it (which dispatches
    batches)."""
    name = f"{host}@loop"
    queues = ",".join(q for q in (host_queue(host), rollout_queue(host), "model", queues) if q)
    command = celery_worker(name, queues, "threads", 4, beat)

    def ready() -> bool:
        return worker_answers(broker, name)

    return running(command, {**service_env(host, broker, channels), **extra}, ready, 60)


def asgi(host: str, port: int, broker: str = BROKER, channels: str = CHANNELS, **extra: str):
    command = [str(BIN / "uvicorn"), "backend.asgi:application", "--port", str(port)]
    return running(command, {**service_env(host, broker, channels), **extra}, port_open(port))


def websockify(port: int, **extra: str):
    """The one websockify of a deployment, resolving stream tokens in the test database (with
    ``extra`` in its environment: a test's own media folder, say)."""
    command = [
        str(BIN / "python"),
        "-m",
        "vm_pool.recording.proxy",
        "--token-source",
        "backend.settings",
        f"127.0.0.1:{port}",
    ]
    return running(command, child_env(**extra), port_open(port))


class Socket:
    """A WebSocket client of one episode that remembers every event it received."""

    def __init__(self, server: str, episode: int, cookie: str) -> None:
        self.ws = connect(  # noqa: SIM115  (closed by close())
            f"ws://{server}/ws/episodes/{episode}/",
            additional_headers={"Cookie": cookie},
            origin=f"http://{server}",
        )
        self.events: list[dict] = []

    def next(self, event: str, timeout: float = 60, **match) -> dict:
        while True:
            message = json.loads(self.ws.recv(timeout=timeout))
            self.events.append(message)
            payload = message["payload"]
            if message["event"] == event and all(payload.get(k) == v for k, v in match.items()):
                return payload

    def send(self, **message) -> None:
        self.ws.send(json.dumps(message))

    def close(self) -> None:
        self.ws.close()
