"""OSWorld's getters: what an evaluator reads from the desktop, or from the task's files.

A getter takes the evaluation under way and its config (``{"type": ..., ...}``) and returns
what the metric compares: a local file path (or None when the desktop has no such file), a
string, a dict, a list. Files land in the evaluation's own folder, named by the config's
``dest``. Everything on the desktop is read through its agent, inside its sandbox: files of
HOME and ``/tmp``, a command's output, the running browser over its debugging port.

Chrome is Chromium here (profile ``~/.config/chromium``). OSWorld reads the active tab's URL
from the accessibility tree's address bar, which shows it without its scheme and then prefixes
``goto_prefix``; here the URL comes from the browser itself over DevTools, and the same
prefix rule is applied to it.

Getters not listed in ``GETTERS`` are not supported here; ``manage.py osworld_coverage``
names them with the tasks they block.
"""

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qs, urlparse

from vm_pool.providers.base import DesktopControl
from vm_pool.setup_browser import page_tabs

CHROME_PROFILE = "~/.config/chromium/Default"
VLC_CONFIG = "~/.config/vlc/vlcrc"
GIMP_CONFIG = "~/.config/GIMP/2.10"


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


def _require(config: dict[str, Any], key: str) -> Any:
    if key not in config:
        raise GetterError(f"the {config.get('type')!r} getter needs {key!r}")
    return config[key]


def _files(config: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(index, source, dest) of a file getter's files; ``multi`` gives lists."""
    if config.get("multi"):
        paths, dests = _require(config, "path"), _require(config, "dest")
        if not isinstance(paths, list) or not isinstance(dests, list) or len(paths) != len(dests):
            raise GetterError("with 'multi', 'path' and 'dest' are lists of the same length")
        return [(i, str(p), str(d)) for i, (p, d) in enumerate(zip(paths, dests, strict=True))]
    path = _require(config, "path")
    return [(0, str(path), str(config.get("dest") or Path(str(path)).name))]


def _given(config: dict[str, Any], found: dict[int, str | None]) -> Any:
    gives = config.get("gives", [0])
    given = [found.get(i) for i in gives]
    return given[0] if len(given) == 1 else given


def vm_file(reading: Reading, config: dict[str, Any]) -> Any:
    found: dict[int, str | None] = {}
    for index, path, dest in _files(config):
        data = reading.control.read_file(path)
        if data is None:
            found[index] = None
            continue
        target = reading.local(dest)
        target.write_bytes(data)
        found[index] = str(target)
    return _given(config, found)


def cloud_file(reading: Reading, config: dict[str, Any]) -> Any:
    found: dict[int, str | None] = {}
    for index, url, dest in _files(config):
        target = reading.local(dest)
        target.write_bytes(reading.fetch_url(url))
        found[index] = str(target)
    return _given(config, found)


def cache_file(reading: Reading, config: dict[str, Any]) -> str:
    """A file the postconfig's commands wrote (``stdout``/``stderr`` of an ``execute``)."""
    name = str(_require(config, "path"))
    if name not in reading.outputs:
        raise GetterError(f"no command of the postconfig wrote {name!r}")
    target = reading.local(name)
    target.write_text(reading.outputs[name])
    return str(target)


def content_from_vm_file(reading: Reading, config: dict[str, Any]) -> Any:
    import pandas as pd

    path = vm_file(reading, {"path": _require(config, "path")})
    if config.get("file_type") == "xlsx" and config.get("file_content") == "last_row":
        if path is None:
            return None
        return pd.read_excel(path).iloc[-1].astype(str).tolist()
    raise GetterError(f"content_from_vm_file does not read {config.get('file_type')!r} files")


def rule(reading: Reading, config: dict[str, Any]) -> Any:
    return _require(config, "rules")


def _command(config: dict[str, Any]) -> list[str]:
    command = _require(config, "command")
    if isinstance(command, str):
        return ["bash", "-c", command]
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        return ["bash", "-c", " ".join(command)] if config.get("shell") else list(command)
    raise GetterError("'command' must be a string or a list of strings")


def vm_command_line(reading: Reading, config: dict[str, Any]) -> str:
    return reading.control.run(_command(config), timeout=60).stdout


def vm_command_error(reading: Reading, config: dict[str, Any]) -> str:
    return reading.control.run(_command(config), timeout=60).stderr


def vm_screen_size(reading: Reading, config: dict[str, Any]) -> dict[str, int]:
    screen = reading.control.observe(settle=False).screen
    return {"width": screen.width, "height": screen.height}


def vm_wallpaper(reading: Reading, config: dict[str, Any]) -> str:
    """The desktop's wallpaper image (as ``change_wallpaper`` set it), in a local file; an
    empty file when the desktop has none, as OSWorld gives it."""
    from vm_pool.setup_desktop import WALLPAPER_CONFIG

    target = reading.local(str(config.get("dest", "wallpaper")))
    settings = reading.control.read_file(WALLPAPER_CONFIG) or b""
    lines = settings.decode(errors="replace").splitlines()
    path = next((line.split("=", 1)[1] for line in lines if line.startswith("wallpaper=")), "")
    data = reading.control.read_file(path) if path else None
    target.write_bytes(data or b"")
    return str(target)


def vm_window_size(reading: Reading, config: dict[str, Any]) -> dict[str, int] | None:
    """The size of the window whose name holds ``app_class_name`` (OSWorld's key)."""
    name = str(_require(config, "app_class_name"))
    listed = reading.control.run(["wmctrl", "-lG"], timeout=10).stdout
    for line in listed.splitlines():
        parts = line.split(None, 7)
        if len(parts) == 8 and name.lower() in parts[7].lower():
            return {"width": int(parts[4]), "height": int(parts[5])}
    return None


def list_directory(reading: Reading, config: dict[str, Any]) -> dict[str, Any]:
    """A folder's tree as OSWorld gives it: {type, name, children}."""
    root = str(_require(config, "path"))
    listed = reading.control.run(
        ["find", root, "-mindepth", "1", "-printf", "%y %P\\n"], timeout=30
    )
    if listed.returncode != 0:
        raise GetterError(f"cannot list {root}: {listed.output[-200:]}")
    tree: dict[str, Any] = {"type": "directory", "name": PurePosixPath(root).name, "children": []}
    folders = {".": tree}
    for line in sorted(listed.stdout.splitlines(), key=lambda entry: entry[2:]):
        kind, _, relative = line.partition(" ")
        parent = folders.get(str(PurePosixPath(relative).parent))
        if parent is None:
            continue
        node: dict[str, Any] = {"type": "file", "name": PurePosixPath(relative).name}
        if kind == "d":
            node = {"type": "directory", "name": node["name"], "children": []}
            folders[relative] = node
        parent["children"].append(node)
    return tree


# --- the browser ---------------------------------------------------------------------------


def _address_bar(url: str, config: dict[str, Any]) -> str:
    """The URL as OSWorld reads it: the address bar's text, prefixed with ``goto_prefix``."""
    shown = url.split("://", 1)[1] if "://" in url else url
    return f"{config.get('goto_prefix', 'https://')}{shown}"


def active_url_from_accessTree(reading: Reading, config: dict[str, Any]) -> str | None:  # noqa: N802
    tabs = page_tabs(reading.control)
    return _address_bar(tabs[0]["url"], config) if tabs else None


def active_tab_url_parse(reading: Reading, config: dict[str, Any]) -> dict[str, Any] | None:
    url = active_url_from_accessTree(reading, config)
    if url is None:
        return None
    query = parse_qs(urlparse(url).query)
    found: dict[str, Any] = {key: query.get(key, [""])[0] for key in _require(config, "parse_keys")}
    for old, new in (config.get("replace") or {}).items():
        found[new] = found.pop(old)
    if config.get("split_list"):
        found = {key: value.split(",") for key, value in found.items()}
    return found


def active_tab_info(reading: Reading, config: dict[str, Any]) -> dict[str, Any] | None:
    tabs = page_tabs(reading.control)
    if not tabs:
        return None
    tab = tabs[0]
    reply = reading.control.devtools(
        {"target": tab["id"], "expression": "document.body ? document.body.innerText : ''"}
    )
    return {"title": tab.get("title", ""), "url": tab.get("url", ""), "content": reply.get("value")}


def open_tabs_info(reading: Reading, config: dict[str, Any]) -> list[dict[str, str]]:
    tabs = page_tabs(reading.control)
    return [{"title": t.get("title", ""), "url": t.get("url", "")} for t in tabs]


def _profile_json(reading: Reading, name: str) -> dict[str, Any] | None:
    data = reading.control.read_file(f"{CHROME_PROFILE}/{name}")
    return json.loads(data) if data else None


def bookmarks(reading: Reading, config: dict[str, Any]) -> Any:
    data = _profile_json(reading, "Bookmarks")
    return data.get("roots", {}) if data else []


def default_search_engine(reading: Reading, config: dict[str, Any]) -> str:
    data = _profile_json(reading, "Preferences") or {}
    provider = data.get("default_search_provider_data", {}).get("template_url_data", {})
    return str(provider.get("short_name", "Google"))


def history(reading: Reading, config: dict[str, Any]) -> list[tuple[Any, ...]] | None:
    data = reading.control.read_file(f"{CHROME_PROFILE}/History")
    if data is None:
        return None
    target = reading.local(str(config.get("dest", "History")))
    target.write_bytes(data)
    with sqlite3.connect(target) as db:
        rows = db.execute("SELECT url, title, last_visit_time FROM urls").fetchall()
    db.close()
    return rows


# --- application settings ------------------------------------------------------------------


def vlc_config(reading: Reading, config: dict[str, Any]) -> str | None:
    return vm_file(reading, {"path": VLC_CONFIG, "dest": config.get("dest", "vlcrc")})


def gimp_config_file(reading: Reading, config: dict[str, Any]) -> str | None:
    name = str(_require(config, "file_name"))
    return vm_file(reading, {"path": f"{GIMP_CONFIG}/{name}", "dest": config.get("dest", name)})


GETTERS: dict[str, Callable[[Reading, dict[str, Any]], Any]] = {
    "vm_file": vm_file,
    "cloud_file": cloud_file,
    "cache_file": cache_file,
    "content_from_vm_file": content_from_vm_file,
    "rule": rule,
    "vm_command_line": vm_command_line,
    "vm_command_error": vm_command_error,
    "vm_screen_size": vm_screen_size,
    "vm_window_size": vm_window_size,
    "vm_wallpaper": vm_wallpaper,
    "list_directory": list_directory,
    "active_url_from_accessTree": active_url_from_accessTree,
    "active_tab_url_parse": active_tab_url_parse,
    "active_tab_info": active_tab_info,
    "open_tabs_info": open_tabs_info,
    "bookmarks": bookmarks,
    "default_search_engine": default_search_engine,
    "history": history,
    "vlc_config": vlc_config,
    "gimp_config_file": gimp_config_file,
}
