"""OSWorld's Writer metrics (formatting and text of .docx and .odt files) and the text, HTML,
e-book and zip metrics of its multi-app tasks, over real files made with python-docx, odfpy,
openpyxl and Pillow, with the options the published tasks pass."""

import zipfile
from collections.abc import Callable
from pathlib import Path

import openpyxl
import pytest
from docx import Document
from docx.document import Document as DocxDocument
from docx.enum.text import WD_BREAK, WD_PARAGRAPH_ALIGNMENT, WD_TAB_ALIGNMENT
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Inches, Pt, RGBColor
from odf.opendocument import OpenDocumentText
from odf.style import Style, TextProperties
from odf.text import P, Span
from PIL import Image

from vm_pool.evaluation.bounds import LimitHit
from vm_pool.evaluation.metrics import METRICS, MetricError
from vm_pool.evaluation.metrics.writer import _ciede2000

Build = Callable[[DocxDocument], None]


def _docx(path: Path, build: Build) -> str:
    doc = Document()
    build(doc)
    doc.save(str(path))
    return str(path)


def _texts(*paragraphs: str) -> Build:
    def build(doc: DocxDocument) -> None:
        for text in paragraphs:
            doc.add_paragraph(text)

    return build


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


# Writer: formatting


def _tabbed(position: float) -> Build:
    def build(doc: DocxDocument) -> None:
        for words in ("Book one title\tprice", "Second book here\tprice"):
            paragraph = doc.add_paragraph(words)
            paragraph.paragraph_format.tab_stops.add_tab_stop(
                Inches(position), WD_TAB_ALIGNMENT.RIGHT
            )

    return build


def test_tab_stops_where_the_gold_has_them_score_1(tmp_path: Path) -> None:
    gold = _docx(tmp_path / "gold.docx", _tabbed(6))
    options = {"word_number_split_by_tabstop": 3, "index": 0}
    assert METRICS["check_tabstops"](_docx(tmp_path / "r.docx", _tabbed(6)), gold, **options) == 1


def test_tab_stops_off_by_a_width_share_lose_that_share(tmp_path: Path) -> None:
    gold = _docx(tmp_path / "gold.docx", _tabbed(6))
    score = METRICS["check_tabstops"](_docx(tmp_path / "r.docx", _tabbed(5)), gold)
    assert score == pytest.approx(1 - 1 / 6)  # python-docx's Letter page holds 6" of text


def test_tab_stops_without_three_words_before_the_tab_score_0(tmp_path: Path) -> None:
    gold = _docx(tmp_path / "gold.docx", _tabbed(6))

    def two_words(doc: DocxDocument) -> None:
        for words in ("Book one\ttitle price", "Second book\there price"):
            paragraph = doc.add_paragraph(words)
            paragraph.paragraph_format.tab_stops.add_tab_stop(Inches(6), WD_TAB_ALIGNMENT.RIGHT)

    result = _docx(tmp_path / "r.docx", two_words)
    options = {"word_number_split_by_tabstop": 3, "index": 0}
    assert METRICS["check_tabstops"](result, gold, **options) == 0
    untabbed = _docx(tmp_path / "plain.docx", _texts("Book one title price", "Second book"))
    assert METRICS["check_tabstops"](untabbed, gold) == 0


def _subscripted(subscript: bool) -> Build:
    def build(doc: DocxDocument) -> None:
        paragraph = doc.add_paragraph("H")
        paragraph.add_run("2").font.subscript = subscript
        paragraph.add_run("O")

    return build


def test_subscript_in_both_documents(tmp_path: Path) -> None:
    gold = _docx(tmp_path / "gold.docx", _subscripted(True))
    metric = METRICS["compare_subscript_contains"]
    assert metric(_docx(tmp_path / "r.docx", _subscripted(True)), gold) == 1
    assert metric(_docx(tmp_path / "no.docx", _subscripted(False)), gold) == 0


def _page_field(doc: DocxDocument) -> None:
    """A footer with a PAGE field as Writer saves it (complex field, cached result 1)."""
    paragraph = doc.sections[0].footer.paragraphs[0]
    for kind, text in (("begin", None), (None, " PAGE "), ("separate", None)):
        run = paragraph.add_run()
        if kind:
            char = OxmlElement("w:fldChar")
            char.set(qn("w:fldCharType"), kind)
            run._r.append(char)
        else:
            instruction = OxmlElement("w:instrText")
            instruction.text = text
            run._r.append(instruction)
    paragraph.add_run("1")
    end = OxmlElement("w:fldChar")
    end.set(qn("w:fldCharType"), "end")
    paragraph.add_run()._r.append(end)


def test_page_numbers_in_footers(tmp_path: Path) -> None:
    numbered = _docx(tmp_path / "r.docx", _page_field)
    plain = _docx(tmp_path / "plain.docx", _texts("No footer at all"))
    assert METRICS["has_page_numbers_in_footers"](numbered) == 1
    assert METRICS["has_page_numbers_in_footers"](plain) == 0
    assert METRICS["has_page_numbers_in_footers"](None) == 0


def _fonts(*names: str) -> Build:
    def build(doc: DocxDocument) -> None:
        for name in names:
            doc.add_paragraph().add_run("Dublin Zoo").font.name = name

    return build


def test_font_names_throughout(tmp_path: Path) -> None:
    rules = {"font_name": "Times New Roman"}
    metric = METRICS["compare_font_names"]
    assert metric(_docx(tmp_path / "r.docx", _fonts("Times New Roman", "Times New Roman")), rules)
    assert metric(_docx(tmp_path / "w.docx", _fonts("Times New Roman", "Arial")), rules) == 0
    assert metric(_write(tmp_path / "broken.docx", "not a zip"), rules) == 0


def test_first_line_centred(tmp_path: Path) -> None:
    def centred(doc: DocxDocument) -> None:
        doc.add_paragraph("Title").alignment = WD_PARAGRAPH_ALIGNMENT.CENTER
        doc.add_paragraph("Body")

    assert METRICS["is_first_line_centered"](_docx(tmp_path / "r.docx", centred)) == 1
    assert METRICS["is_first_line_centered"](_docx(tmp_path / "w.docx", _texts("Title"))) == 0


def _odt(path: Path, highlighted: bool) -> str:
    doc = OpenDocumentText()
    style = Style(name="T1", family="text")
    colour = "#ffff00" if highlighted else "transparent"
    style.addElement(TextProperties(backgroundcolor=colour))
    doc.automaticstyles.addElement(style)
    paragraph = P(text="Call the ")
    paragraph.addElement(Span(stylename=style, text="candidate"))
    doc.text.addElement(paragraph)
    doc.save(str(path))
    return str(path)


def test_no_yellow_highlight_left(tmp_path: Path) -> None:
    gold = _odt(tmp_path / "gold.odt", highlighted=False)
    metric = METRICS["check_highlighted_words"]
    assert metric(_odt(tmp_path / "r.odt", highlighted=False), gold) == 1
    assert metric(_odt(tmp_path / "w.odt", highlighted=True), gold) == 0


def _picture(tmp_path: Path, colour: str, size: tuple[int, int] = (40, 30)) -> Build:
    image = tmp_path / f"{colour}-{size[0]}.png"
    Image.new("RGB", size, colour).save(image)

    def build(doc: DocxDocument) -> None:
        doc.add_picture(str(image))

    return build


def test_docx_images_compare_pixels(tmp_path: Path) -> None:
    gold = _docx(tmp_path / "gold.docx", _picture(tmp_path, "red"))
    metric = METRICS["compare_docx_images"]
    assert metric(_docx(tmp_path / "r.docx", _picture(tmp_path, "red")), gold) == 1
    assert metric(_docx(tmp_path / "w.docx", _picture(tmp_path, "blue")), gold) == 0
    assert metric(_docx(tmp_path / "none.docx", _texts("no picture")), gold) == 0


def test_a_docx_picture_past_the_pixel_cap_is_a_limit(tmp_path: Path) -> None:
    huge = _docx(tmp_path / "huge.docx", _picture(tmp_path, "red", (4100, 4100)))
    with pytest.raises(LimitHit):
        METRICS["compare_docx_images"](huge, huge)


def _struck(last_struck: bool) -> Build:
    def build(doc: DocxDocument) -> None:
        doc.add_paragraph("Keep this.")
        paragraph = doc.add_paragraph()
        paragraph.add_run("Strike ").font.strike = True
        paragraph.add_run("this.").font.strike = last_struck

    return build


def test_strike_through_last_paragraph(tmp_path: Path) -> None:
    gold = _docx(tmp_path / "gold.docx", _struck(True))
    metric = METRICS["evaluate_strike_through_last_paragraph"]
    assert metric(_docx(tmp_path / "r.docx", _struck(True)), gold) == 1
    assert metric(_docx(tmp_path / "w.docx", _struck(False)), gold) == 0
    other_text = _docx(tmp_path / "t.docx", _texts("Keep this.", "Other text."))
    assert metric(other_text, gold) == 0


def _coloured(colours: dict[str, RGBColor | None]) -> Build:
    def build(doc: DocxDocument) -> None:
        table = doc.add_table(rows=1, cols=len(colours))
        for cell, (word, colour) in zip(table.rows[0].cells, colours.items(), strict=True):
            run = cell.paragraphs[0].add_run(word)
            if colour is not None:
                run.font.color.rgb = colour

    return build


def test_words_coloured_by_their_first_letter(tmp_path: Path) -> None:
    red, blue = RGBColor(0xFF, 0, 0), RGBColor(0, 0, 0xFF)
    gold = _docx(tmp_path / "gold.docx", _coloured({"apple": red, "tree": blue}))
    metric = METRICS["evaluate_colored_words_in_tables"]
    near = _docx(tmp_path / "near.docx", _coloured({"apple": RGBColor(250, 5, 5), "tree": blue}))
    assert metric(near, gold) == 1
    swapped = _docx(tmp_path / "w.docx", _coloured({"apple": blue, "tree": red}))
    assert metric(swapped, gold) == 0
    uncoloured = _docx(tmp_path / "u.docx", _coloured({"apple": red, "tree": None}))
    assert metric(uncoloured, gold) == 0
    off_red = _docx(tmp_path / "o.docx", _coloured({"apple": RGBColor(230, 20, 20), "tree": blue}))
    assert metric(off_red, gold) == 0  # 5.3 units from red
    assert metric(off_red, gold, threshold=6) == 1


def test_ciede2000_matches_the_published_test_pairs() -> None:
    """Sharma, Wu and Dalal's CIEDE2000 test data, pairs 1, 17 and 25."""
    assert _ciede2000((50, 2.6772, -79.7751), (50, 0, -82.7485)) == pytest.approx(2.0425, 1e-4)
    assert _ciede2000((50, 2.5, 0), (73, 25, -18)) == pytest.approx(27.1492, 1e-4)
    assert _ciede2000((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387)) == (
        pytest.approx(1.2644, 1e-4)
    )


def _italics(size: int | None) -> Build:
    def build(doc: DocxDocument) -> None:
        paragraph = doc.add_paragraph("Plain ")
        run = paragraph.add_run("slanted")
        run.italic = True
        run.font.size = Pt(size) if size else None

    return build


def test_italic_runs_in_14_points(tmp_path: Path) -> None:
    gold = _docx(tmp_path / "gold.docx", _italics(14))
    metric = METRICS["check_italic_font_size_14"]
    assert metric(_docx(tmp_path / "r.docx", _italics(14)), gold) == 1
    assert metric(_docx(tmp_path / "w.docx", _italics(12)), gold) == 0
    assert metric(_docx(tmp_path / "n.docx", _italics(None)), gold) == 0


def _breaks(count: int) -> Build:
    def build(doc: DocxDocument) -> None:
        for index in range(count):
            doc.add_paragraph(f"Page {index}").runs[0].add_break(WD_BREAK.PAGE)
        doc.add_paragraph().add_run().add_break(WD_BREAK.LINE)

    return build


def test_page_breaks_counted(tmp_path: Path) -> None:
    metric = METRICS["contains_page_break"]
    five = _docx(tmp_path / "five.docx", _breaks(5))
    assert metric(five, {"page_break_count": 5}) == 1
    assert metric(_docx(tmp_path / "four.docx", _breaks(4)), {"page_break_count": 5}) == 0
    assert metric(five, {}) == 1
    assert metric(_docx(tmp_path / "none.docx", _breaks(0)), {}) == 0


_XCU = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry"
  xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse">
<value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard"
 oor:op="fuse"><value>{font}</value></prop></item>
</oor:items>
"""


def test_default_font_from_writer_registry(tmp_path: Path) -> None:
    rules = {"font_name": "Times New Roman"}
    metric = METRICS["find_default_font"]
    assert metric(_write(tmp_path / "r.xcu", _XCU.format(font="Times New Roman")), rules) == 1
    assert metric(_write(tmp_path / "w.xcu", _XCU.format(font="Liberation Serif")), rules) == 0
    assert metric(_write(tmp_path / "bad.xcu", "<oor:items"), rules) == 0
    assert metric(None, rules) == 0


# Writer: text


def test_docx_text_ignoring_empty_paragraphs(tmp_path: Path) -> None:
    gold = _docx(tmp_path / "gold.docx", _texts("The Iliad is old.", "", "Homer wrote it."))
    spaced = _docx(tmp_path / "r.docx", _texts("The Iliad is old.", "", "", "Homer wrote it."))
    metric = METRICS["compare_docx_files_and_ignore_new_lines"]
    assert metric(spaced, gold, ignore_blanks=False) == 1
    joined = _docx(tmp_path / "j.docx", _texts("The Iliad is old. Homer wrote it."))
    assert metric(joined, gold, ignore_blanks=False) == 0
    assert metric(joined, gold) == 1  # the whole text, whitespace collapsed
    assert metric(_write(tmp_path / "r.txt", "x"), gold) == 0


def test_references_scored_past_the_base(tmp_path: Path) -> None:
    refs = ("Smith, J. (2020). A study. Journal, 1(2), 3-4.", "Doe, A. (2019). Book. Press.")
    gold = _docx(tmp_path / "gold.docx", _texts("Case study", "References", "", *refs))
    metric = METRICS["compare_references"]
    options = {"content_only": True, "reference_base_result": 0.6}
    assert (
        metric(
            _docx(tmp_path / "r.docx", _texts("Other body", "References", *refs)), gold, **options
        )
        == 1
    )
    wrong = _docx(tmp_path / "w.docx", _texts("References", "Unrelated entry", "Another one"))
    assert metric(wrong, gold, **options) == 0
    one_ref = _docx(tmp_path / "o.docx", _texts("References", refs[0]))
    assert metric(one_ref, gold, **options) == 0
    no_section = _docx(tmp_path / "n.docx", _texts("Case study"))
    assert metric(no_section, gold, **options) == 0


def test_unique_train_records(tmp_path: Path) -> None:
    lines = ("06:00:01, T1, S1, 1", "06:05:00, T2, S2, 2", "06:10:00, T1, S3, 1")
    original = _docx(tmp_path / "original.docx", _texts(*lines))
    gold = _docx(tmp_path / "gold.docx", _texts(lines[0], lines[1]))
    metric = METRICS["compare_unique_train_records"]
    kept_first = _docx(tmp_path / "r.docx", _texts(lines[0], "", lines[1]))
    assert metric(kept_first, [gold, original]) == 1
    kept_last = _docx(tmp_path / "l.docx", _texts(lines[1], lines[2]))
    assert metric(kept_last, [gold, original]) == 1  # any one record per train
    assert metric(original, [gold, original]) == 0  # T1 twice
    edited = _docx(tmp_path / "e.docx", _texts("06:00:01, T1, S9, 1", lines[1]))
    assert metric(edited, [gold, original]) == 0  # a line the original does not have
    assert metric(kept_first, gold) == 0


def test_fuzzy_place_match_needs_three_words(tmp_path: Path) -> None:
    rules = {"expected": ["福田区正义街1号", "福田区振兴路108号", "福田区滨河大道2033号"]}
    metric = METRICS["fuzzy_place_math"]
    three = _docx(
        tmp_path / "r.docx", _texts("福田区正义街1号", "福田区振兴路108号 福田区滨河大道2033号")
    )
    assert metric(three, rules) == 1
    near = _docx(
        tmp_path / "n.docx", _texts("福田区正义街1号", "福田区振兴路108", "福田区滨河大道2033号")
    )
    assert metric(near, rules) == pytest.approx((1 + 18 / 19 + 1) / 3)  # 9 of 10 characters
    four = _docx(tmp_path / "f.docx", _texts("福田区正义街1号 福田区振兴路108号 a b"))
    assert metric(four, rules) == 0
    assert metric(_write(tmp_path / "bad.docx", "no"), rules) == 0


# Multi-app: text files, sheets, HTML, e-books, zips


def test_python_pure_text(tmp_path: Path) -> None:
    gold = _write(tmp_path / "gold.py", "import torch\n\n# the model\nx = 1\n\tif x:\n")
    metric = METRICS["compare_python_pure_text"]
    header = "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n"
    same = header + "import torch\n# the model  \nx = 1\n    if x:\n"
    assert metric(_write(tmp_path / "r.py", same), gold) == 1
    markdown = "import torch\n# the model\n## Markdown header\nx = 1\n    if x:\n"
    assert metric(_write(tmp_path / "w.py", markdown), gold) == 0
    assert metric(None, gold) == 0


def test_result_files_by_number_or_text(tmp_path: Path) -> None:
    gold = _write(tmp_path / "gold.txt", "25.5\n")
    metric = METRICS["compare_result_files"]
    assert metric(_write(tmp_path / "a.txt", "The median price is 25.5"), gold) == 1
    assert metric(_write(tmp_path / "b.txt", "25.50001"), gold) == 1
    assert metric(_write(tmp_path / "c.txt", "26"), gold) == 0
    word_gold = _write(tmp_path / "word.txt", "median")
    assert metric(_write(tmp_path / "d.txt", " median "), word_gold) == 1
    (tmp_path / "e.txt").write_bytes(b"\xff\xfe25.5")
    assert metric(str(tmp_path / "e.txt"), gold) == 0


def test_line_number_counts_timestamped_lines(tmp_path: Path) -> None:
    rows = "".join(f"12:00:{second:02d}  all  1.0  0.0\n" for second in range(31))
    report = _write(tmp_path / "r.txt", "Linux 6.1 (host)\n\n" + rows + "Average: all 1.0\n")
    metric = METRICS["check_line_number"]
    assert metric(report, {"expected": "31"}) == 1
    assert metric(report, {"expected": "30"}) == 0
    assert metric(None, {"expected": "31"}) == 0
    with pytest.raises(MetricError):
        metric(report, {"expected": "many"})


def _cities(path: Path, cities: list[str | None]) -> str:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    for row, city in enumerate(cities, start=2):
        sheet.cell(row=row, column=3, value=city)
    book.save(path)
    return str(path)


def test_conference_cities_in_order(tmp_path: Path) -> None:
    expected = ["Scottsdale", ["Montreal", "Montréal"]] + ["Vancouver"] * 19
    rules = {"expected": expected}
    metric = METRICS["compare_conference_city_in_order"]
    right = _cities(tmp_path / "r.xlsx", ["Scottsdale, AZ", "MONTRÉAL"] + ["Vancouver"] * 19)
    assert metric(right, rules) == 1
    wrong = _cities(tmp_path / "w.xlsx", ["Scottsdale", "Toronto"] + ["Vancouver"] * 19)
    assert metric(wrong, rules) == 0
    missing = _cities(tmp_path / "m.xlsx", ["Scottsdale", "Montreal"] + [None] * 19)
    assert metric(missing, rules) == 0
    assert metric(None, rules) == 0


_TABLE = """<!DOCTYPE html>
<html><head><title>survey</title><style>td {{ color: red }}</style></head>
<body>
<table class="{cls}">
<tr><td sdval="2021" sdnum="{sdnum}">2021</td>
    <td>{value}</td></tr>
</table>
<!-- exported -->
</body></html>
"""


def test_htmls_node_by_node(tmp_path: Path) -> None:
    gold = _write(tmp_path / "gold.html", _TABLE.format(cls="a b", sdnum="1033;", value="Total"))
    metric = METRICS["compare_htmls"]
    spaced = _TABLE.format(cls=" a  b ", sdnum="1033;", value="Total").replace("\n<tr>", "\n\n<tr>")
    assert metric(_write(tmp_path / "r.html", spaced), gold) == 1  # class words, blank runs
    other_value = _write(tmp_path / "v.html", _TABLE.format(cls="a b", sdnum="1033;", value="Sum"))
    assert metric(other_value, gold) == 0
    other_format = _write(
        tmp_path / "f.html", _TABLE.format(cls="a b", sdnum="1033;0;@", value="Total")
    )
    assert metric(other_format, gold) == 0
    assert metric(other_format, gold, ignore_sdnum=True) == 1
    assert metric(None, gold) == 0


def test_htmls_stop_at_the_shorter_document(tmp_path: Path) -> None:
    gold = _write(tmp_path / "gold.html", "<p>one</p>")
    longer = _write(tmp_path / "r.html", "<p>one</p><p>two</p>")
    assert METRICS["compare_htmls"](longer, gold) == 0  # body's text differs
    assert METRICS["compare_htmls"](gold, gold) == 1


def _epub(path: Path, identifier: str, chapter: str, extra: dict[str, str] | None = None) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
        archive.writestr(
            "content.opf",
            f'<package>\n<dc:identifier id="uid">{identifier}</dc:identifier>\n'
            "<dc:title>Pass Through</dc:title>\n</package>\n",
        )
        archive.writestr(
            "toc.ncx",
            f'<ncx>\n<navPoint id="{identifier}">\n<text>Chapter 1</text>\n</navPoint>\n</ncx>\n',
        )
        archive.writestr("index_split_000.html", f"<html><body>\n<p>{chapter}</p>\n</body></html>")
        for name, text in (extra or {}).items():
            archive.writestr(name, text)
    return str(path)


def test_epub_parts_compared_line_by_line(tmp_path: Path) -> None:
    gold = _epub(tmp_path / "gold.epub", "uuid-1", "It was a dark night.")
    metric = METRICS["compare_epub"]
    assert metric(_epub(tmp_path / "r.epub", "uuid-2", "It was a dark night."), gold) == 1
    changed = metric(_epub(tmp_path / "w.epub", "uuid-2", "Another story."), gold)
    assert 0.5 < changed < 1
    assert metric(_write(tmp_path / "n.epub", "not a zip"), gold) == 0
    assert metric(None, gold) == 0


def test_epub_member_climbing_out_is_a_limit(tmp_path: Path) -> None:
    gold = _epub(tmp_path / "gold.epub", "uuid-1", "Night.")
    bad = _epub(tmp_path / "bad.epub", "uuid-1", "Night.", {"../escape.html": "<p>x</p>"})
    with pytest.raises(LimitHit):
        METRICS["compare_epub"](bad, gold)


def _pdf(text: str) -> bytes:
    """A one-page PDF that shows ``text`` in Helvetica, with a correct cross-reference."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
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
    return bytes(out)


def _zip(path: Path, members: dict[str, bytes]) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return str(path)


def test_zip_files_same_names_and_contents(tmp_path: Path) -> None:
    essay = "Recruitment and retention of health professionals across Europe"
    gold = _zip(tmp_path / "gold.zip", {"essay/": b"", "essay/essay.pdf": _pdf(essay)})
    metric = METRICS["compare_zip_files"]
    reprinted = _pdf(essay).replace(b"72 720", b"72 700")  # other bytes, the same text
    assert (
        metric(_zip(tmp_path / "r.zip", {"essay/": b"", "essay/essay.pdf": reprinted}), gold) == 1
    )
    other = _zip(tmp_path / "o.zip", {"essay/": b"", "essay/essay.pdf": _pdf("A different essay")})
    assert metric(other, gold) == 0
    no_folder = _zip(tmp_path / "n.zip", {"essay/essay.pdf": _pdf(essay)})
    assert metric(no_folder, gold) == 0
    text_gold = _zip(tmp_path / "t.zip", {"notes.txt": b"a"})
    assert metric(_zip(tmp_path / "t2.zip", {"notes.txt": b"b"}), text_gold) == 0
    assert metric(_write(tmp_path / "x.zip", "not a zip"), gold) == 0
