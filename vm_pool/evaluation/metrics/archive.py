"""compare_archive: read two archives and score their files pairwise with another metric.

``file_type`` (default ``text``) picks the metric: text, pdf, docx, ppt, image, csv or table;
``file_path`` is a folder inside the archives; other options go to that metric. The score is
the mean over the files directly in that folder, 0 when the two archives do not hold the same
file names there. OSWorld also offers audio and video, which need libraries we do not install.

An archive from the desktop is never unpacked: its regular members are read into memory within
the bounds (``vm_pool.evaluation.bounds``: member count, inflated size, ratio), a path inside it
is only a name, and links, devices and folders are never made. An archive with a member that
climbs out (an absolute path, ``..``) or a link is refused whole (the limit "archive paths"): no
task's own archive holds one. Each compared pair is written
under names of the metric's own choosing in a folder of its own.
"""

import re
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from vm_pool.evaluation.bounds import (
    MAX_ZIP_BYTES,
    MAX_ZIP_MEMBERS,
    NOT_A_VERDICT,
    LimitHit,
    check_size,
    check_zip,
)
from vm_pool.evaluation.metrics.docs import compare_docx_files
from vm_pool.evaluation.metrics.errors import MetricError
from vm_pool.evaluation.metrics.general import compare_text_file
from vm_pool.evaluation.metrics.images import compare_images
from vm_pool.evaluation.metrics.pdf import compare_pdfs
from vm_pool.evaluation.metrics.slides import compare_pptx_files
from vm_pool.evaluation.metrics.table import compare_csv, compare_table

_BY_FILE_TYPE: dict[str, Callable[..., float]] = {
    "text": compare_text_file,
    "pdf": compare_pdfs,
    "docx": compare_docx_files,
    "ppt": compare_pptx_files,
    "image": compare_images,
    "csv": compare_csv,
    "table": compare_table,
}
_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,8}$")


class NotAnArchive(ValueError):
    pass


def compare_archive(result: str | None, expected: str, **options: Any) -> float:
    file_path: str = options.pop("file_path", "")
    file_type: str = options.pop("file_type", "text")
    if file_type not in _BY_FILE_TYPE:
        raise MetricError(f"compare_archive file_type {file_type!r} is not supported")
    if not result:
        return 0.0
    compare = _BY_FILE_TYPE[file_type]
    try:
        result_files = _folder(read_members(result), file_path)
    except NOT_A_VERDICT:
        raise
    except (NotAnArchive, OSError, tarfile.TarError, zipfile.BadZipFile, EOFError):
        return 0.0
    expected_files = _folder(read_members(expected), file_path)
    if not result_files or sorted(result_files) != sorted(expected_files):
        return 0.0
    scores = []
    with tempfile.TemporaryDirectory() as workdir:
        for index, name in enumerate(sorted(result_files)):
            first, second = result_files[name], expected_files[name]
            if first is None or second is None:  # a folder: not a file to compare
                return 0.0
            suffix = PurePosixPath(name).suffix
            suffix = suffix if _SUFFIX.match(suffix) else ""
            result_copy = Path(workdir) / f"result-{index}{suffix}"
            expected_copy = Path(workdir) / f"expected-{index}{suffix}"
            result_copy.write_bytes(first)
            expected_copy.write_bytes(second)
            scores.append(compare(str(result_copy), str(expected_copy), **options))
            result_copy.unlink()
            expected_copy.unlink()
    return sum(scores) / len(scores)


def _folder(members: dict[str, bytes], folder: str) -> dict[str, bytes | None]:
    """What lies directly in ``folder`` inside the archive: files with their bytes, folders
    as None (as a listing of the unpacked folder would show them)."""
    prefix = PurePosixPath(folder.strip("/")) if folder.strip("/") else None
    found: dict[str, bytes | None] = {}
    for name, data in members.items():
        parts = PurePosixPath(name).parts
        if prefix is not None:
            if parts[: len(prefix.parts)] != prefix.parts:
                continue
            parts = parts[len(prefix.parts) :]
        if not parts:
            continue
        found[parts[0]] = data if len(parts) == 1 else None
    if not found:
        raise NotAnArchive(f"no folder {folder!r} in the archive")
    return found


def _name(raw: str, is_link: bool) -> str | None:
    """A member's path as a plain relative name (None: nothing, ``.``); a member that climbs
    out or is a link refuses the archive."""
    path = PurePosixPath(raw.replace("\\", "/"))
    if is_link or path.is_absolute() or ".." in path.parts:
        raise LimitHit("archive paths", f"the member {raw[:100]!r} climbs out or is a link")
    parts = [part for part in path.parts if part != "."]
    return "/".join(parts) or None


def read_members(path: str) -> dict[str, bytes]:
    """The regular files of a zip or tar archive (optionally gzip, bzip2 or xz compressed),
    by their path inside it, read within the bounds."""
    check_size(path)
    if zipfile.is_zipfile(path):
        check_zip(path)
        members: dict[str, bytes] = {}
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                is_link = (info.external_attr >> 16) & 0o170000 == 0o120000
                name = _name(info.filename, is_link)
                if info.is_dir() or name is None:
                    continue
                members[name] = archive.read(info)
        return members
    try:
        with tarfile.open(path, mode="r|*") as archive:  # one pass, never seeking back
            return _tar_members(archive)
    except tarfile.ReadError as error:
        raise NotAnArchive(str(error)) from error


def _tar_members(archive: tarfile.TarFile) -> dict[str, bytes]:
    members: dict[str, bytes] = {}
    total = 0
    for count, member in enumerate(archive, start=1):
        if count > MAX_ZIP_MEMBERS:
            raise LimitHit("archive members", f"more than {MAX_ZIP_MEMBERS} members")
        name = _name(member.name, member.issym() or member.islnk())
        if not member.isreg() or name is None:
            continue
        total += member.size
        if total > MAX_ZIP_BYTES:
            raise LimitHit("archive size", f"more than {MAX_ZIP_BYTES} bytes of files")
        stream = archive.extractfile(member)
        if stream is not None:
            members[name] = stream.read(member.size)
    return members
