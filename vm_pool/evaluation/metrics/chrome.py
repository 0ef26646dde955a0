"""Browser metrics: the open tabs and the active tab's URL, as OSWorld's chrome getters give them.

URLs are compared as OSWorld's ``compare_urls`` does: scheme added when missing, a lone ``www``
subdomain dropped, the public suffix ignored (``airbnb.com`` equals ``airbnb.com.sg``), a bare
``/`` path dropped. OSWorld finds the suffix with tldextract and the public-suffix list; here
the last label is the suffix, or the last two for ``co.uk``-style country domains, which agrees
with it for ordinary web addresses.
"""

import re
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
