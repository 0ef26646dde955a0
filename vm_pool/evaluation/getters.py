"""OSWorld's getters: what an evaluator reads from the desktop, or from the task's files.

A getter takes the evaluation under way and its config (``{"type": ..., ...}``) and gathers
what the metric will compare, without opening it: it runs in the desktop host's worker, and
everything it brings back was made on the desktop, so it is parsed only in the evaluation jail
(``vm_pool.evaluation.jail``). What a getter returns is a ``Gathered`` record, plain JSON:

- ``value``: a string, number, list or dict as it came (a command's output, the open tabs);
- ``files``: files it put in the evaluation's folder, named by the config's ``dest`` (None where
  the desktop has no such file); the metric gets their paths inside the jail;
- ``read``: a file or a text that a reader of ``vm_pool.evaluation.readers`` turns into the
  metric's value inside the jail (the browser's History database, its Bookmarks and Preferences
  JSON, a spreadsheet's last row, a folder listing);
- ``error``: why it could not be had (OSWorld scores such a metric 0, as its "file not found").

Everything on the desktop is read through its agent, inside its sandbox: files of HOME and
``/tmp``, a command's output, the running browser over its debugging port.

Chrome is Chromium here (profile ``~/.config/chromium``). OSWorld reads the active tab's URL
from the accessibility tree's address bar (an ``http(s)`` URL shows there without its scheme)
and prefixes ``goto_prefix`` unless the text has a scheme; here the URL comes from the browser
itself over DevTools, and the address bar's text and the same prefix rule are applied to it
(``_address_bar``).

Getters not listed in ``GETTERS`` are not supported here; ``manage.py osworld_coverage``
names them with the tasks they block.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from vm_pool.desktop import DesktopControl
from vm_pool.setup.browser import page_tabs

Gathered = dict[str, Any]

CHROME_PROFILE = "~/.config/chromium/Default"
VLC_CONFIG = "~/.config/vlc/vlcrc"
GIMP_CONFIG = "~/.config/GIMP/2.10"
WALLPAPER_SETTINGS_BYTES = 64 * 1024


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


def _given(config: dict[str, Any], found: dict[int, str | None]) -> Gathered:
    gives = config.get("gives", [0])
    return {"kind": "files", "files": [found.get(i) for i in gives], "single": len(gives) == 1}


def _one_file(gathered: Gathered) -> str | None:
    names = gathered["files"]
    return names[0] if names else None


def vm_file(reading: Reading, config: dict[str, Any]) -> Gathered:
    found: dict[int, str | None] = {}
    for index, path, dest in _files(config):
        data = reading.control.read_file(path)
        found[index] = None if data is None else reading.store(dest, data)
    return _given(config, found)


def cloud_file(reading: Reading, config: dict[str, Any]) -> Gathered:
    found: dict[int, str | None] = {}
    for index, url, dest in _files(config):
        found[index] = reading.store(dest, reading.fetch_url(url))
    return _given(config, found)


def cache_file(reading: Reading, config: dict[str, Any]) -> Gathered:
    """A file the postconfig's commands wrote (``stdout``/``stderr`` of an ``execute``)."""
    name = str(_require(config, "path"))
    if name not in reading.outputs:
        raise GetterError(f"no command of the postconfig wrote {name!r}")
    return _given({}, {0: reading.store(name, reading.outputs[name].encode())})


def content_from_vm_file(reading: Reading, config: dict[str, Any]) -> Gathered:
    if config.get("file_type") != "xlsx" or config.get("file_content") != "last_row":
        raise GetterError(f"content_from_vm_file does not read {config.get('file_type')!r} files")
    path = str(_require(config, "path"))
    gathered = vm_file(reading, {"path": path, "dest": config.get("dest") or "content.xlsx"})
    return read("xlsx_last_row", _one_file(gathered))


def rule(reading: Reading, config: dict[str, Any]) -> Gathered:
    return value(_require(config, "rules"))


def _command(config: dict[str, Any]) -> list[str]:
    command = _require(config, "command")
    if isinstance(command, str):
        return ["bash", "-c", command]
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        return ["bash", "-c", " ".join(command)] if config.get("shell") else list(command)
    raise GetterError("'command' must be a string or a list of strings")


def vm_command_line(reading: Reading, config: dict[str, Any]) -> Gathered:
    return value(reading.control.run(_command(config), timeout=60).stdout)


def vm_command_error(reading: Reading, config: dict[str, Any]) -> Gathered:
    return value(reading.control.run(_command(config), timeout=60).stderr)


def vm_screen_size(reading: Reading, config: dict[str, Any]) -> Gathered:
    screen = reading.control.observe(settle=False).screen
    return value({"width": screen.width, "height": screen.height})


def vm_wallpaper(reading: Reading, config: dict[str, Any]) -> Gathered:
    """The desktop's wallpaper image (as ``change_wallpaper`` set it), as a file; an empty file
    when the desktop has none, as OSWorld gives it. Its settings file is one short line: a
    longer one is not looked into."""
    from vm_pool.setup.windows import WALLPAPER_CONFIG  # weight: the desktop toolkit

    settings = reading.control.read_file(WALLPAPER_CONFIG) or b""
    if len(settings) > WALLPAPER_SETTINGS_BYTES:
        raise GetterError(f"{WALLPAPER_CONFIG} is {len(settings)} bytes long")
    lines = settings.decode(errors="replace").splitlines()
    path = next((line.split("=", 1)[1] for line in lines if line.startswith("wallpaper=")), "")
    data = reading.control.read_file(path) if path else None
    return _given({}, {0: reading.store(str(config.get("dest", "wallpaper")), data or b"")})


def vm_window_size(reading: Reading, config: dict[str, Any]) -> Gathered:
    """The size of the window whose name holds ``app_class_name`` (OSWorld's key)."""
    name = str(_require(config, "app_class_name"))
    listed = reading.control.run(["wmctrl", "-lG"], timeout=10).stdout
    return read("window_size", text=listed, app_class_name=name)


def list_directory(reading: Reading, config: dict[str, Any]) -> Gathered:
    """A folder's tree as OSWorld gives it: {type, name, children}."""
    root = str(_require(config, "path"))
    listed = reading.control.run(
        ["find", root, "-mindepth", "1", "-printf", "%y %P\\n"], timeout=30
    )
    if listed.returncode != 0:
        raise GetterError(f"cannot list {root}: {listed.output[-200:]}")
    return read("directory_tree", text=listed.stdout, root=root)


# --- the browser ---------------------------------------------------------------------------


def _address_bar(url: str, config: dict[str, Any]) -> str:
    """The URL as OSWorld reads it from the address bar: Chrome shows an ``http(s)`` URL without
    its scheme and any other (``chrome://``, ``file://``) whole; OSWorld keeps a text with a
    scheme as it is, and otherwise prefixes ``goto_prefix`` (``https://`` when absent), dropping
    the text's own ``www.`` when the prefix ends with one."""
    shown = _HIDDEN_SCHEME.sub("", url.strip())
    if _SCHEME.match(shown):
        return shown
    prefix = config.get("goto_prefix", "https://") or ""
    if prefix.endswith("www.") and shown.lower().startswith("www."):
        shown = shown[4:]
    return f"{prefix}{shown}"


_HIDDEN_SCHEME = re.compile(r"^https?://", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+\-.]*:")


def _tabs(reading: Reading) -> list[dict[str, Any]]:
    """The open pages, as the browser's DevTools list them (first: the active one)."""
    return page_tabs(reading.control)


def active_url_from_accessTree(reading: Reading, config: dict[str, Any]) -> Gathered:  # noqa: N802
    tabs = _tabs(reading)
    return value(_address_bar(str(tabs[0].get("url", "")), config) if tabs else None)


def active_tab_url_parse(reading: Reading, config: dict[str, Any]) -> Gathered:
    tabs = _tabs(reading)
    if not tabs:
        return value(None)
    query = parse_qs(urlparse(_address_bar(str(tabs[0].get("url", "")), config)).query)
    found: dict[str, Any] = {key: query.get(key, [""])[0] for key in _require(config, "parse_keys")}
    for old, new in (config.get("replace") or {}).items():
        found[new] = found.pop(old)
    if config.get("split_list"):
        found = {key: found_value.split(",") for key, found_value in found.items()}
    return value(found)


def active_tab_info(reading: Reading, config: dict[str, Any]) -> Gathered:
    tabs = _tabs(reading)
    if not tabs:
        return value(None)
    tab = tabs[0]
    reply = reading.control.devtools(
        {"target": tab["id"], "expression": "document.body ? document.body.innerText : ''"}
    )
    content = reply.get("value") if isinstance(reply, dict) else None
    return value({"title": tab.get("title", ""), "url": tab.get("url", ""), "content": content})


def open_tabs_info(reading: Reading, config: dict[str, Any]) -> Gathered:
    tabs = _tabs(reading)
    return value([{"title": t.get("title", ""), "url": t.get("url", "")} for t in tabs])


def _profile_file(reading: Reading, name: str) -> str | None:
    data = reading.control.read_file(f"{CHROME_PROFILE}/{name}")
    return reading.store(name, data) if data else None


def bookmarks(reading: Reading, config: dict[str, Any]) -> Gathered:
    return read("chrome_bookmarks", _profile_file(reading, "Bookmarks"))


def default_search_engine(reading: Reading, config: dict[str, Any]) -> Gathered:
    return read("chrome_search_engine", _profile_file(reading, "Preferences"))


def history(reading: Reading, config: dict[str, Any]) -> Gathered:
    data = reading.control.read_file(f"{CHROME_PROFILE}/History")
    name = None if data is None else reading.store(str(config.get("dest", "History")), data)
    return read("chrome_history", name)


# --- application settings ------------------------------------------------------------------


def vlc_config(reading: Reading, config: dict[str, Any]) -> Gathered:
    return vm_file(reading, {"path": VLC_CONFIG, "dest": config.get("dest", "vlcrc")})


def gimp_config_file(reading: Reading, config: dict[str, Any]) -> Gathered:
    name = str(_require(config, "file_name"))
    return vm_file(reading, {"path": f"{GIMP_CONFIG}/{name}", "dest": config.get("dest", name)})


GETTERS: dict[str, Callable[[Reading, dict[str, Any]], Gathered]] = {
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
