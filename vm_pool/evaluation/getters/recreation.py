"""OSWorld's ``gotoRecreationPage_and_get_html_content``: the expected side of a recreation.gov
task, read live from the site in a new tab of the desktop's browser (the site must be reachable
from the desktop).

The steps, as OSWorld means them: open recreation.gov (``https://www.``, ``http://www.``, then
``https://``), search for "Diamond", open the first highlighted result (it opens in a new tab),
press its "next available" button if there is one, and take the text of the element of
``class`` (the ``order``-th, else the first) on that page: ``{"expected": {class: text}}``, with
"__EVALUATION_FAILED__" for an element that is not there, and
``{"expected": {"error": "__EVALUATION_FAILED__", "error_message": …}}`` when a step fails.

Deliberate difference from OSWorld: there the steps after the search are unreachable (they sit
after a ``raise``) and the result tab is then read from an unset variable, so every attempt
fails; here they run. One attempt is made (OSWorld makes three).
"""

import json
import time
from typing import Any

from vm_pool.desktop import DesktopControl
from vm_pool.evaluation.getters.base import Gathered, Getter, GetterError, Reading, value
from vm_pool.evaluation.getters.browser_pages import (
    FAILED,
    LOAD_WAIT_S,
    POLL_S,
    click,
    close_tab,
    evaluate,
    loaded,
    open_tab,
    until,
    wait_for,
)
from vm_pool.setup.browser import page_tabs

SITES = ["https://www.recreation.gov/", "http://www.recreation.gov/", "https://recreation.gov/"]
SEARCH_SETTLE_S = 10.0
RESULT_WAIT_S = 25.0
NEXT_AVAILABLE_WAIT_S = 30.0
NEXT_AVAILABLE = [
    "button.next-available",
    "button[class*='next-available']",
    "button[class*='next']",
    ".next-available",
    "[data-testid*='next']",
]
_FILL_SEARCH = """(() => {
  const field = document.querySelector('input#hero-search-input');
  field.focus();
  Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set.call(field, 'Diamond');
  field.dispatchEvent(new Event('input', {bubbles: true}));
  field.dispatchEvent(new Event('change', {bubbles: true}));
  return true;
})()"""


def _open_site(control: DesktopControl, opened: list[str]) -> str:
    for site in SITES:
        target = open_tab(control, site)
        opened.append(target)
        try:
            loaded(control, target)
            return target
        except GetterError:
            continue
    raise GetterError("recreation.gov could not be loaded (is the site reachable?)")


def _result_tab(control: DesktopControl, target: str, opened: list[str]) -> str:
    """Search for "Diamond" and open the first highlighted result: the tab it opens."""
    wait_for(control, target, "input#hero-search-input", LOAD_WAIT_S)
    evaluate(control, target, _FILL_SEARCH)
    click(control, target, "button.nav-search-button")
    time.sleep(SEARCH_SETTLE_S)
    if not until(control, target, r"/recreation\.gov\/search/.test(location.href)", 20.0):
        raise GetterError("the search did not lead to recreation.gov's results")
    result = ".search-result-highlight--success"
    wait_for(control, target, result, RESULT_WAIT_S)
    before = {tab["id"] for tab in page_tabs(control)}
    evaluate(control, target, f"document.querySelector({json.dumps(result)}).click()")
    deadline = time.monotonic() + LOAD_WAIT_S
    while time.monotonic() < deadline:
        new = [tab["id"] for tab in page_tabs(control) if tab["id"] not in before]
        if new:
            opened.append(new[0])
            loaded(control, new[0])
            return str(new[0])
        time.sleep(POLL_S)
    raise GetterError("the search result did not open a new tab")


def _press_next_available(control: DesktopControl, target: str) -> None:
    """Press the first "next available" button found, if one shows within the wait."""
    present = [f"document.querySelector({json.dumps(s)}) !== null" for s in NEXT_AVAILABLE]
    if until(control, target, " || ".join(present), NEXT_AVAILABLE_WAIT_S):
        selector = next(
            s
            for s, probe in zip(NEXT_AVAILABLE, present, strict=True)
            if evaluate(control, target, probe) is True
        )
        click(control, target, selector)


def _class_text(control: DesktopControl, target: str, config: dict[str, Any]) -> dict[str, Any]:
    class_name = str(config.get("class"))
    selector = json.dumps("." + class_name)
    try:
        texts = evaluate(control, target, f"Array.from(document.querySelectorAll({selector}), "
                                          "e => e.textContent)")  # fmt: skip
    except GetterError:
        return {class_name: FAILED}
    texts = texts if isinstance(texts, list) else []
    index = int(config["order"]) if "order" in config else 0
    if not -len(texts) <= index < len(texts) or not isinstance(texts[index], str):
        return {class_name: FAILED}
    return {class_name: texts[index].strip()}


def gotoRecreationPage_and_get_html_content(  # noqa: N802
    reading: Reading, config: dict[str, Any]
) -> Gathered:
    control = reading.control
    opened: list[str] = []
    try:
        result = _result_tab(control, _open_site(control, opened), opened)
        _press_next_available(control, result)
        if config.get("selector") != "class":
            return value({"expected": {}})
        return value({"expected": _class_text(control, result, config)})
    except (GetterError, ValueError, TypeError) as error:
        return value({"expected": {"error": FAILED, "error_message": str(error)}})
    finally:
        for target in opened:
            close_tab(control, target)


GETTERS: dict[str, Getter] = {
    "gotoRecreationPage_and_get_html_content": gotoRecreationPage_and_get_html_content,
}
