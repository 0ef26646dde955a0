"""Reading an archive of task files, zip or tar, as one bounded piece of work.

The rule is that **the work of one archive is bounded**, whatever it holds:

- at most ``TANDEM_TASK_ARCHIVE_MAX_MEMBERS`` entries: a zip's count is read from its end
  record (and its directory's size bounded) before the directory is parsed; a tar stops at the
  first header past the count;
- a zip is read at random (its directory says where each entry is), only the entries it names,
  and an entry is read a chunk at a time, never past one byte more than it declares (what a
  file may unpack to against what it takes is checked by ``task_file_archives`` before its
  bytes are read);
- a tar is read as one forward stream, once, whatever order its index and files come in: its
  entries together, named or not, within ``TANDEM_TASK_ARCHIVE_MAX_BYTES``, each header (long
  names, pax records) within ``HEADER_ROOM``;
- reading stops after its ``Budget`` of seconds (``TANDEM_TASK_ARCHIVE_REQUEST_SECONDS`` in a
  request, ``TANDEM_TASK_ARCHIVE_JOB_SECONDS`` in the job), and the archive is refused.

The files that may be stored are kept, as they are read, in one temporary file (``Held``: in
memory up to ``HELD_IN_MEMORY``, then on disk), never more than the archive's limit; nothing is
written out under a name from the archive, so a path in it is only a name.
"""

import bz2
import gzip
import hashlib
import io
import lzma
import stat
import struct
import tarfile
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from django.conf import settings

from vm_pool.task_files.archive_members import (
    INDEX_NAME,
    UNREADABLE,
    ArchiveRefused,
    Listed,
    Member,
    Problems,
    inside,
    is_index,
    passed_over,
    read_index,
)

CHUNK_BYTES = 1024 * 1024
# A tar member's headers (its own, a long name's, pax records) and the reader's look-ahead.
HEADER_ROOM = 64 * 1024
# What a zip's central directory may take per entry it may hold: the fixed 46 bytes, a long
# percent-encoded URL as its name, extra fields.
DIRECTORY_ENTRY_BYTES = 1024
HELD_IN_MEMORY = 32 * 1024 * 1024

Progress = Callable[[float], None]


class OutOfTime(Exception):
    """The archive's time to be read is spent."""


class _HeaderTooLarge(Exception):
    """A tar member's headers run past ``HEADER_ROOM``."""


@dataclass(frozen=True)
class _Place:
    start: int
    size: int
    sha256: str


@dataclass
class Contents:
    """What one reading of an archive found: every member, what its index lists (None without
    one), and how to have a member's bytes held (a tar holds them as it streams by)."""

    members: list[Member]
    listed: list[Listed] | None
    packed_bytes: int | None  # a zip's own size, for its ratio as a whole
    hold: Callable[[Member], None]


class Budget:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() >= self.deadline:
            raise OutOfTime()


class Held:
    """The bytes of members that may be stored, in one temporary file, each with its digest."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.places: dict[Member, _Place] = {}

    def keep(self, member: Member, chunks: Iterator[bytes]) -> None:
        start = self.file.seek(0, io.SEEK_END)
        digest = hashlib.sha256()
        size = 0
        for chunk in chunks:
            digest.update(chunk)
            self.file.write(chunk)
            size += len(chunk)
        self.places[member] = _Place(start, size, digest.hexdigest())

    def read(self, member: Member) -> bytes:
        place = self.places[member]
        self.file.seek(place.start)
        return self.file.read(place.size)


# --- reading -------------------------------------------------------------------------------


def _unreadable(exc: BaseException) -> ArchiveRefused:
    return Problems().refuse("", f"this is not a readable .zip or .tar(.gz) archive: {exc}")


@contextmanager
def read_archive(
    archive: IO[bytes], held: Held, budget: Budget, problems: Problems, progress: Progress
) -> Iterator[Contents]:
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


def _chunks(stream: IO[bytes], size: int, budget: Budget) -> Iterator[bytes]:
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
    archive: IO[bytes], size: int, held: Held, budget: Budget, problems: Problems
) -> Iterator[Contents]:
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

        def chunks(member: Member) -> Iterator[bytes]:
            with opened.open(member.handle) as stream:
                yield from _chunks(stream, member.size, budget)

        index = next((m for m in members if is_index(m)), None)
        listed = None if index is None else read_index(index, chunks(index), problems)
        yield Contents(members, listed, size, lambda member: held.keep(member, chunks(member)))


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


def _zip_member(info: zipfile.ZipInfo) -> Member:
    mode = info.external_attr >> 16
    if info.is_dir():
        kind = "dir"
    elif stat.S_ISLNK(mode):
        kind = "a symbolic link"
    elif stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # 0: the archiver recorded no type
        kind = "not a regular file"
    else:
        kind = "file"
    return Member(info.filename, info.file_size, kind, info.compress_size, info)


# --- tar ---


class _TarStream:
    """A tar's unpacked bytes, read forward only: each read within the time budget, and never
    past ``until`` (the end of the current member's data, and room for the next headers)."""

    def __init__(self, unpacked: IO[bytes] | io.BufferedIOBase, budget: Budget) -> None:
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
    held: Held,
    budget: Budget,
    problems: Problems,
    progress: Progress,
) -> Contents:
    """One forward pass: every member's header, the index where it comes, and the bytes of
    each file it may name (before the index, every file that could be named; after it, only
    those it lists)."""
    most = settings.TANDEM_TASK_ARCHIVE_MAX_MEMBERS
    cap = settings.TANDEM_TASK_ARCHIVE_MAX_BYTES
    stream = _TarStream(_unpacked(archive), budget)
    members: list[Member] = []
    listed: list[Listed] | None = None
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
                path = inside(member.name)
                if member.kind == "file" and path is not None and not passed_over(path):
                    extracted = tar.extractfile(info)
                    assert extracted is not None  # a regular file's data
                    if path == INDEX_NAME and listed is None:
                        chunks = _chunks(extracted, info.size, budget)
                        listed = read_index(member, chunks, problems)
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

    def hold(member: Member) -> None:
        """Nothing to read: a tar's files are held as the stream passes them."""

    return Contents(members, listed, None, hold)


def _tar_member(info: tarfile.TarInfo) -> Member:
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
    return Member(info.name, info.size, kind, None, info)
