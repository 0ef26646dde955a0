"""Case makers for the Writer formatting metrics: tab stops, subscripts, footers' page
numbers, font names, centring, highlights (.odt), pictures, strike-through, italics, page
breaks, words coloured in tables and Writer's default font (registrymodifications.xcu).

Documents are made with python-docx as Writer saves them: direct run formatting (fonts named
in ``w:rFonts``, sizes in half points), tab stops in the paragraph's properties, a page number
as a PAGE field with its cached number, a manual page break as ``<w:br w:type="page"/>`` in a
run, or as "page break before" on the paragraph (which Writer also writes, and which is not a
run's break). Each case is a gold document and a result made from it by what an episode
leaves: the asked-for change, a part of it, none, or a change to the text.
"""

import io
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from docx import Document
from docx.enum.text import WD_BREAK, WD_PARAGRAPH_ALIGNMENT, WD_TAB_ALIGNMENT
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Inches, Pt, RGBColor
from odf.opendocument import OpenDocumentText
from odf.style import ParagraphProperties, Style, TextProperties
from odf.text import A, P, S, Span
from PIL import Image

from tests.support.osworld_differential.core import Case, makes, words

_SERIF = "Liberation Serif"


def _sentences(rng: random.Random, count: int, length: tuple[int, int] = (3, 7)) -> list[str]:
    return [" ".join(words(rng, rng.randint(*length))).capitalize() for _ in range(count)]


def _document() -> Any:
    """An empty document in Writer's default look: Liberation Serif 12 pt."""
    document = Document()
    style = document.styles["Normal"]
    style.font.name = _SERIF
    style.font.size = Pt(12)
    return document


def _save(document: Any, path: Path) -> str:
    document.save(str(path))
    return str(path)


def _page_field(paragraph: Any, number: int) -> None:
    """A PAGE field with its cached number, as Writer writes Insert > Page Number."""
    for kind, text in (("begin", None), ("instr", " PAGE "), ("separate", None),
                       ("text", str(number)), ("end", None)):  # fmt: skip
        run = paragraph.add_run()
        if kind == "instr":
            instruction = OxmlElement("w:instrText")
            instruction.set(qn("xml:space"), "preserve")
            instruction.text = text
            run._r.append(instruction)
        elif kind == "text":
            run.text = text
        else:
            field = OxmlElement("w:fldChar")
            field.set(qn("w:fldCharType"), kind)
            run._r.append(field)


@makes("check_tabstops")
def _tabstops(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 0a0faba3: the first three words left, the rest right at the text's right edge."""
    changes = ["same", "same", "same", "shifted", "left instead of right", "no tab stop",
               "four words first", "no tab", "blank paragraph", "paragraph dropped",
               "extra stop", "cleared stop"]  # fmt: skip
    for index in range(12):
        change = changes[index % len(changes)]
        lines = [words(rng, rng.randint(4, 8)) for _ in range(rng.randint(2, 4))]
        gold, result = _document(), _document()
        for number, line in enumerate(lines):
            first, rest = " ".join(line[:3]), " ".join(line[3:])
            here = change if number == len(lines) - 1 else "same"
            if here == "paragraph dropped":
                gold.add_paragraph(f"{first}\t{rest}").paragraph_format.tab_stops.add_tab_stop(
                    Inches(6.5), WD_TAB_ALIGNMENT.RIGHT
                )
                continue
            for document, side in ((gold, "same"), (result, here)):
                text = f"{first}\t{rest}"
                if side == "four words first":
                    text = f"{' '.join(line[:4])}\t{' '.join(line[4:])}"
                elif side == "no tab":
                    text = " ".join(line)
                paragraph = document.add_paragraph(text)
                stops = paragraph.paragraph_format.tab_stops
                position = Inches(6.4 if side == "shifted" else 6.5)
                if side == "left instead of right":
                    stops.add_tab_stop(position, WD_TAB_ALIGNMENT.LEFT)
                elif side != "no tab stop":
                    stops.add_tab_stop(position, WD_TAB_ALIGNMENT.RIGHT)
                if side == "extra stop":
                    stops.add_tab_stop(Inches(3), WD_TAB_ALIGNMENT.CENTER)
                if side == "cleared stop":
                    stops.add_tab_stop(Inches(1), WD_TAB_ALIGNMENT.CLEAR)
                if side == "blank paragraph":
                    document.add_paragraph("")
        options: dict[str, Any] = (
            {"word_number_split_by_tabstop": 3, "index": 0} if rng.random() < 0.7 else {}
        )
        result_path = _save(result, folder / f"result{index}.docx")
        gold_path = _save(gold, folder / f"gold{index}.docx")
        yield Case(change, (None if index == 0 else result_path, gold_path), options)


def _factsheet(path: Path, subscript: str, rng: random.Random) -> str:
    """A water factsheet: "H2O" as runs H, 2, O; the 2 set as ``subscript`` says."""
    document = _document()
    document.add_paragraph(_sentences(rng, 1)[0])
    paragraph = document.add_paragraph("Water, ")
    for text in ("H", "2", "O"):
        run = paragraph.add_run(text)
        if text == "2" and subscript == "subscript":
            run.font.subscript = True
        elif text == "2" and subscript == "superscript":
            run.font.superscript = True
    paragraph.add_run(" is " + " ".join(words(rng, 4)))
    if subscript == "moved":
        paragraph.runs[2].font.subscript = None
        paragraph.runs[-1].font.subscript = True
    return _save(document, path)


@makes("compare_subscript_contains")
def _subscript(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(8):
        kind = rng.choice(["subscript", "subscript", "plain", "superscript", "moved"])
        gold = _factsheet(folder / f"gold{index}.docx", "subscript", rng)
        result = _factsheet(folder / f"result{index}.docx", kind, rng)
        yield Case(kind, (None if index == 0 else result, gold))


@makes("has_page_numbers_in_footers")
def _page_numbers(rng: random.Random, folder: Path) -> Iterator[Case]:
    kinds = ["field", "field", "text", "none", "words only", "second section without",
             "second section linked", "field in second paragraph"]  # fmt: skip
    for index in range(8):
        kind = kinds[index % len(kinds)]
        document = _document()
        for text in _sentences(rng, 3):
            document.add_paragraph(text)
        footer = document.sections[0].footer
        footer.is_linked_to_previous = False
        paragraph = footer.paragraphs[0]
        if kind in ("field", "second section without", "second section linked"):
            _page_field(paragraph, 1)
        elif kind == "text":
            paragraph.text = "Page 1 of 3"
        elif kind == "words only":
            paragraph.text = "LibreOffice, open source word processing"
        elif kind == "field in second paragraph":
            _page_field(footer.add_paragraph(), 1)
        if kind.startswith("second section"):
            section = document.add_section()
            document.add_paragraph(_sentences(rng, 1)[0])
            section.footer.is_linked_to_previous = kind.endswith("linked")
        yield Case(kind, (None if index == 0 else _save(document, folder / f"d{index}.docx"),))


@makes("compare_font_names")
def _font_names(rng: random.Random, folder: Path) -> Iterator[Case]:
    rules = {"font_name": "Times New Roman"}
    for index in range(8):
        state = rng.choice(["all runs", "all runs", "one run left", "style only", "none"])
        document = _document()
        if state == "style only":
            document.styles["Normal"].font.name = "Times New Roman"
        for number, text in enumerate(_sentences(rng, 3)):
            paragraph = document.add_paragraph()
            for part in text.split(" ", 1):
                run = paragraph.add_run(part + " ")
                if state == "all runs" or (state == "one run left" and number < 2):
                    run.font.name = "Times New Roman"
        if rng.random() < 0.3:
            document.add_paragraph("")
        path = _save(document, folder / f"d{index}.docx")
        yield Case(state, (None if index == 0 else path, rules))


@makes("is_first_line_centered")
def _first_line_centered(rng: random.Random, folder: Path) -> Iterator[Case]:
    alignments = [WD_PARAGRAPH_ALIGNMENT.CENTER, WD_PARAGRAPH_ALIGNMENT.CENTER,
                  WD_PARAGRAPH_ALIGNMENT.LEFT, WD_PARAGRAPH_ALIGNMENT.JUSTIFY, None]  # fmt: skip
    for index in range(8):
        alignment = rng.choice(alignments)
        document = _document()
        heading = document.add_paragraph("Constitution of the " + " ".join(words(rng, 2)))
        heading.paragraph_format.alignment = alignment
        second = document.add_paragraph(_sentences(rng, 1)[0])
        second.paragraph_format.alignment = WD_PARAGRAPH_ALIGNMENT.CENTER
        path = _save(document, folder / f"d{index}.docx")
        yield Case(f"{alignment}", (None if index == 0 else path,))


def _odt(path: Path, lines: list[str], highlighted: dict[int, str]) -> str:
    """An .odt whose lines are paragraphs (in an automatic paragraph style, as Writer saves
    them); the words after line i's first in a span whose automatic text style has the
    background ``highlighted[i]`` (bold where none), as Writer writes a highlighting. The
    last paragraph ends with a double space and a link, which Writer writes as ``text:s``
    and ``text:a``."""
    document = OpenDocumentText()
    styles: dict[str, Style] = {}
    for colour in sorted(set(highlighted.values())):
        style = Style(name=f"T{len(styles) + 1}", family="text")
        style.addElement(TextProperties(backgroundcolor=colour))
        document.automaticstyles.addElement(style)
        styles[colour] = style
    bold = Style(name="T9", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    document.automaticstyles.addElement(bold)
    body = Style(name="P1", family="paragraph", parentstylename="Standard")
    body.addElement(ParagraphProperties(marginbottom="0.247cm"))
    document.automaticstyles.addElement(body)
    for number, line in enumerate(lines):
        first, _, rest = line.partition(" ")
        paragraph = P(stylename=body, text=first + " ")
        style = styles.get(highlighted.get(number, ""), bold)
        paragraph.addElement(Span(stylename=style, text=rest))
        if number == len(lines) - 1:
            paragraph.addElement(S(c=2))
            paragraph.addElement(A(href="https://example.org/recruitment", text="details"))
        document.text.addElement(paragraph)
    document.save(str(path))
    return str(path)


@makes("check_highlighted_words")
def _highlighted(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 6a33f9b9: remove the yellow highlighting; the text must stay as it was."""
    for index in range(8):
        lines = _sentences(rng, 3)
        state = rng.choice(["removed", "removed", "one left", "other colour", "text changed"])
        left: dict[int, str] = {}
        if state == "one left":
            left = {rng.randrange(3): "#ffff00"}
        elif state == "other colour":
            left = {0: "#00ff00"}
        result_lines = [*lines[:-1], lines[-1] + " more"] if state == "text changed" else lines
        gold = _odt(folder / f"gold{index}.odt", lines, {})
        result = _odt(folder / f"result{index}.odt", result_lines, left)
        yield Case(state, (None if index == 0 else result, gold))


def _picture(colour: tuple[int, int, int], format_: str = "PNG") -> io.BytesIO:
    stream = io.BytesIO()
    Image.new("RGB", (24, 16), colour).save(stream, format=format_)
    stream.seek(0)
    return stream


@makes("compare_docx_images")
def _docx_images(rng: random.Random, folder: Path) -> Iterator[Case]:
    changes = ["same", "same", "same", "other pixels", "dropped", "added", "as BMP",
               "swapped", "text only changed"]  # fmt: skip
    for index in range(9):
        change = changes[index % len(changes)]
        colours = [(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(2)]
        paths = []
        for side in ("gold", "result"):
            here = change if side == "result" else "same"
            document = _document()
            document.add_paragraph(_sentences(rng, 1)[0] if here == "text only changed" else "")
            pictures = list(colours)
            if here == "other pixels":
                pictures[1] = (pictures[1][0] ^ 1, *pictures[1][1:])
            elif here == "dropped":
                pictures = pictures[:1]
            elif here == "added":
                pictures.append((0, 0, 0))
            elif here == "swapped":
                pictures.reverse()
            for colour in pictures:
                format_ = "BMP" if here == "as BMP" else "PNG"
                document.add_picture(_picture(colour, format_), width=Inches(1))
            paths.append(_save(document, folder / f"{side}{index}.docx"))
        yield Case(change, (None if index == 0 else paths[1], paths[0]))


def _outline(path: Path, lines: list[str], struck: str, size: dict[str, Any]) -> str:
    """A course outline, a paragraph per line of two runs; the last paragraph's runs struck
    through as ``struck`` says; runs italic at ``size["italic"]`` points when given."""
    document = _document()
    for number, line in enumerate(lines):
        paragraph = document.add_paragraph()
        first, _, rest = line.partition(" ")
        for part, run_text in enumerate((first + " ", rest)):
            run = paragraph.add_run(run_text)
            if number == len(lines) - 1 and (struck == "all" or (struck == "first" and not part)):
                run.font.strike = True
            if "italic" in size and part == 1 and number % 2 == 0:
                run.italic = True
                run.font.size = None if size["italic"] is None else Pt(size["italic"])
    return _save(document, path)


@makes("evaluate_strike_through_last_paragraph")
def _strike_through(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(8):
        lines = _sentences(rng, rng.randint(2, 4))
        struck = rng.choice(["all", "all", "first", "none", "all, text changed"])
        result_lines = [*lines[:-1], lines[-1] + " x"] if "changed" in struck else lines
        gold = _outline(folder / f"gold{index}.docx", lines, "none", {})
        result = _outline(folder / f"result{index}.docx", result_lines, struck.split(",")[0], {})
        yield Case(struck, (None if index == 0 else result, gold))


@makes("check_italic_font_size_14")
def _italic_14(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(8):
        lines = _sentences(rng, 3)
        size = rng.choice([14, 14, 12, None, 14.5])
        changed = rng.random() < 0.2
        result_lines = [*lines[:-1], lines[-1] + " x"] if changed else lines
        gold = _outline(folder / f"gold{index}.docx", lines, "none", {"italic": 12})
        result = _outline(folder / f"result{index}.docx", result_lines, "none", {"italic": size})
        label = f"italic at {size}" + (", text changed" if changed else "")
        yield Case(label, (None if index == 0 else result, gold))


@makes("contains_page_break")
def _page_breaks(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task ecc2413d asks for five page breaks; Writer writes some as "page break before"."""
    for index in range(10):
        count = rng.choice([5, 5, 4, 6, 0])
        before = rng.random() < 0.25
        document = _document()
        for number in range(7):
            paragraph = document.add_paragraph(_sentences(rng, 1)[0])
            if number < count:
                if before and number == 0:
                    paragraph.paragraph_format.page_break_before = True
                else:
                    paragraph.add_run().add_break(WD_BREAK.PAGE)
        rules: dict[str, Any] = {"page_break_count": 5} if index % 4 else {}
        path = _save(document, folder / f"d{index}.docx")
        label = f"{count} breaks" + (", the first as page break before" if before else "")
        yield Case(label, (None if index == 0 else path, rules))


_XCU = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" \
xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse">\
<value>false</value></prop></item>
{items}</oor:items>
"""


@makes("find_default_font")
def _default_font(rng: random.Random, folder: Path) -> Iterator[Case]:
    rules = {"font_name": "Times New Roman"}
    for index in range(12):
        state = rng.choice(["set", "set", "other font", "heading only", "not set", "broken"])
        items = ""
        if state in ("set", "other font", "heading only"):
            prop = "Heading" if state == "heading only" else "Standard"
            font = "DejaVu Sans" if state == "other font" else "Times New Roman"
            items = ('<item oor:path="/org.openoffice.Office.Writer/DefaultFont">'
                     f'<prop oor:name="{prop}" oor:op="fuse"><value>{font}</value></prop>'
                     "</item>\n")  # fmt: skip
        text = _XCU.format(items=items)
        if state == "broken":
            text = text[: len(text) // 2]
        path = folder / f"registrymodifications{index}.xcu"
        path.write_text(text, encoding="utf-8")
        yield Case(state, (None if index == 0 else str(path), rules))


_SIGHT_WORDS = ["all", "am", "are", "at", "ate", "be", "black", "brown", "but", "came", "did",
                "do", "eat", "four", "get", "good", "have", "he", "into", "like", "must", "new",
                "no", "now", "on", "our", "out", "please", "pretty", "ran", "ride", "saw", "say",
                "she", "so", "soon", "that", "there", "they", "this", "too", "under", "want",
                "was", "well", "went", "what", "white", "who", "will", "with", "yes"]  # fmt: skip


def _sight_words(path: Path, cells: list[str], colours: list[RGBColor | None]) -> str:
    """The Dolch primer: a title, then a table of the words, each a run of its colour."""
    document = _document()
    document.add_paragraph("Dolch Sight Words Primer")
    table = document.add_table(rows=len(cells) // 4, cols=4)
    for number, (word, colour) in enumerate(zip(cells, colours, strict=True)):
        run = table.cell(number // 4, number % 4).paragraphs[0].add_run(word)
        if colour is not None:
            run.font.color.rgb = colour
    return _save(document, path)


@makes("evaluate_colored_words_in_tables")
def _colored_words(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 8472fece: words starting with a vowel red, the others blue, in the tables."""
    red, blue = RGBColor(0xFF, 0, 0), RGBColor(0, 0, 0xFF)
    # near red and blue as Writer's palette and a colour picker give them, and ones too far
    # (CIEDE2000 from pure red and blue: 0.8 and 0.9; 3.2 and 2.9, inside 3.5; 3.6 and 3.9)
    nears = {"near": [RGBColor(0xFF, 0x00, 0x08), RGBColor(0x00, 0x00, 0xF8)],
             "just inside": [RGBColor(0xF0, 0x10, 0x10), RGBColor(0x00, 0x00, 0xE8)],
             "just outside": [RGBColor(0xEE, 0x11, 0x11), RGBColor(0x00, 0x00, 0xE0)],
             "palette dark": [RGBColor(0xC9, 0x21, 0x1E), RGBColor(0x2A, 0x60, 0x99)]}  # fmt: skip
    states = ["right", "right", "near", "just inside", "just outside", "palette dark",
              "one swapped", "one automatic", "text changed"]  # fmt: skip
    for index in range(9):
        state = states[index % len(states)]
        cells = rng.sample(_SIGHT_WORDS, 8)
        colours: list[RGBColor | None] = [red if word[0] in "aeiou" else blue for word in cells]
        if state in nears:
            near_red, near_blue = nears[state]
            colours = [near_red if c == red else near_blue for c in colours]
        elif state == "one swapped":
            colours[0] = blue if colours[0] == red else red
        elif state == "one automatic":
            colours[rng.randrange(8)] = None
        result_cells = [*cells[:-1], "zzz"] if state == "text changed" else cells
        gold = _sight_words(folder / f"gold{index}.docx", cells, [None] * 8)
        result = _sight_words(folder / f"result{index}.docx", result_cells, colours)
        yield Case(state, (None if index == 0 else result, gold))
