"""Getters of the browser (Chromium here; profile ``~/.config/chromium``): the active tab and the
open tabs over DevTools, the profile's files (History, Bookmarks, Preferences) for the jail's
readers.

OSWorld reads the active tab's URL from the accessibility tree's address bar (an ``http(s)`` URL
shows there without its scheme) and prefixes ``goto_prefix`` unless the text has a scheme; here
the URL comes from the browser itself over DevTools, and the address bar's text and the same
prefix rule are applied to it (``_address_bar``).
"""

import re
from typing import Any
from urllib.parse import parse_qs, urlparse

from vm_pool.evaluation.getters.base import Gathered, Getter, Reading, read, require, value
from vm_pool.setup.browser import page_tabs

CHROME_PROFILE = "~/.config/chromium/Default"


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
    found: dict[str, Any] = {key: query.get(key, [""])[0] for key in require(config, "parse_keys")}
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


GETTERS: dict[str, Getter] = {
    "active_url_from_accessTree": active_url_from_accessTree,
    "active_tab_url_parse": active_tab_url_parse,
    "active_tab_info": active_tab_info,
    "open_tabs_info": open_tabs_info,
    "bookmarks": bookmarks,
    "default_search_engine": default_search_engine,
    "history": history,
}
