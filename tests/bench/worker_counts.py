"""Loaded into a benchmark's Celery worker (``celery worker --include tests.bench.worker_counts``):
at the worker's shutdown it writes the full frames its process grabbed
(``ScreenGrabber.grabbed``) as JSON to the file ``TANDEM_BENCH_COUNTS`` names."""

import json
import os
from pathlib import Path
from typing import Any

from celery.signals import worker_shutdown


@worker_shutdown.connect
def _write_counts(**_: Any) -> None:
    from vm_pool.screen.capture import ScreenGrabber  # here: the worker has set Django up

    path = os.environ.get("TANDEM_BENCH_COUNTS")
    if path:
        Path(path).write_text(json.dumps({"grabbed": ScreenGrabber.grabbed}))
