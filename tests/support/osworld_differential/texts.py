"""Case makers for the text metrics: Writer documents compared by their text (paragraphs
without the empty ones, a references section, de-duplicated train records, three addresses),
and the multi-app tasks' files (a sar report, a Python file, a result number, cities in a
sheet, e-books and zip archives).

Documents are made with python-docx, e-books in calibre's flat layout (content.opf, toc.ncx
and the chapters at the archive's top), archives with zipfile as a desktop's archiver makes
them. Each case is a gold file and a result that an episode could leave.
"""

import random
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openpyxl
from docx import Document
from docx.shared import Pt

from tests.support.osworld_differential.core import Case, makes, words


def _docx(path: Path, paragraphs: list[str]) -> str:
    document = Document()
    document.styles["Normal"].font.name = "Liberation Serif"
    document.styles["Normal"].font.size = Pt(12)
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))
    return str(path)


def _write(path: Path, text: str, newline: str = "\n") -> str:
    with open(path, "w", encoding="utf-8", newline=newline) as f:
        f.write(text)
    return str(path)


@makes("compare_docx_files_and_ignore_new_lines")
def _ignore_new_lines(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 5bc63fb9 (ignore_blanks false): model answers pasted into a document."""
    changes = ["same", "same", "empty lines", "line split", "double space", "word changed",
               "trailing space", "line dropped", "tab"]  # fmt: skip
    for index in range(9):
        change = changes[index % len(changes)]
        lines = [" ".join(words(rng, rng.randint(3, 8))) for _ in range(rng.randint(2, 4))]
        edited = list(lines)
        if change == "empty lines":
            edited = [part for line in lines for part in (line, "")]
        elif change == "line split":
            first, _, rest = edited[0].partition(" ")
            edited[0:1] = [first, rest]
        elif change == "double space":
            edited[0] = edited[0].replace(" ", "  ", 1)
        elif change == "word changed":
            edited[-1] += " extra"
        elif change == "trailing space":
            edited[0] += " "
        elif change == "line dropped":
            edited.pop()
        elif change == "tab":
            edited[0] = edited[0].replace(" ", "\t", 1)
        gold = _docx(folder / f"gold{index}.docx", lines)
        result = _docx(folder / f"result{index}.docx", edited)
        options = {"ignore_blanks": False} if rng.random() < 0.7 else {}
        yield Case(change, (None if index == 0 else result, gold), options)


_AUTHORS = ["Smith, J.", "Nguyen, T. H.", "García, M.", "O'Brien, K.", "Chen, L."]
_TITLES = ["Nurse staffing and patient outcomes", "Burnout in primary care",
           "Retention of health professionals", "Workforce planning in Europe"]  # fmt: skip


def _reference(rng: random.Random) -> str:
    year = rng.randint(2005, 2023)
    return (f"{rng.choice(_AUTHORS)} ({year}). {rng.choice(_TITLES)}. "
            f"Journal of {words(rng, 1)[0].capitalize()} Studies, {rng.randint(1, 40)}"
            f"({rng.randint(1, 6)}), {rng.randint(1, 200)}-{rng.randint(201, 400)}.")  # fmt: skip


def _apa_slip(reference: str) -> str:
    """The same reference as a student might leave it: period after the year missing,
    volume not separated."""
    return reference.replace("). ", ") ", 1).replace(", ", " ", 1)


@makes("compare_references")
def _references(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 2c1ebcd7: fix the reference list to APA 7; scored by fuzzy likeness above 0.6."""
    changes = ["same", "same", "one slip", "all slips", "one dropped", "no heading",
               "neither heading", "blank lines", "reordered", "rewritten"]  # fmt: skip
    for index in range(10):
        change = changes[index % len(changes)]
        body = [" ".join(words(rng, 6)) for _ in range(2)]
        references = [_reference(rng) for _ in range(rng.randint(2, 4))]
        result_refs = list(references)
        if change == "one slip":
            result_refs[0] = _apa_slip(result_refs[0])
        elif change == "all slips":
            result_refs = [_apa_slip(r) for r in result_refs]
        elif change == "one dropped":
            result_refs.pop()
        elif change == "blank lines":
            result_refs = [part for r in result_refs for part in (r, "")]
        elif change == "reordered":
            result_refs.reverse()
        elif change == "rewritten":
            result_refs = [" ".join(words(rng, 12)) for _ in result_refs]
        heading = "References"
        gold_heading = "Bibliography" if change == "neither heading" else heading
        result_heading = (
            "Reference list" if change in ("no heading", "neither heading") else heading
        )
        gold = _docx(folder / f"gold{index}.docx", [*body, gold_heading, *references])
        result = _docx(folder / f"result{index}.docx", [*body, result_heading, *result_refs])
        yield Case(change, (None if index == 0 else result, gold),
                   {"content_only": True, "reference_base_result": 0.6})  # fmt: skip


def _train_lines(rng: random.Random) -> list[str]:
    """Signalling records ``time, train_id, station_id, platform``, some trains twice."""
    lines = []
    for number in range(rng.randint(4, 7)):
        time = f"{rng.randint(6, 11):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        lines.append(f"{time}, {100 + number}, {rng.choice(['ADM', 'TST', 'MOK'])}, "
                     f"{rng.randint(1, 4)}")  # fmt: skip
    return lines


@makes("compare_unique_train_records")
def _train_records(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 6f81754e: keep one record per train id; [gold, the original] are expected."""
    changes = ["deduplicated", "deduplicated", "other duplicate kept", "not deduplicated",
               "record dropped", "record edited", "blank lines"]  # fmt: skip
    for index in range(8):
        change = changes[index % len(changes)]
        unique = _train_lines(rng)
        repeats = [line.replace(line[:2], f"{int(line[:2]) + 1:02d}", 1)
                   for line in rng.sample(unique, 2)]  # fmt: skip
        original = unique + repeats
        rng.shuffle(original)
        kept = [line for line in original if line in unique]
        if change == "other duplicate kept":
            kept = _one_per_id(original, prefer=repeats)
        elif change == "not deduplicated":
            kept = list(original)
        elif change == "record dropped":
            kept.pop()
        elif change == "record edited":
            kept[0] = kept[0].replace(",", ";", 1)
        elif change == "blank lines":
            kept = [part for line in kept for part in (line, "")]
        gold = _docx(folder / f"gold{index}.docx", [line for line in original if line in unique])
        start = _docx(folder / f"original{index}.docx", original)
        result = _docx(folder / f"result{index}.docx", kept)
        yield Case(change, (None if index == 0 else result, [gold, start]))


def _one_per_id(lines: list[str], prefer: list[str]) -> list[str]:
    """One line per train id, the ``prefer`` line where a train has one, in original order."""
    chosen: dict[str, str] = {}
    for line in lines:
        train = line.split(",")[1]
        if train not in chosen or line in prefer:
            chosen[train] = line
    return [line for line in lines if line in chosen.values()]


_PLACES = [
    "深圳市福田区益田路5055号信息枢纽大厦西门一楼",
    "深圳市福田区福华三路111号北三门会展中心警务室",
    "深圳市福田区正义街1号",
    "福田区莲科路18号莲花一村警务室",
    "深圳市福田区振兴路108号",
    "福田区竹子林五路12号",
]


@makes("fuzzy_place_math")
def _place_math(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 7ff48d5b: addresses of self-service machines typed into the document."""
    for index in range(10):
        count = rng.choice([3, 3, 3, 2, 4])
        places = rng.sample(_PLACES, count)
        state = rng.choice(["exact", "exact", "slip", "space inside", "other place"])
        if state == "slip":
            places[0] = places[0][:-2] + "二楼"
        elif state == "space inside":
            places[0] = places[0][:6] + " " + places[0][6:]
        elif state == "other place":
            places[-1] = "北京市朝阳区建国路88号"
        lines = [line for place in places for line in (place, "")]
        path = _docx(folder / f"d{index}.docx", lines)
        yield Case(f"{count} places, {state}", (None if index == 0 else path,
                                                 {"expected": _PLACES}))  # fmt: skip


@makes("check_line_number")
def _line_number(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 2373b66a: ``sar 1 30`` saved to a file, 31 timed lines with its header."""
    for index in range(12):
        samples = rng.choice([30, 30, 29, 31, 10])
        lines = [
            "Linux 6.5.0-27-generic (user-vm) \t03/28/2024 \t_x86_64_\t(4 CPU)",
            "",
            "10:15:01 AM     CPU     %user     %nice   %system   %iowait    %idle",
        ]
        for second in range(samples):
            lines.append(f"10:15:{second + 2:02d} AM     all      {rng.uniform(0, 9):.2f}"
                         "      0.00      0.50      0.00     97.00")  # fmt: skip
        if rng.random() < 0.7:
            lines += ["Average:        all      2.10      0.00      0.50      0.00     97.40"]
        if rng.random() < 0.2:
            lines[2] = lines[2].replace("10:15:01", "25:15:01")
        path = _write(folder / f"report{index}.txt", "\n".join(lines) + "\n")
        yield Case(f"{samples} samples", (None if index == 0 else path, {"expected": "31"}))


_CITIES: list[Any] = [
    "Scottsdale", "Atlanta", ["Lake Tahoe", "Stateline"],
    ["Banff", "Alberta's Rockies", "Alberta\u2019s Rockies"], "Beijing", ["Montreal", "Montréal"],
    "San Diego", "Lille", ["Montreal", "Montréal"], "San Juan",
    ["New York", "New York City", "NYC"],
    "Barcelona", "Toulon", "Sydney", ["Los Angeles", "Long Beach", "LA"], "Vancouver", "Stockholm",
    ["Montreal", "Montréal"], "New Orleans", ["Los Angeles", "Long Beach", "LA"], "Vancouver",
]  # fmt: skip


@makes("compare_conference_city_in_order")
def _conference_cities(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 6f4073b8: the cities of 21 conferences filled into column C."""
    for index in range(14):
        state = rng.choice(["filled", "filled", "alternatives", "with country", "one wrong",
                            "one empty", "swapped"])  # fmt: skip
        cities = [entry if isinstance(entry, str) else entry[0] for entry in _CITIES]
        if state == "alternatives":
            cities = [entry if isinstance(entry, str) else rng.choice(entry) for entry in _CITIES]
        elif state == "with country":
            cities = [f"{city}, {rng.choice(['USA', 'Canada', 'Spain'])}" for city in cities]
        elif state == "one wrong":
            cities[rng.randrange(len(cities))] = "Paris"
        elif state == "one empty":
            cities[rng.randrange(len(cities))] = None
        elif state == "swapped":
            cities[0], cities[1] = cities[1], cities[0]
        book = openpyxl.Workbook()
        sheet = book.active
        sheet.append(["Conference", "Year", "City"])
        for number, city in enumerate(cities):
            sheet.append([rng.choice(["ICML", "NeurIPS", "ICLR"]), 2013 + number // 3, city])
        path = folder / f"cities{index}.xlsx"
        book.save(path)
        yield Case(state, (str(path), {"expected": _CITIES}))


_OPF = """<?xml version='1.0' encoding='utf-8'?>
<package xmlns="http://www.idpf.org/2007/opf" unique-identifier="uuid_id" version="2.0">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:title>Pass Through</dc:title>
    <dc:identifier id="uuid_id">urn:uuid:{uuid}</dc:identifier>
    <dc:language>en</dc:language>
  </metadata>
  <manifest>
{manifest}  </manifest>
  <spine toc="ncx">
{spine}  </spine>
</package>
"""
_NCX = """<?xml version='1.0' encoding='utf-8'?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
  <head><meta name="dtb:uid" content="{uuid}"/></head>
  <docTitle><text>Pass Through</text></docTitle>
  <navMap>
{points}  </navMap>
</ncx>
"""


_CHAPTER = """<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml">
<head><title>Pass Through</title></head>
<body class="calibre">
{body}
</body></html>
"""


def _epub(path: Path, chapters: list[list[str]], uuid: str, folder: str = "") -> str:
    """An e-book in calibre's layout; ``folder`` puts the chapters in a sub-folder."""
    names = [f"{folder}index_split_{number:03d}.html" for number in range(len(chapters))]
    manifest = "".join(f'    <item href="{n}" id="c{i}" media-type="application/xhtml+xml"/>\n'
                       for i, n in enumerate(names))  # fmt: skip
    spine = "".join(f'    <itemref idref="c{i}"/>\n' for i in range(len(names)))
    points = "".join(f'    <navPoint id="p{i}" playOrder="{i}"><navLabel><text>Chapter {i}'
                     f'</text></navLabel><content src="{n}"/></navPoint>\n'
                     for i, n in enumerate(names))  # fmt: skip
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        book.writestr("META-INF/container.xml", '<?xml version="1.0"?><container/>')
        book.writestr("content.opf", _OPF.format(uuid=uuid, manifest=manifest, spine=spine))
        book.writestr("toc.ncx", _NCX.format(uuid=uuid, points=points))
        for name, paragraphs in zip(names, chapters, strict=True):
            body = "\n".join(f'<p class="calibre1">{p}</p>' for p in paragraphs)
            book.writestr(name, _CHAPTER.format(body=body))
    return str(path)


@makes("compare_epub")
def _compare_epub(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 42d25c08: a novel's text files made into an e-book; scored by line likeness."""
    changes = ["same", "same", "other identifier", "a paragraph changed", "a chapter missing",
               "not a zip", "re-wrapped"]  # fmt: skip
    for index in range(15):
        change = changes[index % len(changes)] if index < 14 else "chapters in a folder"
        chapters = [[" ".join(words(rng, 8)) for _ in range(rng.randint(2, 4))] for _ in range(3)]
        gold = _epub(folder / f"gold{index}.epub", chapters, "1111")
        result_chapters = [list(chapter) for chapter in chapters]
        uuid = "2222" if change == "other identifier" else "1111"
        if change == "a paragraph changed":
            result_chapters[1][0] = " ".join(words(rng, 8))
        elif change == "a chapter missing":
            result_chapters.pop()
        elif change == "re-wrapped":
            result_chapters[0][0] = result_chapters[0][0].replace(" ", "\n", 2)
        path = folder / f"result{index}.epub"
        if change == "not a zip":
            result = _write(path, "\n\n".join(" ".join(c) for c in chapters))
        elif change == "chapters in a folder":
            result = _epub(path, result_chapters, uuid, folder="text/")
            gold = _epub(folder / f"gold{index}.epub", chapters, "1111", folder="text/")
        else:
            result = _epub(path, result_chapters, uuid)
        difference = "epub chapters in a sub-folder" if change == "chapters in a folder" else None
        yield Case(change, (None if index == 0 else result, gold), difference=difference)


_PYTHON = """import torch
import torch.nn as nn
from torch.nn import functional as F

# hyperparameters
batch_size = 32 # how many independent sequences will we process in parallel?
block_size = 8 # what is the maximum context length for predictions?

torch.manual_seed(1337)


def get_batch(split):
    # generate a small batch of data of inputs x and targets y
    data = train_data if split == 'train' else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i+block_size] for i in ix])
    return x
"""


@makes("compare_python_pure_text")
def _python_pure_text(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task dd60633f: code cells of a notebook merged into one file, markdown left out."""
    changes = ["same", "same", "shebang and coding", "blank lines", "tabs", "trailing spaces",
               "crlf", "markdown kept", "a comment dropped", "docstring kept",
               "coding after code"]  # fmt: skip
    for index in range(22):
        change = changes[index % len(changes)]
        text, newline = _PYTHON, "\n"
        if change == "shebang and coding":
            text = "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n" + text
        elif change == "blank lines":
            text = text.replace("\n\n", "\n\n\n\n").replace("import torch\n", "import torch\n\n")
        elif change == "tabs":
            text = text.replace("    ", "\t")
        elif change == "trailing spaces":
            text = text.replace("\n", "  \n")
        elif change == "crlf":
            newline = "\r\n"
        elif change == "markdown kept":
            text = "```python\n" + text + "```\n"
        elif change == "a comment dropped":
            text = text.replace("# hyperparameters\n", "")
        elif change == "docstring kept":
            text = '"""Building a GPT"""\n' + text
        elif change == "coding after code":
            text = "import os\n# coding: utf-8\n" + text
        gold = _write(folder / f"gold{index}.py", _PYTHON)
        result = _write(folder / f"result{index}.py", text, newline=newline)
        yield Case(change, (None if index == 0 else result, gold))


@makes("compare_result_files")
def _result_files(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 7f35355e: the median price written to result.txt."""
    for index in range(16):
        gold_text = rng.choice(["25.0", "25.0", "Median: 25.0", "25"])
        result_text = rng.choice(["25.0", "25.0\n", "25", "25.00001", "25.1",
                                  "The median price is 25.0", "twenty-five", ""])  # fmt: skip
        gold = _write(folder / f"gold{index}.txt", gold_text + "\n")
        path = folder / f"result{index}.txt"
        if index == 1:
            path.write_bytes(b"\xff\xfe2\x005\x00")
            result_text = "UTF-16 25"
        else:
            _write(path, result_text)
        yield Case(f"{result_text!r} vs {gold_text!r}", (None if index == 0 else str(path), gold))


@makes("compare_zip_files")
def _zip_files(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Task 8df7e444: the essay and its forms zipped for submission. OSWorld reads PDF
    members with PyPDF2, which is not here, so PDF members appear only where the names
    differ (scored before any member is read)."""
    changes = ["same", "same", "same", "a member changed", "a member missing", "a member renamed",
               "in a folder", "pdf renamed", "not a zip"]  # fmt: skip
    for index in range(10):
        change = changes[index % len(changes)]
        essay = _docx(folder / f"essay{index}.docx", [" ".join(words(rng, 9)) for _ in range(3)])
        members = {"essay.docx": Path(essay).read_bytes(),
                   "cover_sheet.txt": " ".join(words(rng, 5)).encode()}  # fmt: skip
        result_members = dict(members)
        if change == "a member changed":
            result_members["cover_sheet.txt"] += b" signed"
        elif change == "a member missing":
            del result_members["cover_sheet.txt"]
        elif change == "a member renamed":
            result_members["Essay.docx"] = result_members.pop("essay.docx")
        elif change == "in a folder":
            result_members = {f"submission/{k}": v for k, v in result_members.items()}
        elif change == "pdf renamed":
            members["essay.pdf"] = b"%PDF-1.4\n"
            result_members["essay_final.pdf"] = b"%PDF-1.4\n"
        paths = []
        for side, content in (("gold", members), ("result", result_members)):
            path = folder / f"{side}{index}.zip"
            with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
                for name, data in content.items():
                    archive.writestr(name, data)
            paths.append(str(path))
        if change == "not a zip":
            paths[1] = essay
        yield Case(change, (None if index == 0 else paths[1], paths[0]))
