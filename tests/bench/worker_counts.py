"""Loaded into a benchmark's Celery worker (``celery worker --include tests.bench.worker_counts``):
at the worker's shutdown it writes, as JSON, to the file ``TANDEM_BENCH_COUNTS`` names:

- ``grabbed``: the full frames its process grabbed (``ScreenGrabber.grabbed``);
- ``gc_full_passes`` and ``gc_full_pass_ms_max``: the garbage collector's full passes (of its
  oldest generation) once the worker was ready, and the longest of them. A full pass holds the
  GIL: every job's thread waits for it (``backend.celery.freeze_startup_objects``).
"""

import gc
import json
import os
import time
from pathlib import Path
from typing import Any

from celery.signals import worker_ready, worker_shutdown

_full_passes: list[float] = []
_started: list[float] = []


def _time_full_passes(phase: str, info: dict[str, Any]) -> None:
    if info.get("generation") != 2:
        return
    if phase == "start":
        _started[:] = [time.perf_counter()]
    elif _started:
        _full_passes.append((time.perf_counter() - _started.pop()) * 1000)


@worker_ready.connect
def _count_from_now(**_: Any) -> None:
    gc.callbacks.append(_time_full_passes)


@worker_shutdown.connect
def _write_counts(**_: Any) -> None:
    from vm_pool.screen.capture import ScreenGrabber  # here: the worker has set Django up

    path = os.environ.get("TANDEM_BENCH_COUNTS")
    if path:
        counts = {
            "grabbed": ScreenGrabber.grabbed,
            "gc_full_passes": len(_full_passes),
            "gc_full_pass_ms_max": round(max(_full_passes, default=0.0), 1),
        }
        Path(path).write_text(json.dumps(counts))
