"""Reading the parts of an .xlsx workbook that compare_table's rules look at.

OSWorld reads a cell's stored value from the sheet XML (not through openpyxl), so a formula's
cached result is what counts; ``read_cell_value`` does the same with zipfile and lxml.
A sheet index is OSWorld's: an int or ``RI<n>``/``RN<name>`` for the result book,
``EI<n>``/``EN<name>`` for the expected one.
"""

import os
import zipfile
from typing import Any

from lxml import etree
from openpyxl.cell.cell import Cell, MergedCell
from openpyxl.styles.differential import DifferentialStyle

from vm_pool.evaluation.metrics.errors import MetricError

_MAIN_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_NS = {"oo": _MAIN_NS}
# Desktop-made XML: no entities expanded, nothing fetched, libxml2's default size limits kept.
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


def resolve_sheet(
    sheet_idx: int | str,
    result: Any,
    expected: Any,
    result_names: list[str],
    expected_names: list[str] | None,
) -> tuple[Any, str]:
    """The book (``result`` or ``expected``) and sheet name a sheet index points at.

    An index past either end gives the name "" (a sheet that does not exist), as in OSWorld.
    """
    if isinstance(sheet_idx, int):
        return result, _nth(result_names, sheet_idx)
    if sheet_idx.startswith("RI"):
        return result, _nth(result_names, int(sheet_idx[2:]))
    if sheet_idx.startswith("RN"):
        return result, sheet_idx[2:]
    if sheet_idx.startswith(("EI", "EN")):
        if expected is None or expected_names is None:
            raise MetricError(f"sheet index {sheet_idx!r} needs an expected workbook")
        if sheet_idx.startswith("EI"):
            return expected, _nth(expected_names, int(sheet_idx[2:]))
        return expected, sheet_idx[2:]
    raise MetricError(f"unrecognised sheet index {sheet_idx!r}")


def _nth(names: list[str], index: int) -> str:
    """Python's indexing, as OSWorld's: -1 is the last sheet."""
    return names[index] if -len(names) <= index < len(names) else ""


def read_lines(path: str) -> list[str]:
    """A text file's lines; UTF-8, else Latin-1 (which reads any bytes), as OSWorld falls back."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.splitlines()


def printed_sheet(book_path: str, sheet_name: str) -> list[str] | None:
    """The sheet as LibreOffice printed it to ``<book>-<sheet>.csv``, trailing blank lines dropped.

    OSWorld's task files export that CSV in their postconfig; None when it is not there.
    """
    csv_path = f"{os.path.splitext(book_path)[0]}-{sheet_name}.csv"
    try:
        lines = [line.strip() for line in read_lines(csv_path)]
    except OSError:
        return None
    while lines and not lines[-1]:
        lines.pop()
    return lines


def read_cell_value(xlsx_path: str, sheet_name: str, coordinate: str) -> Any:
    """The value stored for a cell: float for numbers, str for text and errors, else None."""
    part = _sheet_part(xlsx_path, sheet_name)
    if part is None:
        return None
    sheet, shared = part
    cells = sheet.xpath(f'oo:sheetData/oo:row/oo:c[@r="{coordinate}"]', namespaces=_NS)
    return _stored_value(cells[0], shared) if cells else None


def read_sheet_values(xlsx_path: str, sheet_name: str) -> dict[str, Any]:
    """Every cell's stored value by coordinate, each as ``read_cell_value`` reads it, for
    reading many cells of one sheet without parsing it again for each."""
    part = _sheet_part(xlsx_path, sheet_name)
    if part is None:
        return {}
    sheet, shared = part
    values: dict[str, Any] = {}
    for cell in sheet.iterfind("oo:sheetData/oo:row/oo:c", _NS):
        coordinate = cell.get("r")
        if coordinate is not None and coordinate not in values:
            values[coordinate] = _stored_value(cell, shared)
    return values


def _sheet_part(xlsx_path: str, sheet_name: str) -> tuple[Any, list[str]] | None:
    """The sheet's XML and the book's shared strings; None when either cannot be read.

    The sheet part is ``sheet<sheetId>.xml``, as OSWorld finds it.
    """
    try:
        with zipfile.ZipFile(xlsx_path) as book:
            shared = _shared_strings(book)
            workbook = etree.fromstring(book.read("xl/workbook.xml"), _PARSER)
            sheet_ids = {
                sh.get("name"): sh.get("sheetId")
                for sh in workbook.iterfind("oo:sheets/oo:sheet", _NS)
            }
            part = book.read(f"xl/worksheets/sheet{sheet_ids[sheet_name]}.xml")
            return etree.fromstring(part, _PARSER), shared
    except (OSError, KeyError, zipfile.BadZipFile, etree.XMLSyntaxError):
        return None


def _stored_value(cell: Any, shared: list[str]) -> Any:
    kind = cell.get("t", "n")
    stored = cell.findtext("oo:v", namespaces=_NS)
    try:
        if kind == "n":
            return float(stored) if stored is not None else None
        if kind == "s":
            return shared[int(stored)] if stored is not None else None
        if kind in {"str", "e"}:
            return stored
        if kind == "inlineStr":
            return cell.findtext("oo:is/oo:t", namespaces=_NS)
    except (ValueError, IndexError):
        return None
    return None


def _shared_strings(book: zipfile.ZipFile) -> list[str]:
    try:
        root = etree.fromstring(book.read("xl/sharedStrings.xml"), _PARSER)
    except KeyError:
        return []
    return [
        "".join(t.text or "" for t in si.iter(f"{{{_MAIN_NS}}}t"))
        for si in root.iterfind("oo:si", _NS)
    ]


def read_cell_style(
    style_name: str, cell: Cell | MergedCell, differential: DifferentialStyle | None = None
) -> Any:
    """One style property of a cell, named as in OSWorld's ``_read_cell_style``.

    ``differential`` is a conditional-formatting style that applies to the cell: when given,
    font, fill and number format come from it instead of the cell.
    """
    has_value = cell.value is not None
    styled: Any = differential if differential is not None else cell
    if style_name == "number_format":
        if not (has_value and cell.data_type == "n"):
            return None
        if differential is None:
            return cell.number_format
        # Deliberate difference from OSWorld: it crashes on a conditional style without a
        # number format; that style sets none.
        return differential.numFmt.formatCode if differential.numFmt is not None else None
    if style_name in _FONT_PROPS:
        return getattr(styled.font, _FONT_PROPS[style_name], None) if has_value else None
    if style_name == "font_color":
        color = getattr(styled.font, "color", None)
        return (color.rgb if color is not None else None) if has_value else None
    if style_name == "fill_type":
        return styled.fill.tagname if styled.fill is not None else None
    if style_name in {"bgcolor", "fgcolor"}:
        # OSWorld reads a cell's fgColor but a conditional style's bgColor: that is where
        # LibreOffice puts the solid colour in each case.
        color = cell.fill.fgColor if differential is None else _dxf_bgcolor(differential)
        return color.rgb if color is not None else None
    if style_name == "hyperlink":
        return cell.hyperlink or ("" if has_value else None)
    if style_name == "merge":
        return isinstance(cell, MergedCell)
    raise MetricError(f"unknown cell style {style_name!r}")


_FONT_PROPS = {
    "font_name": "name",
    "font_family": "family",
    "font_bold": "bold",
    "font_italic": "italic",
    "font_underline": "underline",
    "font_size": "size",
}


def _dxf_bgcolor(differential: DifferentialStyle) -> Any:
    fill = differential.fill
    return getattr(fill, "bgColor", None) if fill is not None else None
