"""Setup steps that drive the desktop's running browser, with OSWorld's meaning.

OSWorld's tasks start Chrome with a debugging port (9222, or 1337 forwarded to 9222 by
``socat``) and then drive it over the DevTools protocol. The port lives in the desktop's own
network namespace; the platform reaches it only through the desktop's agent
(``DesktopControl.devtools``, ``vm_pool.devtools``). Chrome is Chromium here, which also
answers to ``google-chrome``; its profile is ``~/.config/chromium``.

- ``chrome_open_tabs`` (``urls_to_open``): opens each URL in a new tab of the running browser;
  with no browser listening, starts one with the debugging port and the URLs; either way it
  ends once the opened tabs show a page (beside those shown before) and each has its title, or
  after ``TAB_WAIT_S``, and the screen is drawn
- ``chrome_close_tabs`` (``urls_to_close``): closes the tabs showing those URLs
- ``update_browse_history`` (``history``: [{url, title, visit_time_from_now_in_seconds}]): writes
  those visits into the profile's history database, made from OSWorld's empty Chrome history
  (a task file, through the cache like any download), before the browser starts
"""

import json
import sqlite3
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from vm_pool.desktop import DesktopControl
from vm_pool.devtools import PORT
from vm_pool.setup.base import (
    SetupFailed,
    SetupRun,
    SetupStep,
    fetch,
    launch_and_draw,
    until_drawn,
)
from vm_pool.task_files.urls import EMPTY_CHROME_HISTORY_URL

# --test-type keeps Chromium from drawing its "unsupported command-line flag: --no-sandbox" bar
# across the top of every page: the model would see it, and train on it, at every step.
BROWSER = ["chromium", "--no-first-run", "--no-default-browser-check", "--no-sandbox",
           "--test-type", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--password-store=basic",
           f"--remote-debugging-port={PORT}"]  # fmt: skip
PROFILE = "~/.config/chromium/Default"
# Chrome counts time in microseconds from 1601-01-01; a visit's transition as OSWorld writes it.
CHROME_EPOCH = datetime(1601, 1, 1)
TYPED_LINK = 805306368
TAB_WAIT_S = 10.0


def _urls(step: SetupStep, key: str) -> list[str]:
    urls = step.parameters.get(key)
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
        raise SetupFailed(f"{step.name()}: '{key}' must be a non-empty list of URLs")
    return urls


def browser_listening(run: SetupRun) -> bool:
    return "error" not in run.control.devtools({"method": "GET", "path": "/json/version"})


def page_tabs(control: DesktopControl) -> list[dict[str, Any]]:
    """The browser's page tabs, first the one in front, as its DevTools port lists them."""
    reply = control.devtools({"method": "GET", "path": "/json/list"})
    if "error" in reply:
        return []
    return [t for t in json.loads(reply["body"]) if t.get("type") == "page"]


def open_tabs(run: SetupRun, step: SetupStep) -> None:
    urls = _urls(step, "urls_to_open")
    if not browser_listening(run):
        expected = len(urls)
        launch_and_draw(run, step, [*BROWSER, *urls])
    else:
        # Tabs already showing a page must not stand in for the new ones before they are listed.
        expected = len(_shown(page_tabs(run.control))) + len(urls)
        for url in urls:
            path = f"/json/new?{quote(url, safe='')}"
            reply = run.control.devtools({"method": "PUT", "path": path})
            if "error" in reply or reply.get("status") != 200:
                raise SetupFailed(f"{step.name()}: the browser did not open {url}: {reply}")
    # The browser answers before its tabs show their pages: the first screen must show them.
    deadline = time.monotonic() + TAB_WAIT_S
    while time.monotonic() < deadline and not _loaded(page_tabs(run.control), expected):
        time.sleep(0.2)
    until_drawn(run.control)


def _loaded(tabs: list[dict[str, Any]], expected: int) -> bool:
    """Whether at least ``expected`` tabs show a page and every one has its title: a tab still
    loading has none. Addresses are not compared, so a page that redirected counts (the
    browser's own pages, such as its address bar's popup, are not page tabs)."""
    shown = _shown(tabs)
    return len(shown) >= expected and all(t.get("title") for t in shown)


def _shown(tabs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tabs that show a page (not a blank one)."""
    return [t for t in tabs if t.get("url") not in ("", "about:blank")]


def _same_url(wanted: str, shown: str) -> bool:
    return wanted.rstrip("/") in shown.rstrip("/")


def close_tabs(run: SetupRun, step: SetupStep) -> None:
    urls = _urls(step, "urls_to_close")
    if not browser_listening(run):
        run.note(step, "no browser is listening on its debugging port; nothing to close")
        return
    closed = set()
    for url in urls:
        tab = next((t for t in page_tabs(run.control) if _same_url(url, t.get("url", ""))), None)
        if tab is None:
            run.note(step, f"no tab shows {url}")
            continue
        run.control.devtools({"method": "GET", "path": f"/json/close/{tab['id']}"})
        closed.add(tab["id"])
    # The browser answers a close before the tab is gone: the next step must not see it.
    deadline = time.monotonic() + TAB_WAIT_S
    while closed & {t["id"] for t in page_tabs(run.control)} and time.monotonic() < deadline:
        time.sleep(0.1)


def _history_items(step: SetupStep) -> list[tuple[str, str, float]]:
    history = step.parameters.get("history")
    if not isinstance(history, list):
        raise SetupFailed(f"{step.name()}: 'history' must be a list of visits")
    items = []
    for item in history:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            raise SetupFailed(f"{step.name()}: each visit needs a 'url'")
        ago = item.get("visit_time_from_now_in_seconds", 0)
        if isinstance(ago, bool) or not isinstance(ago, int | float):
            raise SetupFailed(f"{step.name()}: 'visit_time_from_now_in_seconds' is a number")
        items.append((item["url"], str(item.get("title", "")), float(ago)))
    return items


def update_browse_history(run: SetupRun, step: SetupStep) -> None:
    items = _history_items(step)
    empty = fetch(step, EMPTY_CHROME_HISTORY_URL)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "History"
        path.write_bytes(empty)
        with sqlite3.connect(path) as db:
            for url, title, ago in items:
                visited = datetime.now() - timedelta(seconds=ago)
                stamp = int((visited - CHROME_EPOCH).total_seconds() * 1_000_000)
                cursor = db.execute(
                    "INSERT INTO urls (url, title, visit_count, typed_count, last_visit_time,"
                    " hidden) VALUES (?, ?, 1, 0, ?, 0)",
                    (url, title, stamp),
                )
                db.execute(
                    "INSERT INTO visits (url, visit_time, from_visit, transition, segment_id,"
                    " visit_duration) VALUES (?, ?, 0, ?, 0, 0)",
                    (cursor.lastrowid, stamp, TYPED_LINK),
                )
        db.close()
        run.control.put_file(f"{PROFILE}/History", path.read_bytes())
