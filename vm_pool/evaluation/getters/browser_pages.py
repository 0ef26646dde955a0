"""Getters that read or drive pages of the desktop's browser over DevTools.

OSWorld drives Chrome with Playwright over the debugging port; here the platform reaches that
port only through the desktop's agent (``DesktopControl.devtools``): the page list, opening and
closing a tab, and JavaScript run in one tab (``vm_pool.devtools``). A reply is bounded there
(``MAX_MESSAGE_BYTES``); a page's HTML is also bounded here (``PAGE_HTML_CHARS``), past which
the evaluation is not scored (the reader says so).

- ``active_tab_html_parse``: the active tab's document, for the reader ``active_tab_html``
  (the selections are applied there, in the jail);
- ``chrome_appearance_mode_ui``: the appearance chosen on ``chrome://settings/appearance``, or
  the profile's color scheme where the page does not tell.

The others open a website in a new tab, as OSWorld's do, and need that site reachable from the
desktop (a desktop without internet gives what OSWorld gives when a site does not load):

- ``page_info`` (``url``): its title, URL and HTML;
- ``info_from_website`` (``url``, ``infos``, ``backups``): texts and attributes of elements,
  after clicks; ``backups`` when any step fails;
- ``pdf_from_url`` (``path``, ``dest``): the page printed to PDF by the desktop's Chromium
  (headless, a profile of its own, no header or footer: Playwright's ``page.pdf``);
- ``gotoRecreationPage_and_get_html_content`` (``getters.recreation``).
"""

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, unquote

from vm_pool.desktop import DesktopControl
from vm_pool.evaluation.getters.base import (
    Gathered,
    Getter,
    GetterError,
    Reading,
    given,
    read,
    require,
    value,
)
from vm_pool.evaluation.getters.browser import CHROME_PROFILE, active_url
from vm_pool.setup.browser import page_tabs

PAGE_HTML_CHARS = 8 * 1024 * 1024  # a DevTools reply is at most 32 MiB, UTF-8 and escaped
LOAD_WAIT_S = 60.0
SELECTOR_WAIT_S = 10.0
POLL_S = 0.25
PDF_FOLDER = "/tmp/tandem-pdf-from-url"
PDF_TIMEOUT_S = 120.0
EMPTY_PDF = b"%PDF-1.4\n%EOF\n"
FAILED = "__EVALUATION_FAILED__"

# The document as the browser holds it, copied into an inert document (no script runs, nothing
# loads) where each form field's live value is written into its markup.
_SNAPSHOT = """(async () => {
  for (let i = 0; i < 50 && document.readyState !== 'complete'; i++)
    await new Promise(r => setTimeout(r, 100));
  const inert = document.implementation.createHTMLDocument('');
  const root = inert.importNode(document.documentElement, true);
  const fields = 'input, textarea, select';
  const live = document.documentElement.querySelectorAll(fields);
  const copies = root.querySelectorAll(fields);
  live.forEach((field, i) => {
    const copy = copies[i];
    if (!copy || copy.tagName !== field.tagName) return;
    if (field.tagName === 'INPUT') copy.setAttribute('value', field.value);
    else if (field.tagName === 'TEXTAREA') copy.textContent = field.value;
    else Array.from(field.options).forEach((option, j) => {
      if (copy.options[j]) copy.options[j].toggleAttribute('selected', option.selected);
    });
  });
  const html = '<!DOCTYPE html>' + root.outerHTML;
  return html.length > %(limit)d ? {length: html.length} : {html: html};
})()"""

# Playwright's page.content(): the doctype and the document element's markup.
_CONTENT = """(() => {
  const doctype = document.doctype ? new XMLSerializer().serializeToString(document.doctype) : '';
  const html = doctype + (document.documentElement ? document.documentElement.outerHTML : '');
  return {title: document.title, url: location.href,
          content: html.length > %(limit)d ? null : html, length: html.length};
})()"""


def evaluate(control: DesktopControl, target: str, expression: str) -> Any:
    reply = control.devtools({"target": target, "expression": expression})
    if "error" in reply:
        raise GetterError(f"the browser could not run a page script: {reply['error']}")
    return reply.get("value")


def until(control: DesktopControl, target: str, expression: str, wait_s: float) -> bool:
    """Whether ``expression`` became true in the tab within ``wait_s`` (a page navigating in
    between answers nothing, and is asked again)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if evaluate(control, target, expression) is True:
                return True
        except GetterError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def loaded(control: DesktopControl, target: str, wait_s: float = LOAD_WAIT_S) -> None:
    """Wait for the tab's page to finish loading; a page that could not be loaded (Chromium's
    error page) fails, as Playwright's ``goto`` does."""
    ready = "location.href !== 'about:blank' && document.readyState === 'complete'"
    if not until(control, target, ready, wait_s):
        raise GetterError("the page did not finish loading")
    shown = evaluate(control, target, "location.href")
    if str(shown).startswith("chrome-error://"):
        raise GetterError("the browser could not load the page (is the site reachable?)")


def wait_for(control: DesktopControl, target: str, selector: str, wait_s: float) -> None:
    """Playwright's ``wait_for_selector(state='attached')``."""
    found = f"document.querySelector({json.dumps(selector)}) !== null"
    if not until(control, target, found, wait_s):
        raise GetterError(f"no element {selector!r} on the page")


def open_tab(control: DesktopControl, url: str) -> str:
    reply = control.devtools({"method": "PUT", "path": f"/json/new?{quote(url, safe='')}"})
    if "error" in reply or reply.get("status") != 200:
        raise GetterError(f"the browser did not open {url}: {reply.get('error') or reply}")
    target = json.loads(reply["body"]).get("id")
    if not isinstance(target, str):
        raise GetterError(f"the browser opened {url} without naming its tab")
    return target


def close_tab(control: DesktopControl, target: str) -> None:
    control.devtools({"method": "GET", "path": f"/json/close/{quote(target, safe='')}"})


@contextmanager
def new_tab(control: DesktopControl, url: str) -> Iterator[str]:
    """A new tab on ``url``, loaded; closed afterwards, as OSWorld's getters close their page."""
    target = open_tab(control, url)
    try:
        loaded(control, target)
        yield target
    finally:
        close_tab(control, target)


def _same_page(url: str) -> str:
    return unquote(url).rstrip("/")


def active_tab_html_parse(reading: Reading, config: dict[str, Any]) -> Gathered:
    """The active tab's document for the reader ``active_tab_html``. As OSWorld, the page is the
    open one whose URL is the address bar's (with ``goto_prefix``): {} when none is."""
    wanted = active_url(reading, config)
    if wanted is None:
        return value(None)
    tabs = page_tabs(reading.control)
    tab = next((t for t in tabs if _same_page(str(t.get("url", ""))) == _same_page(wanted)), None)
    if tab is None:
        return value({})
    snapshot = evaluate(reading.control, tab["id"], _SNAPSHOT % {"limit": PAGE_HTML_CHARS})
    if not isinstance(snapshot, dict):
        raise GetterError("the page's document could not be read")
    selection = {key: found for key, found in config.items() if key != "type"}
    url = str(tab.get("url", ""))
    if not isinstance(snapshot.get("html"), str):
        return read("active_tab_html", None, page_chars=snapshot.get("length"), url=url)
    name = reading.store("active_tab.html", snapshot["html"].encode())
    return read("active_tab_html", name, selection=selection, url=url)


def page_info(reading: Reading, config: dict[str, Any]) -> Gathered:
    """The title, URL and HTML of ``url`` opened in a new tab; OSWorld's "Connection failed"
    record when it cannot be loaded."""
    url = str(require(config, "url"))
    try:
        with new_tab(reading.control, url) as target:
            page = evaluate(reading.control, target, _CONTENT % {"limit": PAGE_HTML_CHARS})
    except (GetterError, ValueError):
        return value({"title": "Connection failed", "url": url, "content": ""})
    if not isinstance(page, dict) or page.get("content") is None:
        raise GetterError(f"the page's HTML is over {PAGE_HTML_CHARS} characters")
    return value({"title": page["title"], "url": page["url"], "content": page["content"]})


def _element_value(control: DesktopControl, target: str, selector: str, attribute: Any) -> Any:
    """An element's ``innerText`` (``attribute`` None) or attribute, once it is there."""
    wait_for(control, target, selector, SELECTOR_WAIT_S)
    element = f"document.querySelector({json.dumps(selector)})"
    if attribute is None:
        return evaluate(control, target, f"{element}.innerText")
    return evaluate(control, target, f"{element}.getAttribute({json.dumps(str(attribute))})")


def click(control: DesktopControl, target: str, selector: str) -> None:
    wait_for(control, target, selector, SELECTOR_WAIT_S)
    evaluate(control, target, f"document.querySelector({json.dumps(selector)}).click()")
    time.sleep(POLL_S)  # a click that navigates unloads the page it was made on
    until(control, target, "document.readyState === 'complete'", LOAD_WAIT_S)


def _website_infos(control: DesktopControl, target: str, url: str, infos: list[Any]) -> list[Any]:
    found = []
    for info in infos:
        if evaluate(control, target, "location.href") != url:
            evaluate(control, target, f"location.href = {json.dumps(url)}")
            time.sleep(POLL_S)
            loaded(control, target)
        action = info.get("action", "inner_text")
        selector = info.get("selector")
        if action in ("inner_text", "attribute"):
            attribute = info.get("attribute") if action == "attribute" else None
            found.append(_element_value(control, target, str(selector), attribute))
        elif action in ("click_and_inner_text", "click_and_attribute"):
            *clicks, last = [str(s) for s in selector]
            for step in clicks:
                click(control, target, step)
            attribute = info.get("attribute") if action == "click_and_attribute" else None
            found.append(_element_value(control, target, last, attribute))
        else:
            raise GetterError(f"info_from_website's action {action!r} is not supported")
    return found


def info_from_website(reading: Reading, config: dict[str, Any]) -> Gathered:
    """OSWorld's get_info_from_website: per info, an element's text or attribute (after clicking
    the selectors before the last); ``backups`` when the site or an element is not there."""
    url = str(require(config, "url"))
    try:
        with new_tab(reading.control, url) as target:
            return value(_website_infos(reading.control, target, url, config.get("infos", [])))
    except (GetterError, AttributeError, TypeError, ValueError):
        return value(config.get("backups"))


def pdf_from_url(reading: Reading, config: dict[str, Any]) -> Gathered:
    """``path`` (a URL) printed to PDF by the desktop's Chromium; OSWorld's empty PDF when it
    cannot be printed."""
    url = str(require(config, "path"))
    dest = str(require(config, "dest"))
    printed = f"{PDF_FOLDER}/page.pdf"
    script = (
        f"rm -rf {PDF_FOLDER} && mkdir -p {PDF_FOLDER} && chromium --headless --no-sandbox "
        f"--disable-gpu --no-first-run --no-pdf-header-footer --user-data-dir={PDF_FOLDER}/profile "
        f'--print-to-pdf={printed} "$1" >/dev/null 2>&1'
    )
    reading.control.run(["bash", "-c", script, "pdf_from_url", url], timeout=PDF_TIMEOUT_S)
    data = reading.control.read_file(printed)
    return given({}, {0: reading.store(dest, data or EMPTY_PDF)})


_APPEARANCE_PROBE = r"""(() => {
  const lower = (s) => String(s || '').toLowerCase();
  const allowedPrefPaths = new Set([
    'prefs.browser.theme.color_scheme',
    'prefs.browser.theme.color_scheme2',
    'prefs.extensions.theme.system_theme',
  ]);
  const inferFromText = (s) => {
    const t = lower(s);
    if (t.includes('light')) return 'light';
    if (t.includes('dark')) return 'dark';
    if (t.includes('device') || t.includes('system') || t.includes('default')) return 'system';
    return null;
  };
  const collectShadowRoots = (root, acc) => {
    if (!root) return;
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) {
        acc.push(el.shadowRoot);
        collectShadowRoots(el.shadowRoot, acc);
      }
    }
  };
  const modes = [];
  try {
    const ui = document.querySelector('settings-ui');
    const prefs = ui && ui.prefs ? ui.prefs : null;
    const visited = new Set();
    const walk = (obj, path) => {
      if (!obj || typeof obj !== 'object') return;
      if (visited.has(obj)) return;
      visited.add(obj);
      if (Object.prototype.hasOwnProperty.call(obj, 'value')) {
        const v = obj.value;
        const p = lower(path);
        if (allowedPrefPaths.has(p)) {
          if (p.endsWith('extensions.theme.system_theme')) {
            if (v === 0 || v === '0' || v === false) modes.push('light');
            if (v === 1 || v === '1' || v === true) modes.push('dark');
          } else {
            if (v === 1 || v === '1' || lower(v) === 'light') modes.push('light');
            if (v === 2 || v === '2' || lower(v) === 'dark') modes.push('dark');
            if (v === 0 || v === '0' || lower(v) === 'system' || lower(v) === 'default'
                || lower(v) === 'device') modes.push('system');
          }
        }
      }
      for (const [k, v] of Object.entries(obj)) walk(v, path ? `${path}.${k}` : k);
    };
    walk(prefs, 'prefs');
  } catch (e) {}
  try {
    const roots = [document];
    collectShadowRoots(document, roots);
    for (const r of roots) {
      for (const el of r.querySelectorAll(
          '[selected],[checked],[aria-checked="true"],option:checked')) {
        const m = inferFromText((el.innerText || el.textContent || '').trim());
        if (m) modes.push(m);
      }
    }
  } catch (e) {}
  if (modes.includes('light')) return 'light';
  if (modes.includes('dark')) return 'dark';
  if (modes.includes('system')) return 'system';
  return null;
})()"""
APPEARANCE_SETTLE_S = 2.5


def chrome_appearance_mode_ui(reading: Reading, config: dict[str, Any]) -> Gathered:
    """The mode chosen on Chromium's appearance settings page (light, dark or system), probed as
    OSWorld probes it; where the page cannot be read or does not tell, the profile's color scheme
    (the reader's ``chrome_color_scheme``)."""
    try:
        with new_tab(reading.control, "chrome://settings/appearance") as target:
            time.sleep(APPEARANCE_SETTLE_S)
            mode = evaluate(reading.control, target, _APPEARANCE_PROBE)
    except GetterError:
        mode = None
    if mode in ("light", "dark", "system"):
        return value(mode)
    preferences = reading.control.read_file(f"{CHROME_PROFILE}/Preferences")
    name = reading.store("Preferences", preferences) if preferences else None
    return read("chrome_preference", name, setting="chrome_color_scheme")


GETTERS: dict[str, Getter] = {
    "active_tab_html_parse": active_tab_html_parse,
    "page_info": page_info,
    "info_from_website": info_from_website,
    "pdf_from_url": pdf_from_url,
    "chrome_appearance_mode_ui": chrome_appearance_mode_ui,
}
