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

Its parts: what a member's path and ``index.json`` name, and the refusal listing every problem
(``task_file_archive_members``); reading a zip or a tar within bounds of entries, bytes, headers
and time (``task_file_archive_reading``), after which no file, nor the files together, may
unpack to more than ``TANDEM_TASK_ARCHIVE_MAX_RATIO`` times what it takes in a zip (past
``RATIO_FLOOR``); an upload too large to be read in its request is checked and stored the same
way by a job (``task_file_archive_jobs``).
"""

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import IO, Any
from urllib.parse import unquote

from django.conf import settings

from backend.accounts.models import User
from vm_pool.models import TaskFile
from vm_pool.task_files import downloads
from vm_pool.task_files.archive_members import (
    INDEX_NAME,
    UNREADABLE,
    ArchiveRefused,
    Listed,
    Member,
    Problems,
    inside,
    passed_over,
)
from vm_pool.task_files.archive_reading import (
    HELD_IN_MEMORY,
    Budget,
    Contents,
    Held,
    OutOfTime,
    Progress,
    read_archive,
)

__all__ = ["ArchiveRefused", "ArchiveReport", "store_archive"]

# Below this, a file that packs well is only a small file that packs well.
RATIO_FLOOR = 1024 * 1024


@dataclass(frozen=True)
class _Entry:
    url: str
    member: Member
    sha256: str | None


@dataclass
class ArchiveReport:
    files: list[dict[str, Any]] = field(default_factory=list)

    def count(self, result: str) -> int:
        return sum(1 for f in self.files if f["result"] == result)

    def counts(self) -> dict[str, int]:
        return {r: self.count(r) for r in ("stored", "replaced", "unchanged")}

    def as_dict(self) -> dict[str, Any]:
        return {**self.counts(), "files": self.files}


def store_archive(
    archive: IO[bytes],
    uploaded_by: User | None,
    seconds: float,
    progress: Progress = lambda fraction: None,
) -> ArchiveReport:
    """Check every entry of ``archive``, reading it for at most ``seconds``, then keep each file
    under its URL; or refuse, storing nothing, listing every problem."""
    problems = Problems()
    budget = Budget(seconds)
    entries: list[_Entry] = []
    with tempfile.SpooledTemporaryFile(max_size=HELD_IN_MEMORY) as spool:
        held = Held(spool)
        try:
            with read_archive(archive, held, budget, problems, progress) as contents:
                entries = _entries(contents, problems)
                for done, entry in enumerate(_within_limits(entries, contents, problems)):
                    _check_content(entry, contents, held, problems)
                    progress(0.5 * (done + 1) / len(entries))
        except OutOfTime:
            problems.add("", f"it could not be read within {budget.seconds:g} s")
        problems.refuse_if_any()
        return _store(entries, held, uploaded_by, progress)


def _store(
    entries: list[_Entry], held: Held, uploaded_by: User | None, progress: Progress
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


# --- what the archive names ----------------------------------------------------------------


def _files(members: list[Member], problems: Problems) -> dict[str, Member]:
    """The archive's files by normalised path; every member that is not one is a problem."""
    files: dict[str, Member] = {}
    for member in members:
        path = inside(member.name)
        if path is None:
            problems.add(member.name, "its path leads out of the archive (absolute, or '..')")
        elif member.kind == "dir" or passed_over(path):
            continue
        elif member.kind != "file":
            problems.add(member.name, f"it is {member.kind}; an archive of task files holds files")
        elif path in files:
            problems.add(member.name, "the archive holds two entries of this name")
        else:
            files[path] = member
    return files


def _entries(contents: Contents, problems: Problems) -> list[_Entry]:
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


def _within_limits(entries: list[_Entry], contents: Contents, problems: Problems) -> list[_Entry]:
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


Named = Iterator[tuple[str, Member | None, str | None]]


def _url_named(files: dict[str, Member], problems: Problems) -> Named:
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


def _indexed(listed: list[Listed], files: dict[str, Member], problems: Problems) -> Named:
    for item in listed:
        member = files.get(item.path) if item.path is not None else None
        if item.path is None:
            problems.add(
                item.where, f"the path {item.spelled!r} leads out of the archive", item.url
            )
        elif member is None:
            problems.add(item.where, f"the archive holds no file {item.spelled!r}", item.url)
        yield item.url, member, item.sha256


def _check_content(entry: _Entry, contents: Contents, held: Held, problems: Problems) -> None:
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
