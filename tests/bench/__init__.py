"""Tandem's benchmarks, run with ``python -m tests.bench`` (``make bench``).

Each module named in ``BENCHMARKS`` exposes ``run() -> dict[str, float | int]`` and may expose
``GOALS: dict[str, str]``, the goal of each of its keys. The runner merges what every module
returns into one table and ``bench-results.json``; a module that fails leaves its keys out.

Benchmarks that need the database run Django against ``tandem_bench``, never the developer's
database: ``setup_django`` points the settings at it before Django reads them, and
``fresh_database`` creates it empty and migrated, then drops it.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager

BENCH_DB_NAME = "tandem_bench"

BENCHMARKS: tuple[str, ...] = (
    "tests.bench.claim",
    "tests.bench.desktops",
    "tests.bench.containers",
    "tests.bench.desktop_io",
    "tests.bench.prompt",
    "tests.bench.step",
    "tests.bench.rollouts",
    "tests.bench.observation",
    "tests.bench.watch",
    "tests.bench.reaction",
    "tests.bench.export",
    "tests.bench.web",
    "tests.bench.evaluation",
    "tests.bench.osworld_agreement",
    "tests.bench.demonstrations",
    "tests.bench.quality",
)


def setup_django() -> None:
    """Configure Django for the bench database; call before any module imports a model."""
    os.environ["TANDEM_DB_NAME"] = BENCH_DB_NAME
    # Benchmarks run many clients as threads of this one process, each holding a connection as
    # a request does: the process's pool is as large as they need (servers they start get theirs).
    os.environ["TANDEM_DB_POOL_MAX"] = "40"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
    import django

    django.setup()


def _server_admin(sql: str) -> None:
    """Run one statement on the server's ``postgres`` database, outside any transaction."""
    import psycopg

    # Reads Django's settings: imported once they are configured (``setup_django``).
    from tests.support.services import database_address

    with psycopg.connect(**database_address("postgres"), autocommit=True) as admin:
        admin.execute(sql)


@contextmanager
def fresh_database() -> Iterator[None]:
    """An empty, migrated ``tandem_bench`` for the duration of the block, dropped afterwards."""
    from django.core.management import call_command
    from django.db import connections

    def disconnect() -> None:
        # The pool's connections too: a pool whose database is dropped under it keeps trying
        # to reconnect and hands out nothing.
        connections.close_all()
        connections["default"].close_pool()

    disconnect()
    _server_admin(f"DROP DATABASE IF EXISTS {BENCH_DB_NAME} WITH (FORCE)")
    _server_admin(f"CREATE DATABASE {BENCH_DB_NAME}")
    try:
        call_command("migrate", verbosity=0, interactive=False)
        yield
    finally:
        disconnect()
        _server_admin(f"DROP DATABASE IF EXISTS {BENCH_DB_NAME} WITH (FORCE)")
