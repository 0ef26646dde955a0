"""Deliberate differences from OSWorld (vm_pool/evaluation/DIFFERENCES.md, "Other deliberate
differences") that no other test pinned: each test is named after its difference, runs Tandem
on the input that shows it and, where OSWorld's vendored code runs on that input, OSWorld too.

Pure: no database, no desktop. The stand-ins are for what is outside Tandem: a desktop whose
``date`` fails, and pyatspi's table of a Calc sheet.
"""

import json
import re
import subprocess
import sys
import types
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from docx import Document
from docx.oxml.ns import qn
from odf.opendocument import OpenDocumentText
from odf.style import Style, TextProperties
from odf.text import P, Span
from openpyxl import Workbook
from openpyxl.chart import BarChart, Reference
from openpyxl.formatting.rule import CellIsRule, Rule
from openpyxl.styles import Font
from openpyxl.styles.differential import DifferentialStyle
from pypdf import PdfReader

from tests.osworld_reference import reference_metrics
from vm_pool.agent.accessibility import AtspiSource
from vm_pool.evaluation.getters import GETTERS, Reading
from vm_pool.evaluation.metrics import METRICS, MetricError
from vm_pool.evaluation.metrics.pdf import pdf_text
from vm_pool.evaluation.readers import READERS


@pytest.fixture(scope="module")
def osworld() -> dict[str, Any]:
    return reference_metrics()


def _docx(path: Path, *paragraphs: str, page_size: bool = True) -> str:
    doc = Document()
    for text in paragraphs:
        doc.add_paragraph(text)
    if not page_size:
        section = doc.sections[0]._sectPr
        section.remove(section.find(qn("w:pgSz")))
    doc.save(str(path))
    return str(path)


def _epub(path: Path, chapter: bytes) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
        archive.writestr("content.opf", "<package>\n<dc:title>Night</dc:title>\n</package>\n")
        archive.writestr("toc.ncx", "<ncx>\n<text>Chapter 1</text>\n</ncx>\n")
        archive.writestr("index_split_000.html", chapter)
    return str(path)


# Metrics that score where OSWorld crashes


def test_epub_part_not_utf8_is_compared(tmp_path: Path, osworld: dict[str, Any]) -> None:
    chapter = "<html><body><p>Caf\u00e9 at night.</p></body></html>".encode("latin-1")
    result, gold = _epub(tmp_path / "r.epub", chapter), _epub(tmp_path / "g.epub", chapter)
    assert METRICS["compare_epub"](result, gold) == 1.0
    with pytest.raises(UnicodeDecodeError):
        osworld["compare_epub"](result, gold)


def test_epub_empty_part_is_compared(tmp_path: Path, osworld: dict[str, Any]) -> None:
    result, gold = _epub(tmp_path / "r.epub", b""), _epub(tmp_path / "g.epub", b"")
    assert METRICS["compare_epub"](result, gold) == 1.0
    with pytest.raises(Exception, match="empty"):
        osworld["compare_epub"](result, gold)


def test_references_both_empty_are_the_same_list(tmp_path: Path, osworld: dict[str, Any]) -> None:
    result = _docx(tmp_path / "r.docx", "Case study", "References")
    gold = _docx(tmp_path / "g.docx", "Case study", "References")
    assert METRICS["compare_references"](result, gold) == 1.0
    with pytest.raises(ZeroDivisionError):
        osworld["compare_references"](result, gold)


def test_tabstops_of_two_documents_without_text_score_1(
    tmp_path: Path, osworld: dict[str, Any]
) -> None:
    result, gold = _docx(tmp_path / "r.docx"), _docx(tmp_path / "g.docx")
    assert METRICS["check_tabstops"](result, gold) == 1.0
    with pytest.raises(ZeroDivisionError):
        osworld["check_tabstops"](result, gold)


# Not scored where OSWorld gives a verdict


def test_tabstops_gold_without_page_width_is_not_scored(tmp_path: Path) -> None:
    result = _docx(tmp_path / "r.docx", "Book one title\tprice")
    gold = _docx(tmp_path / "g.docx", "Book one title\tprice", page_size=False)
    with pytest.raises(MetricError, match="page width"):
        METRICS["check_tabstops"](result, gold)


def test_compare_config_expected_not_text_is_not_scored(
    tmp_path: Path, osworld: dict[str, Any]
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text('{"editor.fontSize": 14}')
    rules = {"expected": {"editor.fontSize": 14}}
    with pytest.raises(MetricError, match="as text"):
        METRICS["compare_config"](str(settings), rules)
    with pytest.raises(AttributeError):
        osworld["compare_config"](str(settings), rules)


_TREE = (
    '<desktop-frame xmlns:st="https://accessibility.ubuntu.example.org/ns/state">'
    '<application name="Thunderbird"><push-button name="Send">Send</push-button></application>'
    "</desktop-frame>"
)


def test_accessibility_xpath_selecting_a_value_is_not_scored(osworld: dict[str, Any]) -> None:
    rules = [{"xpath": "string(//push-button/@name)"}]
    with pytest.raises(MetricError, match="selects no nodes but a value"):
        METRICS["check_accessibility_tree"](_TREE, rules)
    assert osworld["check_accessibility_tree"](_TREE, rules) == 1.0


# Getters, readers and the accessibility tree


def test_extension_entry_without_path_is_skipped(tmp_path: Path) -> None:
    settings = {
        "aaaa": {"location": 1, "manifest": {"name": "Momentum"}},
        "bbbb": {"location": 4, "path": "/home/user/Desktop/helloExtension"},
    }
    preferences = tmp_path / "Preferences"
    preferences.write_text(json.dumps({"extensions": {"settings": settings}}))
    found = READERS["chrome_preference"](
        str(preferences), None, {"setting": "find_unpacked_extension_path"}
    )
    assert found == ["/home/user/Desktop/helloExtension"]  # OSWorld: "Google" (its KeyError)


class _NoClock:
    """A desktop whose ``date`` fails."""

    def run(self, command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, stdout="", stderr="date: not found")


def _never_fetched(url: str) -> bytes:
    raise AssertionError(url)


def test_relative_time_without_the_desktops_clock_is_utc(tmp_path: Path) -> None:
    rules = {"relativeTime": {"from": "today"}, "expected": {"time": "{Year}-{Month0D}-{Day0D}"}}
    reading = Reading(_NoClock(), tmp_path, _never_fetched)  # type: ignore[arg-type]
    gathered = GETTERS["rule_relativeTime"](reading, {"rules": rules})
    assert gathered["kind"] == "read" and gathered["reader"] == "relative_time_rules"
    now = datetime.fromisoformat(gathered["text"])
    assert now.utcoffset() == timedelta(0)
    assert abs((datetime.now(UTC) - now).total_seconds()) < 60


class _Cell:
    def __init__(self, index: int, showing: bool) -> None:
        self.index, self.showing = index, showing

    def getState(self) -> Any:  # noqa: N802 (pyatspi's name)
        return types.SimpleNamespace(contains=lambda state: self.showing)


class _Table:
    """pyatspi's accessible of a Calc sheet: cells by index, row after row of ``columns``."""

    def __init__(self, columns: int, showing: set[int], cells: int) -> None:
        self.columns = columns
        self.cells = [_Cell(i, i in showing) for i in range(cells)]

    def queryTable(self) -> Any:  # noqa: N802 (pyatspi's name)
        return types.SimpleNamespace(nColumns=self.columns)

    def __getitem__(self, index: int) -> _Cell:
        return self.cells[index]


def test_calc_walk_row_length_is_the_tables_column_count() -> None:
    # A 4-column sheet of 3 rows: B1, C1, B2, C2 show. OSWorld would step rows by 16384 cells
    # (LibreOffice 7.4 and later), the sheet's own column count there.
    source = AtspiSource(types.SimpleNamespace(STATE_SHOWING="showing"))
    table = _Table(columns=4, showing={1, 2, 5, 6}, cells=12)
    walked = [cell.index for cell in source.children(table, calc_table=True)]
    assert walked == [1, 2, 5, 6]


def _pdf(path: Path, *pages: str) -> str:
    """A PDF with one line of Helvetica text on each page, with a correct cross-reference."""
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    font = 3 + 2 * len(pages)
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    path.write_bytes(bytes(out))
    return str(path)


def test_pdf_text_without_pymupdf_is_pypdfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _pdf(tmp_path / "r.pdf", "Invoice 42", "Total 100")
    gold = _pdf(tmp_path / "g.pdf", "Invoice 42", "Total 100")
    monkeypatch.setitem(sys.modules, "pymupdf", None)  # the default install: no PyMuPDF
    pages = [page.extract_text() for page in PdfReader(result).pages]
    assert pdf_text(result) == "\n".join(pages).strip()
    assert METRICS["compare_pdfs"](result, gold) == 1.0


# The workbooks and documents below are saved by openpyxl and odfpy; where those write another
# shape than the one at issue, the part is edited in the zip (``_rewritten``).


def _rewritten(path: Path, part: str, edit: Callable[[str], str]) -> str:
    """The package at ``path`` with one XML part passed through ``edit``."""
    with zipfile.ZipFile(path) as package:
        parts = {name: package.read(name) for name in package.namelist()}
    parts[part] = edit(parts[part].decode()).encode()
    with zipfile.ZipFile(path, "w") as package:
        for name, data in parts.items():
            package.writestr(name, data)
    return str(path)


def _workbook(path: Path, *rules: Rule, chart_at: str | None = None) -> str:
    """Sheet1 holds 4, 12 and 30 in A1:A3, conditionally formatted by ``rules``, and a bar
    chart of them anchored at ``chart_at`` (openpyxl's one-cell anchor)."""
    book = Workbook()
    sheet = book.active
    sheet.title = "Sheet1"
    for row, value in enumerate((4, 12, 30), start=1):
        sheet.cell(row=row, column=1, value=value)
    for rule in rules:
        sheet.conditional_formatting.add("A1:A3", rule)
    if chart_at is not None:
        chart = BarChart()
        chart.add_data(Reference(sheet, min_col=1, min_row=1, max_row=3))
        sheet.add_chart(chart, chart_at)
    book.save(path)
    return str(path)


def _style_rule(*props: str) -> list[dict[str, Any]]:
    return [{"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": list(props)}]


_RED = Font(color="FFFF0000")


def test_a_formula_rule_without_a_formula_formats_no_cell(
    tmp_path: Path, osworld: dict[str, Any]
) -> None:
    # <cfRule type="expression" dxfId="0" priority="1"/>: no <formula> child.
    empty = Rule(type="expression", formula=[], dxf=DifferentialStyle(font=_RED))
    over_ten = CellIsRule(operator="greaterThan", formula=["10"], font=_RED)
    result = _workbook(tmp_path / "r.xlsx", empty, over_ten)
    gold = _workbook(tmp_path / "g.xlsx", over_ten)
    assert METRICS["compare_table"](result, gold, rules=_style_rule("font_color")) == 1.0
    plain = _workbook(tmp_path / "plain.xlsx")
    assert METRICS["compare_table"](result, plain, rules=_style_rule("font_color")) == 0.0
    with pytest.raises(IndexError):  # formulae[0] of the rule without a formula
        osworld["compare_table"](result, gold, rules=_style_rule("font_color"))


def test_a_conditional_style_without_a_number_format_sets_none(
    tmp_path: Path, osworld: dict[str, Any]
) -> None:
    # A2 and A3 (over 10) take a conditional style that sets only the font colour.
    over_ten = CellIsRule(operator="greaterThan", formula=["10"], font=_RED)
    result = _workbook(tmp_path / "r.xlsx", over_ten)
    gold = _workbook(tmp_path / "g.xlsx", over_ten)
    rules = _style_rule("number_format")
    assert METRICS["compare_table"](result, gold, rules=rules) == 1.0
    # None where the style applies, not the cell's own "General": a sheet without it differs.
    plain = _workbook(tmp_path / "plain.xlsx")
    assert METRICS["compare_table"](result, plain, rules=rules) == 0.0
    with pytest.raises(AttributeError, match="formatCode"):  # differential.numFmt is None
        osworld["compare_table"](result, gold, rules=rules)


def _absolute_anchor(drawing: str) -> str:
    """openpyxl's one-cell anchor as an absolute one: a position in EMUs, no cell."""
    drawing = re.sub(
        r"<oneCellAnchor><from>.*?</from>", '<absoluteAnchor><pos x="1219200" y="190500"/>', drawing
    )
    return drawing.replace("</oneCellAnchor>", "</absoluteAnchor>")


def test_a_chart_with_a_one_cell_or_absolute_anchor_is_compared(
    tmp_path: Path, osworld: dict[str, Any]
) -> None:
    rules = [{"type": "chart", "sheet_idx0": 0, "sheet_idx1": "EI0", "chart_props": ["anchor"]}]
    one_cell = _workbook(tmp_path / "r.xlsx", chart_at="C2")
    gold = _workbook(tmp_path / "g.xlsx", chart_at="C2")
    assert "<oneCellAnchor>" in zipfile.ZipFile(gold).read("xl/drawings/drawing1.xml").decode()
    assert METRICS["compare_table"](one_cell, gold, rules=rules) == 1.0
    moved = _workbook(tmp_path / "moved.xlsx", chart_at="E2")
    assert METRICS["compare_table"](moved, gold, rules=rules) == 0.0  # its start column differs
    with pytest.raises(AttributeError, match="editAs"):
        osworld["compare_table"](one_cell, gold, rules=rules)

    absolute = _workbook(tmp_path / "a.xlsx", chart_at="C2")
    absolute = _rewritten(Path(absolute), "xl/drawings/drawing1.xml", _absolute_anchor)
    absolute_gold = _workbook(tmp_path / "ag.xlsx", chart_at="C2")
    absolute_gold = _rewritten(Path(absolute_gold), "xl/drawings/drawing1.xml", _absolute_anchor)
    assert METRICS["compare_table"](absolute, absolute_gold, rules=rules) == 1.0
    assert METRICS["compare_table"](absolute, gold, rules=rules) == 0.0  # no start column
    with pytest.raises(AttributeError, match="editAs"):
        osworld["compare_table"](absolute, absolute_gold, rules=rules)


def _odt(path: Path, highlight: str) -> str:
    """'Call the candidate', the last word in the text style T1 with ``highlight`` as its
    background."""
    doc = OpenDocumentText()
    text_style = Style(name="T1", family="text")
    text_style.addElement(TextProperties(backgroundcolor=highlight))
    doc.automaticstyles.addElement(text_style)
    paragraph = P(text="Call the ")
    paragraph.addElement(Span(stylename=text_style, text="candidate"))
    doc.text.addElement(paragraph)
    doc.save(str(path))
    return str(path)


def _column_properties_too(content: str) -> str:
    """T1 also holding a table column's properties, which odfpy will not add to a text style.

    A same-named column style beside T1 would not show the difference: odfpy renames a
    duplicate style name on load, and the span follows the text style.
    """
    column = '<style:table-column-properties style:column-width="2cm"/>'
    return content.replace("</style:style>", column + "</style:style>", 1)


def _indented_styles(content: str) -> str:
    """The automatic styles written one element a line, as an indenting XML writer does."""
    start, end = content.index("<office:automatic-styles>"), content.index("<office:body>")
    return content[:start] + content[start:end].replace("><", ">\n  <") + content[end:]


def test_a_style_node_that_cannot_carry_a_highlight_has_none(
    tmp_path: Path, osworld: dict[str, Any]
) -> None:
    gold = _odt(tmp_path / "g.odt", "transparent")
    metric = METRICS["check_highlighted_words"]

    # The line breaks between the styles are text nodes: odfpy's Text has no getAttribute.
    indented = _rewritten(
        Path(_odt(tmp_path / "i.odt", "transparent")), "content.xml", _indented_styles
    )
    yellow = _rewritten(Path(_odt(tmp_path / "y.odt", "#ffff00")), "content.xml", _indented_styles)
    assert metric(indented, gold) == 1.0
    assert metric(yellow, gold) == 0.0
    with pytest.raises(AttributeError, match="'Text' object has no attribute 'getAttribute'"):
        osworld["check_highlighted_words"](indented, gold)

    # A column's properties do not allow fo:background-color: odfpy's getAttribute raises
    # ValueError.
    with_column = _rewritten(
        Path(_odt(tmp_path / "c.odt", "transparent")), "content.xml", _column_properties_too
    )
    yellow_with_column = _rewritten(
        Path(_odt(tmp_path / "cy.odt", "#ffff00")), "content.xml", _column_properties_too
    )
    assert metric(with_column, gold) == 1.0
    assert metric(yellow_with_column, gold) == 0.0
    with pytest.raises(ValueError, match="backgroundcolor"):
        osworld["check_highlighted_words"](with_column, gold)
