"""compare_table's ``style`` rule on the two published tasks that use it: weekends of a calendar
with a red background (``bgcolor``), and the highest period rate in green font
(``font_color``). OSWorld computes conditional formats' formulas with the ``formulas`` package.

A result is what a LibreOffice episode saves: the cells formatted directly, or a conditional
format with a formula (``expression``), a cell-value condition (``cellIs``) or a top-N rule,
in the syntax LibreOffice writes to .xlsx (Excel's names and commas; a dxf whose fill has the
colour as both foreground and background). Some formulas are right, some select the wrong
cells; some colours are wrong.
"""

import datetime
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openpyxl
from openpyxl.formatting.rule import CellIsRule, FormulaRule, Rule
from openpyxl.styles import Font, PatternFill
from openpyxl.styles.differential import DifferentialStyle

from tests.support.osworld_differential.core import Case

RED, GREEN = "FFFF0000", "FF00FF00"

# (formula on the range's first cell, whether it selects exactly Saturdays and Sundays)
_WEEKEND_FORMULAS = [
    ("WEEKDAY(A2,2)>5", True),
    ("OR(WEEKDAY(A2)=1,WEEKDAY(A2)=7)", True),
    ("WEEKDAY(A2,2)>=6", True),
    ("MOD(A2,7)<2", True),
    ('AND(A2<>"",WEEKDAY(A2,2)>5)', True),
    ("OR(WEEKDAY(A2,2)=6,WEEKDAY(A2,2)=7)", True),
    ("WEEKDAY(A2,2)>6", False),
    ("WEEKDAY(A2)>5", False),
    ("WEEKDAY(A2,1)=7", False),
    ("WEEKDAY($A$2,2)>5", False),
    ('OR(TEXT(A2,"ddd")="Sat",TEXT(A2,"ddd")="Sun")', True),
    ('LEFT(TEXT(A2,"dddd"),1)="S"', True),
    ('TEXT(A2,"dddd")="Sunday"', False),
]
_TOP_FORMULAS = [
    ("B2=MAX($B$2:$B${last})", True),
    ("B2>=LARGE($B$2:$B${last},1)", True),
    ("B2=MAX(B$2:B${last})", True),
    ("B2>=MAX($B$2:$B${last})", True),
    ("B2=MIN($B$2:$B${last})", False),
    ("B2>AVERAGE($B$2:$B${last})", False),
    ("AND(ISNUMBER(B2),B2=MAX($B$2:$B${last}))", True),
]
_STYLE_RULES = {
    "bgcolor": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"},
                {"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["bgcolor"]}],
    "font_color": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"},
                   {"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0",
                    "props": ["font_color"]}],
}  # fmt: skip


def _fill(colour: str) -> PatternFill:
    """A dxf fill as LibreOffice writes it: the colour as foreground and background."""
    return PatternFill(fill_type="solid", fgColor=colour, bgColor=colour)


def _calendar(rng: random.Random) -> list[list[Any]]:
    start = datetime.date(2023, rng.randint(1, 12), rng.randint(1, 28))
    rows: list[list[Any]] = [["Date", "Plan"]]
    for day in range(rng.randint(8, 16)):
        rows.append([start + datetime.timedelta(days=day), rng.choice(["gym", "work", None])])
    return rows


def _book(path: Path, rows: list[list[Any]]) -> tuple[openpyxl.Workbook, Any]:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Sheet1"
    for row in rows:
        sheet.append(row)
    for row in sheet.iter_rows(min_row=2, max_col=1):
        row[0].number_format = "yyyy-mm-dd"
    return book, sheet


def _weekend_case(rng: random.Random, folder: Path, index: int) -> Case:
    rows = _calendar(rng)
    last = len(rows)
    weekend = [r for r in range(2, last + 1) if rows[r - 1][0].weekday() >= 5]
    gold_book, gold = _book(folder / f"style-gold{index}.xlsx", rows)
    for row in weekend:
        gold.cell(row, 1).fill = PatternFill(fill_type="solid", fgColor=RED)
    gold_book.save(folder / f"style-gold{index}.xlsx")
    book, sheet = _book(folder / f"style-result{index}.xlsx", rows)
    colour = rng.choice([RED, RED, RED, "FFFF3333"])
    way = rng.choice(["expression", "expression", "expression", "direct", "cell value"])
    label = way
    if way == "expression":
        formula, right = rng.choice(_WEEKEND_FORMULAS)
        area = rng.choice([f"A2:A{last}", f"A2:A{last}", f"A1:A{last}"])
        sheet.conditional_formatting.add(area, FormulaRule(formula=[formula], fill=_fill(colour)))
        label = f"{formula} on {area} ({'right' if right else 'wrong'})"
    elif way == "direct":
        chosen = list(weekend) if rng.random() < 0.7 else weekend[:-1]
        for row in chosen:
            sheet.cell(row, 1).fill = PatternFill(fill_type="solid", fgColor=colour)
        label = f"direct fill on {len(chosen)} of {len(weekend)} weekend days"
    else:
        serial = (rows[1][0] - datetime.date(1899, 12, 30)).days
        rule = CellIsRule(operator="greaterThan", formula=[str(serial + 3)], fill=_fill(colour))
        sheet.conditional_formatting.add(f"A2:A{last}", rule)
        label = f"cell value > {serial + 3}"
    book.save(folder / f"style-result{index}.xlsx")
    args = (str(folder / f"style-result{index}.xlsx"), str(folder / f"style-gold{index}.xlsx"))
    return Case(f"weekends: {label}, {colour}", args, {"rules": _STYLE_RULES["bgcolor"]})


def _top_case(rng: random.Random, folder: Path, index: int) -> Case:
    rows: list[list[Any]] = [["Year", "Period Rate (%)"]]
    for year in range(rng.randint(5, 12)):
        rows.append([2010 + year, round(rng.uniform(0.5, 9.5), rng.choice([2, 4]))])
    last = len(rows)
    best = max(range(2, last + 1), key=lambda r: rows[r - 1][1])
    gold_book, gold = _book(folder / f"style-gold{index}.xlsx", rows)
    gold.cell(best, 2).font = Font(color=GREEN)
    gold_book.save(folder / f"style-gold{index}.xlsx")
    book, sheet = _book(folder / f"style-result{index}.xlsx", rows)
    colour = rng.choice([GREEN, GREEN, GREEN, "FF00AA00"])
    way = rng.choice(["expression", "expression", "direct", "cell value", "top 1"])
    area = f"B2:B{last}"
    label = way
    if way == "expression":
        template, right = rng.choice(_TOP_FORMULAS)
        formula = template.format(last=last)
        sheet.conditional_formatting.add(
            area, FormulaRule(formula=[formula], font=Font(color=colour))
        )
        label = f"{formula} ({'right' if right else 'wrong'})"
    elif way == "direct":
        row = best if rng.random() < 0.7 else 2
        sheet.cell(row, 2).font = Font(color=colour)
        label = f"direct colour on row {row}, best {best}"
    elif way == "cell value":
        rule = CellIsRule(
            operator="equal", formula=[f"MAX($B$2:$B${last})"], font=Font(color=colour)
        )
        sheet.conditional_formatting.add(area, rule)
    else:
        if rng.random() < 0.5:
            # OSWorld tests a top-N rule with the test of the rule before it
            formula = f"B2=MIN($B$2:$B${last})"
            sheet.conditional_formatting.add(
                area, FormulaRule(formula=[formula], font=Font(color="FFFF0000"))
            )
            label += " after a formula rule"
        dxf = DifferentialStyle(font=Font(color=colour))
        sheet.conditional_formatting.add(area, Rule(type="top10", rank=1, dxf=dxf))
    book.save(folder / f"style-result{index}.xlsx")
    args = (str(folder / f"style-result{index}.xlsx"), str(folder / f"style-gold{index}.xlsx"))
    return Case(f"highest rate: {label}, {colour}", args, {"rules": _STYLE_RULES["font_color"]})


def style_cases(rng: random.Random, folder: Path) -> Iterator[Case]:
    """compare_table cases with the published style rules."""
    for index in range(32):
        maker = _weekend_case if index % 2 == 0 else _top_case
        yield maker(rng, folder, index)
