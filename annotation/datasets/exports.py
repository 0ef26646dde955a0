"""Dataset exports: the background job that turns recorded episodes into a versioned dataset,
and what the API does with it (create, cancel, list files, download).

An export is a ``DatasetExport`` row and a Celery job on the ``exports`` queue. Rules:

- **One attempt at a time, exactly one result.** The job (``acks_late``, re-delivered when its
  worker dies) starts an *attempt*: under the row's lock it bumps ``attempt`` and marks the row
  running. A delivery that finds the export finished does nothing; one that finds it running
  with a fresh heartbeat (another attempt is alive) asks to be retried later; one that finds the
  heartbeat older than ``TANDEM_EXPORT_STALE_SECONDS`` takes over with a new attempt.
- **Staging, then publish.** An attempt writes into its own staging folder on the worker's disk,
  ``TANDEM_EXPORT_STAGING_ROOT/<id>-<attempt>/`` (the leftovers of earlier attempts are removed
  first). Only a complete dataset is published to storage under ``exports/<id>/``: what an
  earlier attempt left there is cleared, the data files are copied, ``manifest.json`` last, and
  the row becomes ``succeeded`` with its file list in one transaction. The API shows files and
  serves downloads only for a succeeded export, so a half-written attempt is never visible.
- **Between chunks** of ``CHECK_EVERY`` records (and at least every second, as records or
  episodes are read) the attempt writes its progress and heartbeat in one conditional update;
  when that update finds the export cancelled or taken over, the attempt stops and removes its
  staging folder.
- **Versioned and reproducible.** Files are a function of the data and the filters (see the
  format writers); ``content_hash`` is the sha256 of the manifest, which lists every file's
  sha256, so equal hashes mean equal pairs.
- Screenshots are read from storage one at a time as rows are written (a few cached, since
  consecutive samples share most of their five), never a project at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from annotation.datasets import pairs
from annotation.datasets.formats import llama_factory, trl
from annotation.datasets.records import Filters, ReviewStatus, Source
from annotation.job_names import BUILD_EXPORT
from annotation.models import DatasetExport, Episode, EpisodeMode, Project
from annotation.quality import kept
from backend import attempts
from backend.accounts.models import User
from backend.celery import send_after_commit
from backend.errors import DomainError
from model_serving.versions import served_style
from vm_pool.models import Screenshot

log = logging.getLogger(__name__)

CHECK_EVERY = 200
CHECK_SECONDS = 1.0
IMAGES_DIR = "images"
IMAGE_CACHE = 16

Status = DatasetExport.Status
FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)


class ExportError(DomainError):
    """A request about an export that cannot be done as asked."""


class ExportConflict(DomainError):
    status_code = 409
    code = "conflict"


class ExportNotFound(DomainError):
    status_code = 404
    code = "not_found"


class _Stopped(Exception):
    """The export was cancelled or taken over by a newer attempt while this one ran."""


# --- requests ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportFilters:
    """What an export reads, as the API takes it. Dates bound the episode's end: ``date_from``
    inclusive, ``date_to`` exclusive."""

    date_from: datetime | None = None
    date_to: datetime | None = None
    model_version: str | None = None
    review_status: ReviewStatus = "any"
    annotator: str | None = None  # username
    include_accepted: bool = False
    exclude_held_out: bool = False  # leave out the evaluation split, as fine-tuning needs
    min_task_success: float | None = None  # only episodes the task's evaluator scored this high
    source: Source = "interactive"  # or validated rollouts
    drop_no_visible_effect: bool = False  # leave out steps whose action changed nothing
    # Leave out demonstrations whose thoughts are not all a person's (by default: an empty
    # thought or a model's unapproved draft is no training target), or that did not replay.
    require_approved_thoughts: bool = True
    require_replay: bool = False
    # Only work of annotators this good, or work they corroborate (annotation.quality.kept).
    min_gold_accuracy: float | None = None
    min_agreement: float | None = None

    def as_json(self) -> dict[str, Any]:
        # Filters added later are written only when set, so older exports read the same.
        later = {
            k: v
            for k, v in (
                ("min_task_success", self.min_task_success),
                ("source", self.source),
                ("drop_no_visible_effect", self.drop_no_visible_effect),
                ("require_approved_thoughts", self.require_approved_thoughts),
                ("require_replay", self.require_replay),
                ("min_gold_accuracy", self.min_gold_accuracy),
                ("min_agreement", self.min_agreement),
            )
            if v is not None and v != "interactive" and v is not False
        }
        return {
            "date_from": self.date_from.isoformat() if self.date_from else None,
            "date_to": self.date_to.isoformat() if self.date_to else None,
            "model_version": self.model_version,
            "review_status": self.review_status,
            "annotator": self.annotator,
            "include_accepted": self.include_accepted,
            "exclude_held_out": self.exclude_held_out,
        } | later


def create_export(
    project: Project, user: User, kind: str, format: str, filters: ExportFilters
) -> DatasetExport:
    """Record an export and queue its job (after commit)."""
    if kind not in DatasetExport.Kind.values:
        raise ExportError(f"Unknown kind {kind!r}; one of {', '.join(DatasetExport.Kind.values)}.")
    if format not in DatasetExport.Format.values:
        known = ", ".join(DatasetExport.Format.values)
        raise ExportError(f"Unknown format {format!r}; one of {known}.")
    if format == DatasetExport.Format.LLAMA_FACTORY and kind == DatasetExport.Kind.CT:
        raise ExportError("LLaMA-Factory exports are SFT or DPO; export CT data as trl.")
    if filters.date_from and filters.date_to and filters.date_from >= filters.date_to:
        raise ExportError("date_from must be before date_to.")
    if (
        filters.annotator is not None
        and not User.objects.filter(username=filters.annotator).exists()
    ):
        raise ExportError(f"No annotator named {filters.annotator!r}.")
    with transaction.atomic():
        export = DatasetExport.objects.create(
            project=project,
            kind=kind,
            format=format,
            filters=filters.as_json(),
            # The convention of the model the project serves: its version A's, where it has one.
            coordinate_style=served_style(project.model_settings, project.model_version),
            created_by=user,
        )
        send_after_commit(BUILD_EXPORT, [export.pk], settings.TANDEM_EXPORT_QUEUE)
    return export


def cancel_export(export_id: int) -> DatasetExport:
    """Cancel a queued or running export; its job stops at its next check and publishes
    nothing."""
    with transaction.atomic():
        export = DatasetExport.objects.select_for_update().get(pk=export_id)
        if export.status in FINISHED:
            raise ExportConflict(
                f"This export has already {export.status}; it cannot be cancelled."
            )
        export.status = Status.CANCELLED
        export.finished_at = timezone.now()
        export.save(update_fields=["status", "finished_at"])
    return export


# --- downloads -----------------------------------------------------------------------------


def export_prefix(export_id: int) -> str:
    return f"exports/{export_id}/"


def published_file(export: DatasetExport, name: str) -> dict[str, Any]:
    """The entry of a succeeded export's file, or a clear error."""
    if export.status != Status.SUCCEEDED:
        raise ExportConflict(f"This export is {export.status}; only a succeeded one has files.")
    for entry in export.files:
        if entry["name"] == name:
            return dict(entry)
    raise ExportNotFound(
        f"This export has no file {name!r}.",
        details={"files": [entry["name"] for entry in export.files]},
    )


def local_path(export: DatasetExport, name: str) -> str | None:
    """The file's path when storage is on this machine's disk, else None (remote storage)."""
    try:
        return default_storage.path(export_prefix(export.pk) + name)
    except NotImplementedError:
        return None


def presigned_url(export: DatasetExport, name: str) -> str:
    """A short-lived URL of the file in remote storage, downloading under its own name."""
    key = export_prefix(export.pk) + name
    filename = f"export-{export.pk}-{name.replace('/', '-')}"
    parameters = {"ResponseContentDisposition": f'attachment; filename="{filename}"'}
    expire = settings.TANDEM_EXPORT_URL_SECONDS
    return str(default_storage.url(key, parameters=parameters, expire=expire))  # type: ignore[call-arg]


# --- the job -------------------------------------------------------------------------------


def build_export(export_id: int) -> None:
    """Build, publish and record one export (the job's body; see the module docstring)."""
    attempt = _start_attempt(export_id)
    if attempt is None:
        return
    export = DatasetExport.objects.select_related("project").get(pk=export_id)
    staging = _staging(export_id, attempt)
    try:
        manifest_path = _write(export, attempt, staging)
        files = _publish(export, attempt, staging, manifest_path)
        _finish(export, attempt, files, manifest_path)
    except _Stopped:
        log.info("export %s attempt %s stopped: cancelled or taken over", export_id, attempt)
        if DatasetExport.objects.filter(pk=export_id, status=Status.CANCELLED).exists():
            _clear(export_id)  # what it may have published before the cancel was seen
    except Exception as error:
        log.exception("export %s attempt %s failed", export_id, attempt)
        _fail(export_id, attempt, f"{type(error).__name__}: {error}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _start_attempt(export_id: int) -> int | None:
    now = timezone.now()
    stale = timedelta(seconds=settings.TANDEM_EXPORT_STALE_SECONDS)
    with transaction.atomic():
        export = DatasetExport.objects.select_for_update().filter(pk=export_id).first()
        if export is None or export.status in FINISHED:
            return None  # deleted, or a duplicate delivery of a finished job
        attempts.take(export, export.status == Status.RUNNING, stale, now)
        export.status = Status.RUNNING
        export.progress = 0.0
        export.started_at = export.started_at or now
        export.error = ""
        export.save(
            update_fields=["attempt", "status", "progress", "heartbeat_at", "started_at", "error"]
        )
        return export.attempt


def _staging(export_id: int, attempt: int) -> Path:
    root = Path(settings.TANDEM_EXPORT_STAGING_ROOT)
    for leftover in root.glob(f"{export_id}-*"):  # earlier attempts whose worker died
        shutil.rmtree(leftover, ignore_errors=True)
    staging = root / f"{export_id}-{attempt}"
    staging.mkdir(parents=True)
    return staging


def _check(export_id: int, attempt: int, progress: float) -> None:
    """Progress and heartbeat in one update, which only an attempt still in force can make."""
    updated = DatasetExport.objects.filter(
        pk=export_id, attempt=attempt, status=Status.RUNNING
    ).update(progress=min(max(progress, 0.0), 1.0), heartbeat_at=timezone.now())
    if not updated:
        raise _Stopped()


class _Checkpoints:
    """Progress and heartbeat between chunks: after every ``CHECK_EVERY`` records or
    ``CHECK_SECONDS``, whichever comes first, counted as episodes are read (so an export whose
    episodes give few records still checks in). Progress counts the episodes read; writing the
    files takes the last 10%."""

    def __init__(self, export_id: int, attempt: int, total: int) -> None:
        self.export_id, self.attempt, self.total = export_id, attempt, max(total, 1)
        self.episodes = self.records = 0
        self.checked_at = time.monotonic()
        self.delay = settings.TANDEM_EXPORT_RECORD_DELAY_MS / 1000

    def episode(self, episode_id: int) -> None:
        self.episodes += 1
        self._maybe_check()

    def wrap(self, records: Iterator[pairs.Sample]) -> Iterator[pairs.Sample]:
        for record in records:
            self.records += 1
            self._maybe_check()
            if self.delay:
                time.sleep(self.delay)
            yield record

    def _maybe_check(self) -> None:
        if self.records >= CHECK_EVERY or time.monotonic() - self.checked_at >= CHECK_SECONDS:
            _check(self.export_id, self.attempt, 0.9 * self.episodes / self.total)
            self.records, self.checked_at = 0, time.monotonic()


def export_filters(export: DatasetExport) -> tuple[Filters, bool]:
    """What the export's job reads, from the filters recorded on it; a filter added later that
    an older export does not name reads as it did then (off)."""
    given = export.filters
    annotator_id = None
    if given.get("annotator"):
        annotator_id = User.objects.get(username=given["annotator"]).pk
    filters = Filters(
        project_id=export.project_id,
        ended_from=datetime.fromisoformat(given["date_from"]) if given.get("date_from") else None,
        ended_until=datetime.fromisoformat(given["date_to"]) if given.get("date_to") else None,
        model_version=given.get("model_version") or None,
        review_status=given.get("review_status") or "any",
        annotator_id=annotator_id,
        exclude_held_out=bool(given.get("exclude_held_out")),
        min_task_success=given.get("min_task_success"),
        source=given.get("source") or "interactive",
        drop_no_visible_effect=bool(given.get("drop_no_visible_effect")),
        require_approved_thoughts=bool(given.get("require_approved_thoughts")),
        require_replay=bool(given.get("require_replay")),
        min_gold_accuracy=given.get("min_gold_accuracy"),
        min_agreement=given.get("min_agreement"),
    )
    return filters, bool(given.get("include_accepted"))


def quality_summary(filters: Filters) -> dict[str, Any]:
    """What the quality rules kept of the period's people's episodes (``quality.kept``)."""
    if filters.source != "interactive":
        return {}
    episodes = Episode.objects.filter(
        task__project_id=filters.project_id, mode=EpisodeMode.INTERACTIVE, ended_at__isnull=False
    )
    if filters.ended_from is not None:
        episodes = episodes.filter(ended_at__gte=filters.ended_from)
    if filters.ended_until is not None:
        episodes = episodes.filter(ended_at__lt=filters.ended_until)
    return kept.summary(
        episodes, filters.project_id, filters.min_gold_accuracy, filters.min_agreement
    )


def _screenshot_reader() -> Any:
    @lru_cache(maxsize=IMAGE_CACHE)
    def read(sha256: str) -> bytes:
        name = Screenshot.objects.values_list("file", flat=True).get(pk=sha256)
        with default_storage.open(name, "rb") as stream:
            return bytes(stream.read())

    return read


def _write(export: DatasetExport, attempt: int, staging: Path) -> Path:
    filters, include_accepted = export_filters(export)
    checkpoints = _Checkpoints(export.pk, attempt, pairs.count_episodes(filters, export.kind))
    records = checkpoints.wrap(
        pairs.iter_samples(filters, export.kind, include_accepted, on_episode=checkpoints.episode)
    )
    style = export.coordinate_style
    manifest_filters = {
        "project": export.project_id,
        **export.filters,
        "quality": quality_summary(filters),
    }
    if export.format == DatasetExport.Format.TRL:
        trl.write_trl(
            records,
            export.kind,  # type: ignore[arg-type]
            staging,
            _screenshot_reader(),
            style=style,
            filters=manifest_filters,
        )
        manifest_path = staging / trl.MANIFEST_FILE
    else:
        wanted: set[str] = set()

        def image_path(sha256: str) -> str:
            wanted.add(sha256)
            return f"{IMAGES_DIR}/{sha256}.png"  # relative: the screenshots travel beside the data

        llama_factory.write_llama_factory(
            records,
            export.kind,  # type: ignore[arg-type]
            staging,
            image_path,
            style=style,
            filters=manifest_filters,
        )
        manifest_path = staging / llama_factory.MANIFEST_FILE
        _copy_images(staging, sorted(wanted), manifest_path, export.pk, attempt)
    _check(export.pk, attempt, 0.9)
    return manifest_path


def _copy_images(
    staging: Path, shas: list[str], manifest_path: Path, export_id: int, attempt: int
) -> None:
    """LLaMA-Factory reads images from paths: put each screenshot the data names beside it,
    once, and list it in the manifest like every other file."""
    (staging / IMAGES_DIR).mkdir()
    read = _screenshot_reader()
    manifest = json.loads(manifest_path.read_text())
    for index, sha256 in enumerate(shas):
        png = read(sha256)
        name = f"{IMAGES_DIR}/{sha256}.png"
        (staging / name).write_bytes(png)
        manifest["files"][name] = {"sha256": hashlib.sha256(png).hexdigest()}
        if index % CHECK_EVERY == 0:
            _check(export_id, attempt, 0.9)
    manifest_path.write_text(json.dumps(manifest, sort_keys=True, indent=2) + "\n")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def _stored_names(prefix: str) -> Iterator[str]:
    try:
        folders, files = default_storage.listdir(prefix)
    except FileNotFoundError:
        return
    for name in files:
        yield prefix + name
    for folder in folders:
        yield from _stored_names(f"{prefix}{folder}/")


def _clear(export_id: int) -> None:
    for name in list(_stored_names(export_prefix(export_id))):
        default_storage.delete(name)


def _publish(
    export: DatasetExport, attempt: int, staging: Path, manifest_path: Path
) -> list[dict[str, Any]]:
    """Copy the staged files to storage, the manifest last; return their entries."""
    _clear(export.pk)  # what an earlier attempt left half-published
    paths = sorted(p for p in staging.rglob("*") if p.is_file() and p != manifest_path)
    files = []
    for path in [*paths, manifest_path]:
        name = path.relative_to(staging).as_posix()
        key = export_prefix(export.pk) + name
        with path.open("rb") as stream:
            saved = default_storage.save(key, File(stream, name=path.name))
        if saved != key:
            raise RuntimeError(f"storage wrote {saved!r} instead of {key!r}")
        files.append({"name": name, "size": path.stat().st_size, "sha256": _sha256(path)})
        _check(export.pk, attempt, 0.95)
    return files


def _finish(
    export: DatasetExport, attempt: int, files: list[dict[str, Any]], manifest_path: Path
) -> None:
    manifest = json.loads(manifest_path.read_text())
    with transaction.atomic():
        row = DatasetExport.objects.select_for_update().get(pk=export.pk)
        if row.attempt != attempt or row.status != Status.RUNNING:
            raise _Stopped()  # cancelled after the last check, or taken over
        row.status = Status.SUCCEEDED
        row.progress = 1.0
        row.files = files
        row.counts = manifest["counts"]
        row.content_hash = files[-1]["sha256"]  # the manifest's: it lists every file's sha256
        row.location = export_prefix(export.pk)
        row.finished_at = timezone.now()
        row.save(
            update_fields=[
                "status",
                "progress",
                "files",
                "counts",
                "content_hash",
                "location",
                "finished_at",
            ]
        )


def _fail(export_id: int, attempt: int, message: str) -> None:
    with transaction.atomic():
        row = DatasetExport.objects.select_for_update().get(pk=export_id)
        if row.attempt != attempt or row.status != Status.RUNNING:
            return
        row.status = Status.FAILED
        row.error = message[:2000]
        row.finished_at = timezone.now()
        row.save(update_fields=["status", "error", "finished_at"])
    with contextlib.suppress(Exception):  # the failure is recorded; leftovers are only bytes
        _clear(export_id)
