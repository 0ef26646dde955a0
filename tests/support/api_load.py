"""A bounded API load on loopback, for the load test and ``make bench``: many concurrent clients
against one web server, and the PostgreSQL connections the server holds meanwhile.

The server's connections are counted in ``pg_stat_activity`` by the application name the
server was started with (``TANDEM_DB_APPLICATION_NAME``), every few milliseconds, by a
connection of this process's own (which has another name).
"""

import logging
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
import psycopg

from tests.support.services import database_address

# Reads a manager makes all day: projects, tasks, episodes, the board and who they are.
PATHS = (
    "/api/projects/",
    "/api/tasks/?page_size=50",
    "/api/episodes/",
    "/api/me/",
    "/api/projects/{project}/board/",
)
SAMPLE_S = 0.005
logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request would drown the report


@dataclass
class LoadResult:
    statuses: Counter = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    peak_connections: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies_ms)

    @property
    def p95_ms(self) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def _sampler() -> psycopg.Connection:
    return psycopg.connect(
        **database_address(), application_name="tandem-load-sampler", autocommit=True
    )


def api_load(
    base_url: str,
    token: str,
    project_id: int,
    application_name: str,
    clients: int,
    requests_each: int,
) -> LoadResult:
    """Run ``clients`` threads, each sending ``requests_each`` GETs in turn over ``PATHS``."""
    result = LoadResult()
    lock = threading.Lock()
    running = threading.Event()
    running.set()

    def sample() -> None:
        with _sampler() as sampler:
            while running.is_set():
                row = sampler.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                    [application_name],
                ).fetchone()
                result.peak_connections = max(result.peak_connections, int(row[0]) if row else 0)
                time.sleep(SAMPLE_S)

    def client(number: int) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base_url, headers=headers, timeout=120) as http:
            for i in range(requests_each):
                path = PATHS[(number + i) % len(PATHS)].format(project=project_id)
                started = time.perf_counter()
                try:
                    status = http.get(path).status_code
                except httpx.HTTPError as error:
                    with lock:
                        result.errors.append(f"{path}: {error!r}")
                    continue
                with lock:
                    result.statuses[status] += 1
                    result.latencies_ms.append((time.perf_counter() - started) * 1000)

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    running.clear()
    sampler.join()
    return result
