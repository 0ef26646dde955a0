"""PDF metrics: text similarity and page count.

OSWorld extracts text with PyMuPDF; so does this, where PyMuPDF is installed (the optional extra
``osworld-pdf``: it is AGPL-licensed, so a deployment chooses it). Without it, pypdf extracts
the text, which for the same page can differ in spacing and line breaks, so a fuzzy score may
differ slightly from OSWorld's (identical files still score 1 and unrelated ones near 0; the
difference is listed in ``DIFFERENCES.md``).
"""

import operator
from typing import Any

from pypdf import PdfReader
from rapidfuzz import fuzz

from vm_pool.evaluation.bounds import NOT_A_VERDICT, check_page_count, check_size
from vm_pool.evaluation.metrics.errors import MetricError

_RELATIONS = {"eq", "ne", "lt", "le", "gt", "ge"}


def compare_pdfs(result: str | list[str] | None, expected: str | list[str]) -> float:
    """Mean over the file pairs of the rapidfuzz ratio of their texts, from 0 to 1.

    A pair whose result is missing or unreadable scores 0.
    """
    expected_paths = expected if isinstance(expected, list) else [expected]
    results: list[str | None] = list(result) if isinstance(result, list) else [result]
    if not expected_paths:
        return 0.0
    score = 0.0
    for result_path, expected_path in zip(results, expected_paths, strict=False):
        if result_path is None:
            continue
        try:
            score += fuzz.ratio(pdf_text(result_path), pdf_text(expected_path)) / 100.0
        except NOT_A_VERDICT:
            raise
        except Exception:  # a broken PDF is a failed pair, as in OSWorld
            continue
    return score / len(expected_paths)


def _pages(path: str) -> list[Any]:
    """A PDF's pages, refusing one with more than the evaluation reads (``bounds``)."""
    check_size(path)
    pages = list(PdfReader(path).pages)
    check_page_count(len(pages))
    return pages


def pdf_text(path: str) -> str:
    """A PDF's text as OSWorld's ``compare_pdfs`` reads it: PyMuPDF's, page after page, where
    it is installed; pypdf's, a line between pages, where it is not."""
    try:
        import pymupdf  # weight, and optional: the extra 'osworld-pdf'
    except ImportError:
        return "\n".join(page.extract_text() for page in _pages(path)).strip()
    check_size(path)
    with pymupdf.open(path) as document:
        check_page_count(document.page_count)
        return "".join(page.get_text() for page in document).strip()


def check_pdf_pages(pdf_file: str | None, rules: dict[str, Any]) -> float:
    """1 when the page count stands in ``rules["relation"]`` (eq, lt, ...) to ``ref_value``."""
    if pdf_file is None:
        return 0.0
    relation = rules["relation"]
    if relation not in _RELATIONS:
        raise MetricError(f"check_pdf_pages relation {relation!r} is not supported")
    return float(getattr(operator, relation)(len(_pages(pdf_file)), rules["ref_value"]))
