"""The Celery app: named queues for the default work, exports, desktops and model calls."""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")

app = Celery("tandem")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in ("default", "exports", "desktops", "model")]
app.autodiscover_tasks(["annotation", "vm_pool", "model_serving"], related_name="jobs")
