"""Celery jobs of model serving.

``run_finetune_job`` runs on the ``train`` queue, which only GPU workers consume (never the
web process, never the export or desktop workers). ``serve_model_version`` loads a version on
its endpoint; it runs on ``default``.
"""

from typing import Any

from celery import shared_task

from backend.attempts import AttemptAlive
from model_serving import finetune, serving
from model_serving.models import ModelVersion


@shared_task(
    name="model_serving.jobs.run_finetune_job",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,
)
def run_finetune_job(self: Any, job_id: int) -> str:
    """Train a job (``model_serving.finetune``). Delivered again when its worker dies; while
    another attempt is alive, it waits for that one instead."""
    try:
        return finetune.run_job(job_id)
    except AttemptAlive as alive:
        raise self.retry(countdown=alive.seconds) from None


@shared_task(name="model_serving.jobs.serve_model_version", acks_late=True)
def serve_model_version(version_id: int) -> str:
    version = ModelVersion.objects.get(pk=version_id)
    try:
        serving.serve_version(version)
    except serving.ServingFailed as error:
        return str(error)
    return ModelVersion.Serving.SERVING
