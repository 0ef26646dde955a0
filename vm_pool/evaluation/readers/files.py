"""Readers of files and listings: a spreadsheet's last row, ``find``'s and ``wmctrl``'s output."""

from pathlib import PurePosixPath
from typing import Any

from vm_pool.evaluation.bounds import check_sheets
from vm_pool.evaluation.readers.base import Reader, Unreadable, lines


def xlsx_last_row(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    if path is None:
        return None
    import pandas as pd

    check_sheets(path)
    try:
        frame = pd.read_excel(path)
    except (ValueError, OSError, KeyError) as error:
        raise Unreadable(f"the spreadsheet cannot be read: {error}") from error
    if frame.empty:
        raise Unreadable("the spreadsheet has no rows")
    return frame.iloc[-1].astype(str).tolist()


def directory_tree(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    """``find -printf '%y %P\\n'``'s listing as OSWorld's tree: {type, name, children}."""
    root = str(config.get("root", ""))
    tree: dict[str, Any] = {"type": "directory", "name": PurePosixPath(root).name, "children": []}
    folders = {".": tree}
    for line in sorted(lines(text), key=lambda entry: entry[2:]):
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


def window_size(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    """From ``wmctrl -lG``: the size of the first window whose name holds ``app_class_name``."""
    name = str(config.get("app_class_name", "")).lower()
    for line in lines(text):
        parts = line.split(None, 7)
        if len(parts) == 8 and name in parts[7].lower():
            try:
                return {"width": int(parts[4]), "height": int(parts[5])}
            except ValueError as error:
                raise Unreadable(f"wmctrl's listing is not one: {line[:100]!r}") from error
    return None


READERS: dict[str, Reader] = {
    "xlsx_last_row": xlsx_last_row,
    "directory_tree": directory_tree,
    "window_size": window_size,
}
