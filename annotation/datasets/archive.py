"""A succeeded export as one download: ``GET /api/exports/{id}/archive/``.

An export is many files (a manifest, shards or JSON, and for LLaMA-Factory one image per
screenshot); pulling them one link at a time is thousands of requests. The archive is a plain
tar streamed from storage as it is read, never built whole in memory nor on disk: each
published file of the export (``DatasetExport.files``, in their order) under one folder named
after the export, so that ``curl -L …/archive/ | tar x`` leaves the layout the export's own
README and ``dataset_info.json`` expect. Images are PNG already: the tar is not compressed.
"""

import tarfile
from collections.abc import Iterator

from django.core.files.storage import default_storage

from annotation.datasets.exports import ExportConflict, export_prefix, published_file
from annotation.models import DatasetExport

CHUNK_BYTES = 1024 * 1024


def folder_name(export: DatasetExport) -> str:
    return f"export-{export.pk}-{export.kind}-{export.format}"


def archive_chunks(export: DatasetExport) -> Iterator[bytes]:
    """The export's tar, chunk by chunk (refuses, before the first byte, an export that has not
    succeeded)."""
    if export.status != DatasetExport.Status.SUCCEEDED:
        raise ExportConflict(f"This export is {export.status}; only a succeeded one has files.")
    entries = [published_file(export, entry["name"]) for entry in export.files]
    return _chunks(export, entries)


def _chunks(export: DatasetExport, entries: list[dict]) -> Iterator[bytes]:
    folder = folder_name(export)
    for entry in entries:
        info = tarfile.TarInfo(f"{folder}/{entry['name']}")
        info.size = int(entry["size"])
        info.mode = 0o644
        info.mtime = int(export.finished_at.timestamp()) if export.finished_at else 0
        yield info.tobuf(format=tarfile.PAX_FORMAT)
        written = 0
        with default_storage.open(export_prefix(export.pk) + entry["name"], "rb") as file:
            while chunk := file.read(CHUNK_BYTES):
                written += len(chunk)
                yield chunk
        if written != info.size:  # the stored file is not the one published: stop, loudly
            raise OSError(f"{entry['name']} is {written} bytes, published as {info.size}")
        if padding := -written % tarfile.BLOCKSIZE:
            yield bytes(padding)
    yield bytes(tarfile.BLOCKSIZE * 2)  # the end of the archive
