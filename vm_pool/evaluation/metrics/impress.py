"""LibreOffice Impress's metrics, as OSWorld scores them: a presentation's slides, its master,
its transitions, Impress's settings and its window.

- ``check_slide_orientation_Portrait``, ``evaluate_presentation_fill_to_rgb_distance``: the
  presentation as python-pptx reads it (its slide size, each slide's background fill);
- ``check_transition``, ``check_page_number_colors``: the slide's or the first master's XML;
- ``check_presenter_console_disable``, ``check_auto_saving_time``: LibreOffice's settings,
  ``registrymodifications.xcu`` (``<item oor:path="…"><prop oor:name="…"><value>…``);
- ``check_left_panel``: the accessibility tree (Impress's "Slides View" panel).

Everything here came from the desktop: a presentation is checked against the zip bounds
(``bounds.check_zip``) before it is opened, an XML file against the file size cap, and XML is
parsed with no entities resolved, no DTD loaded and nothing fetched, within lxml's default
limits on depth and text. A missing file scores 0, as OSWorld's "file not found".
"""

import math
import re
import zipfile
from pathlib import Path
from typing import Any

from lxml import etree
from pptx import Presentation

from vm_pool.desktop import MAX_TREE_BYTES
from vm_pool.evaluation.bounds import NOT_A_VERDICT, LimitHit, check_size, check_zip
from vm_pool.evaluation.metrics.errors import MetricError

_NAMESPACES = {
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "p": "http://schemas.openxmlformats.org/presentationml/2006/main",
}
_OOR = "http://openoffice.org/2001/registry"
_SOLID, _BACKGROUND = 1, 5  # python-pptx's MSO_FILL.SOLID and MSO_FILL.BACKGROUND (no fill)
_FARTHEST = math.sqrt(3 * 255**2)  # black to white: distances are shares of it
_MASTER = "ppt/slideMasters/slideMaster1.xml"
_NUMBER_PLACEHOLDERS = ("sldNum", "ftr", "dt")
_BLACK = "000000"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")  # an XML element's local name
COLOR_THRESHOLD = 50  # how far a channel must lead the others (or stay under, for black)


def _parse(data: bytes) -> Any:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    return etree.fromstring(data, parser)


def _xml_file(path: str) -> Any:
    check_size(path)
    return _parse(Path(path).read_bytes())


def _presentation(path: str) -> Any:
    check_zip(path)
    return Presentation(path)


def _rules(rules: Any, *names: str) -> dict[str, Any]:
    if not isinstance(rules, dict) or any(name not in rules for name in names):
        raise MetricError(f"the rules must be an object with {', '.join(map(repr, names))}")
    return rules


def check_presenter_console_disable(result: str | None) -> float:
    """1 when the first ``EnablePresenterScreen`` setting of Impress's start options is
    ``false`` (any case); 0 when it is anything else, missing, or the file does not parse."""
    if result is None:
        return 0.0
    path = "/org.openoffice.Office.Impress/Misc/Start"
    found = f".//item[@oor:path='{path}']/prop[@oor:name='EnablePresenterScreen']"
    try:
        prop = _xml_file(result).find(found, {"oor": _OOR})
    except NOT_A_VERDICT:
        raise
    except (etree.XMLSyntaxError, OSError, ValueError):  # OSWorld scores any error 0
        return 0.0
    if prop is None:
        return 0.0
    value = prop.find("value")
    text = value.text if value is not None else None
    return 1.0 if text is not None and text.lower() == "false" else 0.0


def check_auto_saving_time(result: str | None, rules: dict[str, Any]) -> float:
    """1 when LibreOffice's ``AutoSaveTimeIntervall`` (of ``Common/Save/Document``) equals
    ``rules["minutes"]``; where several items set it, the last one counts."""
    minutes = _rules(rules, "minutes")["minutes"]
    if result is None:
        return 0.0
    saved: str | None = None
    for item in _xml_file(result).iterfind(".//item"):
        if item.get(f"{{{_OOR}}}path") != "/org.openoffice.Office.Common/Save/Document":
            continue
        for prop in item.iterfind(".//prop"):
            if prop.get(f"{{{_OOR}}}name") == "AutoSaveTimeIntervall":
                value = prop.find(".//value")
                if value is None:
                    return 0.0  # OSWorld fails here: the setting has no value
                saved = value.text
                break
    if saved is None:
        return 0.0
    return 1.0 if int(saved) == minutes else 0.0


def check_left_panel(result: str | None) -> float:
    """1 when the accessibility tree holds a ``document-frame`` named "Slides View" (Impress's
    slide panel is open)."""
    if result is None:
        return 0.0
    size = len(result.encode())
    if size > MAX_TREE_BYTES:
        raise LimitHit("accessibility tree", f"{size} bytes of XML (at most {MAX_TREE_BYTES})")
    frames = _parse(result.encode()).iter("document-frame")
    return 1.0 if any(frame.get("name") == "Slides View" for frame in frames) else 0.0


def check_slide_orientation_Portrait(result: str | None) -> float:  # noqa: N802 (OSWorld's name)
    """1 when the slides are narrower than they are high."""
    if result is None:
        return 0.0
    presentation = _presentation(result)
    return 1.0 if presentation.slide_width < presentation.slide_height else 0.0


def evaluate_presentation_fill_to_rgb_distance(result: str | None, rules: dict[str, Any]) -> float:
    """1 minus the mean over the slides of each background's distance to ``rules["rgb"]``.

    A slide's background is its own solid fill, or with no fill its master's solid fill; the
    distance is Euclidean in RGB over black-to-white's. It is the farthest (1) for any other
    background (gradient, picture, a theme colour), and for one still of
    ``rules["original_rgb"]`` (optional) when given.
    """
    rgb = _colour(_rules(rules, "rgb")["rgb"], "rgb")
    original = rules.get("original_rgb")
    original = None if original is None else _colour(original, "original_rgb")
    if result is None:
        return 0.0
    slides = list(_presentation(result).slides)
    distances = [_fill_distance(slide, rgb, original) for slide in slides]
    # Deliberate difference from OSWorld: a presentation without slides divides by zero there.
    return 1.0 - sum(distances) / len(distances) if distances else 0.0


def _colour(value: Any, name: str) -> tuple[int, int, int]:
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise MetricError(f"{name} must be three numbers, not {value!r}")
    red, green, blue = value
    return red, green, blue


def _fill_distance(
    slide: Any, rgb: tuple[int, int, int], original: tuple[int, int, int] | None
) -> float:
    fill = slide.background.fill
    if fill.type == _BACKGROUND:
        fill = slide.slide_layout.slide_master.background.fill
    if fill.type != _SOLID:
        return 1.0
    try:
        found = tuple(fill.fore_color.rgb)
    except AttributeError:  # a theme, system or preset colour has no RGB in python-pptx
        return 1.0
    if original is not None and found == tuple(original):
        return 1.0
    return math.dist(found, rgb) / _FARTHEST


def check_transition(result: str | None, rules: dict[str, Any]) -> float:
    """1 when slide ``rules["slide_idx"]`` (from 0) has a transition with an element named
    ``rules["transition_type"]`` in it (``dissolve``, ``fade``, …)."""
    _rules(rules, "slide_idx", "transition_type")
    index, kind = rules["slide_idx"], rules["transition_type"]
    if not isinstance(index, int) or not isinstance(kind, str) or not _NAME.fullmatch(kind):
        raise MetricError("slide_idx must be a number and transition_type an element's name")
    if result is None:
        return 0.0
    check_zip(result)
    with zipfile.ZipFile(result) as archive:
        name = f"ppt/slides/slide{index + 1}.xml"
        if name not in archive.namelist():
            return 0.0
        slide = _parse(archive.read(name))
    transition = slide.find(".//p:transition", _NAMESPACES)
    if transition is None:
        return 0.0
    return 0.0 if transition.find(f".//p:{kind}", _NAMESPACES) is None else 1.0


def check_page_number_colors(result: str | None, rules: dict[str, Any]) -> float:
    """1 when the first master's page-number colour is ``rules["color"]``: red, blue or green
    when that channel leads both others by more than ``COLOR_THRESHOLD``, black when all
    three are under it; any other colour name passes once a colour is found.

    The colour is found as OSWorld looks for it: a solid fill in the page number's
    placeholder, else in a footer, date or page-number placeholder, else the last
    text-run colour that is not black, else the last solid fill's colour that is not black,
    else the last solid fill's colour.
    """
    color = _rules(rules, "color")["color"]
    if not isinstance(color, str):
        raise MetricError(f"color must be a colour's name, not {color!r}")
    if result is None:
        return 0.0
    check_zip(result)
    with zipfile.ZipFile(result) as archive:
        master = _parse(archive.read(_MASTER))
    found = _page_number_colour(master)
    channels = _hex_rgb(found) if found is not None else None
    if channels is None:
        return 0.0
    red, green, blue = channels
    t = COLOR_THRESHOLD
    passes = {
        "red": red > green + t and red > blue + t,
        "blue": blue > green + t and blue > red + t,
        "green": green > red + t and green > blue + t,
        "black": red < t and green < t and blue < t,
    }
    return 1.0 if passes.get(color, True) else 0.0


def _page_number_colour(master: Any) -> str | None:
    fill = ".//a:solidFill//a:srgbClr"
    placeholders = [master.find('.//p:ph[@type="sldNum"]', _NAMESPACES)] + [
        ph
        for ph in master.iterfind(".//p:ph", _NAMESPACES)
        if ph.get("type") in _NUMBER_PLACEHOLDERS
    ]
    for placeholder in placeholders:
        colour = placeholder.find(fill, _NAMESPACES) if placeholder is not None else None
        if colour is not None:
            if colour.get("val") is not None:
                return str(colour.get("val"))
            break  # the first placeholder with a colour decides, as in OSWorld
    for path in (".//a:rPr" + fill[1:], fill):
        for colour in reversed(master.findall(path, _NAMESPACES)):
            value = colour.get("val")
            if value and value != _BLACK:
                return str(value)
    last = master.findall(fill, _NAMESPACES)
    return last[-1].get("val") if last else None


def _hex_rgb(value: str) -> tuple[int, int, int] | None:
    """``RRGGBB`` (a leading ``#`` allowed) as numbers; None for anything else."""
    digits = value.lstrip("#")
    if len(digits) != 6:
        return None
    try:
        return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)
    except ValueError:
        return None
