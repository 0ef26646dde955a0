"""Word-processor formatting metrics, as OSWorld scores them: tab stops, fonts, subscripts,
strike-through, italics, word colours, highlights, page breaks, footers, centring, pictures,
and Writer's default font.

Each reads the .docx with python-docx (the .odt of ``check_highlighted_words`` with odfpy, the
registry file of ``find_default_font`` with lxml) where OSWorld reads it, so the same file gets
the same score. A document that does not open scores 0, as in OSWorld. Several metrics first
require the result's text to match the expected document's (``compare_docx_files`` with its
defaults) and then check the result's formatting.

OSWorld measures colour differences with scikit-image; ``_lab`` and ``_ciede2000`` below are
the same formulas (sRGB to CIELAB under D65 and the 2° observer, then CIEDE2000 with unit
weights) written for one pair of colours.
"""

import io
import math
import re
from typing import Any

from docx import Document
from docx.document import Document as DocxDocument
from docx.enum.text import WD_PARAGRAPH_ALIGNMENT, WD_TAB_ALIGNMENT
from lxml import etree
from odf.opendocument import load as load_odt
from odf.text import Span
from PIL import Image

from vm_pool.evaluation.bounds import (
    MAX_IMAGE_PIXELS,
    NOT_A_VERDICT,
    LimitHit,
    check_size,
    check_zip,
)
from vm_pool.evaluation.metrics.docs import compare_docx_files
from vm_pool.evaluation.metrics.errors import MetricError

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_OOR = {"oor": "http://openoffice.org/2001/registry"}
_DEFAULT_FONT = './/item[@oor:path="/org.openoffice.Office.Writer/DefaultFont"]'
_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
_RED, _BLUE = (255, 0, 0), (0, 0, 255)


def open_docx(path: str) -> DocxDocument | None:
    """The .docx at ``path``; None when it does not open (OSWorld scores that 0)."""
    try:
        check_zip(path)
        return Document(path)
    except NOT_A_VERDICT:
        raise
    except Exception:
        return None


def open_both(result: str | None, expected: str | None) -> tuple[DocxDocument, DocxDocument] | None:
    """Both documents, or None when either is missing or does not open (a score of 0)."""
    if not result or not expected:
        return None
    doc1, doc2 = open_docx(result), open_docx(expected)
    if doc1 is None or doc2 is None:
        return None
    return doc1, doc2


def check_tabstops(result: str | None, expected: str | None, **options: Any) -> float:
    """How closely the result's tab stops match the expected document's, from 0 to 1.

    Only paragraphs with text count, and both documents must have as many. With
    ``word_number_split_by_tabstop`` = n, the part of every result paragraph before its
    ``index``-th tab (default 0) must hold exactly n words. Tab stops that clear or sit left at
    0 are ignored; the rest must agree in number and alignment paragraph by paragraph, and each
    pair's distance, over the expected first section's text width, is taken off the score
    (averaged over the paragraphs).
    """
    pair = open_both(result, expected)
    if pair is None:
        return 0.0
    doc1, doc2 = pair
    para1 = [p for p in doc1.paragraphs if p.text.strip()]
    para2 = [p for p in doc2.paragraphs if p.text.strip()]
    if len(para1) != len(para2):
        return 0.0
    number = options.get("word_number_split_by_tabstop")
    if number is not None:
        index = options.get("index", 0)
        for paragraph in para1:
            splits = paragraph.text.split("\t")
            # Deliberate difference from OSWorld: a paragraph with fewer tabs than ``index``
            # crashes OSWorld (IndexError); here it lacks the words asked for and scores 0.
            if not -len(splits) <= index < len(splits):
                return 0.0
            words = [w for w in re.split(r"\s", splits[index]) if w.strip()]
            if len(words) != number:
                return 0.0
    # Deliberate difference from OSWorld: two documents without text divide by zero there;
    # here they have no tab stops to differ in.
    if not para1:
        return 1.0
    section = doc2.sections[0]
    page_width, left, right = section.page_width, section.left_margin, section.right_margin
    if page_width is None or left is None or right is None:
        raise MetricError("check_tabstops: the expected document has no page width or margins")
    width = page_width - left - right

    def kept(paragraph: Any) -> list[Any]:
        return [
            stop
            for stop in paragraph.paragraph_format.tab_stops
            if stop.alignment != WD_TAB_ALIGNMENT.CLEAR
            and not (stop.alignment == WD_TAB_ALIGNMENT.LEFT and stop.position == 0)
        ]

    minus = 0.0
    for p1, p2 in zip(para1, para2, strict=True):
        tabs1, tabs2 = kept(p1), kept(p2)
        if len(tabs1) != len(tabs2):
            return 0.0
        difference = 0.0
        for t1, t2 in zip(tabs1, tabs2, strict=True):
            if t1.alignment != t2.alignment:
                return 0.0
            difference += abs(t1.position - t2.position)
        minus += difference / width
    return 1 - minus / len(para1)


def compare_subscript_contains(result: str | None, expected: str | None) -> float:
    """1 when some run is subscript in both documents at the same paragraph and run index."""
    pair = open_both(result, expected)
    if pair is None:
        return 0.0
    doc1, doc2 = pair
    for para1, para2 in zip(doc1.paragraphs, doc2.paragraphs, strict=False):
        for run1, run2 in zip(para1.runs, para2.runs, strict=False):
            if run1.font.subscript and run2.font.subscript:
                return 1.0
    return 0.0


def has_page_numbers_in_footers(result: str | None) -> float:
    """1 when the first footer paragraph of every section has a digit in its text."""
    if not result:
        return 0.0
    doc = open_docx(result)
    if doc is None:
        return 0.0
    for section in doc.sections:
        paragraphs = section.footer.paragraphs
        text = paragraphs[0].text if paragraphs else ""
        if not any(char.isdigit() for char in text):
            return 0.0
    return 1.0


def compare_font_names(result: str | None, rules: dict[str, Any]) -> float:
    """1 when every run of the body's paragraphs names ``rules["font_name"]`` as its font."""
    if not result:
        return 0.0
    doc = open_docx(result)
    if doc is None:
        return 0.0
    expected_font = rules["font_name"]
    return float(all(run.font.name == expected_font for p in doc.paragraphs for run in p.runs))


def is_first_line_centered(result: str | None) -> float:
    """1 when the body's first paragraph is centred."""
    if not result:
        return 0.0
    doc = open_docx(result)
    if doc is None:
        return 0.0
    # Deliberate difference from OSWorld: a body without paragraphs crashes OSWorld
    # (IndexError); here it has no centred first line and scores 0.
    if not doc.paragraphs:
        return 0.0
    alignment = doc.paragraphs[0].paragraph_format.alignment
    return float(alignment == WD_PARAGRAPH_ALIGNMENT.CENTER)


def check_highlighted_words(result: str | None, expected: str | None) -> float:
    """1 when the .odt result has the expected text and no span in a yellow (#ffff00)
    highlighted automatic style."""
    if not result or not expected:
        return 0.0
    if not compare_docx_files(result, expected):
        return 0.0
    doc = load_odt(result)
    for span in doc.getElementsByType(Span):
        style_name = _odf_attribute(span, "stylename")
        if not style_name:
            continue
        for style in doc.automaticstyles.childNodes:
            if _odf_attribute(style, "name") != style_name:
                continue
            if any(_odf_attribute(p, "backgroundcolor") == "#ffff00" for p in style.childNodes):
                return 0.0
    return 1.0


def _odf_attribute(node: Any, name: str) -> Any:
    """odfpy's ``getAttribute``, None where the node cannot have the attribute.

    Deliberate difference from OSWorld: odfpy raises for an attribute the node's kind does not
    allow (AttributeError for a text node, ValueError for a column's properties), which crashes
    OSWorld; here such a node simply has no highlight.
    """
    try:
        return node.getAttribute(name)
    except (AttributeError, ValueError):
        return None


def compare_docx_images(result: str | None, expected: str | None) -> float:
    """1 when both documents hold the same number of pictures, pairwise of the same pixels."""
    pair = open_both(result, expected)
    if pair is None:
        return 0.0
    doc1, doc2 = pair
    images1, images2 = _image_blobs(doc1), _image_blobs(doc2)
    if len(images1) != len(images2):
        return 0.0
    for blob1, blob2 in zip(images1, images2, strict=True):
        # Deliberate difference from OSWorld: a picture Pillow cannot decode (an SVG, a
        # metafile) crashes OSWorld; here it is not the expected picture and scores 0.
        pixels1, pixels2 = _pixels(blob1), _pixels(blob2)
        if pixels1 is None or pixels2 is None or pixels1 != pixels2:
            return 0.0
    return 1.0


def _image_blobs(doc: DocxDocument) -> list[bytes]:
    """The bytes of the pictures the main document part relates to, in relationship order."""
    return [rel.target_part.blob for rel in doc.part.rels.values() if "image" in rel.reltype]


def _pixels(blob: bytes) -> bytes | None:
    """A picture's raw pixel bytes (as Pillow's ``tobytes``), None when it does not decode;
    a picture past ``MAX_IMAGE_PIXELS`` is a limit, not a verdict."""
    try:
        image = Image.open(io.BytesIO(blob))
        width, height = image.size
        if width * height > MAX_IMAGE_PIXELS:
            raise LimitHit("image pixels", f"{width}×{height} pixels (at most {MAX_IMAGE_PIXELS})")
        return image.tobytes()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise LimitHit("image pixels", str(error)) from error
    except NOT_A_VERDICT:
        raise
    except Exception:  # a decoder's error on bytes from the desktop: not a picture
        return None


def evaluate_strike_through_last_paragraph(result: str | None, expected: str | None) -> float:
    """1 when the result has the expected text and every run of its last paragraph is struck
    through."""
    if not result or not expected:
        return 0.0
    if not compare_docx_files(result, expected):
        return 0.0
    doc = open_docx(result)
    # Deliberate difference from OSWorld: a body without paragraphs crashes OSWorld
    # (IndexError); here there is no struck last paragraph and it scores 0.
    if doc is None or not doc.paragraphs:
        return 0.0
    return float(all(run.font.strike for run in doc.paragraphs[-1].runs))


def evaluate_colored_words_in_tables(
    result: str | None, expected: str | None, **options: Any
) -> float:
    """1 when the result has the expected text and, in its tables, every run whose text starts
    with a vowel is red and every other non-empty run blue: within ``threshold`` (default 3.5)
    CIEDE2000 units of pure red or blue."""
    if not result or not expected:
        return 0.0
    if not compare_docx_files(result, expected):
        return 0.0
    doc = open_docx(result)
    if doc is None:
        return 0.0
    threshold = options.get("threshold", 3.5)
    for table in doc.tables:
        for row in table.rows:
            for cell in row.cells:
                for paragraph in cell.paragraphs:
                    for run in paragraph.runs:
                        if not run.text:
                            continue
                        target = _RED if run.text[0].lower() in "aeiou" else _BLUE
                        rgb = run.font.color.rgb
                        # Deliberate difference from OSWorld: a run without an RGB colour
                        # (automatic or none) crashes OSWorld (TypeError); here it is neither
                        # red nor blue and scores 0.
                        if rgb is None or _ciede2000(_lab(tuple(rgb)), _lab(target)) > threshold:
                            return 0.0
    return 1.0


def _lab(rgb: tuple[int, ...]) -> tuple[float, float, float]:
    """CIELAB of an 8-bit sRGB colour (D65, 2° observer), as scikit-image's rgb2lab."""
    linear = []
    for channel in rgb:
        value = channel / 255.0
        linear.append(((value + 0.055) / 1.055) ** 2.4 if value > 0.04045 else value / 12.92)
    r, g, b = linear
    xyz = (
        (0.412453 * r + 0.357580 * g + 0.180423 * b) / 0.95047,
        (0.212671 * r + 0.715160 * g + 0.072169 * b) / 1.0,
        (0.019334 * r + 0.119193 * g + 0.950227 * b) / 1.08883,
    )
    x, y, z = (math.cbrt(v) if v > 0.008856 else 7.787 * v + 16.0 / 116.0 for v in xyz)
    return 116.0 * y - 16.0, 500.0 * (x - y), 200.0 * (y - z)


def _ciede2000(lab1: tuple[float, float, float], lab2: tuple[float, float, float]) -> float:
    """The CIEDE2000 colour difference (kL = kC = kH = 1), as scikit-image's deltaE_ciede2000."""
    l1, a1, b1 = lab1
    l2, a2, b2 = lab2
    c7 = (0.5 * (math.hypot(a1, b1) + math.hypot(a2, b2))) ** 7
    scale = 1 + 0.5 * (1 - math.sqrt(c7 / (c7 + 25**7)))
    c1, h1 = math.hypot(a1 * scale, b1), math.atan2(b1, a1 * scale) % (2 * math.pi)
    c2, h2 = math.hypot(a2 * scale, b2), math.atan2(b2, a2 * scale) % (2 * math.pi)

    lbar = 0.5 * (l1 + l2)
    sl = 1 + 0.015 * (lbar - 50) ** 2 / math.sqrt(20 + (lbar - 50) ** 2)
    l_term = (l2 - l1) / sl

    cbar = 0.5 * (c1 + c2)
    c_term = (c2 - c1) / (1 + 0.045 * cbar)

    h_diff, h_sum, cc = h2 - h1, h1 + h2, c1 * c2
    if cc == 0.0:
        dh, hbar = 0.0, h_sum
    else:
        dh = h_diff - 2 * math.pi if h_diff > math.pi else h_diff
        dh = dh + 2 * math.pi if h_diff < -math.pi else dh
        hbar = h_sum
        if abs(h_diff) > math.pi:
            hbar += 2 * math.pi if h_sum < 2 * math.pi else -2 * math.pi
        hbar *= 0.5
    t = (
        1
        - 0.17 * math.cos(hbar - math.radians(30))
        + 0.24 * math.cos(2 * hbar)
        + 0.32 * math.cos(3 * hbar + math.radians(6))
        - 0.20 * math.cos(4 * hbar - math.radians(63))
    )
    h_term = 2 * math.sqrt(cc) * math.sin(dh / 2) / (1 + 0.015 * cbar * t)

    c7 = cbar**7
    rc = 2 * math.sqrt(c7 / (c7 + 25**7))
    dtheta = math.radians(30) * math.exp(-(((math.degrees(hbar) - 275) / 25) ** 2))
    r_term = -math.sin(2 * dtheta) * rc * c_term * h_term
    return math.sqrt(max(l_term**2 + c_term**2 + h_term**2 + r_term, 0.0))


def check_italic_font_size_14(result: str | None, expected: str | None) -> float:
    """1 when the result has the expected text and every italic run is set in 14 pt."""
    if not result or not expected:
        return 0.0
    if not compare_docx_files(result, expected):
        return 0.0
    doc = open_docx(result)
    if doc is None:
        return 0.0
    for paragraph in doc.paragraphs:
        for run in paragraph.runs:
            if run.italic and (run.font.size is None or run.font.size.pt != 14):
                return 0.0
    return 1.0


def contains_page_break(result: str | None, rules: Any) -> float:
    """1 when the body's runs hold a page break (``<w:br w:type="page"/>``), exactly
    ``rules["page_break_count"]`` of them when that is given."""
    if not result:
        return 0.0
    doc = open_docx(result)
    if doc is None:
        return 0.0
    expected_count = rules.get("page_break_count") if isinstance(rules, dict) else None
    count = sum(
        1
        for paragraph in doc.paragraphs
        for run in paragraph.runs
        for br in run.element.iter(f"{_W}br")
        if br.get(f"{_W}type") == "page"
    )
    if expected_count is not None and count != expected_count:
        return 0.0
    return float(count > 0)


def find_default_font(result: str | None, rules: dict[str, Any]) -> float:
    """1 when Writer's registry (registrymodifications.xcu) sets its standard default font to
    ``rules["font_name"]`` (the last such setting counts; an unreadable file sets none)."""
    expected_font = rules["font_name"]
    if not result:
        return 0.0
    default_font = None
    try:
        check_size(result)
        root = etree.parse(result, _XML).getroot()
        for item in root.findall(_DEFAULT_FONT, _OOR):
            for prop in item.findall('.//prop[@oor:name="Standard"]', _OOR):
                for value in prop.findall("value"):
                    default_font = value.text
    except NOT_A_VERDICT:
        raise
    except (OSError, etree.XMLSyntaxError):
        pass
    return float(default_font == expected_font)
