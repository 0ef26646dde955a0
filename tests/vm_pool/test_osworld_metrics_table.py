"""OSWorld's spreadsheet metrics (compare_table, compare_csv) on workbooks built in the test."""

from pathlib import Path

import pytest
from openpyxl import Workbook
from openpyxl.styles import Font

from vm_pool.evaluation.metrics import METRICS, MetricError
from vm_pool.evaluation.metrics.table import compare_csv, compare_table

AGAINST_GOLD = {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}


def _book(path: Path, rows: list[list], title: str = "Sheet1", **sheet_attrs) -> str:
    book = Workbook()
    sheet = book.active
    sheet.title = title
    for row in rows:
        sheet.append(row)
    for name, value in sheet_attrs.items():
        setattr(sheet, name, value)
    book.save(path)
    return str(path)


@pytest.fixture
def gold(tmp_path: Path) -> str:
    return _book(tmp_path / "gold.xlsx", [["Name", "Score"], ["Ann", 1.5], ["Bob", 2.25]])


def test_same_sheet_data_scores_1(tmp_path: Path, gold: str) -> None:
    result = _book(tmp_path / "result.xlsx", [["Name", "Score"], ["Ann", 1.5], ["Bob", 2.25]])
    assert compare_table(result, gold, rules=[AGAINST_GOLD]) == 1.0


def test_changed_cell_scores_0(tmp_path: Path, gold: str) -> None:
    result = _book(tmp_path / "result.xlsx", [["Name", "Score"], ["Ann", 1.5], ["Bob", 9]])
    assert compare_table(result, gold, rules=[AGAINST_GOLD]) == 0.0


def test_sheet_data_rounds_to_the_rules_precision(tmp_path: Path, gold: str) -> None:
    result = _book(tmp_path / "result.xlsx", [["Name", "Score"], ["Ann", 1.50001], ["Bob", 2.25]])
    assert compare_table(result, gold, rules=[AGAINST_GOLD]) == 1.0
    strict = {**AGAINST_GOLD, "precision": 6}
    assert compare_table(result, gold, rules=[strict]) == 0.0


def test_missing_or_unreadable_result_scores_0(tmp_path: Path, gold: str) -> None:
    assert compare_table(None, gold, rules=[AGAINST_GOLD]) == 0.0
    assert compare_table(str(tmp_path / "absent.xlsx"), gold, rules=[AGAINST_GOLD]) == 0.0
    not_a_book = tmp_path / "result.xlsx"
    not_a_book.write_text("plain text")
    assert compare_table(str(not_a_book), gold, rules=[AGAINST_GOLD]) == 0.0


def test_sheet_name_compares_the_sheet_lists(tmp_path: Path, gold: str) -> None:
    same = _book(tmp_path / "same.xlsx", [["x"]])
    renamed = _book(tmp_path / "renamed.xlsx", [["x"]], title="Data")
    assert compare_table(same, gold, rules=[{"type": "sheet_name"}]) == 1.0
    assert compare_table(renamed, gold, rules=[{"type": "sheet_name"}]) == 0.0


def test_check_cell_reads_the_stored_value(tmp_path: Path) -> None:
    result = _book(tmp_path / "result.xlsx", [["Total", 42], ["Label", "done"]])

    def check(coordinate: str, rule: dict) -> float:
        cell_rule = {"type": "check_cell", "sheet_idx": 0, "coordinate": coordinate}
        return compare_table(result, rules=[{**cell_rule, "props": {"value": rule}}])

    assert check("B1", {"method": "eq", "ref": 42}) == 1.0
    assert check("B1", {"method": "approx:0.1", "ref": 42.05}) == 1.0
    assert check("B1", {"method": "eq", "ref": 41}) == 0.0
    assert check("B2", {"method": "eq", "ref": "done"}) == 1.0
    assert check("B2", {"method": "re.I", "ref": "^DON"}) == 1.0
    assert check("C9", {"method": "eq", "ref": 1}) == 0.0


def test_check_cell_style_props(tmp_path: Path) -> None:
    book = Workbook()
    book.active["A1"] = "bold"
    book.active["A1"].font = Font(bold=True, color="FF00FF00")
    path = tmp_path / "result.xlsx"
    book.save(path)
    rule = {"type": "check_cell", "sheet_idx": "RNSheet", "coordinate": "A1"}
    bold = {"font_bold": {"method": "eq", "ref": True}}
    green = {"font_color": {"method": "eq", "ref": "FF00FF00"}}
    assert compare_table(str(path), rules=[{**rule, "props": {**bold, **green}}]) == 1.0
    red = {"font_color": {"method": "eq", "ref": "FFFF0000"}}
    assert compare_table(str(path), rules=[{**rule, "props": red}]) == 0.0


def test_style_rule_compares_cell_styles_with_the_gold(tmp_path: Path) -> None:
    def styled(name: str, color: str) -> str:
        book = Workbook()
        book.active["A1"] = 7
        book.active["A1"].font = Font(color=color)
        book.save(tmp_path / name)
        return str(tmp_path / name)

    gold = styled("gold.xlsx", "FF00FF00")
    rule = {"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["font_color"]}
    assert compare_table(styled("good.xlsx", "FF00FF00"), gold, rules=[rule]) == 1.0
    assert compare_table(styled("bad.xlsx", "FFFF0000"), gold, rules=[rule]) == 0.0


def test_sheet_fuzzy_normalises_then_matches(tmp_path: Path) -> None:
    gold = _book(tmp_path / "gold.xlsx", [["12 Main Road", "+1 (555) 010"]])
    close = _book(tmp_path / "close.xlsx", [["12 main rd", "1555010 ext"]])
    far = _book(tmp_path / "far.xlsx", [["Elm Street", "999"]])
    rule = {
        "type": "sheet_fuzzy",
        "sheet_idx0": "RNSheet1",
        "sheet_idx1": "ENSheet1",
        "rules": [
            {
                "range": ["A1:A1"],
                "type": "fuzzy_match",
                "normalization": [["Rd", "Road"], ["rd", "Road"]],
                "ignore_case": True,
            },
            {"range": ["B1"], "type": "includes", "trim_leadings": "+ ", "ignore_chars": " ()"},
        ],
    }
    assert compare_table(close, gold, rules=[rule]) == 1.0
    assert compare_table(far, gold, rules=[rule]) == 0.0


def test_sheet_print_compares_the_exported_csv(tmp_path: Path, gold: str) -> None:
    result = _book(tmp_path / "result.xlsx", [["a"]])
    (tmp_path / "gold-Sheet1.csv").write_text("Name,Score\nAnn,1.5\n\n")
    rule = {"type": "sheet_print", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    assert compare_table(result, gold, rules=[rule]) == 0.0  # result's CSV not exported
    (tmp_path / "result-Sheet1.csv").write_text("name,score\nann,1.5\n")
    assert compare_table(result, gold, rules=[rule]) == 0.0
    assert compare_table(result, gold, rules=[{**rule, "ignore_case": True}]) == 1.0


def test_freeze_and_zoom(tmp_path: Path) -> None:
    gold = _book(tmp_path / "gold.xlsx", [["h"]], freeze_panes="A2")
    frozen = _book(tmp_path / "frozen.xlsx", [["h"]], freeze_panes="A2")
    loose = _book(tmp_path / "loose.xlsx", [["h"]])
    freeze = {"type": "freeze", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    assert compare_table(frozen, gold, rules=[freeze]) == 1.0
    assert compare_table(loose, gold, rules=[freeze]) == 0.0

    zoom = {"type": "zoom", "sheet_idx": 0, "method": "ge", "ref": 150}
    assert compare_table(loose, rules=[zoom]) == 0.0  # no zoom set means 100
    book = Workbook()
    book.active.sheet_view.zoomScale = 200
    book.save(tmp_path / "zoomed.xlsx")
    assert compare_table(str(tmp_path / "zoomed.xlsx"), rules=[zoom]) == 1.0


def test_row_props_compare_row_heights(tmp_path: Path) -> None:
    def with_height(name: str, height: float) -> str:
        book = Workbook()
        book.active["A1"] = "x"
        book.active.row_dimensions[1].height = height
        book.save(tmp_path / name)
        return str(tmp_path / name)

    gold = with_height("gold.xlsx", 30)
    rule = {"type": "row_props", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["height"]}
    assert compare_table(with_height("good.xlsx", 30), gold, rules=[rule]) == 1.0
    assert compare_table(with_height("bad.xlsx", 12), gold, rules=[rule]) == 0.0


def test_every_rule_must_hold(tmp_path: Path, gold: str) -> None:
    result = _book(tmp_path / "result.xlsx", [["Name", "Score"], ["Ann", 1.5], ["Bob", 2.25]])
    cell = {"type": "check_cell", "sheet_idx": 0, "coordinate": "A2"}
    wrong = {**cell, "props": {"value": {"method": "eq", "ref": "Zoe"}}}
    assert compare_table(result, gold, rules=[AGAINST_GOLD, wrong]) == 0.0


def test_unknown_rule_type_is_an_error_not_a_pass(tmp_path: Path, gold: str) -> None:
    with pytest.raises(MetricError, match="sparkline"):
        compare_table(gold, gold, rules=[AGAINST_GOLD, {"type": "sparkline"}])
    with pytest.raises(MetricError, match="no_such_rule"):
        compare_table(None, gold, rules=[{"type": "no_such_rule"}])
    with pytest.raises(MetricError):
        compare_table(gold, gold, rules=[])


def test_unknown_value_method_is_an_error(tmp_path: Path, gold: str) -> None:
    rule = {"type": "check_cell", "sheet_idx": 0, "coordinate": "A1"}
    with pytest.raises(MetricError, match="fuzzy"):
        compare_table(gold, rules=[{**rule, "props": {"value": {"method": "fuzzy", "ref": 1}}}])


def test_compare_csv(tmp_path: Path) -> None:
    gold = tmp_path / "gold.csv"
    gold.write_text("a,b\n1,2\n")
    same = tmp_path / "same.csv"
    same.write_text("a,b\n1,2\n")
    padded = tmp_path / "padded.csv"
    padded.write_text("A,B \n1,2\n")
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,3\n")
    assert compare_csv(str(same), str(gold)) == 1.0
    assert compare_csv(str(other), str(gold)) == 0.0
    assert compare_csv(None, str(gold)) == 0.0
    assert compare_csv(str(padded), str(gold)) == 0.0
    assert compare_csv(str(padded), str(gold), strict=False, ignore_case=True) == 1.0
    assert compare_csv(str(other), [str(gold), str(other)]) == 1.0
    assert METRICS["compare_csv"] is compare_csv
