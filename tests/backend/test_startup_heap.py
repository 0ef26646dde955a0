"""The web server and the workers leave their start-up objects out of the collector's full
passes (``backend.celery.freeze_startup_objects``): shown in fresh processes, the web app as
uvicorn imports it and a worker as Celery tells it that it is ready."""

import subprocess
import sys

from tests.support.services import ROOT, child_env

WEB = "import gc, backend.asgi; print(gc.get_freeze_count())"
WORKER = (
    "import gc, django; django.setup(); from celery import signals; from backend.celery import app;"
    "signals.worker_ready.send(sender=None); print(gc.get_freeze_count())"
)


def frozen_after(program: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", f"import gc; assert gc.get_freeze_count() == 0; {program}"],
        cwd=ROOT,
        env=child_env(DJANGO_SETTINGS_MODULE="backend.settings"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


def test_the_web_app_and_a_ready_worker_freeze_what_start_up_made():
    assert frozen_after(WEB) > 50_000
    assert frozen_after(WORKER) > 50_000
