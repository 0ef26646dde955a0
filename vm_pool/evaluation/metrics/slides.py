"""compare_pptx_files: two presentations, slide by slide, shape by shape, run by run.

Scores 1 only if nothing examined differs. The ``examine_*`` options and their defaults are
OSWorld's (see ``_DEFAULTS``); options OSWorld ignores (``_note``, ``enable_debug``, ...) are
ignored here too. A few options are OSWorld's task-specific position checks
(``examine_title_bottom_position`` and the like) and are kept as they are, constants included,
so that the tasks using them score the same. A slide background in a colour without an RGB
value (a theme colour) fails ``examine_background_color``, as OSWorld fails on it.
"""

from typing import Any

from lxml import etree
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.enum.text import PP_ALIGN

from vm_pool.evaluation.bounds import NOT_A_VERDICT, check_zip

_DEFAULTS: dict[str, Any] = {
    "approximately_tolerance": 0.005,
    "examine_number_of_slides": True,
    "examine_shape": True,
    "examine_text": True,
    "examine_indent": True,
    "examine_font_name": True,
    "examine_font_size": True,
    "examine_font_bold": True,
    "examine_font_italic": True,
    "examine_color_rgb": True,
    "examine_font_underline": True,
    "examine_strike_through": True,
    "examine_alignment": True,
    "examine_title_bottom_position": False,
    "examine_table_bottom_position": False,
    "examine_run_count": True,
    "examine_right_position": False,
    "examine_top_position": False,
    "examine_shape_for_shift_size": False,
    "examine_image_size": False,
    "examine_modify_height": False,
    "examine_bullets": True,
    "examine_background_color": True,
    "examine_note": True,
}
_PICTURE = MSO_SHAPE_TYPE.PICTURE
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_NO_RGB = "a colour without an RGB value"


class _Differs(Exception):
    """Raised from deep in the comparison as soon as one examined property differs."""


def compare_pptx_files(result: str | None, expected: str | None, **options: Any) -> float:
    if not result or not expected:
        return 0.0
    try:
        check_zip(result)
        prs1 = Presentation(result)
    except NOT_A_VERDICT:
        raise
    except Exception:  # an unreadable result scores 0
        return 0.0
    check_zip(expected)
    prs2 = Presentation(expected)
    opts = {name: options.get(name, default) for name, default in _DEFAULTS.items()}
    if opts["examine_number_of_slides"] and len(prs1.slides) != len(prs2.slides):
        return 0.0
    pairs = zip(prs1.slides, prs2.slides, strict=False)
    try:
        for index, (slide1, slide2) in enumerate(pairs, start=1):
            _compare_slides(slide1, slide2, index, opts)
    except _Differs:
        return 0.0
    return 1.0


def _check(same: bool) -> None:
    if not same:
        raise _Differs


def _compare_slides(slide1: Any, slide2: Any, index: int, opts: dict[str, Any]) -> None:
    # OSWorld fails on a background colour it cannot read (python-pptx's AttributeError), so
    # such a slide never matches, not even an identical one. Deliberate difference from
    # OSWorld: it reads both backgrounds whatever the option says, and so fails on a
    # theme-coloured one even with examine_background_color false.
    if opts["examine_background_color"]:
        colours = (_background_color(slide1), _background_color(slide2))
        _check(_NO_RGB not in colours and colours[0] == colours[1])
    if opts["examine_note"]:
        _check(_notes(slide1).strip() == _notes(slide2).strip())
    text_shapes1, text_shapes2 = _text_shapes(slide1.shapes), _text_shapes(slide2.shapes)
    _check(len(slide1.shapes) == len(slide2.shapes))
    runs_compared = False
    for shape1, shape2 in zip(slide1.shapes, slide2.shapes, strict=True):
        _compare_geometry(shape1, shape2, index, opts)
        if shape1.shape_type == MSO_SHAPE_TYPE.TABLE:
            _check(shape2.shape_type == MSO_SHAPE_TYPE.TABLE)
            _compare_tables(shape1.table, shape2.table, opts)
        if hasattr(shape1, "text") and hasattr(shape2, "text"):
            runs_compared |= _compare_text_frames(shape1, shape2, opts)
    # OSWorld checks bullets from inside its run loop, over the whole slide's XML.
    if opts["examine_bullets"] and runs_compared:
        _check(_bullets_match(_bullets(slide1), _bullets(slide2)))
    if len(text_shapes1) != len(text_shapes2):
        raise _Differs
    if opts["examine_alignment"]:
        for tshape1, tshape2 in zip(text_shapes1, text_shapes2, strict=True):
            if opts["examine_text"]:
                _check(tshape1.text.strip() == tshape2.text.strip())
            paragraphs1, paragraphs2 = tshape1.text_frame.paragraphs, tshape2.text_frame.paragraphs
            _check(len(paragraphs1) == len(paragraphs2))
            for para1, para2 in zip(paragraphs1, paragraphs2, strict=True):
                _check(_alignment(para1) == _alignment(para2))


def _background_color(slide: Any) -> Any:
    """The slide's solid background colour, or its master's when the slide has no fill; None
    for any other background; ``_NO_RGB`` for a solid colour without an RGB value (a theme,
    system or preset colour), which OSWorld cannot read."""
    fill = slide.background.fill
    if fill.type == 5:
        fill = slide.slide_layout.slide_master.background.fill
    if fill.type != 1:
        return None
    try:
        return fill.fore_color.rgb
    except AttributeError:
        return _NO_RGB


def _notes(slide: Any) -> str:
    if not slide.has_notes_slide:
        return ""
    frame = slide.notes_slide.notes_text_frame
    return frame.text if frame is not None else ""


def _text_shapes(shapes: Any) -> list[Any]:
    """Every shape with a text frame, those inside groups included, in document order."""
    found = []
    for shape in shapes:
        if hasattr(shape, "text") and hasattr(shape, "text_frame"):
            found.append(shape)
        if hasattr(shape, "shapes"):
            found.extend(_text_shapes(shape.shapes))
    return found


def _approx(a: Any, b: Any, tolerance: float) -> bool:
    if a == b:
        return True
    if a is None or b is None or a == 0 or b == 0:
        return False
    return abs(a - b) / max(abs(a), abs(b)) <= tolerance


def _same_box(shape1: Any, shape2: Any, tolerance: float) -> bool:
    return all(
        _approx(getattr(shape1, side), getattr(shape2, side), tolerance)
        for side in ("left", "top", "width", "height")
    )


def _has_text(shape: Any) -> bool:
    return hasattr(shape, "text")


def _both(shape1: Any, shape2: Any, shape_type: MSO_SHAPE_TYPE) -> bool:
    return bool(shape1.shape_type == shape_type and shape2.shape_type == shape_type)


def _is_blank(shape: Any) -> bool:
    return not getattr(shape, "text", None) or shape.text.strip() == ""


def _compare_geometry(shape1: Any, shape2: Any, index: int, opts: dict[str, Any]) -> None:
    tol = opts["approximately_tolerance"]
    same_box = _same_box(shape1, shape2, tol)
    both_text = _has_text(shape1) and _has_text(shape2)
    if opts["examine_title_bottom_position"]:
        if both_text and shape1.text == shape2.text:
            if shape1.text == "Product Comparison":
                _check(not (shape1.top <= shape2.top or shape1.top < 3600000))
        else:
            _check(same_box)
    if opts["examine_table_bottom_position"]:
        if index == 3 and _both(shape1, shape2, MSO_SHAPE_TYPE.TABLE):
            _check(not (shape1.top <= shape2.top or shape1.top < 3600000))
        else:
            _check(same_box)
    on_second_slide = index == 2
    neither_text = not _has_text(shape1) and not _has_text(shape2)
    if opts["examine_right_position"] and on_second_slide and neither_text:
        _check(not (shape1.left <= shape2.left or shape1.left < 4320000))
    if opts["examine_top_position"] and on_second_slide and _both(shape1, shape2, _PICTURE):
        _check(not (shape1.top >= shape2.top or shape1.top > 1980000))
    if opts["examine_shape_for_shift_size"] and not same_box:
        placeholder = "Elaborate on what you want to discuss."
        _check(both_text and shape1.text == shape2.text == placeholder)
    if opts["examine_shape"] and not same_box:
        _check(_is_blank(shape1) and _is_blank(shape2))
    if opts["examine_image_size"]:
        if _both(shape1, shape2, _PICTURE):
            _check(
                _approx(shape1.width, shape2.width, tol)
                and _approx(shape1.height, shape2.height, tol)
            )
        else:
            _check(same_box)
    if opts["examine_modify_height"]:
        freeforms = _both(shape1, shape2, MSO_SHAPE_TYPE.FREEFORM)
        if neither_text or freeforms:
            _check(_approx(shape1.height, shape2.height, tol))
        else:
            _check(same_box)


def _compare_tables(table1: Any, table2: Any, opts: dict[str, Any]) -> None:
    """Cell by cell: paragraph and run counts, then each run's colour and emphasis."""
    _check(len(table1.rows) == len(table2.rows) and len(table1.columns) == len(table2.columns))
    for row in range(len(table1.rows)):
        for column in range(len(table1.columns)):
            paragraphs1 = table1.cell(row, column).text_frame.paragraphs
            paragraphs2 = table2.cell(row, column).text_frame.paragraphs
            _check(len(paragraphs1) == len(paragraphs2))
            for para1, para2 in zip(paragraphs1, paragraphs2, strict=True):
                runs1, runs2 = _runs(para1, para2)
                if opts["examine_run_count"]:
                    _check(len(runs1) == len(runs2))
                for run1, run2 in zip(runs1, runs2, strict=False):
                    if opts["examine_color_rgb"]:
                        _check(_same_color(run1, run2))
                    _check(_same_flag(run1.font.bold, run2.font.bold))
                    _check(_same_flag(run1.font.italic, run2.font.italic))
                    _check(_same_underline(run1.font.underline, run2.font.underline))


def _compare_text_frames(shape1: Any, shape2: Any, opts: dict[str, Any]) -> bool:
    """Compare two text shapes' paragraphs and runs; True if any pair of runs was compared."""
    if opts["examine_text"]:
        _check(shape1.text.strip() == shape2.text.strip())
    paragraphs1, paragraphs2 = shape1.text_frame.paragraphs, shape2.text_frame.paragraphs
    _check(len(paragraphs1) == len(paragraphs2))
    runs_compared = False
    for para1, para2 in zip(paragraphs1, paragraphs2, strict=True):
        if opts["examine_alignment"]:
            _check(_alignment(para1) == _alignment(para2))
        if opts["examine_text"]:
            _check(para1.text == para2.text)
        if opts["examine_indent"] and para1.level != para2.level:
            # Levels 0 and 1 look alike (the same continuation indent), as OSWorld allows.
            _check(para1.level in (0, 1) and para2.level in (0, 1))
        runs1, runs2 = _runs(para1, para2)
        if opts["examine_run_count"]:
            _check(len(runs1) == len(runs2))
        for run1, run2 in zip(runs1, runs2, strict=False):
            _compare_runs(run1, run2, opts)
            runs_compared = True
    return runs_compared


def _compare_runs(run1: Any, run2: Any, opts: dict[str, Any]) -> None:
    font1, font2 = run1.font, run2.font
    if opts["examine_font_name"]:
        _check(font1.name == font2.name)
    if opts["examine_font_size"]:
        _check(font1.size == font2.size)
    if opts["examine_font_bold"]:
        _check(_same_flag(font1.bold, font2.bold))
    if opts["examine_font_italic"]:
        _check(_same_flag(font1.italic, font2.italic))
    if opts["examine_color_rgb"]:
        _check(_same_color(run1, run2))
    if opts["examine_font_underline"]:
        _check(_same_underline(font1.underline, font2.underline))
    if opts["examine_strike_through"]:
        strike1 = font1._element.attrib.get("strike", "noStrike")
        strike2 = font2._element.attrib.get("strike", "noStrike")
        _check(strike1 == strike2)


def _runs(para1: Any, para2: Any) -> tuple[list[Any], list[Any]]:
    """The paragraphs' runs; for two blank paragraphs, only runs with text (none), so that
    a formatting-only run does not count."""
    if (para1.text or "").strip() == "" and (para2.text or "").strip() == "":
        return _nonempty_runs(para1), _nonempty_runs(para2)
    return list(para1.runs), list(para2.runs)


def _nonempty_runs(para: Any) -> list[Any]:
    return [run for run in para.runs if (run.text or "").strip()]


def _alignment(para: Any) -> Any:
    return para.alignment if para.alignment is not None else PP_ALIGN.LEFT


def _same_flag(flag1: bool | None, flag2: bool | None) -> bool:
    """Bold or italic: None (inherited) and False both mean off."""
    return flag1 == flag2 or (not flag1 and not flag2)


def _same_underline(underline1: Any, underline2: Any) -> bool:
    """OSWorld's rule: two set values must be equal; None equals anything but ``True`` itself
    (by identity: python-pptx's ``MSO_UNDERLINE.WORDS`` equals ``True`` but is not it, so
    "words" underline against none passes, as in OSWorld)."""
    if underline1 == underline2:
        return True
    if underline1 is not None and underline2 is not None:
        return False
    return not (underline1 is True or underline2 is True)


def _same_color(run1: Any, run2: Any) -> bool:
    """Explicit RGB colours must match; a run whose colour has no RGB is not compared."""
    try:
        rgb1, rgb2 = run1.font.color.rgb, run2.font.color.rgb
    except AttributeError:
        return True
    return bool(rgb1 == rgb2)


def _bullets(slide: Any) -> list[tuple[Any, str, str]]:
    """(level, bullet character, text) of each non-blank paragraph of the slide's XML."""
    root = etree.fromstring(slide.part.blob)
    bullets = []
    for paragraph in root.iter(f"{_A}p"):
        text = "".join(t.text or "" for t in paragraph.iter(f"{_A}t"))
        if not text.strip():
            continue
        properties = paragraph.find(f"{_A}pPr")
        if properties is None:
            bullets.append(("No Level", "No Bullet", text))
            continue
        bullet_char = properties.find(f"{_A}buChar")
        char = bullet_char.get("char") if bullet_char is not None else "No Bullet"
        bullets.append((properties.get("lvl"), char, text))
    return bullets


def _bullets_match(
    bullets1: list[tuple[Any, str, str]], bullets2: list[tuple[Any, str, str]]
) -> bool:
    """Same text and bullet character; the level counts only where a bullet is shown."""
    if len(bullets1) != len(bullets2):
        return False
    for (level1, char1, text1), (level2, char2, text2) in zip(bullets1, bullets2, strict=True):
        if text1 != text2 or char1 != char2:
            return False
        shown = char1 != "No Bullet" or char2 != "No Bullet"
        if shown and (level1 or "0") != (level2 or "0"):
            return False
    return True
