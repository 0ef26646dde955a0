"""Running one call in several threads at the same moment, as racing requests do: each thread
starts at a barrier, uses a database connection of its own and closes it."""

import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import connection

T = TypeVar("T")


def at_once(call: Callable[[], T], times: int, timeout_s: float = 30.0) -> list[T]:
    """What ``call`` returned in each of ``times`` threads started together; the first error
    any of them raised is raised here."""
    start = threading.Barrier(times)
    results: list[T] = []
    failures: list[BaseException] = []

    def one() -> None:
        try:
            start.wait()
            results.append(call())
        except BaseException as error:  # raised by the caller's thread below
            failures.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout_s)
    if failures:
        raise failures[0]
    return results
