"""What an archive of task files holds, as its reader and its checks both see it.

The rule is that **a path in an archive is only a name**: it is normalised (``\\`` read as
``/``), one that leads out of the archive (absolute, or with ``..``) names nothing, and
Finder's ``__MACOSX/`` and ``.DS_Store`` are passed over. ``index.json`` at the root lists the
URL of each file (``{"<url>": "<path>", …}``, or ``[{"url", "path", "sha256"}, …]``), within
``INDEX_MAX_BYTES``. Each problem found on the way is kept, not raised: the archive is refused
once, listing every problem (the first ``MAX_PROBLEMS_SHOWN`` of them), unless a problem stops
the reading itself.
"""

import json
import lzma
import re
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from backend.errors import DomainError

INDEX_NAME = "index.json"
INDEX_MAX_BYTES = 16 * 1024 * 1024
MAX_PROBLEMS_SHOWN = 200
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# What archivers add that names no file (macOS Finder's resource forks and folder settings).
PASSED_OVER = ("__MACOSX/",)
PASSED_OVER_NAMES = (".DS_Store",)

# What reading an archive, or a member of it, may raise.
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


class ArchiveRefused(DomainError):
    status_code = 400
    code = "archive_refused"


@dataclass(frozen=True)
class Member:
    name: str  # as the archive spells it
    size: int
    kind: str  # "file", "dir", or what it is instead ("a symbolic link", …)
    packed: int | None  # a zip entry's compressed size; None in a tar
    handle: Any  # the archive's own record of it


@dataclass(frozen=True)
class Listed:
    """One file ``index.json`` lists; ``path`` is None when it leads out of the archive."""

    where: str
    url: str
    spelled: str
    path: str | None
    sha256: str | None


class Problems:
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


def inside(name: str) -> str | None:
    """The member's path, normalised, or None when it would lead out of the archive."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        return None
    return str(path)


def passed_over(path: str) -> bool:
    return path.startswith(PASSED_OVER) or PurePosixPath(path).name in PASSED_OVER_NAMES


def is_index(member: Member) -> bool:
    return member.kind == "file" and inside(member.name) == INDEX_NAME


def read_index(index: Member, chunks: Iterator[bytes], problems: Problems) -> list[Listed]:
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
    listed: list[Listed] = []
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
            Listed(where, item["url"], path, inside(path), sha256.lower() if sha256 else None)
        )
    return listed
