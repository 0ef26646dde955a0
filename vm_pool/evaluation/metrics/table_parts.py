"""The charts and pivot tables of a worksheet, summarised as OSWorld's compare_table compares them.

Both come from the openpyxl book compare_table already loaded (openpyxl reads a sheet's chart
and pivot-table parts with the sheet, inside the bounds ``check_sheets`` put on the zip), and
both summaries are OSWorld's ``load_charts`` / ``load_pivot_tables``: a dict keyed by the data a
chart or pivot table is drawn from, whose values hold only the properties the rule names. Two
sheets pass the ``chart`` or ``pivot_table`` rule when their summaries are equal.

Chart properties (``chart_props``): title, legend, anchor, width, height, type (the chart's tag,
e.g. ``barChart``), direction (``bar`` or ``col``), xtitle, ytitle, ztitle. Pivot properties
(``pivot_props``): name, show_total, show_empty_row, show_empty_col, show_headers, location,
selection and filter (the items each field shows; ``ordered`` keeps their order), col_fields,
row_fields, data_fields (``index;name;subtotal;show_data_as``, the name only with
``data_fields_name``).
"""

import itertools
from typing import Any

from openpyxl.utils import coordinate_to_tuple
from openpyxl.worksheet.worksheet import Worksheet


def load_charts(sheet: Worksheet | None, chart_props: list[str]) -> dict[str, dict[str, Any]]:
    """Each chart of the sheet by its series' sources (``values,categories;...``)."""
    if sheet is None:
        return {}
    props = set(chart_props)
    charts: dict[str, dict[str, Any]] = {}
    for chart in sheet._charts:
        info: dict[str, Any] = {}
        if "title" in props:
            info["title"] = _rich_text(chart, "title")
        if "legend" in props:
            info["legend"] = chart.legend.position if chart.legend is not None else None
        if "anchor" in props:
            info["anchor"] = _anchor(chart.anchor)
        if "width" in props:
            info["width"] = chart.width
        if "height" in props:
            info["height"] = chart.height
        if "type" in props:
            info["type"] = chart.tagname
        if "direction" in props:
            # Deliberate difference from OSWorld: it crashes on a chart without bars (a line
            # chart where the gold has columns); such a chart has no direction here.
            info["direction"] = getattr(chart, "barDir", None)
        for prop, axis in (("xtitle", "x_axis"), ("ytitle", "y_axis"), ("ztitle", "z_axis")):
            if prop in props:
                info[prop] = _rich_text(getattr(chart, axis, None), "title")
        # OSWorld keys charts by their series: two charts drawn from the same data count once.
        charts[";".join(_series_source(series) for series in chart.series)] = info
    return charts


def _series_source(series: Any) -> str:
    return f"{_reference(series.val)},{_reference(series.cat)}"


def _reference(data: Any) -> str:
    """The formula a series' values or categories come from; "" when they are literal."""
    for kind in ("numRef", "strRef"):
        ref = getattr(data, kind, None)
        if ref is not None:
            return f"{ref.f}"
    return ""


def _rich_text(owner: Any, attribute: str) -> Any:
    """The first run of a title's rich text, None when there is none."""
    try:
        return getattr(owner, attribute).tx.rich.p[0].r[0].t
    except (AttributeError, IndexError, TypeError):
        return None


def _anchor(anchor: Any) -> list[Any]:
    # OSWorld lists the end row twice and leaves out the start row; kept, it is what it compares.
    # Deliberate difference from OSWorld: it crashes on a one-cell or absolute anchor (no
    # ``editAs`` or no end); the parts such an anchor lacks are None here.
    start, end = getattr(anchor, "_from", None), getattr(anchor, "to", None)
    return [
        getattr(anchor, "editAs", None),
        getattr(start, "col", None),
        getattr(end, "row", None),
        getattr(end, "col", None),
        getattr(end, "row", None),
    ]


def load_pivot_tables(sheet: Worksheet | None, pivot_props: list[str]) -> dict[str, dict[str, Any]]:
    """Each pivot table of the sheet by its source (``type;(row, col):(row, col);sheet``).

    The source's columns are narrowed to the fields that show items, and field indices are
    counted from the first such field, so a table built over extra empty columns compares equal.
    """
    if sheet is None:
        return {}
    props = set(pivot_props)
    pivots: dict[str, dict[str, Any]] = {}
    for pivot in sheet._pivots:
        raw_selection = [
            [(item.h, item.x) for item in field.items if item.x is not None]
            for field in pivot.pivotFields
        ]
        trimmed = list(itertools.dropwhile(lambda items: not items, raw_selection))
        left_bias = len(raw_selection) - len(trimmed)
        selection = list(itertools.dropwhile(lambda items: not items, reversed(trimmed)))[::-1]
        right_bias = len(trimmed) - len(selection)

        info: dict[str, Any] = {}
        if "name" in props:
            info["name"] = pivot.name
        if "show_total" in props:
            info["show_total"] = pivot.visualTotals
        if "show_empty_row" in props:
            info["show_empty_row"] = pivot.showEmptyRow
        if "show_empty_col" in props:
            info["show_empty_col"] = pivot.showEmptyCol
        if "show_headers" in props:
            info["show_headers"] = pivot.showHeaders
        if "location" in props:
            info["location"] = pivot.location
        if "filter" in props or "selection" in props:
            ordered = "ordered" in props
            info["selection"] = selection if ordered else [set(items) for items in selection]
        if "filter" in props:
            info["filter_fields"] = {field.fld for field in pivot.pageFields}
        if "col_fields" in props:
            info["col_fields"] = [field.x - left_bias for field in pivot.colFields]
        if "row_fields" in props:
            info["row_fields"] = [field.x - left_bias for field in pivot.rowFields]
        if "data_fields" in props:
            named = "data_fields_name" in props
            info["data_fields"] = [
                f"{field.fld - left_bias:d};{field.name if named else ''};"
                f"{field.subtotal};{field.showDataAs}"
                for field in pivot.dataFields
            ]
        pivots[_pivot_source(pivot, left_bias, right_bias)] = info
    return pivots


def _pivot_source(pivot: Any, left_bias: int, right_bias: int) -> str:
    cache = getattr(pivot, "cache", None)
    source = getattr(cache, "cacheSource", None)
    worksheet_source = getattr(source, "worksheetSource", None)
    kind = getattr(source, "type", None)
    ref = getattr(worksheet_source, "ref", None)
    sheet_name = getattr(worksheet_source, "sheet", None)
    if ref is None or ":" not in ref:
        # Deliberate difference from OSWorld: it crashes on a pivot table drawn from a named
        # range or an external source (no worksheet range); such a table is keyed by its name.
        return f"{kind};{getattr(worksheet_source, 'name', None)};{sheet_name}"
    first, last = ref.split(":", 1)
    top_row, left_column = coordinate_to_tuple(first)
    bottom_row, right_column = coordinate_to_tuple(last)
    start = (top_row, left_column + left_bias)
    end = (bottom_row, right_column - right_bias)
    return f"{kind};{start}:{end};{sheet_name}"
