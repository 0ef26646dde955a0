"""The background job that checks and stores a large archive of task files.

The rule is that **a large archive is not read in its request**: an upload over
``TANDEM_TASK_ARCHIVE_BACKGROUND_BYTES`` is kept in storage and a ``TaskFileArchive`` row
records a job (``vm_pool.jobs.store_task_file_archive``, on the ``exports`` queue) that runs the
same check and store as a request (``task_file_archives.store_archive``), within
``TANDEM_TASK_ARCHIVE_JOB_SECONDS``, writing its progress (reading is the first half, storing
the second) and then each file's result, or every problem, on the row.
"""

import logging
import time
import uuid
from typing import Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from backend.accounts.models import User
from backend.celery import send_after_commit
from vm_pool.models import TaskFileArchive
from vm_pool.task_files.archives import ArchiveRefused, store_archive

log = logging.getLogger(__name__)

JOB_NAME = "vm_pool.jobs.store_task_file_archive"
JOB_QUEUE = "exports"  # batch work, like exports: never where desktops' and the loop's jobs wait
PROGRESS_SECONDS = 1.0
UPLOADS = "task-file-archives/"


def queue_archive(upload: File, uploaded_by: User) -> TaskFileArchive:
    """Keep an upload in storage and record the job that checks and stores it (queued after
    commit)."""
    path = default_storage.save(f"{UPLOADS}{uuid.uuid4().hex}", upload)
    with transaction.atomic():
        job = TaskFileArchive.objects.create(
            name=(upload.name or "")[:255],
            file=path,
            size_bytes=upload.size,
            uploaded_by=uploaded_by,
        )
        send_after_commit(JOB_NAME, [job.pk], JOB_QUEUE)
    return job


def run_archive_job(archive_id: int) -> None:
    """Check and store one queued archive, its progress and then its result on its row; the
    upload is removed from storage once the row says what became of it. A delivery that finds
    the row running (its worker died) starts over: storing the same files again changes
    nothing."""
    job = _start_job(archive_id)
    if job is None:
        return
    upload_path = job.file.name or ""
    running = TaskFileArchive.objects.filter(pk=archive_id, status=TaskFileArchive.Status.RUNNING)
    shown = {"at": time.monotonic(), "fraction": 0.0}

    def progress(fraction: float) -> None:
        """At most once a second, and never back (a tar's files are read in its pass)."""
        if fraction > shown["fraction"] and time.monotonic() - shown["at"] >= PROGRESS_SECONDS:
            shown.update(at=time.monotonic(), fraction=min(fraction, 1.0))
            running.update(progress=shown["fraction"])

    result: dict[str, Any]
    try:
        with default_storage.open(upload_path, "rb") as upload:
            seconds = settings.TANDEM_TASK_ARCHIVE_JOB_SECONDS
            report = store_archive(upload, job.uploaded_by, seconds, progress)
    except ArchiveRefused as refusal:
        result = {
            "status": TaskFileArchive.Status.FAILED,
            "error": refusal.message,
            "problems": refusal.details["problems"],
            "counts": {"problems": refusal.details["problem_count"]},
        }
    except Exception as error:
        log.exception("task-file archive %s failed", archive_id)
        result = {
            "status": TaskFileArchive.Status.FAILED,
            "error": f"{type(error).__name__}: {error}",
        }
    else:
        result = {
            "status": TaskFileArchive.Status.DONE,
            "progress": 1.0,
            "counts": report.counts(),
            "files": report.files,
        }
    running.update(**result, file="", finished_at=timezone.now())
    default_storage.delete(upload_path)


def _start_job(archive_id: int) -> TaskFileArchive | None:
    with transaction.atomic():
        job = TaskFileArchive.objects.select_for_update().filter(pk=archive_id).first()
        if job is None or job.status in (
            TaskFileArchive.Status.DONE,
            TaskFileArchive.Status.FAILED,
        ):
            return None  # deleted, or a second delivery of a finished job
        job.status = TaskFileArchive.Status.RUNNING
        job.progress = 0.0
        job.started_at = timezone.now()
        job.save(update_fields=["status", "progress", "started_at"])
    return job
