"""What every getter shares: the evaluation under way (``Reading``), the ``Gathered`` records a
getter returns, and the config helpers."""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vm_pool.desktop import DesktopControl

Gathered = dict[str, Any]


class GetterError(RuntimeError):
    """A getter's config is malformed, or what it reads cannot be read."""


@dataclass
class Reading:
    """What getters need: the desktop, a folder for the files they fetch, the task-file cache
    and what the postconfig's commands wrote to their output files."""

    control: DesktopControl
    folder: Path
    fetch_url: Callable[[str], bytes]
    outputs: dict[str, str] = field(default_factory=dict)

    def local(self, name: str) -> Path:
        target = self.folder / Path(str(name)).name  # a name, never a path out of the folder
        if target.name in ("", ".", ".."):
            raise GetterError(f"{name!r} is not a file name")
        return target

    def store(self, name: str, data: bytes) -> str:
        """Put a file in the evaluation's folder; its name there."""
        target = self.local(name)
        target.write_bytes(data)
        return target.name


def value(found: Any) -> Gathered:
    return {"kind": "value", "value": found}


def read(reader: str, file: str | None = None, text: str | None = None, **config: Any) -> Gathered:
    return {"kind": "read", "reader": reader, "file": file, "text": text, "config": config}


def failed(error: str) -> Gathered:
    return {"kind": "error", "error": error}


def require(config: dict[str, Any], key: str) -> Any:
    if key not in config:
        raise GetterError(f"the {config.get('type')!r} getter needs {key!r}")
    return config[key]


def file_list(config: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(index, source, dest) of a file getter's files; ``multi`` gives lists."""
    if config.get("multi"):
        paths, dests = require(config, "path"), require(config, "dest")
        if not isinstance(paths, list) or not isinstance(dests, list) or len(paths) != len(dests):
            raise GetterError("with 'multi', 'path' and 'dest' are lists of the same length")
        return [(i, str(p), str(d)) for i, (p, d) in enumerate(zip(paths, dests, strict=True))]
    path = require(config, "path")
    return [(0, str(path), str(config.get("dest") or Path(str(path)).name))]


def given(config: dict[str, Any], found: dict[int, str | None]) -> Gathered:
    gives = config.get("gives", [0])
    return {"kind": "files", "files": [found.get(i) for i in gives], "single": len(gives) == 1}


def one_file(gathered: Gathered) -> str | None:
    names = gathered["files"]
    return names[0] if names else None


Getter = Callable[[Reading, dict[str, Any]], Gathered]
