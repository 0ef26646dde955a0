"""Case makers for the browser metrics that compare URLs as OSWorld's ``compare_urls`` does (its
host split is tldextract's): the open tabs, the active tab, and deleted cookies.

Each URL an agent's browser shows is one of the published tasks' URLs as a browser might leave
it: the same, with or without ``www``, another scheme or country domain, a trailing slash, a
query or fragment, a mobile or language subdomain, another path, or another site.
"""

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tests.support.osworld_differential.core import Case, makes

# the published tasks' expected URLs (open_tabs_info and the active-tab getters)
_TAB_SETS = [
    ["https://aclanthology.org/", "https://openai.com/", "https://www.linkedin.com/home/",
     "file:///home/user/Desktop/annual-enterprise-survey-2021-financial-year-provisional.html"],
    ["https://www.apple.com/", "https://scholar.google.com/", "https://www.amazon.com/"],
    ["https://github.com", "https://docs.python.org/3/"],
    ["https://www.lonelyplanet.com", "https://www.airbnb.com", "https://www.tripadvisor.com"],
]  # fmt: skip
_ACTIVE = [
    "https://www.babycenter.com/baby-names/details/carl-853",
    "https://www.nfl.com/scores/2019/post4",
    "https://www.drugs.com/npc/",
    "https://www.drugs.com/npp/",
    "https://discussions.flightaware.com/t/the-banter-thread/4412",
]
_CHANGES = ["same", "same", "same", "www", "scheme", "country", "slash", "query", "fragment",
            "mobile", "path", "other site", "upper case", "port", "bar text"]  # fmt: skip


def _as_left(rng: random.Random, url: str) -> tuple[str, str]:
    """The URL as the browser might show it after the episode, and the change made."""
    change = rng.choice(_CHANGES)
    scheme, host, path, query, fragment = urlsplit(url)
    if not host:
        return ("file:///home/user/Desktop/other.html" if change == "other site" else url), change
    if change == "www":
        host = host[4:] if host.startswith("www.") else "www." + host
    elif change == "scheme":
        scheme = "http" if scheme == "https" else "https"
    elif change == "country":
        labels = host.split(".")
        labels[-1] = rng.choice(["com.sg", "co.uk", "de", "com.au", "fr", "co.jp"])
        host = ".".join(labels)
    elif change == "slash":
        path = path.rstrip("/") if path.endswith("/") else path + "/"
    elif change == "query":
        query = rng.choice(["ref=nav", "hl=en&q=1"])
    elif change == "fragment":
        fragment = "top"
    elif change == "mobile":
        host = rng.choice(["m.", "en.", "www2."]) + host.removeprefix("www.")
    elif change == "path":
        path = path.rstrip("/") + rng.choice(["/index.html", "/about", "/2"])
    elif change == "other site":
        host = rng.choice(["www.google.com", "www.bing.com", "news.ycombinator.com"])
    elif change == "upper case":
        host = host.upper()
    elif change == "port":
        host += ":443"
    elif change == "bar text":
        # active_url_from_accessTree prefixes the address bar's text with "https://www."
        return "https://www." + url.split("://", 1)[1], change
    return urlunsplit((scheme, host, path, query, fragment)), change


@makes("is_expected_tabs")
def _expected_tabs(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(40):
        expected = _TAB_SETS[index % len(_TAB_SETS)]
        tabs = []
        for url in expected:
            shown, change = _as_left(rng, url)
            tabs.append({"title": change, "url": shown})
        extra = rng.random()
        if extra < 0.15:
            tabs.pop(rng.randrange(len(tabs)))
        elif extra < 0.3:
            tabs.append({"title": "New Tab", "url": "chrome://newtab/"})
        rng.shuffle(tabs)
        result: Any = None if index == 0 else tabs
        rule = {"type": "url", "urls": expected}
        yield Case(f"{[tab['url'] for tab in tabs]}", (result, rule))


@makes("is_expected_active_tab")
def _expected_active_tab(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(40):
        expected = _ACTIVE[index % len(_ACTIVE)]
        shown, change = _as_left(rng, expected)
        # active_tab_info gives {"title", "url", "content"}; the accessibility getter a URL
        result: Any = {"title": change, "url": shown} if rng.random() < 0.4 else shown
        if index == 0:
            result = None
        yield Case(f"{change}: {shown}", (result, {"type": "url", "url": expected}))


# hosts a Chromium profile's Cookies table holds after browsing shopping and search sites
_COOKIE_HOSTS = [".amazon.com", "www.amazon.com", ".www.amazon.com", "fls-na.amazon.com",
                 "amazon.com", ".amazon.co.uk", ".amazon.de", ".google.com",
                 "accounts.google.com", ".youtube.com", ".doubleclick.net",
                 "images-na.ssl-images-amazon.com", ".amazon.com.au"]  # fmt: skip


@makes("is_cookie_deleted")
def _cookie_deleted(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Rows as ``SELECT * FROM cookies`` returns them: (creation_utc, host_key, ...)."""
    rules = [{"type": "domains", "domains": [".amazon.com"]},
             {"type": "domains", "domains": [".amazon.com"]},
             {"type": "domains", "domains": ["amazon.com", ".google.com"]}]  # fmt: skip
    for index in range(30):
        hosts = rng.sample(_COOKIE_HOSTS, rng.randint(0, 4))
        rows = [(13_350_000_000_000_000 + n, host, "", "session-id", "x", "/")
                for n, host in enumerate(hosts)]  # fmt: skip
        yield Case(f"{hosts}", (rows, rules[index % len(rules)]))
    yield Case("another rule type", ([], {"type": "names", "names": ["session-id"]}))
