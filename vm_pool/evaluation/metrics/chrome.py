"""Browser metrics: the open tabs and the active tab's URL, as OSWorld's chrome getters give them;
the profile's bookmarks, extensions, cookies, history and font size; the desktop's shortcuts.

URLs are compared as OSWorld's ``compare_urls`` does: scheme added when missing, a lone ``www``
subdomain dropped, the public suffix ignored (``airbnb.com`` equals ``airbnb.com.sg``), a bare
``/`` path dropped. OSWorld finds the suffix with tldextract and the public-suffix list; here
the last label is the suffix, or the last two for ``co.uk``-style country domains, which agrees
with it for ordinary web addresses.
"""

import re
from itertools import product
from typing import Any
from urllib.parse import ParseResult, urlparse, urlunparse

from vm_pool.evaluation.metrics.errors import MetricError

_SECOND_LEVEL = {"co", "com", "org", "net", "gov", "edu", "ac", "or", "ne", "go", "gob", "nic"}
_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


def is_expected_url_pattern_match(result: Any, rules: dict[str, Any]) -> float:
    """1 when every regex of ``rules["expected"]`` is found in the URL (a str or ``{"url"}``)."""
    if not result:
        return 0.0
    if isinstance(result, str):
        url = result
    elif isinstance(result, dict) and "url" in result:
        url = result["url"]
    else:
        return 0.0
    return float(all(re.search(pattern, url) for pattern in rules["expected"]))


def is_expected_tabs(open_tabs: list[dict[str, str]] | None, rule: dict[str, Any]) -> float:
    """1 when the open tabs' URLs are the expected ones (``rule["urls"]``), in any order."""
    if not open_tabs:
        return 0.0
    _require_url_rule(rule)
    expected: list[str] = rule["urls"]
    actual = [tab["url"] for tab in open_tabs]
    if len(expected) != len(actual):
        return 0.0
    return float(all(any(compare_urls(e, a) for a in actual) for e in expected))


def is_expected_active_tab(active_tab: Any, rule: dict[str, Any]) -> float:
    """1 when the active tab (a URL or ``{"url"}``) is ``rule["url"]``."""
    if not active_tab:
        return 0.0
    _require_url_rule(rule)
    actual = active_tab.get("url") if isinstance(active_tab, dict) else active_tab
    return float(compare_urls(rule["url"], actual))


def is_expected_active_tab_approximate(active_tab: Any, rule: dict[str, Any]) -> float:
    """As is_expected_active_tab, but the URLs are compared verbatim with queries removed."""
    if not active_tab:
        return 0.0
    _require_url_rule(rule)
    actual = active_tab.get("url") if isinstance(active_tab, dict) else active_tab
    if actual is None:
        return 0.0

    def without_query(url: str) -> str:
        return urlunparse(urlparse(url)._replace(query=""))

    return float(without_query(rule["url"]) == without_query(actual))


def is_expected_installed_extensions(installed_extensions: Any, expected: dict[str, Any]) -> float:
    """1 when every name of ``expected["expected"]`` is an installed extension's (the Zoom
    extension's two names count as one)."""
    if not installed_extensions:
        return 0.0

    def canonical(name: Any) -> Any:
        return "Zoom Chrome Extension" if name in _ZOOM_NAMES else name

    wanted = {canonical(name) for name in expected["expected"]}
    return float(wanted <= {canonical(name) for name in installed_extensions})


_ZOOM_NAMES = {"Zoom Chrome Extension", "Zoom for Google Chrome"}


def is_expected_bookmarks(bookmarks: Any, rule: dict[str, Any]) -> float:
    """The bookmark bar (``bookmarks["bookmark_bar"]``) against ``rule``: its folders' names
    (``bookmark_bar_folders_names``) or its sites' URLs (``bookmark_bar_websites_urls``) as a
    set; or (``liked_authors_websites_urls``) the URLs of its "Liked Authors" folder, one of each
    listed author's URLs (a URL or a list of alternatives) and nothing else."""
    if not bookmarks:
        return 0.0
    kind = rule.get("type")
    if kind not in _BOOKMARK_RULES:
        raise MetricError(f"bookmark rule type {kind!r} is not supported")
    bar = bookmarks["bookmark_bar"]["children"]
    if kind == "bookmark_bar_folders_names":
        names = {b["name"] for b in bar if b["type"] == "folder"}
        return float(names == set(rule["names"]))
    if kind == "bookmark_bar_websites_urls":
        return float({b["url"] for b in bar if b["type"] == "url"} == set(rule["urls"]))
    folder = next((b for b in bar if b["type"] == "folder" and b["name"] == "Liked Authors"), None)
    if folder is None:
        return 0.0
    urls = {b["url"] for b in folder["children"] if b["type"] == "url"}
    choices = [[url] if isinstance(url, str) else url for url in rule["urls"]]
    return float(any(set(combination) == urls for combination in product(*choices)))


_BOOKMARK_RULES = (
    "bookmark_bar_folders_names",
    "bookmark_bar_websites_urls",
    "liked_authors_websites_urls",
)


def is_expected_search_query(active_tab_info: Any, rules: dict[str, Any]) -> float:
    """1 when the active tab's URL matches the regex ``rules["expect"]["pattern"]``."""
    if not active_tab_info:
        return 0.0
    return float(re.search(rules["expect"]["pattern"], active_tab_info["url"]) is not None)


def is_added_to_steam_cart(active_tab_info: Any, rule: dict[str, Any]) -> float:
    """1 when each of ``rule["items"]`` shows in the page's content (the cart page's HTML)."""
    content = active_tab_info["content"]
    return float(all(item in content for item in rule["items"]))


def is_cookie_deleted(cookie_data: Any, rule: dict[str, Any]) -> float:
    """1 when no cookie's host (a Cookies row's second column) is one of ``rule["domains"]``,
    compared as URLs (``compare_urls``)."""
    if rule.get("type") != "domains":
        raise MetricError(f"cookie rule type {rule.get('type')!r} is not supported")
    hosts = [cookie[1] for cookie in cookie_data]
    return float(not any(compare_urls(d, host) for d in rule["domains"] for host in hosts))


def check_history_deleted(history_data: Any, rule: dict[str, Any]) -> float:
    """1 when no visited URL (a History row's first column) holds one of ``rule["keywords"]``."""
    if rule.get("type") != "keywords":
        raise MetricError(f"history rule type {rule.get('type')!r} is not supported")
    urls = [visit[0] for visit in history_data]
    return float(not any(keyword in url for keyword in rule["keywords"] for url in urls))


def check_font_size(font_size: Any, rule: dict[str, Any]) -> float:
    """The profile's default font size against ``rule``: equal to ``value``, or strictly between
    ``min`` and ``max`` (``range``)."""
    if rule.get("type") not in ("value", "range"):
        raise MetricError(f"font size rule type {rule.get('type')!r} is not supported")
    # Deliberate difference from OSWorld: Chromium writes webkit.webprefs without
    # default_font_size when only another font setting was changed; OSWorld's KeyError there
    # scores 0 whatever the rule, here the size is Chromium's default, 16.
    size = font_size.get("default_font_size", 16)
    if rule["type"] == "value":
        return float(size == rule["value"])
    return float(rule["min"] < size < rule["max"])


def is_shortcut_on_desktop(shortcuts: dict[str, str], rule: dict[str, Any]) -> float:
    """1 when a desktop shortcut's ``Name=`` (rule type ``name``) or ``Exec=`` (``exec``) line is
    the expected one, or one of the two holds the other (names in any case)."""
    kind = rule.get("type")
    if kind not in ("name", "exec"):
        raise MetricError(f"shortcut rule type {kind!r} is not supported")
    key = "Name=" if kind == "name" else "Exec="
    wanted = str(rule[kind])
    for content in shortcuts.values():
        if f"{key}{wanted}\n" in content:
            return 1.0
        for line in content.split("\n"):
            if not line.startswith(key):
                continue
            found, expected = line[len(key) :], wanted
            if kind == "name":
                found, expected = found.lower(), expected.lower()
            if expected in found or found in expected:
                return 1.0
    return 0.0


def _require_url_rule(rule: dict[str, Any]) -> None:
    if rule.get("type") != "url":
        raise MetricError(f"tab rule type {rule.get('type')!r} is not supported (only 'url')")


def compare_urls(url1: str | None, url2: str | None, full: bool = True) -> bool:
    if url1 is None or url2 is None:
        return url1 == url2
    return _normalize_url(url1, full) == _normalize_url(url2, full)


def _normalize_url(url: str, full: bool) -> str:
    if not re.match(r"^[a-zA-Z][a-zA-Z0-9+\-.]*://", url):
        url = f"http://{url}"
    parsed = urlparse(url)
    subdomain, domain = _split_host(parsed.netloc.lower())
    if subdomain == "www":
        subdomain = ""
    normalized = ParseResult(
        scheme=parsed.scheme.lower(),
        netloc=f"{subdomain}.{domain}" if subdomain else domain,
        path=parsed.path if parsed.path != "/" else "",
        params=parsed.params if full else "",
        query=parsed.query if full else "",
        fragment=parsed.fragment if full else "",
    )
    return urlunparse(normalized)


def _split_host(netloc: str) -> tuple[str, str]:
    """(subdomain, registered domain without its public suffix) of a URL's netloc."""
    host = netloc.rsplit("@", 1)[-1]
    if not host.startswith("["):
        host = host.split(":", 1)[0]
    host = host.rstrip(".")
    if host.startswith("[") or _IPV4.match(host):
        return "", host
    labels = host.split(".")
    if len(labels) == 1:
        return "", host
    suffix_len = 1
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in _SECOND_LEVEL:
        suffix_len = 2
    *subdomains, domain = labels[:-suffix_len]
    return ".".join(subdomains), domain
