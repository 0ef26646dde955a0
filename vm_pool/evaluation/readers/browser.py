"""Readers of the browser's profile files: History and Cookies (SQLite), Bookmarks and
Preferences (JSON).

Each Preferences reader takes one setting as OSWorld's getter of the same name reads it, with
the value that getter gives when the file is missing or the setting's path is not there (its
``except`` branch: ``"false"``, ``"Google"``, the default font sizes, …).
"""

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from vm_pool.evaluation.bounds import LimitHit, check_size, read_only_sqlite
from vm_pool.evaluation.readers.base import Reader, Unreadable

HISTORY_ROWS = 100_000
COOKIE_ROWS = 100_000


def _sqlite_rows(path: str, table: str, query: str, limit: int, what: str) -> list[Any]:
    """Rows of a query over one table of a profile database, opened read-only and immutable
    (no journal, no lock, nothing written beside it); the table must be a table (a view can be
    made to compute forever) and a progress handler stops a query past ``SQLITE_STEPS``."""
    with open(path, "rb") as f:  # 16 bytes: its size is checked as it is opened below
        if f.read(16) != b"SQLite format 3\x00":
            raise Unreadable(f"the browser's {what} file is not an SQLite database")
    try:
        with read_only_sqlite(path) as db:
            kind = db.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()
            if kind is None or kind[0] != "table":
                raise Unreadable(f"the browser's {what} has no {table!r} table", "sqlite schema")
            rows = db.execute(f"{query} LIMIT ?", (limit + 1,)).fetchall()
    except sqlite3.DatabaseError as error:  # an OperationalError past the steps is a LimitHit
        raise Unreadable(f"the browser's {what} cannot be read: {error}") from error
    if len(rows) > limit:
        raise LimitHit(f"{what.lower()} rows", f"more than {limit} rows")
    return rows


def chrome_history(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    if path is None:
        return None
    query = "SELECT url, title, last_visit_time FROM urls"
    return _sqlite_rows(path, "urls", query, HISTORY_ROWS, "History")


def chrome_cookies(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    """Every row of the Cookies database's ``cookies`` table, all columns (OSWorld's
    ``SELECT *``: the second one is the cookie's host)."""
    if path is None:
        return None
    return _sqlite_rows(path, "cookies", "SELECT * FROM cookies", COOKIE_ROWS, "Cookies")


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


def _at(data: Any, *keys: str) -> Any:
    """``data[k1][k2]…``, or None where a step is missing or not an object."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def chrome_search_engine(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    data = _json_object(path, "Preferences") if path else {}
    name = _at(data, "default_search_provider_data", "template_url_data", "short_name")
    return "Google" if name is None else str(name)


def _font_size(data: dict[str, Any]) -> Any:
    webprefs = _at(data, "webkit", "webprefs")
    if webprefs is None:
        return {"default_fixed_font_size": 13, "default_font_size": 16, "minimum_font_size": 13}
    return webprefs


def _do_not_track(data: dict[str, Any]) -> str:
    return "true" if data.get("enable_do_not_track") else "false"


def _safe_browsing(data: dict[str, Any]) -> str:
    enhanced, enabled = _at(data, "safebrowsing", "enhanced"), _at(data, "safebrowsing", "enabled")
    return "true" if enhanced or enabled else "false"


def _new_startup_page(data: dict[str, Any]) -> str:
    """A profile without ``session`` starts fresh, which is the new tab page (OSWorld's rule);
    otherwise ``restore_on_startup`` must be 5 (open the New Tab page)."""
    if "session" not in data:
        return "true"
    return "true" if _at(data, "session", "restore_on_startup") == 5 else "false"


def _extension_settings(data: dict[str, Any]) -> list[dict[str, Any]]:
    settings = _at(data, "extensions", "settings")
    if not isinstance(settings, dict):
        return []
    return [entry for entry in settings.values() if isinstance(entry, dict)]


def _unpacked_extension_paths(data: dict[str, Any]) -> list[Any]:
    # Deliberate difference from OSWorld: an entry without a "path" is skipped; OSWorld's
    # KeyError there turns the whole answer into "Google".
    return [entry["path"] for entry in _extension_settings(data) if "path" in entry]


def _installed_extension_names(data: dict[str, Any]) -> list[Any]:
    # Deliberate difference from OSWorld: an entry without a manifest name (Chromium keeps no
    # manifest for an unpacked extension) is skipped; OSWorld's KeyError there turns the whole
    # answer into "Google", so any unpacked extension would hide every installed one.
    names = (_at(entry, "manifest", "name") for entry in _extension_settings(data))
    return [name for name in names if name is not None]


def _data_delete_automatically(data: dict[str, Any]) -> str:
    profile = data.get("profile")
    if not isinstance(profile, dict):
        return "Google"
    return "true" if profile.get("default_content_setting_values") is not None else "false"


def _color_scheme(data: dict[str, Any]) -> str:
    """OSWorld's get_chrome_color_scheme on one profile: ``color_scheme2`` (or the older
    ``color_scheme``) as system / light / dark, but "light" whenever
    ``extensions.theme.system_theme`` is 0 (Linux builds may keep a stale color scheme)."""
    theme = _at(data, "browser", "theme")
    theme = theme if isinstance(theme, dict) else {}
    raw = theme.get("color_scheme2", theme.get("color_scheme"))
    if _at(data, "extensions", "theme", "system_theme") in (0, "0", False):
        return "light"
    return _scheme_name(raw) or "system"


def _scheme_name(raw: Any) -> str | None:
    if isinstance(raw, str):
        lowered = raw.strip().lower()
        names = {"system": "system", "default": "system", "0": "system"}
        names |= {"light": "light", "1": "light", "dark": "dark", "2": "dark"}
        return names.get(lowered)
    if isinstance(raw, int | float):
        return {0: "system", 1: "light", 2: "dark"}.get(int(raw))
    return None


_PREFERENCES: dict[str, tuple[Callable[[dict[str, Any]], Any], Any]] = {
    "profile_name": (lambda data: _at(data, "profile", "name"), None),
    "chrome_font_size": (_font_size, {"default_fixed_font_size": 13, "default_font_size": 16}),
    "enable_do_not_track": (_do_not_track, "false"),
    "enable_safe_browsing": (_safe_browsing, "false"),
    "new_startup_page": (_new_startup_page, "Google"),
    "find_unpacked_extension_path": (_unpacked_extension_paths, "Google"),
    "find_installed_extension_name": (_installed_extension_names, "Google"),
    "data_delete_automacally": (_data_delete_automatically, "Google"),
    "chrome_color_scheme": (_color_scheme, "system"),
}
"""Per getter: the setting it reads, and what it gives without a Preferences file."""


def chrome_preference(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    """One setting of the profile's Preferences, named by ``config["setting"]`` (the getter)."""
    read_setting, missing = _PREFERENCES[str(config["setting"])]
    return read_setting(_json_object(path, "Preferences")) if path else missing


READERS: dict[str, Reader] = {
    "chrome_history": chrome_history,
    "chrome_cookies": chrome_cookies,
    "chrome_bookmarks": chrome_bookmarks,
    "chrome_search_engine": chrome_search_engine,
    "chrome_preference": chrome_preference,
}
