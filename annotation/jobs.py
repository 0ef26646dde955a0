"""Celery jobs of the annotation app (queue ``default``)."""

from celery import shared_task

from annotation import queue


@shared_task(name="annotation.jobs.return_lapsed_leases")
def return_lapsed_leases() -> int:
    """Periodic (beat): tasks whose lease lapsed go back to the pool."""
    return queue.return_lapsed_leases()
