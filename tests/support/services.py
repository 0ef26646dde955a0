"""Start Tandem's real processes (ASGI server, Celery worker) for a test, and stop them after."""

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# In a parallel run, the tests that use what the machine has one of (the services a
# ``services`` test starts, the container engine) run in one process, one after another; the
# ``services`` tests and those asking for ``engine_url`` are put there by tests/conftest.py.
SHARED = pytest.mark.xdist_group("machine")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def parallel_process() -> tuple[int, int]:
    """This process's number in a parallel run (pytest-xdist's ``gw0``, ``gw1``, ...) and how
    many processes the run has; (0, 1) in a run of one."""
    process = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(process[2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def database_address(name: str | None = None) -> dict[str, str]:
    """psycopg's connection arguments for the settings' database server: the settings'
    database, or the one ``name``d on the same server."""
    db = settings.DATABASES["default"]
    return {
        "host": db["HOST"],
        "port": db["PORT"],
        "user": db["USER"],
        "password": db["PASSWORD"],
        "dbname": name or db["NAME"],
    }


REDIS_DATABASES = 16  # Redis's default number; the tests' suites use databases of their own


def clear_redis_keys(prefix: str) -> int:
    """Delete the keys under ``prefix`` (a test instance's, never a deployment's) in every
    database of the Redis at ``REDIS_URL``; how many (none where no Redis answers)."""
    if not prefix.startswith("test_tandem"):
        raise ValueError(f"not a test instance's prefix: {prefix!r}")
    where = redis.connection.parse_url(settings.REDIS_URL)
    cleared = 0
    for database in range(REDIS_DATABASES):
        client = redis.Redis(**{**where, "db": database})
        try:
            stale = list(client.scan_iter(match=f"{prefix}*", count=1000))
            cleared += client.delete(*stale) if stale else 0
        except redis.ConnectionError:
            return cleared  # no Redis here: nothing was left in it
        finally:
            client.close()
    return cleared


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process that must use the test database, as one instance
    with this process (the same prefix on its queues and socket groups)."""
    env = dict(os.environ)
    env["TANDEM_DB_NAME"] = settings.DATABASES["default"]["NAME"]
    env["TANDEM_INSTANCE"] = settings.TANDEM_INSTANCE
    env.update(extra)
    return env


_started = itertools.count(1)


def redis_layer(url: str) -> dict:
    """This instance's channel layer on the Redis database ``url`` (a test's own groups)."""
    config = {**settings.CHANNEL_LAYERS["default"]["CONFIG"], "hosts": [url]}
    return {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": config}}


def worker_answers(broker: str, name: str, timeout: float = 0.5, instance: str = "") -> bool:
    """Whether the worker ``name`` of this instance (or of ``instance``) answers a ping through
    ``broker``."""
    from celery import Celery

    prefix = f"{instance}:" if instance else settings.INSTANCE_KEY_PREFIX
    client = Celery(broker=broker, set_as_current=False)
    client.conf.broker_transport_options = {"global_keyprefix": prefix}
    try:
        return bool(client.control.ping([name], timeout=timeout))
    finally:
        client.close()


@contextmanager
def running(
    command: list[str], env: dict[str, str], ready: Callable[[], bool], timeout: float = 30
) -> Iterator[subprocess.Popen]:
    # One log per started process, kept after the run: a failed test's services can be read.
    logs = ROOT / "var" / "test-logs"
    logs.mkdir(parents=True, exist_ok=True)
    name = f"{os.getpid()}-{next(_started):03d}-{Path(command[0]).name}.log"
    log = open(logs / name, "w+")  # noqa: SIM115
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"{command[0]} did not start:\n{log.read()[-3000:]}")
            time.sleep(0.2)
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):  # the test may have killed it already
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def port_open(port: int) -> Callable[[], bool]:
    def check() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    return check


def celery_worker(
    name: str,
    queues: str | list[str],
    pool: str = "solo",
    threads: int | None = None,
    beat: Path | None = None,
    *more: str,
) -> list[str]:
    """The command line of a Celery worker of the platform named ``name`` on ``queues``, with
    ``pool`` (``threads`` of them for a thread pool), logging at INFO, without gossip or
    mingle (tests start workers that must not wait for each other); ``beat`` (a schedule file)
    runs Celery beat in it; ``more`` goes at the end."""
    queues = queues if isinstance(queues, str) else ",".join(queues)
    command = [str(BIN / "celery"), "-A", "backend", "worker", "-Q", queues, "-n", name]
    command += ["-l", "INFO", "--pool", pool, "--without-gossip", "--without-mingle"]
    if threads is not None:
        command += ["-c", str(threads)]
    if beat is not None:
        command += ["-B", "-s", str(beat)]
    return [*command, *more]
