"""check_image_stretch_and_center: a picture stretched over its whole slide and centred (OSWorld's
check for one Impress task, constants included)."""

from typing import Any

from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.util import Inches

from vm_pool.evaluation.bounds import check_zip

_TOLERANCE = Inches(0.5)


def check_image_stretch_and_center(result: str | None, expected: str | None) -> float:
    """1 when the original's first picture on slide 1 is, in the result's slide 1, within half an
    inch of the slide's width and height and of the centred position.

    The picture is found by its image bytes (the last match counts); 0 when the original's first
    slide has no picture or the result's has none with the same bytes.
    """
    if result is None or expected is None:
        return 0.0
    check_zip(result)
    check_zip(expected)
    original = Presentation(expected)
    modified = Presentation(result)
    originals = _pictures(original.slides[0].shapes)
    if not originals:
        return 0.0
    blob = originals[0].image.blob
    matches = [
        picture for picture in _pictures(modified.slides[0].shapes) if picture.image.blob == blob
    ]
    if not matches:
        return 0.0
    picture = matches[-1]
    slide_width, slide_height = original.slide_width, original.slide_height
    if slide_width is None or slide_height is None:
        return 0.0
    stretched = (
        abs(picture.width - slide_width) <= _TOLERANCE
        and abs(picture.height - slide_height) <= _TOLERANCE
    )
    centred = (
        abs(picture.left - (slide_width - picture.width) / 2) <= _TOLERANCE
        and abs(picture.top - (slide_height - picture.height) / 2) <= _TOLERANCE
    )
    return float(stretched and centred)


def _pictures(shapes: Any) -> list[Any]:
    return [shape for shape in shapes if shape.shape_type == MSO_SHAPE_TYPE.PICTURE]
