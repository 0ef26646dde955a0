"""Many task files at once: an archive that fills the task-file cache (``TaskFile``) by URL.

A platform with no way out to the internet gets OSWorld's files from a manager. One file at a
time is ``POST /api/task-files/``; an archive (``.zip``, ``.tar``, ``.tar.gz``, recognised by its
content) brings a task set's files in one request. It names the URL of each file one of two ways:

- an ``index.json`` at its root: ``{"<url>": "<path inside the archive>", …}``, or a list of
  ``{"url": …, "path": …, "sha256": …}`` (``sha256`` optional, checked when given); other files
  in the archive are ignored;
- without one, every file is named by its URL, percent-encoded as one file name
  (``https%3A%2F%2Fhost%2Fa.xlsx``), in any folder. Finder's ``__MACOSX/`` and ``.DS_Store`` are
  passed over.

The rule is the importer's: **an archive is stored whole or not at all.** Every entry is checked
before anything is stored — a path inside the archive (nothing absolute, no ``..``), no links
nor devices, each URL one a download may name (``downloads.check_url``), each file within the
task-file limit (``TANDEM_DOWNLOAD_MAX_BYTES``), all of them together within
``TANDEM_TASK_ARCHIVE_MAX_BYTES``, each readable and matching its ``sha256`` — and the refusal
lists every problem at once. Nothing is ever written to disk from the archive: its entries are
read into memory one at a time, so a path in it is only a name.
"""

import hashlib
import json
import re
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import IO, Any
from urllib.parse import unquote

from django.conf import settings

from backend.accounts.models import User
from backend.errors import DomainError
from vm_pool import downloads
from vm_pool.models import TaskFile

INDEX_NAME = "index.json"
INDEX_MAX_BYTES = 16 * 1024 * 1024
MAX_ENTRIES = 10_000
MAX_PROBLEMS_SHOWN = 200
CHUNK_BYTES = 1024 * 1024
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# What archivers add that names no file (macOS Finder's resource forks and folder settings).
PASSED_OVER = ("__MACOSX/",)
PASSED_OVER_NAMES = (".DS_Store",)


class ArchiveRefused(DomainError):
    status_code = 400
    code = "archive_refused"


@dataclass(frozen=True)
class _Member:
    name: str  # as the archive spells it
    size: int
    kind: str  # "file", "dir", or what it is instead ("a symbolic link", …)
    handle: Any  # the archive's own record of it, to read it by


@dataclass(frozen=True)
class _Entry:
    url: str
    member: _Member
    sha256: str | None


@dataclass
class ArchiveReport:
    files: list[dict[str, Any]] = field(default_factory=list)

    def count(self, result: str) -> int:
        return sum(1 for f in self.files if f["result"] == result)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stored": self.count("stored"),
            "replaced": self.count("replaced"),
            "unchanged": self.count("unchanged"),
            "files": self.files,
        }


class _Problems:
    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def add(self, entry: str, message: str, url: str = "") -> None:
        self.items.append({"entry": entry, "url": url, "message": message})

    def refusal(self) -> ArchiveRefused:
        count = len(self.items)
        return ArchiveRefused(
            f"The archive has {count} problem{'s' if count != 1 else ''}; nothing was stored.",
            details={"problem_count": count, "problems": self.items[:MAX_PROBLEMS_SHOWN]},
        )

    def refuse_if_any(self) -> None:
        if self.items:
            raise self.refusal()


def store_archive(archive: IO[bytes], uploaded_by: User) -> ArchiveReport:
    """Check every entry of ``archive``, then keep each file under its URL; or refuse, storing
    nothing, listing every problem."""
    problems = _Problems()
    with _opened(archive) as (members, read):
        entries = _entries(members, read, problems)
        digests = {entry: _checked_digest(entry, read, problems) for entry in entries}
        problems.refuse_if_any()
        kept = dict(
            TaskFile.objects.filter(
                url_sha256__in=[downloads.url_key(e.url) for e in entries]
            ).values_list("url_sha256", "sha256")
        )
        report = ArchiveReport()
        for entry in entries:
            before = kept.get(downloads.url_key(entry.url))
            digest = digests[entry]
            if before == digest:
                result = "unchanged"
            else:
                downloads.store_task_file(
                    entry.url, read(entry.member), TaskFile.Source.UPLOADED, uploaded_by
                )
                result = "stored" if before is None else "replaced"
            report.files.append(
                {
                    "url": entry.url,
                    "path": entry.member.name,
                    "sha256": digest,
                    "size_bytes": entry.member.size,
                    "result": result,
                }
            )
    return report


Reader = Callable[[_Member], bytes]
UNREADABLE = (
    OSError,
    EOFError,
    RuntimeError,  # an encrypted zip entry
    NotImplementedError,  # a zip compression method Python lacks
    zlib.error,
    zipfile.BadZipFile,
    tarfile.TarError,
)


def _unreadable(exc: BaseException) -> ArchiveRefused:
    problems = _Problems()
    problems.add("", f"this is not a readable .zip or .tar(.gz) archive: {exc}")
    return problems.refusal()


def _open_archive(archive: IO[bytes]) -> zipfile.ZipFile | tarfile.TarFile:
    is_zip = zipfile.is_zipfile(archive)
    archive.seek(0)
    return zipfile.ZipFile(archive) if is_zip else tarfile.open(fileobj=archive, mode="r:*")


@contextmanager
def _opened(archive: IO[bytes]) -> Iterator[tuple[list[_Member], Reader]]:
    """The archive's members and a reader of one member's bytes, whichever kind it is."""
    try:
        opened = _open_archive(archive)
    except UNREADABLE as exc:
        raise _unreadable(exc) from None

    def read(member: _Member) -> bytes:
        if isinstance(opened, zipfile.ZipFile):
            with opened.open(member.handle) as stream:
                return stream.read(member.size + 1)
        extracted = opened.extractfile(member.handle)
        if extracted is None:  # not a regular file; never asked for, as those are refused first
            raise OSError(f"{member.name} is not a file")
        with extracted:
            return extracted.read(member.size + 1)

    with opened:
        try:
            if isinstance(opened, zipfile.ZipFile):
                members = [_zip_member(info) for info in opened.infolist()]
            else:
                members = [_tar_member(info) for info in opened.getmembers()]
        except UNREADABLE as exc:
            raise _unreadable(exc) from None
        yield members, read


def _zip_member(info: zipfile.ZipInfo) -> _Member:
    mode = info.external_attr >> 16
    if info.is_dir():
        kind = "dir"
    elif stat.S_ISLNK(mode):
        kind = "a symbolic link"
    elif stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # 0: the archiver recorded no type
        kind = "not a regular file"
    else:
        kind = "file"
    return _Member(info.filename, info.file_size, kind, info)


def _tar_member(info: tarfile.TarInfo) -> _Member:
    if info.isdir():
        kind = "dir"
    elif info.issym():
        kind = "a symbolic link"
    elif info.islnk():
        kind = "a hard link"
    elif info.isfile():
        kind = "file"
    else:
        kind = "a device or a pipe"
    return _Member(info.name, info.size, kind, info)


def _inside(name: str) -> str | None:
    """The member's path, normalised, or None when it would lead out of the archive."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        return None
    return str(path)


def _passed_over(path: str) -> bool:
    return path.startswith(PASSED_OVER) or PurePosixPath(path).name in PASSED_OVER_NAMES


def _files(members: list[_Member], problems: _Problems) -> dict[str, _Member]:
    """The archive's files by normalised path; every member that is not one is a problem."""
    if len(members) > MAX_ENTRIES:
        problems.add("", f"the archive holds {len(members)} entries; at most {MAX_ENTRIES}")
        return {}
    files: dict[str, _Member] = {}
    for member in members:
        path = _inside(member.name)
        if path is None:
            problems.add(member.name, "its path leads out of the archive (absolute, or '..')")
        elif member.kind == "dir" or _passed_over(path):
            continue
        elif member.kind != "file":
            problems.add(member.name, f"it is {member.kind}; an archive of task files holds files")
        elif path in files:
            problems.add(member.name, "the archive holds two entries of this name")
        else:
            files[path] = member
    return files


def _entries(members: list[_Member], read: Reader, problems: _Problems) -> list[_Entry]:
    files = _files(members, problems)
    index = files.pop(INDEX_NAME, None)
    named = _indexed(index, files, read, problems) if index else _url_named(files, problems)
    entries: list[_Entry] = []
    seen: set[str] = set()
    for url, member, sha256 in named:
        where = member.name if member else ""
        try:
            downloads.check_url(url)
        except downloads.DownloadRefused as refusal:
            problems.add(where, refusal.message, url)
            continue
        if url in seen:
            problems.add(where, "a second file for this URL", url)
        elif member is not None:
            seen.add(url)
            entries.append(_Entry(url, member, sha256))
    limit = settings.TANDEM_DOWNLOAD_MAX_BYTES
    for entry in entries:
        if entry.member.size > limit:
            problems.add(entry.member.name, f"it is {downloads.size_limit_text(limit)}", entry.url)
    total = sum(entry.member.size for entry in entries)
    if total > settings.TANDEM_TASK_ARCHIVE_MAX_BYTES:
        problems.add(
            "",
            f"its files come to {total:,} bytes unpacked; an archive may hold at most "
            f"{settings.TANDEM_TASK_ARCHIVE_MAX_BYTES:,}",
        )
    if not entries and not problems.items:
        problems.add("", "the archive holds no task files")
    return entries


Named = Iterator[tuple[str, _Member | None, str | None]]


def _url_named(files: dict[str, _Member], problems: _Problems) -> Named:
    for path, member in files.items():
        url = unquote(PurePosixPath(path).name)
        if not url.startswith(("http://", "https://")):
            problems.add(
                member.name,
                f"with no {INDEX_NAME} in the archive, each file is named by its URL "
                "(percent-encoded, like https%3A%2F%2Fhost%2Fa.xlsx)",
            )
            continue
        yield url, member, None


def _indexed(index: _Member, files: dict[str, _Member], read: Reader, problems: _Problems) -> Named:
    if index.size > INDEX_MAX_BYTES:
        problems.add(INDEX_NAME, f"larger than {INDEX_MAX_BYTES // (1024 * 1024)} MB")
        return
    try:
        listed = json.loads(read(index))
    except (ValueError, *UNREADABLE) as exc:
        problems.add(INDEX_NAME, f"not readable JSON: {exc}")
        return
    if isinstance(listed, dict):
        listed = [{"url": url, "path": path} for url, path in listed.items()]
    if not isinstance(listed, list):
        problems.add(INDEX_NAME, 'give {"<url>": "<path>", …} or [{"url", "path", "sha256"}, …]')
        return
    for i, item in enumerate(listed):
        where = f"{INDEX_NAME}[{i}]"
        if not (
            isinstance(item, dict)
            and isinstance(item.get("url"), str)
            and isinstance(item.get("path"), str)
        ):
            problems.add(where, "each file is {url, path} with strings (and an optional sha256)")
            continue
        sha256 = item.get("sha256")
        if sha256 is not None and not (isinstance(sha256, str) and SHA256.match(sha256.lower())):
            problems.add(where, "sha256 must be 64 hexadecimal digits", item["url"])
            continue
        path = _inside(item["path"])
        member = files.get(path) if path is not None else None
        if path is None:
            problems.add(where, f"the path {item['path']!r} leads out of the archive", item["url"])
        elif member is None:
            problems.add(where, f"the archive holds no file {item['path']!r}", item["url"])
        yield item["url"], member, sha256.lower() if sha256 else None


def _checked_digest(entry: _Entry, read: Reader, problems: _Problems) -> str:
    """The entry's SHA-256 once read whole; a file that cannot be read, or that is not the one
    the index names, is a problem."""
    try:
        data = read(entry.member)
    except UNREADABLE as exc:
        problems.add(entry.member.name, f"it cannot be read: {exc}", entry.url)
        return ""
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != entry.member.size:
        problems.add(entry.member.name, "its size is not the one the archive declares", entry.url)
    elif entry.sha256 is not None and digest != entry.sha256:
        problems.add(
            entry.member.name, f"its sha256 is {digest}, not {entry.sha256} as listed", entry.url
        )
    return digest
