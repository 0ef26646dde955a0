"""OSWorld's value rules: ``{"method": ..., "ref": ...}`` tested against one value.

Shared by compare_table's ``check_cell``/``zoom`` rules and by check_json. Methods, as OSWorld
names them: ``re[.FLAG...]``, ``eq ne le lt ge gt``, ``approx:THRESHOLD``, ``spreadsheet_range``,
``range.XY`` (X, Y each ``e`` or ``t``: closed or open bound), ``str_list_eq``, ``str_set_eq``.
"""

import functools
import operator
import re
from typing import Any

from openpyxl.worksheet.cell_range import MultiCellRange

from vm_pool.evaluation.metrics.errors import MetricError

_COMPARISONS = {"eq", "ne", "le", "lt", "ge", "gt"}


def match_value_to_rule(value: Any, rule: dict[str, Any]) -> bool:
    method: str = rule["method"]
    ref: Any = rule.get("ref")
    if method.startswith("re"):
        flags = (getattr(re, name) for name in method.split(".")[1:])
        flag = functools.reduce(operator.or_, flags, re.RegexFlag(0))
        return re.search(ref, value, flag) is not None
    if method in _COMPARISONS:
        return bool(getattr(operator, method)(value, ref))
    if method.startswith("approx:"):
        threshold = float(method.split(":")[1])
        try:
            number = float(value)
        except (TypeError, ValueError):
            return False
        return abs(number - ref) <= threshold
    if method == "spreadsheet_range":
        subset_limit, superset_limit = MultiCellRange(ref[0]), MultiCellRange(ref[1])
        return all(r in value for r in subset_limit) and all(r in superset_limit for r in value)
    if method.startswith("range.") and len(method) == 8:
        low_op = getattr(operator, "l" + method[6])
        high_op = getattr(operator, "l" + method[7])
        return bool(low_op(ref[0], value) and high_op(value, ref[1]))
    if method in {"str_list_eq", "str_set_eq"}:
        container = list if method == "str_list_eq" else set
        return container(value.strip("\"'").split(",")) == container(ref)
    raise MetricError(f"unknown value-rule method {method!r}")
