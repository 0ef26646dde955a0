"""Getters of files and commands: a desktop's files, the task's own files, a command's output,
the screen and window sizes, a folder's tree."""

from typing import Any

from vm_pool.evaluation.getters.base import (
    Gathered,
    Getter,
    GetterError,
    Reading,
    file_list,
    given,
    one_file,
    read,
    require,
    value,
)

WALLPAPER_SETTINGS_BYTES = 64 * 1024


def vm_file(reading: Reading, config: dict[str, Any]) -> Gathered:
    found: dict[int, str | None] = {}
    for index, path, dest in file_list(config):
        data = reading.control.read_file(path)
        found[index] = None if data is None else reading.store(dest, data)
    return given(config, found)


def cloud_file(reading: Reading, config: dict[str, Any]) -> Gathered:
    found: dict[int, str | None] = {}
    for index, url, dest in file_list(config):
        found[index] = reading.store(dest, reading.fetch_url(url))
    return given(config, found)


def cache_file(reading: Reading, config: dict[str, Any]) -> Gathered:
    """A file the postconfig's commands wrote (``stdout``/``stderr`` of an ``execute``)."""
    name = str(require(config, "path"))
    if name not in reading.outputs:
        raise GetterError(f"no command of the postconfig wrote {name!r}")
    return given({}, {0: reading.store(name, reading.outputs[name].encode())})


def content_from_vm_file(reading: Reading, config: dict[str, Any]) -> Gathered:
    if config.get("file_type") != "xlsx" or config.get("file_content") != "last_row":
        raise GetterError(f"content_from_vm_file does not read {config.get('file_type')!r} files")
    path = str(require(config, "path"))
    gathered = vm_file(reading, {"path": path, "dest": config.get("dest") or "content.xlsx"})
    return read("xlsx_last_row", one_file(gathered))


def rule(reading: Reading, config: dict[str, Any]) -> Gathered:
    return value(require(config, "rules"))


def _command(config: dict[str, Any]) -> list[str]:
    command = require(config, "command")
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
    return given({}, {0: reading.store(str(config.get("dest", "wallpaper")), data or b"")})


def vm_window_size(reading: Reading, config: dict[str, Any]) -> Gathered:
    """The size of the window whose name holds ``app_class_name`` (OSWorld's key)."""
    name = str(require(config, "app_class_name"))
    listed = reading.control.run(["wmctrl", "-lG"], timeout=10).stdout
    return read("window_size", text=listed, app_class_name=name)


def list_directory(reading: Reading, config: dict[str, Any]) -> Gathered:
    """A folder's tree as OSWorld gives it: {type, name, children}."""
    root = str(require(config, "path"))
    listed = reading.control.run(
        ["find", root, "-mindepth", "1", "-printf", "%y %P\\n"], timeout=30
    )
    if listed.returncode != 0:
        raise GetterError(f"cannot list {root}: {listed.output[-200:]}")
    return read("directory_tree", text=listed.stdout, root=root)


GETTERS: dict[str, Getter] = {
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
}
