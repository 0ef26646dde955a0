"""The desktop's own settings and state, as OSWorld scores them: the dock's favourite programs,
the time zone, a folder's files, the clipboard. Each reads what a command printed (a
``vm_command_line`` getter) or a folder's tree (``list_directory``)."""

import ast
from typing import Any

UTC_LINE = 3  # timedatectl status's "Time zone:" line


def check_gnome_favorite_apps(apps_str: str | None, rule: dict[str, Any]) -> float:
    """1 when ``gsettings get org.gnome.shell favorite-apps`` (a Python-like list of desktop
    file names) names the same programs as ``rule["expected"]``, in any order."""
    if apps_str is None:
        return 0.0
    # OSWorld evaluates the text with eval(); it comes from the desktop, so only a literal is read.
    apps = ast.literal_eval(apps_str.strip())
    expected = rule["expected"]
    return float(len(apps) == len(expected) and set(apps) == set(expected))


def is_utc_0(timedatectl_output: str | None) -> float:
    """1 when the fourth line of ``timedatectl status`` (``Time zone: ... (XXX, +0000)``)
    ends with ``+0000)``."""
    lines = (timedatectl_output or "").split("\n")
    return float(len(lines) > UTC_LINE and lines[UTC_LINE].endswith("+0000)"))


def check_moved_jpgs(directory_list: dict[str, Any] | None, rule: dict[str, Any]) -> float:
    """1 when the folder (a ``list_directory`` tree) holds exactly the names of
    ``rule["expected"]``, files and folders alike."""
    if directory_list is None:
        return 0.0
    moved = [node["name"] for node in directory_list["children"]]
    expected = rule["expected"]
    return float(len(moved) == len(expected) and set(moved) == set(expected))


def is_in_vm_clickboard(config: dict[str, Any], terminal_output: str | None) -> float:
    """1 when what the clipboard holds contains ``config["expected"]`` (a string, or every
    string of a list)."""
    if terminal_output is None:
        return 0.0
    expected = config["expected"]
    if not isinstance(expected, list):
        return float(expected in terminal_output)
    return float(all(item in terminal_output for item in expected))
