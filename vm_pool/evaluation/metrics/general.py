"""General metrics: values, JSON objects, text files and lists, as OSWorld scores them.

``rules`` here is what an OSWorld ``rule`` getter returns: the evaluator's ``expected.rules``
dict (``{"expected": ...}``, ``{"include": [...], "exclude": [...]}``, ...).
"""

import difflib
import json
import re
from typing import Any

from rapidfuzz import fuzz

from vm_pool.evaluation.bounds import NOT_A_VERDICT
from vm_pool.evaluation.metrics.errors import MetricError
from vm_pool.evaluation.metrics.rules import match_value_to_rule


def exact_match(result: Any, rules: dict[str, Any]) -> float:
    return float(result == rules["expected"])


def match_in_list(result: Any, rules: dict[str, Any]) -> float:
    """1 when the result is one of ``rules["expected"]``."""
    return float(result in rules["expected"])


def is_in_list(result: Any, rules: dict[str, Any]) -> float:
    """1 when ``rules["expected"]`` is one of the result's items (or a substring of it)."""
    if result is None:
        return 0.0
    return float(rules["expected"] in result)


def fuzzy_match(result: Any, rules: dict[str, Any]) -> float:
    """The rapidfuzz ratio of the result and ``rules["expected"]``, from 0 to 1."""
    return fuzz.ratio(result, rules["expected"]) / 100.0


def literal_match(result: Any, expected: Any, **options: Any) -> float:
    """Equality as strings (``type: "str"``, default) or item by item (``type: "list"``)."""
    literal_type = options.get("type", "str")
    ignore_case = options.get("ignore_case", False)

    def text(value: Any) -> str:
        return str(value).lower() if ignore_case else str(value)

    if literal_type == "str":
        return float(text(result) == text(expected))
    if literal_type == "list":
        if not isinstance(result, list | tuple) or not isinstance(expected, list | tuple):
            return 0.0
        return float([text(v) for v in result] == [text(v) for v in expected])
    raise MetricError(f"literal_match type {literal_type!r} is not supported")


def check_include_exclude(result: str | None, rules: dict[str, list[str]]) -> float:
    """1 when every ``include`` string is in the result and no ``exclude`` string is."""
    if result is None:
        return 0.0
    include, exclude = rules.get("include", []), rules.get("exclude", [])
    return float(all(s in result for s in include) and all(s not in result for s in exclude))


def check_direct_json_object(result: Any, rules: dict[str, Any]) -> float:
    """Compare a JSON object (a dict, or its text with single quotes allowed) with
    ``rules["expected"]``: key by key equality, or with ``expect_in_result`` a looser match
    (a listed alternative present, or the expected string contained in the value)."""
    if isinstance(result, str):
        try:
            result = json.loads(result.strip().replace("'", '"'))
        except json.JSONDecodeError:
            return 0.0
    if result is None:
        return 0.0
    expected: dict[str, Any] = rules.get("expected") or {}
    if any(value == "__EVALUATION_FAILED__" for value in expected.values()):
        return 0.0
    try:
        if rules.get("expect_in_result", False):
            return float(all(_in_result(result.get(key), value) for key, value in expected.items()))
        for key, value in expected.items():
            actual = result.get(key)
            # OSWorld looks for ignore_list_order among the expected keys, not in rules.
            if expected.get("ignore_list_order", False):
                if sorted(value) != sorted(actual):
                    return 0.0
            elif value != actual:
                return 0.0
        return 1.0
    except (AttributeError, TypeError):
        return 0.0


def _in_result(actual: Any, expected: Any) -> bool:
    if isinstance(expected, list):
        return any(
            (isinstance(actual, list) and option in actual)
            or (isinstance(actual, str) and option == actual)
            for option in expected
        )
    if isinstance(expected, str):
        return expected in actual
    return False


def check_list(result: str | None, rules: dict[str, list[str]]) -> float:
    """1 when each ``expect`` regex matches some line of the file and no ``unexpect`` regex
    matches any line."""
    if result is None:
        return 0.0
    expect = [re.compile(pattern) for pattern in rules.get("expect", [])]
    unexpect = [re.compile(pattern) for pattern in rules.get("unexpect", [])]
    found = [False] * len(expect)
    with open(result) as f:
        for line in f:
            found = [
                hit or p.search(line) is not None for hit, p in zip(found, expect, strict=True)
            ]
            if any(p.search(line) for p in unexpect):
                return 0.0
    return float(all(found))


def check_json(result: str | None, rules: dict[str, Any], is_yaml: bool = False) -> float:
    """Value rules on a JSON (or YAML) file: each ``expect`` rule's ``key`` path must exist and
    match, no ``unexpect`` rule may match (a missing key counts as None)."""
    if result is None:
        return 0.0
    try:
        with open(result, encoding="utf-8") as f:
            if is_yaml:
                import yaml

                data = yaml.safe_load(f)
            else:
                data = json.load(f)
    except NOT_A_VERDICT:
        raise
    except Exception:  # an unreadable or unparsable result scores 0
        return 0.0
    if is_yaml and data is None:
        return 0.0
    try:
        for rule in rules.get("expect", []):
            value = data
            for key in rule["key"]:
                value = value[key]
            if not match_value_to_rule(value, rule):
                return 0.0
        for rule in rules.get("unexpect", []):
            if match_value_to_rule(_lookup(data, rule["key"]), rule):
                return 0.0
    except (KeyError, IndexError, TypeError, ValueError):
        return 0.0
    return 1.0


def _lookup(data: Any, keys: list[Any]) -> Any:
    value = data
    for key in keys:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def check_json_settings(actual: str | None, expected: dict[str, Any], **options: Any) -> float:
    """1 when the JSON file holds every key of ``expected["expected"]`` with the same value."""
    if not actual:
        return 0.0
    try:
        with open(actual) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return 0.0
    return float(all(key in data and data[key] == v for key, v in expected["expected"].items()))


def compare_text_file(actual: str | None, expected: str, **options: Any) -> float:
    """1 when both files have the same text; ``ignore_blanks`` collapses whitespace,
    ``ignore_case`` lowercases."""
    if not actual:
        return 0.0
    with open(actual) as f:
        actual_text = f.read()
    with open(expected) as f:
        expected_text = f.read()
    if options.get("ignore_blanks", False):
        actual_text, expected_text = _collapse_blanks(actual_text), _collapse_blanks(expected_text)
    if options.get("ignore_case", False):
        actual_text, expected_text = actual_text.lower(), expected_text.lower()
    return float(actual_text == expected_text)


def _collapse_blanks(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[\t\n]", " ", text).strip())


def diff_text_file(result: str | None, expect: str) -> float:
    """How alike the two files' lines are, from 0 to 1 (difflib's ratio)."""
    if result is None:
        return 0.0
    with open(result) as f:
        result_lines = f.read().splitlines()
    with open(expect) as f:
        expected_lines = f.read().splitlines()
    return difflib.SequenceMatcher(a=result_lines, b=expected_lines).ratio()


def file_contains(file_path: str | None, config: dict[str, list[str]]) -> float:
    """1 when the file's text contains every string of ``config["expected"]``."""
    if not file_path:
        return 0.0
    try:
        with open(file_path) as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return 0.0
    return float(all(s in text for s in config["expected"]))
