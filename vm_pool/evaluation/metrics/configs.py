"""Metrics over an application's configuration file as text: a setting in GIMP's gimprc or
sessionrc (``check_config_status``), and a VS Code file against an expected text or JSON object
(``compare_config``, from OSWorld's vscode metrics)."""

import json
from pathlib import Path
from typing import Any

from vm_pool.evaluation.bounds import NOT_A_VERDICT, check_size
from vm_pool.evaluation.metrics.errors import MetricError


def _text(path: str) -> str:
    check_size(path)
    with Path(path).open(encoding="utf-8") as file:
        return file.read()


def _lines(path: str) -> list[str]:
    check_size(path)
    with Path(path).open(encoding="utf-8") as file:
        return file.readlines()


def check_config_status(result: str | None, rule: dict[str, Any]) -> float:
    """1 when a setting line of the GIMP file has ``rule["key"]`` and ends in ``rule["value"]``.

    A setting line is ``(name … value)``; lines starting with ``#`` and empty lines are skipped.
    The key is the first word, or a list of the first two words. The value is compared with the
    last word as written, quotes included (``"\\"Light\\""``).
    """
    if "key" not in rule or "value" not in rule:
        raise MetricError("check_config_status needs rule key and value")
    if result is None:
        return 0.0
    key, value = rule["key"], rule["value"]
    for line in _lines(result):
        if line.startswith("#") or line == "\n":
            continue
        words = line.strip().lstrip("(").rstrip(")\n").split()
        # Deliberate difference from OSWorld: it raises IndexError on a line of blanks or of
        # closing parentheses alone; such a line holds no setting and is skipped.
        if not words:
            continue
        named = words[0] == key if isinstance(key, str) else _two_words(key) and words[:2] == key
        if named and words[-1] == value:
            return 1.0
    return 0.0


def _two_words(key: Any) -> bool:
    return isinstance(key, list) and len(key) == 2


def compare_config(result: str | None, rules: dict[str, Any], containment_ok: bool = True) -> float:
    """1 when the file matches ``rules["expected"]`` (text); 0 when there is no expected text.

    With ``containment_ok`` (the default): when both parse as JSON, every key of the expected
    object must be in the file with an equal value (objects compared the same way, recursively;
    lists and other values equal); when either does not parse, the expected text (stripped) must
    occur in the file. Without it: the texts are equal, or both parse as equal JSON.
    """
    if result is None:
        return 0.0
    expected_text = rules.get("expected")
    if not expected_text:
        return 0.0
    if not isinstance(expected_text, str):
        raise MetricError("compare_config needs rules expected as text")
    actual_text = _text(result)
    if containment_ok:
        try:
            return float(_is_subset(json.loads(expected_text), json.loads(actual_text)))
        except NOT_A_VERDICT:
            raise
        except ValueError:
            return float(expected_text.strip() in actual_text)
    if actual_text == expected_text:
        return 1.0
    try:
        return float(json.loads(actual_text) == json.loads(expected_text))
    except NOT_A_VERDICT:
        raise
    except ValueError:
        return 0.0


def _is_subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and _is_subset(value, actual[key]) for key, value in expected.items()
        )
    return bool(expected == actual)
