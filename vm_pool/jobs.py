"""Celery jobs of the desktop pool.

Jobs that touch a desktop's processes run on the queue of the host that owns it,
``desktops.<host>``; every host's worker consumes its own queue (and the shared ``desktops``
queue for fan-out). Beat runs ``maintain_all_hosts`` and ``check_all_hosts``, which send one
job to each registered host. ``store_task_file_archive`` (a large upload of task files) runs on
``exports``, with the other batch work.
"""

from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings

from vm_pool import pool
from vm_pool.models import DesktopHost, host_queue
from vm_pool.task_files import archive_jobs


@shared_task(name="vm_pool.jobs.start_desktop", acks_late=True)
def start_desktop(desktop_id: int) -> str:
    return pool.start_desktop(desktop_id).status


@shared_task(name="vm_pool.jobs.reset_desktop", acks_late=True)
def reset_desktop(desktop_id: int) -> str:
    return pool.reset_desktop(desktop_id).status


@shared_task(
    name="vm_pool.jobs.store_task_file_archive", acks_late=True, reject_on_worker_lost=True
)
def store_task_file_archive(archive_id: int) -> None:
    """Check and store an uploaded archive of task files (``vm_pool.task_files.archives``)."""
    archive_jobs.run_archive_job(archive_id)


@shared_task(name="vm_pool.jobs.maintain_host")
def maintain_host(host: str) -> dict[str, int]:
    return pool.maintain_host(host)


@shared_task(name="vm_pool.jobs.check_host")
def check_host(host: str) -> list[int]:
    return pool.check_health(host)


def _each_host(job: Any) -> int:
    hosts = list(DesktopHost.objects.values_list("name", flat=True))
    for host in hosts:
        job.apply_async(args=[host], queue=host_queue(host))
    return len(hosts)


@shared_task(name="vm_pool.jobs.maintain_all_hosts")
def maintain_all_hosts() -> int:
    return _each_host(maintain_host)


@shared_task(name="vm_pool.jobs.check_all_hosts")
def check_all_hosts() -> int:
    pool.release_lapsed_desktop_leases()
    return _each_host(check_host)


@worker_ready.connect
def recover_this_host(sender: Any = None, **kwargs: Any) -> None:
    """A worker that owns this host's desktops registers the host and redoes unfinished resets."""
    queues = {q.name for q in sender.app.amqp.queues.consume_from.values()} if sender else set()
    if host_queue(settings.TANDEM_HOST) in queues:
        pool.register_host(settings.TANDEM_HOST, list(settings.TANDEM_HOST_PROVIDERS))
        pool.recover_host(settings.TANDEM_HOST)
