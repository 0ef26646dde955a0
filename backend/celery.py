"""The Celery app: named queues for the default work, exports, desktops, model calls and
training (``train``, consumed only by GPU workers)."""

import gc
import os
from typing import Any

from celery import Celery, signals
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")

app = Celery("tandem")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each queue has its own exchange and routing key: a job sent to one queue reaches that queue
# only. (Per-host queues, "desktops.<host>", are declared the same way when a worker asks for them.)
app.conf.task_queues = [
    Queue(name, Exchange(name, type="direct"), routing_key=name)
    for name in ("default", "exports", "desktops", "model", "train")
]
# Jobs of the live loop are short and many: keep the worker's database connection between
# them instead of connecting again for each (Celery's Django fixup reads this key as it is).
app.conf["CELERY_DB_REUSE_MAX"] = 100
app.autodiscover_tasks(["annotation", "vm_pool", "model_serving"], related_name="jobs")


@signals.worker_ready.connect
@signals.worker_process_init.connect
def freeze_startup_objects(**_: Any) -> None:
    """Leave what start-up made (modules, settings, the app and its jobs: ~230,000 objects in a
    desktop host's worker) out of the collector's full passes, which then scan only what the
    jobs made since. A full pass holds the GIL, so every job's thread waits for it: the step
    benchmark's host worker reports its longest (``worker_gc_full_pass_ms_max``), 130 ms
    without the freeze and 6 to 12 ms with it in runs on a 2-core machine."""
    gc.freeze()


def send_after_commit(name: str, args: list[Any], queue: str) -> None:
    """Queue a job by name once the current transaction commits (at once outside one), so a
    job never reads rows that are not yet there, nor runs for a change that was rolled back."""
    from django.db import transaction

    transaction.on_commit(lambda: app.send_task(name, args=args, queue=queue))
