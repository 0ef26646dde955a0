"""The accessibility-tree metric: elements of the desktop's AT-SPI tree, found by XPath or CSS.

``result`` is the tree as OSWorld's XML (the ``accessibility_tree`` getter, written by
``vm_pool.agent.accessibility``), made on the desktop: it is parsed here, in the jail, with no
entities resolved and nothing fetched, within lxml's default limits on depth and text, after
its size is checked against the agent's own cap.
"""

import functools
import operator
from collections.abc import Callable
from typing import Any

from lxml import etree
from lxml.cssselect import CSSSelector, SelectorError
from rapidfuzz import fuzz

from vm_pool.desktop import MAX_TREE_BYTES
from vm_pool.evaluation.bounds import LimitHit
from vm_pool.evaluation.metrics.errors import MetricError


def _namespaces(system: str, *names: str) -> dict[str, str]:
    return {
        prefix: f"https://accessibility.{system}.example.org/ns/{name}"
        for prefix, name in (entry.split("=") for entry in names)
    }


_COMMON = ("st=state", "attr=attributes", "cp=component", "doc=document")
_VALUES = ("txt=text", "val=value", "act=action")
# OSWorld's namespaces of the tree on each system (desktop_env/evaluators/metrics/general.py).
NAMESPACES: dict[str, dict[str, str]] = {
    "ubuntu": _namespaces("ubuntu", *_COMMON, "docattr=document/attributes", *_VALUES),
    "windows": _namespaces(
        "windows", *_COMMON, "docattr=document/attributes", *_VALUES, "class=class"
    ),
    "macos": _namespaces("macos", *_COMMON, *_VALUES, "role=role"),
}


def _parse(result: str) -> Any:
    size = len(result.encode())
    if size > MAX_TREE_BYTES:
        raise LimitHit("accessibility tree", f"{size} bytes of XML (at most {MAX_TREE_BYTES})")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    return etree.fromstring(result.encode(), parser)


def _elements(tree: Any, rule: dict[str, Any], namespaces: dict[str, str]) -> list[Any]:
    """What a rule selects: its ``xpath`` when it has one, else its ``selectors`` joined."""
    try:
        if "xpath" in rule:
            found = tree.xpath(rule["xpath"], namespaces=namespaces)
        elif "selectors" in rule:
            found = CSSSelector(", ".join(rule["selectors"]), namespaces=namespaces)(tree)
        else:
            raise MetricError("check_accessibility_tree: a rule needs 'xpath' or 'selectors'")
    except (etree.XPathError, SelectorError, TypeError) as error:
        raise MetricError(f"check_accessibility_tree: {type(error).__name__}: {error}") from error
    if not isinstance(found, list):
        raise MetricError(
            f"check_accessibility_tree: the xpath {rule['xpath']!r} selects no nodes but a value"
        )
    return found


def _similarity(expected: str, text: str | None) -> float:
    return 0.0 if text is None else fuzz.ratio(expected, text) / 100.0  # rapidfuzz's 0 for None


def check_accessibility_tree(
    result: str | None, rules: list[dict[str, Any]], osname: str = "ubuntu"
) -> float:
    """The product over ``rules`` of each rule's score: 0 when it selects nothing; else, with
    ``text``, the best match of ``text`` and an element's text (equal, or with ``exact`` false
    the rapidfuzz ratio over 100); else 1."""
    if osname not in NAMESPACES:
        raise MetricError(f"check_accessibility_tree: osname {osname!r} is not one OSWorld knows")
    if result is None:
        # Deliberate difference from OSWorld: it fails on a missing tree; no tree scores 0.
        return 0.0
    tree = _parse(result)
    total = 1.0
    for rule in rules:
        elements = _elements(tree, rule, NAMESPACES[osname])
        if not elements:
            return 0.0
        if "text" not in rule:
            continue
        # Deliberate difference from OSWorld: a rule with ``text`` and no ``exact`` fails there
        # (KeyError); its docstring's default, exact, applies here.
        compare: Callable[[str, str | None], Any] = (
            operator.eq if rule.get("exact", True) else _similarity
        )
        match = functools.partial(compare, rule["text"])
        best: float = 0.0
        for element in elements:
            if not isinstance(element, etree._Element):
                raise MetricError(
                    "check_accessibility_tree: 'text' needs a rule that selects elements"
                )
            best = max(best, float(match(element.text or None)))
        total *= best
    return total
