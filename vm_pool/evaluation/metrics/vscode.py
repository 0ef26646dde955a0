"""VS Code's metrics, as OSWorld scores them: its key bindings and its extensions."""

import json
from typing import Any

from vm_pool.evaluation.bounds import check_size
from vm_pool.evaluation.metrics.errors import MetricError

EXTENSION_RULES = ("contain", "not_contain")


def _json_list(path: str, skip_first_line: bool) -> list[Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            if skip_first_line:
                f.readline()
            data = json.load(f)
    except (OSError, ValueError):  # not JSON (UnicodeDecodeError is a ValueError too)
        return None
    return data if isinstance(data, list) else None


def check_json_keybindings(actual: str | None, expected: dict[str, Any], **options: Any) -> float:
    """1 when keybindings.json (a JSON list, read whole or after its first line, where VS Code
    writes a ``//`` comment) holds ``expected["expected"]`` as one of its entries."""
    if actual is None:
        return 0.0
    check_size(actual)
    data = _json_list(actual, skip_first_line=False)
    if data is None:
        data = _json_list(actual, skip_first_line=True)
    if data is None:
        return 0.0
    return float(expected["expected"] in data)


def is_extension_installed(actual: str | None, rules: dict[str, Any], **options: Any) -> float:
    """With ``{"type": "contain"}``, 1 when the command's output (``code --list-extensions``)
    contains ``rules["expected"]``; with ``"not_contain"``, 1 when it does not."""
    if rules.get("type") not in EXTENSION_RULES:
        raise MetricError(f"is_extension_installed rule type {rules.get('type')!r} is unknown")
    if actual is None:
        return 0.0
    found = rules["expected"] in actual
    return float(found if rules["type"] == "contain" else not found)
