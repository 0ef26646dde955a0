"""Readers: inside the evaluation jail, what a getter gathered becomes the metric's value.

A getter (``vm_pool.evaluation.getters``) only brings bytes back from the desktop; where
OSWorld's getter also parses them (the browser's History database, its Bookmarks and
Preferences JSON, a spreadsheet's last row, ``find``'s or ``wmctrl``'s listing), the parsing is
done here, in the jail, by the reader the getter names. A reader takes the gathered file's path
(None when the desktop had none) or text, and the getter's own settings.

A reader that cannot read what it was given raises ``Unreadable`` (the limit "file format", or
"sqlite schema"), and a file past a bound ``bounds.LimitHit``: either way the evaluation is not
scored, with the reason (a History that is not a database is no verdict on the episode).

The History database is opened read-only and immutable (no journal, no lock, nothing written
beside it), its ``urls`` must be a table (a view can be made to compute forever), and a progress
handler stops a query past ``SQLITE_STEPS`` virtual-machine steps.
"""

import json
import sqlite3
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from vm_pool.evaluation.bounds import LimitHit, check_sheets, check_size

SQLITE_STEPS = 20_000_000
SQLITE_CHECK_EVERY = 10_000
HISTORY_ROWS = 100_000
LISTING_LINES = 100_000


class Unreadable(LimitHit):
    """What a getter gathered is not what its reader reads."""

    def __init__(self, detail: str, limit: str = "file format") -> None:
        super().__init__(limit, detail)


def chrome_history(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    if path is None:
        return None
    check_size(path)
    with open(path, "rb") as f:
        if f.read(16) != b"SQLite format 3\x00":
            raise Unreadable("the browser's History file is not an SQLite database")
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    steps = 0

    def progress() -> int:
        nonlocal steps
        steps += SQLITE_CHECK_EVERY
        return 1 if steps > SQLITE_STEPS else 0  # non-zero interrupts the query

    db.set_progress_handler(progress, SQLITE_CHECK_EVERY)
    try:
        kind = db.execute("SELECT type FROM sqlite_master WHERE name = 'urls'").fetchone()
        if kind is None or kind[0] != "table":
            raise Unreadable("the browser's History has no 'urls' table", "sqlite schema")
        rows = db.execute(
            "SELECT url, title, last_visit_time FROM urls LIMIT ?", (HISTORY_ROWS + 1,)
        ).fetchall()
    except sqlite3.OperationalError as error:
        if steps > SQLITE_STEPS:
            raise LimitHit("sqlite work", f"more than {SQLITE_STEPS} steps") from error
        raise Unreadable(f"the browser's History cannot be read: {error}") from error
    except sqlite3.DatabaseError as error:
        raise Unreadable(f"the browser's History cannot be read: {error}") from error
    finally:
        db.close()
    if len(rows) > HISTORY_ROWS:
        raise LimitHit("history rows", f"more than {HISTORY_ROWS} visited pages")
    return rows


def _json_object(path: str, what: str) -> dict[str, Any]:
    check_size(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Unreadable(f"the browser's {what} is not JSON: {error}") from error
    if not isinstance(data, dict):
        raise Unreadable(f"the browser's {what} is not a JSON object")
    return data


def chrome_bookmarks(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    if path is None:
        return []
    roots = _json_object(path, "Bookmarks").get("roots", {})
    if not isinstance(roots, dict):
        raise Unreadable("the browser's Bookmarks has no 'roots' object")
    return roots


def chrome_search_engine(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    data = _json_object(path, "Preferences") if path else {}
    provider = data.get("default_search_provider_data", {})
    template = provider.get("template_url_data", {}) if isinstance(provider, dict) else {}
    return str(template.get("short_name", "Google") if isinstance(template, dict) else "Google")


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


def _lines(text: str | None) -> list[str]:
    lines = (text or "").splitlines()
    if len(lines) > LISTING_LINES:
        raise LimitHit("listing lines", f"{len(lines)} lines (at most {LISTING_LINES})")
    return lines


def directory_tree(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    """``find -printf '%y %P\\n'``'s listing as OSWorld's tree: {type, name, children}."""
    root = str(config.get("root", ""))
    tree: dict[str, Any] = {"type": "directory", "name": PurePosixPath(root).name, "children": []}
    folders = {".": tree}
    for line in sorted(_lines(text), key=lambda entry: entry[2:]):
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
    for line in _lines(text):
        parts = line.split(None, 7)
        if len(parts) == 8 and name in parts[7].lower():
            try:
                return {"width": int(parts[4]), "height": int(parts[5])}
            except ValueError as error:
                raise Unreadable(f"wmctrl's listing is not one: {line[:100]!r}") from error
    return None


READERS: dict[str, Callable[[str | None, str | None, dict[str, Any]], Any]] = {
    "chrome_history": chrome_history,
    "chrome_bookmarks": chrome_bookmarks,
    "chrome_search_engine": chrome_search_engine,
    "xlsx_last_row": xlsx_last_row,
    "directory_tree": directory_tree,
    "window_size": window_size,
}
