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
from urllib.parse import parse_qs, unquote, urlparse

from vm_pool.evaluation.getters.base import (
    Gathered,
    Getter,
    GetterError,
    Reading,
    read,
    require,
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
    url = active_url(reading, config)
    if url is None:
        return value(None)
    query = parse_qs(urlparse(url).query)
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


def url_dashPart(reading: Reading, config: dict[str, Any]) -> Gathered:  # noqa: N802
    """One ``/``-separated part of the active tab's URL (``partIndex``, Python's indexing),
    before its query with ``needDeleteId``; as a string, or ``{key: part}`` with
    ``returnType`` "json"."""
    url = active_url(reading, config)
    try:
        index = int(require(config, "partIndex"))
    except (TypeError, ValueError):
        return value(None)
    parts = url.split("/") if url is not None else []
    # Deliberate difference from OSWorld: a negative index past the start is None here, where
    # OSWorld's getter raises an IndexError.
    if url is None or not -len(parts) <= index < len(parts):
        return value(None)
    part = parts[index]
    if config.get("needDeleteId", False):
        part = part.split("?")[0]
    if config.get("returnType") == "string":
        return value(part)
    if config.get("returnType") == "json":
        return value({require(config, "key"): part})
    return value(None)


def url_path_parse(reading: Reading, config: dict[str, Any]) -> Gathered:
    """OSWorld's Macy's product-listing URL parse (``get_macys_product_url_parse``): flags for
    men's clothing, shirts and short sleeves in the path, and the facet values of the path's
    ``keys,…/values,…`` pair named by ``parse_keys``."""
    url = active_url(reading, config)
    return value(None if url is None else macys_facets(url, require(config, "parse_keys")))


def macys_facets(url: str, parse_keys: list[str]) -> dict[str, Any]:
    path = unquote(urlparse(url).path)
    parts = path.strip("/").split("/")
    facets: dict[str, Any] = {}
    shirts, short_sleeve = "shirts" in path, "short-sleeve" in path
    for names, values in zip(parts, parts[1:], strict=False):
        if "," in names and "," in values:
            keys = [k.strip() for k in names.split(",")]
            for key, found in zip(keys, [v.strip() for v in values.split(",")], strict=False):
                if key == "Price_discount_range":
                    facets[key] = [item.strip() for item in found.split("|")] if found else None
                else:
                    facets[key] = found or None
                shirts |= key == "Product_department" and found in ("shirts", "Shirts", "Shirt")
                short_sleeve |= key == "Sleeve_length" and found in (
                    "short-sleeve",
                    "Short Sleeve",
                )
            break
    for key in ("Men_regular_size_t", "Price_discount_range"):
        facets.setdefault(key, None)
    result: dict[str, Any] = {
        "mens_clothing": True if "mens-clothing" in path else None,
        "shirts": True if shirts else None,
        "short_sleeve": True if short_sleeve else None,
    }
    for key in parse_keys:
        if key not in facets:
            continue
        if key == "Price_discount_range":
            ranges = facets[key] or []
            half = "50_PERCENT_ off & more" in ranges and not {
                "30_PERCENT_ off & more",
                "20_PERCENT_ off & more",
            } & set(ranges)
            result[key] = "50_PERCENT_ off & more" if half else "not_50_PERCENT_ off & more"
        else:
            result[key] = facets[key]
    return result


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
