"""Getters of the browser (Chromium here; profile ``~/.config/chromium``): the active tab and the
open tabs over DevTools, the profile's files (History, Cookies, Bookmarks, Preferences) for the
jail's readers, the parts of the active tab's URL, the desktop's web shortcuts. The getters that
drive pages over DevTools live in ``browser_pages``.

Each Preferences getter (``profile_name``, ``chrome_font_size``, ``enable_do_not_track``, …)
brings the file back whole; the reader ``chrome_preference`` picks the getter's setting out of it
in the jail, as OSWorld's getter of that name does.

OSWorld reads the active tab's URL from the accessibility tree's address bar (an ``http(s)`` URL
shows there without its scheme) and prefixes ``goto_prefix`` unless the text has a scheme; here
the URL comes from the browser itself over DevTools, and the address bar's text and the same
prefix rule are applied to it (``_address_bar``).
"""

import re
from typing import Any

from vm_pool.evaluation.getters.base import (
    Gathered,
    Getter,
    GetterError,
    Reading,
    read,
    value,
)
from vm_pool.setup.browser import page_tabs

CHROME_PROFILE = "~/.config/chromium/Default"
SHORTCUTS = 200
SHORTCUT_BYTES = 256 * 1024
PREFERENCE_GETTERS = (
    "profile_name",
    "chrome_font_size",
    "enable_do_not_track",
    "enable_safe_browsing",
    "new_startup_page",
    "find_unpacked_extension_path",
    "find_installed_extension_name",
    "data_delete_automacally",
)


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


def active_url(reading: Reading, config: dict[str, Any]) -> str | None:
    """The active tab's URL as OSWorld's ``get_active_url_from_accessTree`` gives it."""
    tabs = _tabs(reading)
    return _address_bar(str(tabs[0].get("url", "")), config) if tabs else None


def _tabs(reading: Reading) -> list[dict[str, Any]]:
    """The open pages, as the browser's DevTools list them (first: the active one)."""
    return page_tabs(reading.control)


def active_url_from_accessTree(reading: Reading, config: dict[str, Any]) -> Gathered:  # noqa: N802
    return value(active_url(reading, config))


def active_tab_url_parse(reading: Reading, config: dict[str, Any]) -> Gathered:
    """The active URL's query values (read in the jail: ``readers.urls``)."""
    return read("url_query", text=active_url(reading, config), **config)


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


def url_dashPart(reading: Reading, config: dict[str, Any]) -> Gathered:  # noqa: N802
    """One ``/``-separated part of the active URL (read in the jail: ``readers.urls``)."""
    return read("url_dash_part", text=active_url(reading, config), **config)


def url_path_parse(reading: Reading, config: dict[str, Any]) -> Gathered:
    """OSWorld's Macy's product-listing URL facets (read in the jail: ``readers.urls``)."""
    return read("url_path_facets", text=active_url(reading, config), **config)


def bookmarks(reading: Reading, config: dict[str, Any]) -> Gathered:
    return read("chrome_bookmarks", _profile_file(reading, "Bookmarks"))


def default_search_engine(reading: Reading, config: dict[str, Any]) -> Gathered:
    return read("chrome_search_engine", _profile_file(reading, "Preferences"))


def history(reading: Reading, config: dict[str, Any]) -> Gathered:
    data = reading.control.read_file(f"{CHROME_PROFILE}/History")
    name = None if data is None else reading.store(str(config.get("dest", "History")), data)
    return read("chrome_history", name)


def cookie_data(reading: Reading, config: dict[str, Any]) -> Gathered:
    data = reading.control.read_file(f"{CHROME_PROFILE}/Cookies")
    name = None if data is None else reading.store(str(config.get("dest", "Cookies")), data)
    return read("chrome_cookies", name)


def _preference_getter(setting: str) -> Getter:
    def getter(reading: Reading, config: dict[str, Any]) -> Gathered:
        return read("chrome_preference", _profile_file(reading, "Preferences"), setting=setting)

    getter.__name__ = setting
    return getter


def shortcuts_on_desktop(reading: Reading, config: dict[str, Any]) -> Gathered:
    """The ``.desktop`` files on the desktop (``~/Desktop``), by name, as text."""
    listed = reading.control.run(
        ["bash", "-c", "find ~/Desktop -maxdepth 1 -type f -name '*.desktop' -printf '%f\\n'"],
        timeout=30,
    )
    names = [name for name in listed.stdout.splitlines() if name]
    if len(names) > SHORTCUTS:
        raise GetterError(f"{len(names)} shortcuts on the desktop (at most {SHORTCUTS} are read)")
    shortcuts = {}
    for name in names:
        data = reading.control.read_file(f"~/Desktop/{name}") or b""
        if len(data) > SHORTCUT_BYTES:
            raise GetterError(f"the shortcut {name} is {len(data)} bytes long")
        shortcuts[name] = data.decode(errors="replace")
    return value(shortcuts)


GETTERS: dict[str, Getter] = {
    "active_url_from_accessTree": active_url_from_accessTree,
    "active_tab_url_parse": active_tab_url_parse,
    "active_tab_info": active_tab_info,
    "open_tabs_info": open_tabs_info,
    "bookmarks": bookmarks,
    "default_search_engine": default_search_engine,
    "history": history,
    "cookie_data": cookie_data,
    "url_dashPart": url_dashPart,
    "url_path_parse": url_path_parse,
    "shortcuts_on_desktop": shortcuts_on_desktop,
    **{setting: _preference_getter(setting) for setting in PREFERENCE_GETTERS},
}
