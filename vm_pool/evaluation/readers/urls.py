"""Readers of the active tab's URL (as the address bar shows it, see ``getters.browser``): its
query values, one of its ``/``-separated parts, and the facets of a Macy's listing's path.

The URL is the browser's, so the desktop's: it is taken apart here, in the jail. A config that
lacks what OSWorld's getter requires is the evaluator's error (``MetricError``: not scored).
"""

from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from vm_pool.evaluation.metrics.errors import MetricError
from vm_pool.evaluation.readers.base import Reader


def _needs(config: dict[str, Any], key: str) -> Any:
    if key not in config:
        raise MetricError(f"the getter needs {key!r}")
    return config[key]


def url_query(path: str | None, url: str | None, config: dict[str, Any]) -> Any:
    """OSWorld's ``get_active_tab_url_parse``: ``parse_keys``' first query values (renamed by
    ``replace``, split at commas with ``split_list``)."""
    if url is None:
        return None
    query = parse_qs(urlparse(url).query)
    found: dict[str, Any] = {key: query.get(key, [""])[0] for key in _needs(config, "parse_keys")}
    for old, new in (config.get("replace") or {}).items():
        found[new] = found.pop(old)
    if config.get("split_list"):
        found = {key: found_value.split(",") for key, found_value in found.items()}
    return found


def url_dash_part(path: str | None, url: str | None, config: dict[str, Any]) -> Any:
    """OSWorld's ``get_url_dashPart``: the ``partIndex``-th ``/``-separated part (Python's
    indexing), before its query with ``needDeleteId``; as a string, or ``{key: part}`` with
    ``returnType`` "json"."""
    try:
        index = int(_needs(config, "partIndex"))
    except (TypeError, ValueError):
        return None
    parts = url.split("/") if url is not None else []
    # Deliberate difference from OSWorld: a negative index past the start is None here, where
    # OSWorld's getter raises an IndexError.
    if url is None or not -len(parts) <= index < len(parts):
        return None
    part = parts[index]
    if config.get("needDeleteId", False):
        part = part.split("?")[0]
    if config.get("returnType") == "string":
        return part
    if config.get("returnType") == "json":
        return {_needs(config, "key"): part}
    return None


def url_path_facets(path: str | None, url: str | None, config: dict[str, Any]) -> Any:
    """OSWorld's ``get_macys_product_url_parse`` (``url_path_parse``)."""
    return None if url is None else macys_facets(url, _needs(config, "parse_keys"))


def macys_facets(url: str, parse_keys: list[str]) -> dict[str, Any]:
    path = unquote(urlparse(url).path)
    parts = path.strip("/").split("/")
    facets: dict[str, Any] = {}
    shirts, short_sleeve = "shirts" in path, "short-sleeve" in path
    for names, values in zip(parts, parts[1:], strict=False):
        if "," in names and "," in values:
            keys = [k.strip() for k in names.split(",")]
            for key, found in zip(keys, [v.strip() for v in values.split(",")], strict=False):
                if key == "Price_discount_range":
                    facets[key] = [item.strip() for item in found.split("|")] if found else None
                else:
                    facets[key] = found or None
                shirts |= key == "Product_department" and found in ("shirts", "Shirts", "Shirt")
                short_sleeve |= key == "Sleeve_length" and found in (
                    "short-sleeve",
                    "Short Sleeve",
                )
            break
    for key in ("Men_regular_size_t", "Price_discount_range"):
        facets.setdefault(key, None)
    result: dict[str, Any] = {
        "mens_clothing": True if "mens-clothing" in path else None,
        "shirts": True if shirts else None,
        "short_sleeve": True if short_sleeve else None,
    }
    for key in parse_keys:
        if key not in facets:
            continue
        if key == "Price_discount_range":
            ranges = facets[key] or []
            half = "50_PERCENT_ off & more" in ranges and not {
                "30_PERCENT_ off & more",
                "20_PERCENT_ off & more",
            } & set(ranges)
            result[key] = "50_PERCENT_ off & more" if half else "not_50_PERCENT_ off & more"
        else:
            result[key] = facets[key]
    return result


READERS: dict[str, Reader] = {
    "url_query": url_query,
    "url_dash_part": url_dash_part,
    "url_path_facets": url_path_facets,
}
