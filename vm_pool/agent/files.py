"""Where the desktop's agent may read and write files: HOME and ``/tmp``, never through a link
that leads elsewhere (``vm_pool.agent``'s ``/files``). Standard library only."""

import os
from pathlib import Path

# Where ``/files`` may write and read, besides HOME.
SCRATCH = "/tmp"
MAX_READ_BYTES = 100 * 1024 * 1024


class PathRefused(ValueError):
    """A file path that leads outside the desktop user's HOME and /tmp."""


def resolve_inside(path: str, home: str, reading: bool = False) -> Path:
    """Where a ``/files`` path lands; refuses paths that leave HOME and /tmp.

    Relative and ``~/`` paths are under HOME. Symlinks are followed before the check, so a
    link in HOME that points elsewhere is refused too, and the file itself is never a link.
    """
    if path.startswith("~/") or path == "~":
        path = home + path[1:]
    target = Path(path) if path.startswith("/") else Path(home) / path
    if ".." in target.parts:
        raise PathRefused(f"{path!r}: '..' is not allowed in a desktop path")
    allowed = [Path(home).resolve(), Path(SCRATCH).resolve()]
    real_parent = target.parent.resolve()
    if not any(real_parent == root or root in real_parent.parents for root in allowed):
        raise PathRefused(f"{path!r} is outside HOME ({home}) and {SCRATCH}")
    if target.is_symlink():
        if reading:  # a link that stays inside is followed, as the check above for its parent
            return resolve_inside(str(target.resolve()), home, reading=True)
        raise PathRefused(f"{path!r} is a symlink; files are written only to plain paths")
    return real_parent / target.name


def write_inside(path: str, home: str, data: bytes) -> str:
    """Put a file in place; where it landed."""
    target = resolve_inside(path, home)
    target.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a link made between the check and the write is not followed either.
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return str(target)


def read_inside(path: str, home: str) -> bytes | None:
    """A file of HOME or /tmp (its links followed only if they stay there); None if none."""
    target = resolve_inside(path, home, reading=True)
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as source:
        data = source.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise PathRefused(f"{path!r} is larger than {MAX_READ_BYTES} bytes")
    return data
