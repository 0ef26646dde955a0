"""Case makers for the office metrics: spreadsheets (compare_table, whose style rule's cases are
in styles.py, compare_csv), Word documents (compare_docx_files, compare_docx_tables,
compare_line_spacing) and presentations (compare_pptx_files). Each case is a gold file and a
result made from it by the kind of change an agent's episode leaves: none, a changed value or
word, a format change, a moved shape."""

import csv
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openpyxl
from docx import Document
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.enum.dml import MSO_THEME_COLOR
from pptx.enum.text import MSO_UNDERLINE, PP_ALIGN
from pptx.util import Inches, Pt

from tests.support.osworld_differential.core import Case, makes, words
from tests.support.osworld_differential.styles import style_cases

Rows = list[list[Any]]


def _rows(rng: random.Random, height: int, width: int) -> Rows:
    header = [f"{word} {index}" for index, word in enumerate(words(rng, width))]
    body = []
    for _ in range(height):
        choices = [rng.randint(0, 500), round(rng.uniform(0, 100), 3), words(rng, 1)[0], None]
        body.append([rng.choice(choices) for _ in range(width)])
    return [header, *body]


def _changed(rng: random.Random, rows: Rows) -> tuple[str, Rows]:
    """A copy of the rows with one change an agent might make, and its name."""
    copy = [list(row) for row in rows]
    change = rng.choice(["same", "same", "value", "tiny float", "text case", "extra row",
                         "number as text", "empty cell"])  # fmt: skip
    row, column = rng.randrange(1, len(copy)), rng.randrange(len(copy[0]))
    cell = copy[row][column]
    if change == "value":
        copy[row][column] = 999
    elif change == "tiny float":
        copy[row][column] = (cell if isinstance(cell, int | float) else 1.0) + 0.00001
    elif change == "text case":
        copy[0][column] = str(copy[0][column]).upper()
    elif change == "extra row":
        copy.append(["total", *[None] * (len(copy[0]) - 1)])
    elif change == "number as text":
        copy[row][column] = str(cell)
    elif change == "empty cell":
        copy[row][column] = None
    return change, copy


def _book(path: Path, sheets: dict[str, Rows], **sheet_settings: Any) -> str:
    """An .xlsx with the sheets in order, and beside it ``<book>-<sheet>.csv`` for each, as
    the tasks' postconfig exports them for sheet_print."""
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
        if sheet_settings.get("freeze"):
            sheet.freeze_panes = sheet_settings["freeze"]
        if sheet_settings.get("zoom"):
            sheet.sheet_view.zoomScale = sheet_settings["zoom"]
        for hidden in sheet_settings.get("hidden_rows", []):
            sheet.row_dimensions[hidden].hidden = True
        for coordinate in sheet_settings.get("merged", []):
            sheet.merge_cells(coordinate)
        with open(f"{path.with_suffix('')}-{name}.csv", "w", newline="") as f:
            csv.writer(f).writerows([["" if v is None else v for v in row] for row in rows])
    book.save(path)
    return str(path)


@makes("compare_table")
def _compare_table(rng: random.Random, folder: Path) -> Iterator[Case]:
    data_rules: list[list[dict[str, Any]]] = [
        [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}],
        [{"type": "sheet_data", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}],
        [{"type": "sheet_data", "sheet_idx0": "RI0", "sheet_idx1": "EI0"}],
        [{"type": "sheet_data", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2"}],
        [{"type": "sheet_data", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1",
          "ignore_case": True}],
        [{"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}],
        [{"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1",
          "ignore_case": True}],
        [{"type": "sheet_name"}, {"type": "sheet_data", "sheet_idx0": "RI1", "sheet_idx1": "EI1"}],
        [{"type": "freeze", "sheet_idx0": 0, "sheet_idx1": "EI0"},
         {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}],
        [{"type": "zoom", "sheet_idx": 0, "method": "lt", "ref": 260},
         {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}],
        [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"},
         {"type": "row_props", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["hidden"]}],
        [{"type": "check_cell", "sheet_idx": 0, "coordinate": "B2",
          "props": {"value": {"method": "approx:0.001", "ref": 191.6667}}}],
        [{"type": "check_cell", "sheet_idx": "RNSheet2", "coordinate": "A1",
          "props": {"value": {"method": "eq", "ref": "Investment Summary"}}},
         {"type": "check_cell", "sheet_idx": "RNSheet2", "coordinate": "B1",
          "props": {"merge": {"method": "eq", "ref": True}}}],
        [{"type": "sheet_fuzzy", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1", "rules": [
            {"range": ["A1:C1"], "type": "includes", "ignore_case": True},
            {"range": ["A2:B5"], "type": "exact_match", "trim_leadings": " ",
             "trim_trailings": " "},
            {"range": ["C2:C5"], "type": "fuzzy_match", "threshold": 85,
             "normalization": [["Rd", "Road"]], "ignore_case": True}]}],
    ]  # fmt: skip
    for index in range(56):
        rules = data_rules[index % len(data_rules)]
        gold_rows = _rows(rng, rng.randint(2, 6), rng.randint(2, 4))
        gold_rows[1][1] = rng.choice([191.6667, 191.66671, 191.7])
        change, result_rows = _changed(rng, gold_rows)
        second = _rows(rng, 3, 3)
        gold_sheets = {"Sheet1": gold_rows, "Sheet2": second}
        result_sheets = {"Sheet1": result_rows, "Sheet2": second}
        if rng.random() < 0.15:
            result_sheets = {"Sheet2": second, "Sheet1": result_rows}
            change += ", sheets swapped"
        elif rng.random() < 0.1:
            result_sheets = {"Sheet1": result_rows, "Other": second}
            change += ", sheet renamed"
        if index % len(data_rules) == 12:
            second[0][0] = rng.choice(["Investment Summary", "Summary"])
        settings: dict[str, Any] = {
            "freeze": rng.choice(["A2", "B2", None]),
            "zoom": rng.choice([100, 250, 300]),
            "hidden_rows": rng.choice([[], [2]]),
            "merged": rng.choice([[], ["A1:C1"]]),
        }
        gold = _book(folder / f"gold{index}.xlsx", gold_sheets, freeze="A2", hidden_rows=[2])
        result = _book(folder / f"result{index}.xlsx", result_sheets, **settings)
        if index == 0:
            result = str(folder / "missing.xlsx")
        yield Case(f"{change}; {settings}", (result, gold), {"rules": rules})
    yield from style_cases(rng, folder)


@makes("compare_csv")
def _compare_csv(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(20):
        rows = _rows(rng, 4, 3)
        change, result_rows = _changed(rng, rows)
        for name, content in (("gold", rows), ("result", result_rows)):
            with open(folder / f"{name}{index}.csv", "w", newline="") as f:
                csv.writer(f).writerows([["" if v is None else v for v in r] for r in content])
        result = None if index == 0 else str(folder / f"result{index}.csv")
        yield Case(change, (result, str(folder / f"gold{index}.csv")))


def _docx(path: Path, paragraphs: list[str], table: Rows | None = None,
          spacing: float | None = None) -> str:  # fmt: skip
    document = Document()
    for text in paragraphs:
        paragraph = document.add_paragraph(text)
        if spacing is not None:
            paragraph.paragraph_format.line_spacing = spacing
    if table is not None:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = "" if value is None else str(value)
    document.save(str(path))
    return str(path)


def _edited(rng: random.Random, paragraphs: list[str]) -> tuple[str, list[str]]:
    edited = list(paragraphs)
    change = rng.choice(["same", "same", "double space", "case", "word", "order", "empty line",
                         "trailing space", "dropped"])  # fmt: skip
    if change == "double space":
        edited[0] = edited[0].replace(" ", "  ")
    elif change == "case":
        edited = [p.upper() for p in edited]
    elif change == "word":
        edited[-1] = edited[-1] + " extra"
    elif change == "order":
        edited.reverse()
    elif change == "empty line":
        edited.insert(1, "")
    elif change == "trailing space":
        edited[0] += " "
    elif change == "dropped":
        edited.pop()
    return change, edited


@makes("compare_docx_files")
def _docx_files(rng: random.Random, folder: Path) -> Iterator[Case]:
    published: list[dict[str, Any]] = [
        {}, {}, {"ignore_blanks": False}, {"content_only": True},
        {"ignore_case": True, "ignore_blanks": True}, {"fuzzy_match": True},
        {"ignore_blanks": True, "ignore_order": True, "content_only": True,
         "delete_empty_lines": True},
        {"ignore_blanks": True, "ignore_case": True, "ignore_order": True},
        {"ignore_blanks": False, "fuzzy_match": True},
    ]  # fmt: skip
    for index in range(40):
        paragraphs = [" ".join(words(rng, rng.randint(2, 6))) for _ in range(rng.randint(2, 4))]
        change, edited = _edited(rng, paragraphs)
        gold = _docx(folder / f"gold{index}.docx", paragraphs)
        result: str | None = _docx(folder / f"result{index}.docx", edited)
        if index == 0:
            result = None
        yield Case(change, (result, gold), published[index % len(published)])


@makes("compare_docx_tables")
def _docx_tables(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(20):
        rows = _rows(rng, 3, 3)
        change, edited = _changed(rng, rows)
        tables = rng.random() < 0.9
        gold = _docx(folder / f"gold{index}.docx", ["Report"], rows)
        result = _docx(folder / f"result{index}.docx", ["Report"], edited if tables else None)
        yield Case(change if tables else "no table", (result, gold))


@makes("compare_line_spacing")
def _line_spacing(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(20):
        paragraphs = [" ".join(words(rng, 4)) for _ in range(3)]
        spacing = rng.choice([1.0, 1.5, 2.0])
        result_spacing = rng.choice([spacing, spacing, 1.15, None])
        change, edited = _edited(rng, paragraphs)
        gold = _docx(folder / f"gold{index}.docx", paragraphs, spacing=spacing)
        result = _docx(folder / f"result{index}.docx", edited, spacing=result_spacing)
        yield Case(f"{change}, spacing {result_spacing} vs {spacing}", (result, gold))


_SLIDE_CHANGES = ["same", "same", "same", "text", "bold", "italic", "underline words",
                  "underline single", "size", "color", "font name", "alignment", "moved",
                  "resized", "slide added", "strike", "level", "table cell", "note"]  # fmt: skip


def _presentation(path: Path, slides: list[list[str]], change: str, changed_slide: int) -> str:
    deck = Presentation()
    for number, lines in enumerate(slides):
        slide = deck.slides.add_slide(deck.slide_layouts[5])
        slide.shapes.title.text = lines[0]
        here = change if number == changed_slide else "same"
        left = Inches(1.2 if here == "moved" else 1)
        width = Inches(6 if here == "resized" else 5)
        box = slide.shapes.add_textbox(left, Inches(2), width, Inches(2))
        for index, line in enumerate(lines[1:]):
            paragraph = (
                box.text_frame.paragraphs[0] if index == 0 else box.text_frame.add_paragraph()
            )
            run = paragraph.add_run()
            run.text = line + (" changed" if here == "text" and index == 0 else "")
            font = run.font
            font.size = Pt(20 if here == "size" and index == 0 else 18)
            font.bold = True if here == "bold" and index == 0 else None
            font.italic = True if here == "italic" and index == 0 else None
            if here == "underline words" and index == 0:
                font.underline = MSO_UNDERLINE.WORDS
            if here == "underline single" and index == 0:
                font.underline = True
            if here == "color" and index == 0:
                font.color.rgb = RGBColor(0xFF, 0, 0)
            if here == "font name" and index == 0:
                font.name = "Courier New"
            if here == "strike" and index == 0:
                run.font._element.set("strike", "sngStrike")
            if here == "alignment" and index == 0:
                paragraph.alignment = PP_ALIGN.CENTER
            if here == "level" and index == 0:
                paragraph.level = 1
        if number == 0:
            table = slide.shapes.add_table(2, 2, Inches(1), Inches(4.5), Inches(4), Inches(1))
            for r in range(2):
                for c in range(2):
                    table.table.cell(r, c).text = f"{lines[0]} {r}{c}"
            if here == "table cell":
                table.table.cell(1, 1).text = "other"
        if here == "note":
            slide.notes_slide.notes_text_frame.text = "a note"
    if change == "slide added":
        deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = "more"
    deck.save(str(path))
    return str(path)


@makes("compare_pptx_files")
def _pptx_files(rng: random.Random, folder: Path) -> Iterator[Case]:
    published: list[dict[str, Any]] = [
        {}, {}, {}, {"examine_shape": False},
        {"examine_modify_height": True, "examine_shape": False},
        {"examine_run_count": False, "examine_shape": False, "examine_background_color": False,
         "examine_shape_lenient_height": True},
        {"examine_shape": False, "examine_title_bottom_position": True},
        {"examine_alignment": False, "examine_font_name": False, "examine_shape": False,
         "examine_font_size": False, "examine_run_count": False},
        {"examine_shape": False, "examine_right_position": True},
        {"examine_table_bottom_position": True, "examine_shape": False},
        {"examine_alignment": False, "examine_font_underline": False, "examine_font_size": False,
         "examine_font_bold": False, "examine_font_italic": False, "examine_color_rgb": False,
         "examine_strike_through": False, "examine_bullets": False},
        {"examine_shape": False, "examine_bullets": False},
    ]  # fmt: skip
    for index in range(48):
        slides = [[" ".join(words(rng, 2)), *(" ".join(words(rng, 3)) for _ in range(2))]
                  for _ in range(rng.randint(1, 2))]  # fmt: skip
        change = _SLIDE_CHANGES[index % len(_SLIDE_CHANGES)]
        changed_slide = rng.randrange(len(slides))
        gold = _presentation(folder / f"gold{index}.pptx", slides, "same", changed_slide)
        result = _presentation(folder / f"result{index}.pptx", slides, change, changed_slide)
        options = published[rng.randrange(len(published))]
        yield Case(change, (result, gold), options)
    deck = Presentation()
    fill = deck.slides.add_slide(deck.slide_layouts[6]).background.fill
    fill.solid()
    fill.fore_color.theme_color = MSO_THEME_COLOR.ACCENT_1
    deck.save(str(folder / "theme.pptx"))
    same = (str(folder / "theme.pptx"), str(folder / "theme.pptx"))
    yield Case("theme background, identical", same)
    yield Case("theme background, identical", same, {"examine_background_color": False},
               difference="pptx theme background not examined")  # fmt: skip
