"""The reader of a page's HTML: OSWorld's ``active_tab_html_parse`` selections, in the jail.

The getter (``getters.browser_pages``) brings back the active tab's document as the browser
holds it (scripts' changes included, with each form field's current value written into its
markup); here it is parsed with lxml's HTML parser (no network) and the task's selections are
applied as OSWorld applies them with Playwright, by ``category``:

- ``class``: ``class_singleObject`` {class: key} takes the first element's text;
  ``class_multiObject`` {class: {index: key}} the index-th element's;
  ``class_multiObject_child`` the index-th direct text of the class's first element;
  ``class_multiObject_only_child`` the first ``h3`` within the index-th element having one;
  ``class_multiObject_search_exist`` {class: [texts]} whether each text is one element's text,
  and with "is_other_exist" listed, whether an element has a text not listed;
- ``xpath``: ``xpathObject`` {xpath: key}, the first match's text;
- ``input``: ``inputObject`` {xpath: key}, the first match's value (an input, textarea or select);
- ``label``: ``labelObject`` {text: key}, the text of the first element holding that text;
- ``class&url``: per listed text, whether an element of the class (``class_multiObject``), or the
  ``span`` of one of its ``li.catAllProducts`` (``class_multiObject_li``), has it, with
  "is_other_exist"; and whether the page's URL holds each of ``url_include_expected`` (or each
  key of ``url_include_expected_multichoice``, stored under its value).

An element's text is its ``textContent``, stripped; a missing one is "". Class selections are
CSS (``.`` + the class), as Playwright's are. What Playwright sees and lxml does not: open shadow
roots (Playwright's CSS pierces them; the markup holds no shadow content), and the rendering
(``innerText`` of the ``li`` spans is approximated by the text with its spaces collapsed).
"""

from typing import Any

import lxml.html
from cssselect import SelectorError
from lxml import etree
from lxml.cssselect import CSSSelector
from lxml.html import HtmlElement

from vm_pool.evaluation.bounds import LimitHit, check_size
from vm_pool.evaluation.readers.base import Reader, Unreadable

_SKIPPED_FOR_TEXT = {"head", "script", "style", "noscript", "template"}


def _parse(path: str) -> HtmlElement:
    check_size(path)
    with open(path, "rb") as f:
        markup = f.read()
    parser = lxml.html.HTMLParser(encoding="utf-8", no_network=True, huge_tree=False)
    try:
        root = lxml.html.document_fromstring(markup, parser=parser)
    except (etree.ParserError, ValueError) as error:
        raise Unreadable(f"the page's HTML cannot be parsed: {error}") from error
    if not isinstance(root, HtmlElement):
        raise Unreadable("the page's HTML has no document element")
    return root


def _css(root: HtmlElement, selector: str) -> list[HtmlElement]:
    """Playwright's ``query_selector_all``: [] for a selector it cannot parse."""
    try:
        return [
            e for e in CSSSelector(selector, translator="html")(root) if isinstance(e, HtmlElement)
        ]
    except (SelectorError, etree.XPathError):
        return []


def _xpath(root: HtmlElement, path: str) -> list[Any]:
    try:
        found = root.xpath(path)
    except etree.XPathError:
        return []
    return found if isinstance(found, list) else [found]


def _text(node: Any) -> str:
    """``textContent``, stripped (for a text or attribute that an xpath selects: itself)."""
    if isinstance(node, HtmlElement):
        return str(node.text_content()).strip()
    return str(node).strip()


def _texts(root: HtmlElement, selector: str) -> list[str]:
    return [_text(element) for element in _css(root, selector)]


def _direct_texts(root: HtmlElement, selector: str) -> list[str]:
    """The first element's own text nodes (not its children's), stripped, empty ones left out."""
    elements = _css(root, selector)
    if not elements:
        return []
    first = elements[0]
    pieces = [first.text, *(child.tail for child in first)]
    return [piece.strip() for piece in pieces if piece and piece.strip()]


def _first_h3_texts(root: HtmlElement, selector: str) -> list[str]:
    texts = []
    for element in _css(root, selector):
        heading = next(iter(element.iterdescendants("h3")), None)
        if heading is not None:
            texts.append(_text(heading))
    return texts


def _li_span_texts(root: HtmlElement, selector: str) -> list[str]:
    texts = []
    for item in _css(root, f"{selector} li.catAllProducts"):
        span = next(iter(item.iterdescendants("span")), None)
        if span is not None:
            texts.append(" ".join(str(span.text_content()).split()))
    return texts


def _at(texts: list[Any], order: Any) -> Any:
    """``texts[int(order)]`` where OSWorld finds one, else ""."""
    index = int(order)
    return texts[index] if -len(texts) <= index < len(texts) else ""


def _input_value(node: Any) -> str:
    """Playwright's ``input_value``: "" for what is not a form field."""
    if not isinstance(node, HtmlElement):
        return ""
    if node.tag == "input":
        return str(node.get("value", "")).strip()
    if node.tag == "textarea":
        return str(node.text_content()).strip()
    if node.tag == "select":
        options = list(node.iterdescendants("option"))
        chosen = next((o for o in options if o.get("selected") is not None), None)
        chosen = chosen if chosen is not None or not options else options[0]
        if chosen is None:
            return ""
        shown = chosen.get("value")
        return (shown if shown is not None else " ".join(chosen.text_content().split())).strip()
    return ""


def _holding_text(root: HtmlElement, label: str) -> HtmlElement | None:
    """Playwright's ``text=label``: the first element whose text holds ``label`` (whitespace
    normalised, any case) where none of its child elements holds it alone."""
    needle = " ".join(label.split()).lower()

    def holds(element: HtmlElement) -> bool:
        return needle in " ".join(str(element.text_content()).split()).lower()

    for element in root.iter():
        if not isinstance(element, HtmlElement) or element.tag in _SKIPPED_FOR_TEXT:
            continue
        if any(a.tag in _SKIPPED_FOR_TEXT for a in element.iterancestors()):
            continue
        if holds(element) and not any(
            isinstance(child, HtmlElement) and holds(child) for child in element
        ):
            return element
    return None


def _class_category(root: HtmlElement, config: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for getter, key_name in (
        (_texts, "class_multiObject"),
        (_direct_texts, "class_multiObject_child"),
        (_first_h3_texts, "class_multiObject_only_child"),
    ):
        for class_name, keys in (config.get(key_name) or {}).items():
            texts = getter(root, "." + class_name)
            for order, key in keys.items():
                found[key] = _at(texts, order)
    for class_name, wanted in (config.get("class_multiObject_search_exist") or {}).items():
        texts = _texts(root, "." + class_name)
        for text in wanted:
            if text != "is_other_exist":
                found[text] = text in texts
        if "is_other_exist" in wanted:
            if any(text not in wanted for text in texts):
                found["is_other_exist"] = True
            found.setdefault("is_other_exist", False)
    for class_name, key in (config.get("class_singleObject") or {}).items():
        texts = _texts(root, "." + class_name)
        found[key] = texts[0] if texts else ""
    return found


def _listed(found: dict[str, Any], texts: list[str], wanted: list[str]) -> None:
    """``class&url``'s rule for one class: each wanted text present (any case), and whether a
    text is in none of the wanted ones."""
    for text in wanted:
        if any(text.lower() == seen.lower() for seen in texts):
            found[text.lower()] = True
    if any(all(seen.lower() not in w.lower() for w in wanted) for seen in texts):
        found["is_other_exist"] = True
    found.setdefault("is_other_exist", False)


def _class_and_url(root: HtmlElement, config: dict[str, Any], url: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for class_name, wanted in (config.get("class_multiObject") or {}).items():
        _listed(found, _texts(root, "." + class_name), wanted)
    for class_name, wanted in (config.get("class_multiObject_li") or {}).items():
        _listed(found, _li_span_texts(root, "." + class_name), wanted)
    page_url = url.lower()
    for key in config.get("url_include_expected") or []:
        found.setdefault(key.lower(), key.lower() in page_url)
    for key, name in (config.get("url_include_expected_multichoice") or {}).items():
        found.setdefault(name.lower(), key.lower() in page_url)
    return found


def select(root: HtmlElement, config: dict[str, Any], url: str) -> dict[str, Any]:
    """OSWorld's selections over a parsed page (see the module's docstring)."""
    category = config.get("category")
    if category == "class":
        return _class_category(root, config)
    if category == "class&url":
        return _class_and_url(root, config, url)
    found: dict[str, Any] = {}
    if category == "xpath":
        for path, key in (config.get("xpathObject") or {}).items():
            matches = _xpath(root, path)
            found[key] = _text(matches[0]) if matches else ""
    elif category == "input":
        for path, key in (config.get("inputObject") or {}).items():
            matches = _xpath(root, path)
            found[key] = _input_value(matches[0]) if matches else ""
    elif category == "label":
        for label, key in (config.get("labelObject") or {}).items():
            element = _holding_text(root, str(label))
            found[key] = "" if element is None else _text(element)
    return found


def active_tab_html(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    """``config``: the getter's ``selection`` (its own config), the page's ``url``, and
    ``page_chars`` where the page was too long to bring back."""
    if path is None:
        if config.get("page_chars"):
            raise LimitHit("page size", f"the page's HTML is {config['page_chars']} characters")
        return None
    return select(_parse(path), config.get("selection") or {}, str(config.get("url", "")))


READERS: dict[str, Reader] = {"active_tab_html": active_tab_html}
