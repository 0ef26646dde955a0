"""Word-processor text metrics, as OSWorld scores them: paragraphs without the empty ones, a
references section, de-duplicated train records, and words close to a list of places.

Each reads the .docx paragraphs' text with python-docx, as OSWorld does; a document that does
not open scores 0.
"""

import re
from typing import Any

from rapidfuzz import fuzz

from vm_pool.evaluation.metrics.writer import open_docx


def _paragraphs(path: str) -> list[str] | None:
    """The body's paragraph texts; None when the file does not open as a .docx."""
    doc = open_docx(path)
    return None if doc is None else [p.text for p in doc.paragraphs]


def compare_docx_files_and_ignore_new_lines(
    result: str | None, expected: str | None, **options: Any
) -> float:
    """1 when two .docx files have the same text once empty paragraphs are dropped.

    ``ignore_blanks`` (default True) compares the whole text with runs of whitespace
    collapsed; False compares the paragraphs one by one, exactly.
    """
    if not result or not expected:
        return 0.0
    if not (result.endswith(".docx") and expected.endswith(".docx")):
        return 0.0
    paragraphs1, paragraphs2 = _paragraphs(result), _paragraphs(expected)
    if paragraphs1 is None or paragraphs2 is None:
        return 0.0
    paragraphs1 = [p for p in paragraphs1 if p != ""]
    paragraphs2 = [p for p in paragraphs2 if p != ""]
    if options.get("ignore_blanks", True):
        text1 = re.sub(r"\s+", " ", "\n".join(paragraphs1)).strip()
        text2 = re.sub(r"\s+", " ", "\n".join(paragraphs2)).strip()
        return float(text1 == text2)
    return float(paragraphs1 == paragraphs2)


def compare_references(result: str | None, expected: str | None, **options: Any) -> float:
    """How alike the two .docx files' reference lists are, from 0 to 1.

    The list is the non-empty paragraphs after the first paragraph that reads exactly
    ``reference_indicator`` (default "References"). Neither document has one: 1; only one: 0;
    lists of different lengths: 0. Otherwise the mean rapidfuzz ratio of the references in
    order, rescaled so that ``reference_base_result`` (default 0.5) and below give 0 (the mean
    must beat it by 0.01) and 1 stays 1. Other options (``content_only``) are ignored, as in
    OSWorld.
    """
    if not result or not expected:
        return 0.0
    indicator = options.get("reference_indicator", "References")
    base = options.get("reference_base_result", 0.5)
    if not (result.endswith(".docx") and expected.endswith(".docx")):
        return 0.0
    paragraphs1, paragraphs2 = _paragraphs(result), _paragraphs(expected)
    if paragraphs1 is None or paragraphs2 is None:
        return 0.0
    if indicator not in paragraphs1 and indicator not in paragraphs2:
        return 1.0
    if indicator not in paragraphs1 or indicator not in paragraphs2:
        return 0.0
    refs1 = [p for p in paragraphs1[paragraphs1.index(indicator) + 1 :] if p.strip()]
    refs2 = [p for p in paragraphs2[paragraphs2.index(indicator) + 1 :] if p.strip()]
    if len(refs1) != len(refs2):
        return 0.0
    # Deliberate difference from OSWorld: two empty reference lists divide by zero there;
    # here they are the same list.
    if not refs1:
        return 1.0
    similarity = sum(fuzz.ratio(r1, r2) / 100.0 for r1, r2 in zip(refs1, refs2, strict=True))
    similarity /= len(refs1)
    if similarity >= base + 0.01:
        return (similarity - base) / (1 - base)
    return 0.0


def _train_records(path: str) -> tuple[list[str], list[str]] | None:
    """The stripped non-empty paragraphs, and the train id (second field) of each that has
    exactly four comma-separated fields; None when the file does not open."""
    paragraphs = _paragraphs(path)
    if paragraphs is None:
        return None
    lines = [p.strip() for p in paragraphs if p.strip()]
    ids = [line.split(",")[1].strip() for line in lines if len(line.split(",")) == 4]
    return lines, ids


def compare_unique_train_records(result: str | None, expected: Any, **options: Any) -> float:
    """1 when the result keeps one record per train: ``expected`` is [gold, original].

    Every result line must be a line of the original, no train id may repeat, the set of
    train ids must be the gold's, and the result must have as many lines as the gold.
    """
    if not result or not isinstance(expected, list) or len(expected) < 2:
        return 0.0
    gold_path, original_path = expected[0], expected[1]
    if not gold_path or not original_path:
        return 0.0
    processed = _train_records(result)
    gold = _train_records(gold_path)
    original = _train_records(original_path)
    if processed is None or gold is None or original is None:
        return 0.0
    lines, ids = processed
    gold_lines, gold_ids = gold
    if not set(lines) <= set(original[0]):
        return 0.0
    if len(ids) != len(set(ids)) or set(ids) != set(gold_ids):
        return 0.0
    return float(len(lines) == len(gold_lines))


def fuzzy_place_math(result: str | None, rules: dict[str, Any]) -> float:
    """The mean, over the words of the .docx (its paragraphs split on whitespace), of each
    word's best rapidfuzz ratio against ``rules["expected"]`` (a list of answers), from 0 to
    1; 0 unless the document has exactly three words."""
    if result is None:
        return 0.0
    answers = rules["expected"]
    # Deliberate difference from OSWorld: a file that does not open as a .docx crashes OSWorld;
    # here it holds none of the answers and scores 0.
    paragraphs = _paragraphs(result)
    if paragraphs is None:
        return 0.0
    words = [word for paragraph in paragraphs for word in paragraph.split()]
    if len(words) != 3:
        return 0.0
    best = [max((fuzz.ratio(w, answer) / 100 for answer in answers), default=0) for w in words]
    return sum(best) / 3
