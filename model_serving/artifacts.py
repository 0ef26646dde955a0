"""Folders in Django's storage (local files or S3): a training run's artifacts go up, a
version's adapter comes down to a worker or to the folder vLLM reads."""

from pathlib import Path
from typing import Any

from django.core.files import File
from django.core.files.storage import default_storage


class MissingArtifacts(Exception):
    """The storage folder is empty or absent."""


def upload_folder(folder: Path, prefix: str) -> list[dict[str, Any]]:
    """Store every file under ``folder`` as ``prefix/<relative path>``; their names and sizes."""
    stored = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = f"{prefix}/{path.relative_to(folder).as_posix()}"
        with path.open("rb") as f:
            saved = default_storage.save(name, File(f, name=path.name))
        stored.append({"name": saved, "size": path.stat().st_size})
    return stored


def download_folder(prefix: str, into: Path) -> None:
    """Copy the storage folder ``prefix`` (and its subfolders) into ``into``."""
    directories, files = default_storage.listdir(prefix)
    if not directories and not files:
        raise MissingArtifacts(f"the storage folder {prefix} is empty or missing")
    into.mkdir(parents=True, exist_ok=True)
    for name in files:
        with default_storage.open(f"{prefix}/{name}", "rb") as source:
            (into / name).write_bytes(source.read())
    for directory in directories:
        download_folder(f"{prefix}/{directory}", into / directory)


def delete_folder(prefix: str) -> None:
    """Remove the storage folder ``prefix`` and everything under it (nothing if absent)."""
    try:
        directories, files = default_storage.listdir(prefix)
    except FileNotFoundError:
        return
    for name in files:
        default_storage.delete(f"{prefix}/{name}")
    for directory in directories:
        delete_folder(f"{prefix}/{directory}")
