"""Text and file metrics of OSWorld's multi-app tasks: Python source without its blank lines,
a number in a result file, timestamped lines, cities in a sheet's column, e-books and zip
archives.

Text files are read as UTF-8 with newlines made ``\\n`` (OSWorld reads them in the desktop
host's UTF-8 locale). Archives are never unpacked: their members are read into memory within
the bounds (``vm_pool.evaluation.bounds``).
"""

import difflib
import io
import re
import unicodedata
import zipfile
import zlib
from typing import Any

import lxml.html
import openpyxl
from lxml import etree
from pypdf import PdfReader

from vm_pool.evaluation.bounds import (
    NOT_A_VERDICT,
    check_page_count,
    check_sheets,
    check_size,
    check_zip,
)
from vm_pool.evaluation.metrics.archive import read_members
from vm_pool.evaluation.metrics.errors import MetricError

_TIME = re.compile(r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)")
_PYTHON_HEADER = ("#!", "# -*- coding:", "# coding:", "# coding=")
_PDF_SIMILARITY = 0.95
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    OSError,
    ValueError,
    EOFError,
    NotImplementedError,  # a compression method zipfile lacks
    RuntimeError,  # an encrypted member
    zlib.error,
)


def _read_text(path: str) -> str:
    check_size(path)
    with open(path, encoding="utf-8") as f:
        return f.read()


def compare_python_pure_text(result: str | None, expected: str | None) -> float:
    """1 when two Python files have the same lines once blank lines, trailing spaces, tabs
    (as 4 columns) and a shebang or coding line among the first three lines are set aside."""
    if not result or not expected:
        return 0.0
    try:
        return float(_python_lines(_read_text(result)) == _python_lines(_read_text(expected)))
    except (OSError, UnicodeDecodeError):
        return 0.0


def _python_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = 0
    while start < min(len(lines), 3) and lines[start].strip().startswith(_PYTHON_HEADER):
        start += 1
    return [line.expandtabs(4).rstrip() for line in lines[start:] if line.strip()]


def compare_result_files(result: str | None, expected: str | None) -> float:
    """1 when the result file states the expected file's content (both stripped).

    When the expected content is a number, the result may contain it as text or be a number
    within 1e-4 of it; otherwise the two must be equal.
    """
    if not result or not expected:
        return 0.0
    # Deliberate difference from OSWorld: a result that is not UTF-8 text crashes OSWorld
    # (UnicodeDecodeError); here it states nothing and scores 0.
    try:
        src = _read_text(result).strip()
    except (OSError, UnicodeDecodeError):
        return 0.0
    tgt = _read_text(expected).strip()
    try:
        tgt_number = float(tgt)
        if tgt in src:
            return 1.0
        return float(abs(float(src) - tgt_number) < 1e-4)
    except ValueError:
        return float(src == tgt)


def check_line_number(result: str | None, line_number: dict[str, Any]) -> float:
    """1 when exactly ``line_number["expected"]`` lines of the file hold a time (HH:MM:SS)."""
    try:
        expected = int(line_number["expected"])
    except (KeyError, TypeError, ValueError) as error:
        # Deliberate difference from OSWorld: options without an integer "expected" score
        # every file 0 there; here they are the evaluator's error.
        raise MetricError(f"check_line_number needs an integer 'expected': {error}") from error
    if result is None:
        return 0.0
    try:
        text = _read_text(result)
    except (OSError, UnicodeDecodeError):
        return 0.0
    count = sum(1 for line in io.StringIO(text) if _TIME.search(line))
    return float(count == expected)


def _city(value: Any) -> str:
    """Lower case, accents dropped, every run of other characters than a-z and 0-9 a space."""
    if value is None:
        return ""
    text = unicodedata.normalize("NFKD", value if isinstance(value, str) else str(value))
    text = "".join(char for char in text if not unicodedata.combining(char))
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def compare_conference_city_in_order(result: str | None, expected_city: dict[str, Any]) -> float:
    """1 when each cell of C2:C22 of the workbook's active sheet contains (normalised, see
    ``_city``) the expected city in the same position, or one of its listed alternatives."""
    expected = expected_city["expected"]
    if not result:
        return 0.0
    # Deliberate difference from OSWorld: a missing or unreadable workbook crashes OSWorld;
    # here it lists no cities and scores 0.
    try:
        check_sheets(result)
        sheet = openpyxl.load_workbook(result).active
        cities = [cell.value for row in sheet["C2:C22"] for cell in row]
    except NOT_A_VERDICT:
        raise
    except Exception:
        return 0.0
    if len(cities) > len(expected):
        return 0.0  # OSWorld's lookup past the expected list fails, and it scores 0
    for actual, entry in zip(cities, expected, strict=False):
        if isinstance(entry, str):
            candidates = [entry]
        elif isinstance(entry, list):
            candidates = entry
        else:
            return 0.0  # OSWorld raises TypeError inside its try and scores 0
        actual_city = _city(actual)
        if not any(city and city in actual_city for city in map(_city, candidates)):
            return 0.0
    return 1.0


def compare_epub(result: str | None, expected: str) -> float:
    """How alike two e-books are, from 0 to 1: the mean, over their parts paired in name
    order, of difflib's ratio of the parts' lines.

    The parts are ``toc.ncx`` without its navPoint lines and ``content.opf`` without its
    dc:identifier lines (both at the top of the archive), and every ``.html`` file re-printed
    by lxml from its text with line breaks removed. A file that is not a zip has no parts.
    """
    if result is None:
        return 0.0
    result_parts, expected_parts = _epub_parts(result), _epub_parts(expected)
    if not result_parts:
        return 0.0
    pairs = zip(result_parts, expected_parts, strict=False)
    total = sum(difflib.SequenceMatcher(a=r[1], b=e[1]).ratio() for r, e in pairs)
    return total / len(result_parts)


def _epub_parts(path: str) -> list[tuple[str, list[str]]]:
    """(name, lines) of the e-book's compared parts, sorted by name."""
    check_size(path)
    if not zipfile.is_zipfile(path):
        return []
    try:
        members = read_members(path)
    except NOT_A_VERDICT:
        raise
    except _ZIP_ERRORS:
        # OSWorld reads a damaged zip (BadZipFile) as an e-book without parts; and,
        # deliberately unlike OSWorld, which crashes on them, so is any other damage.
        return []
    parts = []
    for name, skip in (("toc.ncx", "navPoint"), ("content.opf", "dc:identifier")):
        if name in members:
            lines = _decoded(members[name]).splitlines()
            parts.append((name, [line for line in lines if skip not in line]))
    for name, data in members.items():
        # Deliberate difference from OSWorld: an .html part in a sub-folder crashes OSWorld
        # (it writes the part to a folder it never made); here it is compared like the rest.
        if name.endswith(".html"):
            parts.append((name, _html_lines(data)))
    return sorted(parts)


def _decoded(data: bytes) -> str:
    # Deliberate difference from OSWorld: a part that is not UTF-8 crashes OSWorld
    # (UnicodeDecodeError); here its undecodable bytes are replacement characters.
    return data.decode("utf-8", errors="replace")


def _html_lines(data: bytes) -> list[str]:
    text = "".join(char for char in _decoded(data) if char not in "\n\r")
    try:
        tree = lxml.html.fromstring(text.encode())
    except (etree.LxmlError, ValueError):
        # Deliberate difference from OSWorld: an empty part crashes OSWorld (lxml's "Document
        # is empty"); here it has no lines.
        return []
    printed: str = lxml.html.tostring(tree, pretty_print=True, encoding="unicode")
    return printed.splitlines()


def compare_zip_files(result: str | None, expected: str, **options: Any) -> float:
    """1 when two zip archives list the same names (folders included) and every member has
    the same bytes, or for a .pdf member a text at least 95% alike (difflib's ratio).

    OSWorld extracts PDF text with PyPDF2; this uses pypdf (its successor), whose text for a
    page may differ slightly.
    """
    if not result:
        return 0.0
    # Deliberate difference from OSWorld: a result that is not a zip crashes OSWorld; here it
    # holds none of the expected files and scores 0.
    check_zip(result)
    check_zip(expected)
    try:
        actual_zip = zipfile.ZipFile(result)
    except _ZIP_ERRORS:
        return 0.0
    with actual_zip, zipfile.ZipFile(expected) as expected_zip:
        names = set(actual_zip.namelist())
        if names != set(expected_zip.namelist()):
            return 0.0
        for name in names:
            try:
                content1 = actual_zip.read(name)
            except _ZIP_ERRORS:
                return 0.0  # a damaged or unreadable member is not the expected file
            content2 = expected_zip.read(name)
            if name.lower().endswith(".pdf"):
                if not _similar_pdfs(content1, content2):
                    return 0.0
            elif content1 != content2:
                return 0.0
    return 1.0


def _pdf_text(content: bytes) -> str:
    pages = PdfReader(io.BytesIO(content)).pages
    check_page_count(len(pages))
    return "".join(page.extract_text() for page in pages)


def _similar_pdfs(content1: bytes, content2: bytes) -> bool:
    # Deliberate difference from OSWorld: a PDF that does not parse crashes OSWorld; here it
    # is not like the expected one.
    try:
        text1 = _pdf_text(content1)
    except NOT_A_VERDICT:
        raise
    except Exception:
        return False
    text2 = _pdf_text(content2)
    return difflib.SequenceMatcher(None, text1, text2).ratio() >= _PDF_SIMILARITY
