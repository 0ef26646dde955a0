"""Spreadsheet metrics: compare_table (OSWorld's rule list over two .xlsx books) and compare_csv.

compare_table runs ``options["rules"]`` in order and scores 1 only if every rule holds. Rule
types implemented, with OSWorld's parameters: sheet_name, sheet_data (``precision``, default 4),
sheet_print (``ignore_case``; reads the ``<book>-<sheet>.csv`` files the task's postconfig
exported), sheet_fuzzy, style (``props``; conditional formatting applied as OSWorld applies it,
see ``conditional_formats``), freeze, zoom, data_validation, row_props, col_props, check_cell,
chart (``chart_props``) and pivot_table (``pivot_props``, see ``table_parts``). OSWorld's filter
and sparkline rules, which no published task uses, raise MetricError before anything is scored,
so a task that needs one is never passed by mistake.

Like OSWorld, the result must be an .xlsx book: a missing or unreadable one scores 0.
"""

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import openpyxl
import pandas as pd
from openpyxl import Workbook
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.cell_range import MultiCellRange
from openpyxl.worksheet.worksheet import Worksheet
from rapidfuzz import fuzz

from vm_pool.evaluation.bounds import NOT_A_VERDICT, check_sheets
from vm_pool.evaluation.metrics.conditional_formats import sheet_styles
from vm_pool.evaluation.metrics.errors import MetricError
from vm_pool.evaluation.metrics.rules import match_value_to_rule
from vm_pool.evaluation.metrics.table_parts import load_charts, load_pivot_tables
from vm_pool.evaluation.metrics.workbook import (
    printed_sheet,
    read_cell_style,
    read_cell_value,
    read_lines,
    resolve_sheet,
)


def compare_csv(result: str | None, expected: str | list[str], **options: Any) -> float:
    """1 when the result's lines equal those of the expected file (or of any of several).

    ``strict`` (default True) compares lines as they are; False strips each line first.
    ``ignore_case`` (default False) lowercases both.
    """
    if result is None:
        return 0.0
    try:
        result_lines = _csv_lines(result, **options)
    except OSError:
        return 0.0
    for expected_path in [expected] if isinstance(expected, str) else expected:
        try:
            if result_lines == _csv_lines(expected_path, **options):
                return 1.0
        except OSError:
            continue
    return 0.0


def _csv_lines(path: str, strict: bool = True, ignore_case: bool = False, **_: Any) -> list[str]:
    lines = read_lines(path)
    if not strict:
        lines = [line.strip() for line in lines]
    if ignore_case:
        lines = [line.lower() for line in lines]
    return lines


@dataclass
class _Books:
    """The result and expected workbooks, each as a path, an openpyxl book and a pandas book."""

    result_path: str
    result_xl: Workbook
    result_pd: pd.ExcelFile
    expected_path: str | None = None
    expected_xl: Workbook | None = None
    expected_pd: pd.ExcelFile | None = None

    def _resolve(self, sheet_idx: int | str, result: Any, expected: Any) -> tuple[Any, str]:
        expected_names = self.expected_pd.sheet_names if self.expected_pd is not None else None
        return resolve_sheet(
            sheet_idx, result, expected, list(self.result_pd.sheet_names), expected_names
        )

    def path(self, sheet_idx: int | str) -> tuple[str, str]:
        return self._resolve(sheet_idx, self.result_path, self.expected_path)

    def worksheet(self, sheet_idx: int | str) -> Worksheet | None:
        book, name = self._resolve(sheet_idx, self.result_xl, self.expected_xl)
        return book[name] if name in book.sheetnames else None

    def frame(self, sheet_idx: int | str) -> pd.DataFrame | None:
        book, name = self._resolve(sheet_idx, self.result_pd, self.expected_pd)
        if name not in book.sheet_names:
            return None
        return pd.read_excel(book, name)


def compare_table(result: str | None, expected: str | None = None, **options: Any) -> float:
    """1 when every rule in ``options["rules"]`` holds for the result book (and the expected)."""
    rules: list[dict[str, Any]] = options.get("rules") or []
    if not rules:
        raise MetricError("compare_table needs a non-empty 'rules' option")
    for rule in rules:
        if rule.get("type") not in _RULE_CHECKS:
            raise MetricError(f"compare_table rule type {rule.get('type')!r} is not supported")
    if result is None or not os.path.exists(result):
        return 0.0
    try:
        check_sheets(result)
        books = _Books(result, openpyxl.load_workbook(result), pd.ExcelFile(result))
    except NOT_A_VERDICT:
        raise
    except Exception:  # any unreadable result is the agent's failure
        return 0.0
    if expected is not None:
        try:
            check_sheets(expected)
            books.expected_path = expected
            books.expected_xl = openpyxl.load_workbook(expected)
            books.expected_pd = pd.ExcelFile(expected)
        except NOT_A_VERDICT:
            raise
        except Exception as error:
            raise MetricError(f"expected workbook {expected!r} is unreadable: {error}") from error
    for rule in rules:
        if not _RULE_CHECKS[rule["type"]](books, rule):
            return 0.0
    return 1.0


def _sheet_name(books: _Books, rule: dict[str, Any]) -> bool:
    expected_names = books.expected_pd.sheet_names if books.expected_pd is not None else None
    return books.result_pd.sheet_names == expected_names


def _sheet_data(books: _Books, rule: dict[str, Any]) -> bool:
    precision = rule.get("precision", 4)
    first = books.frame(rule["sheet_idx0"])
    second = books.frame(rule["sheet_idx1"])
    if first is None or second is None:
        return False
    return bool(first.round(precision).equals(second.round(precision)))


def _sheet_print(books: _Books, rule: dict[str, Any]) -> bool:
    first = printed_sheet(*books.path(rule["sheet_idx0"]))
    second = printed_sheet(*books.path(rule["sheet_idx1"]))
    if first is None or second is None:
        return False
    if rule.get("ignore_case", False):
        first = [line.lower() for line in first]
        second = [line.lower() for line in second]
    return first == second


def _sheet_fuzzy(books: _Books, rule: dict[str, Any]) -> bool:
    first = books.path(rule["sheet_idx0"])
    second = books.path(rule["sheet_idx1"])
    for cell_rule in rule["rules"]:
        for cell_range in MultiCellRange(cell_rule["range"]):
            for row, column in cell_range.cells:
                coordinate = f"{get_column_letter(column)}{row}"
                value1 = str(read_cell_value(*first, coordinate))
                value2 = str(read_cell_value(*second, coordinate))
                if not _fuzzy_cell_match(value1, value2, cell_rule):
                    return False
    return True


def _fuzzy_cell_match(value1: str, value2: str, rule: dict[str, Any]) -> bool:
    for old, new in rule.get("normalization", []):
        value1, value2 = value1.replace(old, new), value2.replace(old, new)
    if "trim_leadings" in rule:
        value1, value2 = value1.lstrip(rule["trim_leadings"]), value2.lstrip(rule["trim_leadings"])
    if "trim_trailings" in rule:
        trailing = rule["trim_trailings"]
        value1, value2 = value1.rstrip(trailing), value2.rstrip(trailing)
    if "ignore_chars" in rule:
        ignored = set(rule["ignore_chars"])
        value1 = "".join(ch for ch in value1 if ch not in ignored)
        value2 = "".join(ch for ch in value2 if ch not in ignored)
    if rule.get("ignore_case", False):
        value1, value2 = value1.lower(), value2.lower()
    match_type = rule["type"]
    if match_type == "includes":
        return value2 in value1
    if match_type == "included_by":
        return value1 in value2
    if match_type == "fuzzy_match":
        return fuzz.ratio(value1, value2) >= rule.get("threshold", 85.0)
    if match_type == "exact_match":
        return value1 == value2
    raise MetricError(f"sheet_fuzzy match type {match_type!r} is not supported")


def _style(books: _Books, rule: dict[str, Any]) -> bool:
    props: list[str] = rule.get("props", [])
    styles = []
    for key in ("sheet_idx0", "sheet_idx1"):
        path, name = books.path(rule[key])
        styles.append(sheet_styles(books.worksheet(rule[key]), path, name, props))
    return styles[0] == styles[1]


def _chart(books: _Books, rule: dict[str, Any]) -> bool:
    props: list[str] = rule.get("chart_props", [])
    first = load_charts(books.worksheet(rule["sheet_idx0"]), props)
    return first == load_charts(books.worksheet(rule["sheet_idx1"]), props)


def _pivot_table(books: _Books, rule: dict[str, Any]) -> bool:
    props: list[str] = rule.get("pivot_props", [])
    first = load_pivot_tables(books.worksheet(rule["sheet_idx0"]), props)
    return first == load_pivot_tables(books.worksheet(rule["sheet_idx1"]), props)


def _freeze(books: _Books, rule: dict[str, Any]) -> bool:
    first = books.worksheet(rule["sheet_idx0"])
    second = books.worksheet(rule["sheet_idx1"])
    if first is None or second is None:
        return False
    return bool(first.freeze_panes == second.freeze_panes)


def _zoom(books: _Books, rule: dict[str, Any]) -> bool:
    sheet = books.worksheet(rule["sheet_idx"])
    if sheet is None:
        return False
    return match_value_to_rule(sheet.sheet_view.zoomScale or 100.0, rule)


def _data_validation(books: _Books, rule: dict[str, Any]) -> bool:
    """Every validation in the sheet matches one of ``dv_props``, and there are enough of them."""
    sheet = books.worksheet(rule["sheet_idx"])
    if sheet is None:
        return False
    validations = sheet.data_validations.dataValidation
    if len(validations) < len(rule["dv_props"]):
        return False
    return all(
        any(
            all(match_value_to_rule(getattr(validation, attr), mr) for attr, mr in props.items())
            for props in rule["dv_props"]
        )
        for validation in validations
    )


def _dimensions(books: _Books, sheet_idx: int | str, kind: str, props: list[str]) -> dict:
    sheet = books.worksheet(sheet_idx)
    if sheet is None:
        return {}
    holder = sheet.row_dimensions if kind == "row" else sheet.column_dimensions
    return {key: {prop: getattr(dim, prop) for prop in props} for key, dim in holder.items()}


def _row_props(books: _Books, rule: dict[str, Any]) -> bool:
    props = rule.get("props", [])
    return _dimensions(books, rule["sheet_idx0"], "row", props) == _dimensions(
        books, rule["sheet_idx1"], "row", props
    )


def _col_props(books: _Books, rule: dict[str, Any]) -> bool:
    props = rule.get("props", [])
    return _dimensions(books, rule["sheet_idx0"], "column", props) == _dimensions(
        books, rule["sheet_idx1"], "column", props
    )


def _check_cell(books: _Books, rule: dict[str, Any]) -> bool:
    """Each property of one cell (``value`` or a style) satisfies its value rule."""
    sheet = books.worksheet(rule["sheet_idx"])
    if sheet is None:
        return False
    coordinate: str = rule["coordinate"]
    cell = sheet[coordinate]
    for prop, value_rule in rule["props"].items():
        if prop == "value":
            value = read_cell_value(*books.path(rule["sheet_idx"]), coordinate)
        else:
            value = read_cell_style(prop, cell)
        try:
            if not match_value_to_rule(value, value_rule):
                return False
        except (TypeError, ValueError):
            return False
    return True


_RULE_CHECKS: dict[str, Callable[[_Books, dict[str, Any]], bool]] = {
    "sheet_name": _sheet_name,
    "sheet_data": _sheet_data,
    "sheet_print": _sheet_print,
    "sheet_fuzzy": _sheet_fuzzy,
    "style": _style,
    "freeze": _freeze,
    "zoom": _zoom,
    "data_validation": _data_validation,
    "row_props": _row_props,
    "col_props": _col_props,
    "check_cell": _check_cell,
    "chart": _chart,
    "pivot_table": _pivot_table,
}
# What ``compare_table`` checks; a task's other rule types (filters, sparklines) make its
# evaluator fail, and the coverage report counts them as gaps.
TABLE_RULE_TYPES = frozenset(_RULE_CHECKS)
