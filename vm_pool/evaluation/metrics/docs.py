"""Word-processor metrics: paragraph text, tables and line spacing of .docx (and .odt) files."""

import re
from typing import Any

from docx import Document
from odf.opendocument import load as load_odt
from odf.text import P
from rapidfuzz import fuzz

from vm_pool.evaluation.bounds import NOT_A_VERDICT, check_zip


def compare_docx_files(result: str | None, expected: str | None, **options: Any) -> float:
    """Compare the paragraphs' text of two .docx (or two .odt) documents.

    Options, as in OSWorld: ``ignore_blanks`` (default True) compares the whole text with runs
    of whitespace collapsed; False compares paragraph by paragraph. ``ignore_case``,
    ``ignore_order`` (sort paragraphs), ``delete_empty_lines``. ``content_only`` and
    ``fuzzy_match`` return a rapidfuzz similarity from 0 to 1 instead of 0 or 1.
    """
    if not result or not expected:
        return 0.0
    ignore_case = options.get("ignore_case", False)
    try:
        paragraphs1 = _paragraph_texts(result, expected)
        paragraphs2 = _paragraph_texts(expected, result)
    except NOT_A_VERDICT:
        raise
    except Exception:  # an unreadable result scores 0
        return 0.0
    if paragraphs1 is None or paragraphs2 is None:
        return 0.0
    if options.get("ignore_order", False):
        paragraphs1, paragraphs2 = sorted(paragraphs1), sorted(paragraphs2)
    if options.get("delete_empty_lines", False):
        paragraphs1 = [p for p in paragraphs1 if p.strip()]
        paragraphs2 = [p for p in paragraphs2 if p.strip()]

    if options.get("content_only", False) or options.get("ignore_blanks", True):
        text1 = re.sub(r"\s+", " ", "\n".join(paragraphs1)).strip()
        text2 = re.sub(r"\s+", " ", "\n".join(paragraphs2)).strip()
        if ignore_case:
            text1, text2 = text1.lower(), text2.lower()
        if options.get("content_only", False) or options.get("fuzzy_match", False):
            return fuzz.ratio(text1, text2) / 100.0
        return float(text1 == text2)

    if len(paragraphs1) != len(paragraphs2):
        return 0.0
    if ignore_case:
        paragraphs1 = [p.lower() for p in paragraphs1]
        paragraphs2 = [p.lower() for p in paragraphs2]
    if options.get("fuzzy_match", False):
        if not paragraphs1:
            return 1.0
        pairs = zip(paragraphs1, paragraphs2, strict=True)
        return sum(fuzz.ratio(p1, p2) / 100.0 for p1, p2 in pairs) / len(paragraphs1)
    return float(paragraphs1 == paragraphs2)


def _paragraph_texts(path: str, other: str) -> list[str] | None:
    """The document's paragraph texts; None unless both files are .docx or both .odt."""
    if path.endswith(".docx") and other.endswith(".docx"):
        check_zip(path)
        return [p.text for p in Document(path).paragraphs]
    if path.endswith(".odt") and other.endswith(".odt"):
        check_zip(path)
        return [_odt_paragraph_text(p) for p in load_odt(path).getElementsByType(P)]
    return None


def _odt_paragraph_text(paragraph: Any) -> str:
    """A paragraph's own text and that of its direct spans, the nodes OSWorld reads."""
    parts = []
    for node in paragraph.childNodes:
        if node.nodeType == node.TEXT_NODE:
            parts.append(node.data)
        elif node.nodeType == node.ELEMENT_NODE and node.tagName == "text:span":
            parts.extend(c.data for c in node.childNodes if c.nodeType == c.TEXT_NODE)
    return "".join(parts)


def compare_docx_tables(result: str | None, expected: str | None) -> float:
    """1 when both documents have the same tables, same shape, same stripped cell texts."""
    if not result or not expected:
        return 0.0
    try:
        check_zip(result)
        check_zip(expected)
        tables1, tables2 = Document(result).tables, Document(expected).tables
    except NOT_A_VERDICT:
        raise
    except Exception:  # an unreadable result scores 0
        return 0.0
    if len(tables1) != len(tables2):
        return 0.0
    for table1, table2 in zip(tables1, tables2, strict=True):
        if len(table1.rows) != len(table2.rows) or len(table1.columns) != len(table2.columns):
            return 0.0
        for i in range(len(table1.rows)):
            for j in range(len(table1.columns)):
                if table1.cell(i, j).text.strip() != table2.cell(i, j).text.strip():
                    return 0.0
    return 1.0


def compare_line_spacing(result: str | None, expected: str | None) -> float:
    """1 when the documents' text matches (compare_docx_files defaults) and every paragraph
    has the same line spacing."""
    if not result or not expected:
        return 0.0
    if not compare_docx_files(result, expected):
        return 0.0
    try:
        paragraphs1, paragraphs2 = Document(result).paragraphs, Document(expected).paragraphs
    except NOT_A_VERDICT:
        raise
    except Exception:
        return 0.0
    if len(paragraphs1) != len(paragraphs2):
        return 0.0
    return float(
        all(
            p1.paragraph_format.line_spacing == p2.paragraph_format.line_spacing
            for p1, p2 in zip(paragraphs1, paragraphs2, strict=True)
        )
    )
