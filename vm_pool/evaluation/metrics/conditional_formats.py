"""A sheet's cell styles with its conditional formatting applied, as OSWorld's
``load_xlsx_styles`` computes them for compare_table's ``style`` rule.

For every conditional-formatting rule, in the order the sheet lists them, OSWorld:

1. reads each of the rule's formulas, and binds the values of the absolute references it names
   (``$A$1``, ``$E$2:$E$20``, found by pattern in the formula's text) as arguments;
2. for the formula types (``expression``, ``containsText``, ``beginsWith``, ...) tests a cell by
   computing the first formula with the cell's own value as its first input (inputs sorted by
   name, as the ``formulas`` package orders them) and the arguments as the others; the number of
   values must match the number of inputs, else no cell passes. An error result passes;
3. for ``cellIs`` computes each formula as a constant (a formula that reads a cell skips the
   rule) and compares the cell's value with Python's operators (case matters, text and numbers
   never compare);
4. for any other type (top10, aboveAverage, duplicateValues, color scales, ...) tests the cells
   with whatever test the previous rule of the sheet left behind (OSWorld's loop reuses it), or
   passes none when no rule came before;
5. tests the cells of the rule's ranges that hold a value (the 51st empty cell ends a range, the
   count running on over the rule's ranges) and gives each passing cell the rule's style.

Cell values are the stored ones (a formula's cached result); see ``workbook.read_cell_value``.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openpyxl.utils import get_column_letter
from openpyxl.worksheet.cell_range import CellRange
from openpyxl.worksheet.worksheet import Worksheet

from vm_pool.evaluation.bounds import MAX_SHEET_CELLS, LimitHit
from vm_pool.evaluation.metrics.formula import Formula, Value, parse, truthy
from vm_pool.evaluation.metrics.workbook import read_cell_style, read_sheet_values

FORMULA_TYPES = {
    "expression",
    "containsText",
    "notContainsText",
    "endsWith",
    "beginsWith",
    "containsErrors",
    "notContainsErrors",
}
EMPTY_CELLS_PER_RULE = 50

# OSWorld's pattern for the absolute references whose values become a formula's arguments.
_ABSOLUTE_RANGE = re.compile(r"\$([A-Z]{1,3})\$(\d+)(?::\$([A-Z]{1,3})\$(\d+))?")


def sheet_styles(
    sheet: Worksheet | None, path: str, sheet_name: str, props: list[str]
) -> dict[str, list[Any]]:
    """Each cell's ``props`` (see ``workbook.read_cell_style``), conditional formats applied."""
    if sheet is None:
        return {}
    styles = {
        cell.coordinate: [read_cell_style(prop, cell) for prop in props]
        for column in sheet.iter_cols()
        for cell in column
    }
    values = read_sheet_values(path, sheet_name)
    carried = _CarriedTest()
    for formatting in sheet.conditional_formatting:
        for cf_rule in formatting.rules:
            is_active = carried.after(cf_rule, values)
            if is_active is None:
                continue
            for row, column in _tested_cells(formatting.cells, values):
                value = values[f"{get_column_letter(column)}{row}"]
                if is_active(value):
                    cell = sheet.cell(row=row, column=column)
                    styles[cell.coordinate] = [
                        read_cell_style(prop, cell, cf_rule.dxf) for prop in props
                    ]
    return styles


def _tested_cells(ranges: Any, values: dict[str, Any]) -> list[tuple[int, int]]:
    """The cells of a rule's ranges that hold a value, up to OSWorld's count of empty ones."""
    tested = []
    empty = 0
    for cell_range in ranges:
        for row, column in cell_range.cells:
            if values.get(f"{get_column_letter(column)}{row}") is not None:
                tested.append((row, column))
                continue
            empty += 1
            if empty > EMPTY_CELLS_PER_RULE:
                break
    return tested


@dataclass
class _CarriedTest:
    """The names OSWorld's loop rebinds rule after rule, and the test they make up.

    A rule of a type OSWorld does not evaluate rebinds none of them, so it is tested with the
    test of the last rule that did, reading the names as they stand now.
    """

    kind: str | None = None  # "expression" or "cellIs": which test the loop last built
    condition: Formula | None = None
    arguments: list[Value] = field(default_factory=list)
    operator: str | None = None
    references: list[Any] = field(default_factory=list)

    def after(self, cf_rule: Any, values: dict[str, Any]) -> Callable[[Any], bool] | None:
        """Rebind the names for this rule and return its test; None skips the rule."""
        formulas = []
        for text in cf_rule.formula:
            formula = parse(text)
            self.arguments = _absolute_arguments(text, values)
            formulas.append((formula, self.arguments))
        if cf_rule.type in FORMULA_TYPES:
            if not formulas:
                # Deliberate difference from OSWorld: it crashes on a formula rule without a
                # formula; such a rule formats no cell.
                return None
            self.kind = "expression"
            self.condition, self.arguments = formulas[0]
        elif cf_rule.type == "cellIs":
            self.operator = cf_rule.operator
            if any(formula.inputs for formula, _ in formulas):
                return None  # OSWorld computes the operands without inputs: this one fails
            self.references = [_constant(formula) for formula, _ in formulas]
            self.kind = "cellIs"
        return self.test()

    def test(self) -> Callable[[Any], bool] | None:
        if self.kind == "cellIs":
            operator, references = self.operator, self.references
            return lambda value: _cell_is(operator, value, references)
        if self.kind == "expression" and self.condition is not None:
            return _expression_test(self.condition, self.arguments)
        return None


def _absolute_arguments(text: str, values: dict[str, Any]) -> list[Value]:
    """The values of the absolute references in a formula's text, in the order they appear:
    a range's as a list (row by row), a single cell's as its value."""
    arguments: list[Value] = []
    for first_column, first_row, last_column, last_row in _ABSOLUTE_RANGE.findall(text):
        if not last_column:
            # Deliberate difference from OSWorld: its range reading crashes on a single
            # absolute cell ($A$1); that cell's value is the argument here.
            arguments.append(values.get(f"{first_column}{first_row}"))
            continue
        cell_range = CellRange(f"{first_column}{first_row}:{last_column}{last_row}")
        if cell_range.size["rows"] * cell_range.size["columns"] > MAX_SHEET_CELLS:
            raise LimitHit("spreadsheet cells", f"a formula reads the range {cell_range.coord}")
        arguments.append(
            [values.get(f"{get_column_letter(column)}{row}") for row, column in cell_range.cells]
        )
    return arguments


def _constant(formula: Formula) -> Any:
    return formula.evaluator("", {})(None)


def _expression_test(condition: Formula, arguments: list[Value]) -> Callable[[Any], bool]:
    if len(condition.inputs) != 1 + len(arguments):
        return lambda value: False  # OSWorld's call fails on the count of values: no cell passes
    fixed = dict(zip(condition.inputs[1:], arguments, strict=True))
    compute = condition.evaluator(condition.inputs[0], fixed)
    return lambda value: truthy(compute(value))


def _cell_is(operator: str | None, value: Any, references: list[Any]) -> bool:
    """OSWorld's ``_process_xlsx_cf_operator``: Python's comparisons, False where they fail."""
    try:
        return bool(_CELL_IS[operator or ""](value, references))
    except (TypeError, IndexError, ValueError, KeyError):
        return False


_CELL_IS: dict[str, Callable[[Any, list[Any]], Any]] = {
    "lessThanOrEqual": lambda v, r: v <= r[0],
    "lessThan": lambda v, r: v < r[0],
    "equal": lambda v, r: v == r[0],
    "greaterThanOrEqual": lambda v, r: v >= r[0],
    "notEqual": lambda v, r: v != r[0],
    "greaterThan": lambda v, r: v > r[0],
    "between": lambda v, r: min(r) <= v <= max(r),
    "notBetween": lambda v, r: v < min(r) or v > max(r),
}
