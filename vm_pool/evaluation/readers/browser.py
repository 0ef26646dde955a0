"""Readers of the browser's profile files: History (SQLite), Bookmarks and Preferences (JSON)."""

import json
import sqlite3
from typing import Any

from vm_pool.evaluation.bounds import LimitHit, check_size
from vm_pool.evaluation.readers.base import Reader, Unreadable

SQLITE_STEPS = 20_000_000
SQLITE_CHECK_EVERY = 10_000
HISTORY_ROWS = 100_000


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


READERS: dict[str, Reader] = {
    "chrome_history": chrome_history,
    "chrome_bookmarks": chrome_bookmarks,
    "chrome_search_engine": chrome_search_engine,
}
