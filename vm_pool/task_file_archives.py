"""Many task files at once: an archive that fills the task-file cache (``TaskFile``) by URL.

A platform with no way out to the internet gets OSWorld's files from a manager. One file at a
time is ``POST /api/task-files/``; an archive (``.zip``, ``.tar``, ``.tar.gz``/``.bz2``/``.xz``,
recognised by its content) brings a task set's files in one request. It names the URL of each
file one of two ways:

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
lists every problem at once.

**The work of one archive is bounded**, whatever it holds:

- at most ``TANDEM_TASK_ARCHIVE_MAX_MEMBERS`` entries: a zip's count is read from its end
  record (and its directory's size bounded) before the directory is parsed; a tar stops at the
  first header past the count;
- a zip is read at random (its directory says where each entry is), only the entries it names;
  no file, nor the files together, may unpack to more than ``TANDEM_TASK_ARCHIVE_MAX_RATIO``
  times what it takes in the archive (past ``RATIO_FLOOR``), and an entry is read a chunk at a
  time, never past one byte more than it declares;
- a tar is read as one forward stream, once, whatever order its index and files come in: its
  entries together, named or not, within ``TANDEM_TASK_ARCHIVE_MAX_BYTES``, each header (long
  names, pax records) within ``HEADER_ROOM``;
- reading stops after ``seconds`` (``TANDEM_TASK_ARCHIVE_REQUEST_SECONDS`` in a request,
  ``TANDEM_TASK_ARCHIVE_JOB_SECONDS`` in the job), and the archive is refused.

The files that may be stored are kept, as they are read, in one temporary file (in memory up to
``HELD_IN_MEMORY``, then on disk), never more than the archive's limit; nothing is written out
under a name from the archive, so a path in it is only a name.

An upload over ``TANDEM_TASK_ARCHIVE_BACKGROUND_BYTES`` is not read in its request: it is kept
in storage and a ``TaskFileArchive`` row records a job (``vm_pool.jobs.store_task_file_archive``,
on the ``exports`` queue) that runs the same check and store, writing its progress (reading is
the first half, storing the second) and then each file's result, or every problem, on the row.
"""

import bz2
import gzip
import hashlib
import io
import json
import logging
import lzma
import re
import stat
import struct
import tarfile
import tempfile
import time
import uuid
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import IO, Any
from urllib.parse import unquote

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from backend.accounts.models import User
from backend.celery import send_after_commit
from backend.errors import DomainError
from vm_pool import downloads
from vm_pool.models import TaskFile, TaskFileArchive

log = logging.getLogger(__name__)

INDEX_NAME = "index.json"
INDEX_MAX_BYTES = 16 * 1024 * 1024
MAX_PROBLEMS_SHOWN = 200
CHUNK_BYTES = 1024 * 1024
# A tar member's headers (its own, a long name's, pax records) and the reader's look-ahead.
HEADER_ROOM = 64 * 1024
# What a zip's central directory may take per entry it may hold: the fixed 46 bytes, a long
# percent-encoded URL as its name, extra fields.
DIRECTORY_ENTRY_BYTES = 1024
# Below this, a file that packs well is only a small file that packs well.
RATIO_FLOOR = 1024 * 1024
HELD_IN_MEMORY = 32 * 1024 * 1024
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# What archivers add that names no file (macOS Finder's resource forks and folder settings).
PASSED_OVER = ("__MACOSX/",)
PASSED_OVER_NAMES = (".DS_Store",)

JOB_NAME = "vm_pool.jobs.store_task_file_archive"
JOB_QUEUE = "exports"  # batch work, like exports: never where desktops' and the loop's jobs wait
PROGRESS_SECONDS = 1.0
UPLOADS = "task-file-archives/"

Progress = Callable[[float], None]


class ArchiveRefused(DomainError):
    status_code = 400
    code = "archive_refused"


class _OutOfTime(Exception):
    """The archive's time to be read is spent."""


class _HeaderTooLarge(Exception):
    """A tar member's headers run past ``HEADER_ROOM``."""


@dataclass(frozen=True)
class _Member:
    name: str  # as the archive spells it
    size: int
    kind: str  # "file", "dir", or what it is instead ("a symbolic link", …)
    packed: int | None  # a zip entry's compressed size; None in a tar
    handle: Any  # the archive's own record of it


@dataclass(frozen=True)
class _Entry:
    url: str
    member: _Member
    sha256: str | None


@dataclass(frozen=True)
class _Listed:
    """One file ``index.json`` lists; ``path`` is None when it leads out of the archive."""

    where: str
    url: str
    spelled: str
    path: str | None
    sha256: str | None


@dataclass(frozen=True)
class _Place:
    start: int
    size: int
    sha256: str


@dataclass
class _Contents:
    """What one reading of an archive found: every member, what its index lists (None without
    one), and how to have a member's bytes held (a tar holds them as it streams by)."""

    members: list[_Member]
    listed: list[_Listed] | None
    packed_bytes: int | None  # a zip's own size, for its ratio as a whole
    hold: Callable[[_Member], None]


@dataclass
class ArchiveReport:
    files: list[dict[str, Any]] = field(default_factory=list)

    def count(self, result: str) -> int:
        return sum(1 for f in self.files if f["result"] == result)

    def counts(self) -> dict[str, int]:
        return {r: self.count(r) for r in ("stored", "replaced", "unchanged")}

    def as_dict(self) -> dict[str, Any]:
        return {**self.counts(), "files": self.files}


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

    def refuse(self, entry: str, message: str) -> ArchiveRefused:
        """The refusal after a problem that stops the reading: what was found so far, and it."""
        self.add(entry, message)
        return self.refusal()


class _Budget:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() >= self.deadline:
            raise _OutOfTime()


class _Held:
    """The bytes of members that may be stored, in one temporary file, each with its digest."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.places: dict[_Member, _Place] = {}

    def keep(self, member: _Member, chunks: Iterator[bytes]) -> None:
        start = self.file.seek(0, io.SEEK_END)
        digest = hashlib.sha256()
        size = 0
        for chunk in chunks:
            digest.update(chunk)
            self.file.write(chunk)
            size += len(chunk)
        self.places[member] = _Place(start, size, digest.hexdigest())

    def read(self, member: _Member) -> bytes:
        place = self.places[member]
        self.file.seek(place.start)
        return self.file.read(place.size)


def store_archive(
    archive: IO[bytes],
    uploaded_by: User | None,
    seconds: float,
    progress: Progress = lambda fraction: None,
) -> ArchiveReport:
    """Check every entry of ``archive``, reading it for at most ``seconds``, then keep each file
    under its URL; or refuse, storing nothing, listing every problem."""
    problems = _Problems()
    budget = _Budget(seconds)
    entries: list[_Entry] = []
    with tempfile.SpooledTemporaryFile(max_size=HELD_IN_MEMORY) as spool:
        held = _Held(spool)
        try:
            with _read(archive, held, budget, problems, progress) as contents:
                entries = _entries(contents, problems)
                for done, entry in enumerate(_within_limits(entries, contents, problems)):
                    _check_content(entry, contents, held, problems)
                    progress(0.5 * (done + 1) / len(entries))
        except _OutOfTime:
            problems.add("", f"it could not be read within {budget.seconds:g} s")
        problems.refuse_if_any()
        return _store(entries, held, uploaded_by, progress)


def _store(
    entries: list[_Entry], held: _Held, uploaded_by: User | None, progress: Progress
) -> ArchiveReport:
    kept = dict(
        TaskFile.objects.filter(
            url_sha256__in=[downloads.url_key(e.url) for e in entries]
        ).values_list("url_sha256", "sha256")
    )
    report = ArchiveReport()
    for done, entry in enumerate(entries):
        before = kept.get(downloads.url_key(entry.url))
        digest = held.places[entry.member].sha256
        if before == digest:
            result = "unchanged"
        else:
            downloads.store_task_file(
                entry.url, held.read(entry.member), TaskFile.Source.UPLOADED, uploaded_by
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
        progress(0.5 + 0.5 * (done + 1) / len(entries))
    return report


# --- the job -------------------------------------------------------------------------------


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


# --- reading -------------------------------------------------------------------------------

UNREADABLE = (
    OSError,
    EOFError,
    RuntimeError,  # an encrypted zip entry
    NotImplementedError,  # a zip compression method Python lacks
    zlib.error,
    lzma.LZMAError,
    zipfile.BadZipFile,
    tarfile.TarError,
)


def _unreadable(exc: BaseException) -> ArchiveRefused:
    return _Problems().refuse("", f"this is not a readable .zip or .tar(.gz) archive: {exc}")


@contextmanager
def _read(
    archive: IO[bytes], held: _Held, budget: _Budget, problems: _Problems, progress: Progress
) -> Iterator[_Contents]:
    """The archive's contents, whichever kind it is."""
    archive.seek(0, io.SEEK_END)
    size = archive.tell()
    archive.seek(0)
    is_zip = zipfile.is_zipfile(archive)
    archive.seek(0)
    if is_zip:
        with _zip_contents(archive, size, held, budget, problems) as contents:
            yield contents
    else:
        yield _tar_contents(archive, size, held, budget, problems, progress)


def _chunks(stream: IO[bytes], size: int, budget: _Budget) -> Iterator[bytes]:
    """At most ``size + 1`` bytes of ``stream``, a chunk at a time: one byte more than the
    member declares shows that it declared less than it holds."""
    left = size + 1
    while left > 0:
        budget.check()
        chunk = stream.read(min(CHUNK_BYTES, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


# --- zip ---


@contextmanager
def _zip_contents(
    archive: IO[bytes], size: int, held: _Held, budget: _Budget, problems: _Problems
) -> Iterator[_Contents]:
    most = settings.TANDEM_TASK_ARCHIVE_MAX_MEMBERS
    declared = _zip_directory(archive, size)
    if declared is not None:
        count, directory_bytes = declared
        if count > most:
            raise problems.refuse("", f"the archive holds {count:,} entries; at most {most:,}")
        if directory_bytes > most * DIRECTORY_ENTRY_BYTES:
            raise problems.refuse(
                "",
                f"its directory takes {directory_bytes:,} bytes; at most "
                f"{most * DIRECTORY_ENTRY_BYTES:,} for {most:,} entries",
            )
    try:
        opened = zipfile.ZipFile(archive)
    except UNREADABLE as exc:
        raise _unreadable(exc) from None
    with opened:
        infos = opened.infolist()
        if len(infos) > most:
            raise problems.refuse("", f"the archive holds {len(infos):,} entries; at most {most:,}")
        members = [_zip_member(info) for info in infos]

        def chunks(member: _Member) -> Iterator[bytes]:
            with opened.open(member.handle) as stream:
                yield from _chunks(stream, member.size, budget)

        index = next((m for m in members if _is_index(m)), None)
        listed = None if index is None else _read_index(index, chunks(index), problems)
        yield _Contents(members, listed, size, lambda member: held.keep(member, chunks(member)))


def _zip_directory(archive: IO[bytes], size: int) -> tuple[int, int] | None:
    """The entry count and directory size a zip declares in its end record (zip64's when it
    has one), read before its directory is; None when there is no end record to read."""
    tail_start = max(0, size - (22 + 0xFFFF))  # the record, and a comment of at most 64 KiB
    archive.seek(tail_start)
    tail = archive.read()
    archive.seek(0)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        return None
    count, directory_bytes = struct.unpack_from("<HI", tail, at + 10)
    locator = at - 20
    if (count == 0xFFFF or directory_bytes == 0xFFFFFFFF) and tail[locator : locator + 4] == (
        b"PK\x06\x07"
    ):
        (record_at,) = struct.unpack_from("<Q", tail, locator + 8)
        archive.seek(record_at)
        record = archive.read(56)
        archive.seek(0)
        if len(record) == 56 and record.startswith(b"PK\x06\x06"):
            count, directory_bytes = struct.unpack_from("<QQ", record, 32)
    return count, directory_bytes


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
    return _Member(info.filename, info.file_size, kind, info.compress_size, info)


# --- tar ---


class _TarStream:
    """A tar's unpacked bytes, read forward only: each read within the time budget, and never
    past ``until`` (the end of the current member's data, and room for the next headers)."""

    def __init__(self, unpacked: IO[bytes] | io.BufferedIOBase, budget: _Budget) -> None:
        self.unpacked, self.budget = unpacked, budget
        self.position = 0
        self.until = HEADER_ROOM

    def read(self, size: int = -1) -> bytes:
        self.budget.check()
        data = self.unpacked.read(CHUNK_BYTES if size < 0 else min(size, CHUNK_BYTES))
        self.position += len(data)
        if self.position > self.until:
            raise _HeaderTooLarge()
        return data


def _unpacked(archive: IO[bytes]) -> IO[bytes] | io.BufferedIOBase:
    magic = archive.read(6)
    archive.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=archive, mode="rb")
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(archive)
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(archive)
    return archive


def _tar_contents(
    archive: IO[bytes],
    size: int,
    held: _Held,
    budget: _Budget,
    problems: _Problems,
    progress: Progress,
) -> _Contents:
    """One forward pass: every member's header, the index where it comes, and the bytes of
    each file it may name (before the index, every file that could be named; after it, only
    those it lists)."""
    most = settings.TANDEM_TASK_ARCHIVE_MAX_MEMBERS
    cap = settings.TANDEM_TASK_ARCHIVE_MAX_BYTES
    stream = _TarStream(_unpacked(archive), budget)
    members: list[_Member] = []
    listed: list[_Listed] | None = None
    wanted: set[str] = set()
    unpacked = 0
    try:
        # Read as a stream, tarfile only reads its file (the stubs ask for a file to write too).
        with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
            for info in tar:
                # Its data, then the next member's headers (tarfile is already past its data).
                stream.until = tar.offset + HEADER_ROOM
                if len(members) == most:
                    raise problems.refuse(
                        "", f"the archive holds more than {most:,} entries; at most {most:,}"
                    )
                member = _tar_member(info)
                members.append(member)
                unpacked += info.size
                if unpacked > cap:
                    raise problems.refuse(
                        "", f"its entries come to more than {cap:,} bytes unpacked; at most {cap:,}"
                    )
                path = _inside(member.name)
                if member.kind == "file" and path is not None and not _passed_over(path):
                    extracted = tar.extractfile(info)
                    assert extracted is not None  # a regular file's data
                    if path == INDEX_NAME and listed is None:
                        chunks = _chunks(extracted, info.size, budget)
                        listed = _read_index(member, chunks, problems)
                        wanted = {item.path for item in listed if item.path is not None}
                    elif info.size <= settings.TANDEM_DOWNLOAD_MAX_BYTES and (
                        listed is None or path in wanted
                    ):
                        held.keep(member, _chunks(extracted, info.size, budget))
                progress(0.5 * archive.tell() / max(size, 1))
    except _HeaderTooLarge:
        message = f"an entry's headers (long names, pax records) are over {HEADER_ROOM:,} bytes"
        raise problems.refuse("", message) from None
    except UNREADABLE as exc:
        if not members:
            raise _unreadable(exc) from None
        message = f"the archive cannot be read past it: {exc}"
        raise problems.refuse(members[-1].name, message) from None

    def hold(member: _Member) -> None:
        """Nothing to read: a tar's files are held as the stream passes them."""

    return _Contents(members, listed, None, hold)


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
    return _Member(info.name, info.size, kind, None, info)


# --- what the archive names ----------------------------------------------------------------


def _inside(name: str) -> str | None:
    """The member's path, normalised, or None when it would lead out of the archive."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        return None
    return str(path)


def _passed_over(path: str) -> bool:
    return path.startswith(PASSED_OVER) or PurePosixPath(path).name in PASSED_OVER_NAMES


def _is_index(member: _Member) -> bool:
    return member.kind == "file" and _inside(member.name) == INDEX_NAME


def _files(members: list[_Member], problems: _Problems) -> dict[str, _Member]:
    """The archive's files by normalised path; every member that is not one is a problem."""
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


def _entries(contents: _Contents, problems: _Problems) -> list[_Entry]:
    files = _files(contents.members, problems)
    if files.pop(INDEX_NAME, None) is not None:
        named = _indexed(contents.listed or [], files, problems)
    else:
        named = _url_named(files, problems)
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
    if not entries and not problems.items:
        problems.add("", "the archive holds no task files")
    return entries


def _within_limits(entries: list[_Entry], contents: _Contents, problems: _Problems) -> list[_Entry]:
    """The entries to read: each within the task-file limit and the packing ratio (every other
    one is a problem), and all of them together within the archive's limits."""
    limit = settings.TANDEM_DOWNLOAD_MAX_BYTES
    ratio = settings.TANDEM_TASK_ARCHIVE_MAX_RATIO
    within: list[_Entry] = []
    for entry in entries:
        member = entry.member
        if member.size > limit:
            problems.add(member.name, f"it is {downloads.size_limit_text(limit)}", entry.url)
        elif _packs_too_well(member.size, member.packed, ratio):
            problems.add(
                member.name,
                f"it unpacks to {member.size:,} bytes from {member.packed:,}, more than {ratio}× "
                "(a zip bomb?)",
                entry.url,
            )
        else:
            within.append(entry)
    total = sum(entry.member.size for entry in entries)
    if total > settings.TANDEM_TASK_ARCHIVE_MAX_BYTES:
        problems.add(
            "",
            f"its files come to {total:,} bytes unpacked; an archive may hold at most "
            f"{settings.TANDEM_TASK_ARCHIVE_MAX_BYTES:,}",
        )
    elif _packs_too_well(total, contents.packed_bytes, ratio):
        problems.add(
            "",
            f"its files come to {total:,} bytes unpacked from an archive of "
            f"{contents.packed_bytes:,}, more than {ratio}× (a zip bomb?)",
        )
    return within


def _packs_too_well(size: int, packed: int | None, ratio: int) -> bool:
    return packed is not None and size > RATIO_FLOOR and size > ratio * max(packed, 1)


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


def _read_index(index: _Member, chunks: Iterator[bytes], problems: _Problems) -> list[_Listed]:
    """What ``index.json`` lists (its bytes read from ``chunks`` unless it is too large); each
    item it cannot take is a problem."""
    if index.size > INDEX_MAX_BYTES:
        problems.add(INDEX_NAME, f"larger than {INDEX_MAX_BYTES // (1024 * 1024)} MB")
        return []
    try:
        items = json.loads(b"".join(chunks))
    except (ValueError, *UNREADABLE) as exc:
        problems.add(INDEX_NAME, f"not readable JSON: {exc}")
        return []
    if isinstance(items, dict):
        items = [{"url": url, "path": path} for url, path in items.items()]
    if not isinstance(items, list):
        problems.add(INDEX_NAME, 'give {"<url>": "<path>", …} or [{"url", "path", "sha256"}, …]')
        return []
    listed: list[_Listed] = []
    for i, item in enumerate(items):
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
        path = item["path"]
        listed.append(
            _Listed(where, item["url"], path, _inside(path), sha256.lower() if sha256 else None)
        )
    return listed


def _indexed(listed: list[_Listed], files: dict[str, _Member], problems: _Problems) -> Named:
    for item in listed:
        member = files.get(item.path) if item.path is not None else None
        if item.path is None:
            problems.add(
                item.where, f"the path {item.spelled!r} leads out of the archive", item.url
            )
        elif member is None:
            problems.add(item.where, f"the archive holds no file {item.spelled!r}", item.url)
        yield item.url, member, item.sha256


def _check_content(entry: _Entry, contents: _Contents, held: _Held, problems: _Problems) -> None:
    """Read the entry whole into ``held``; a file that cannot be read, or that is not the one
    the index names, is a problem."""
    try:
        contents.hold(entry.member)
    except UNREADABLE as exc:
        problems.add(entry.member.name, f"it cannot be read: {exc}", entry.url)
        return
    place = held.places.get(entry.member)
    if place is None:
        problems.add(entry.member.name, "it cannot be read", entry.url)
    elif place.size != entry.member.size:
        problems.add(entry.member.name, "its size is not the one the archive declares", entry.url)
    elif entry.sha256 is not None and place.sha256 != entry.sha256:
        problems.add(
            entry.member.name,
            f"its sha256 is {place.sha256}, not {entry.sha256} as listed",
            entry.url,
        )
