"""OSWorld's image checks for GIMP tasks: is the exported image the original with one change made
(darker, more saturated, more contrast, mirrored, palette-based, resized) and otherwise the same
picture, is a shape where it should be, are two lists of images identical.

"The same picture" is OSWorld's structure check: both images converted to RGB, the same size, at
least 7×7, and a mean SSIM over the three channels (scikit-image's ``structural_similarity``
with ``channel_axis=2`` and its defaults: 7×7 uniform window, data range 255) of at least 0.9
unless a metric says otherwise. The SSIM is ``images.structural_similarity``, which gives
scikit-image's numbers without scikit-image.

``result`` is the first argument OSWorld passes (``src_path``), ``expected`` the second
(``tgt_path``); a missing file scores 0. An image past ``bounds.MAX_IMAGE_PIXELS`` is not scored.
"""

import os
from typing import Any

import numpy as np
from PIL import Image, ImageChops, ImageStat

from vm_pool.evaluation.bounds import open_image
from vm_pool.evaluation.metrics.errors import MetricError
from vm_pool.evaluation.metrics.images import structural_similarity

_MIN_SIDE = 7
_BRIGHTNESS_TARGET = 128


def _ssim_rgb(first: Image.Image, second: Image.Image, window: int = _MIN_SIDE) -> float:
    """Mean over the R, G and B channels of the SSIM of two same-sized images."""
    x = np.asarray(first.convert("RGB"))
    y = np.asarray(second.convert("RGB"))
    return float(np.mean([structural_similarity(x[..., c], y[..., c], window) for c in range(3)]))


def _same_structure(first: Image.Image, second: Image.Image, threshold: float = 0.9) -> bool:
    """OSWorld's structure check: same size, both at least 7×7, RGB SSIM at least ``threshold``."""
    if min(*first.size, *second.size) < _MIN_SIDE or first.size != second.size:
        return False
    return _ssim_rgb(first, second) >= threshold


def check_structure_sim(result: str | None, expected: str | None) -> float:
    """1 when the two images have the same size and the same structure."""
    if result is None or expected is None:
        return 0.0
    return float(_same_structure(open_image(result), open_image(expected)))


def check_structure_sim_resized(result: str | None, expected: str | None) -> float:
    """1 when the result, resized to the expected image's size, has its structure.

    A result with transparency is first cropped to its non-transparent pixels (0 when there are
    none), as GIMP leaves a resized layer on a larger transparent canvas.
    """
    if result is None or expected is None:
        return 0.0
    source, target = open_image(result), open_image(expected)
    if source.mode in ("RGBA", "LA") or "transparency" in source.info:
        source = source.convert("RGBA")
        box = source.split()[-1].getbbox()
        if box is None:
            return 0.0
        source = source.crop(box).convert("RGB")
    # Pillow's default filter, as OSWorld calls it.
    return float(_same_structure(source.resize(target.size), target.convert("RGB")))


def check_structure_sim_with_threshold(
    result: str | None, expected: str | None, ssim_threshold: float = 0.85
) -> float:
    """1 when the result, resized to the expected image's size, has SSIM ≥ ``ssim_threshold``.

    Images under 7 pixels on a side use the largest odd window that fits; under 3 they score 0
    (scikit-image cannot take a 1-pixel window).
    """
    if result is None or expected is None:
        return 0.0
    source, target = open_image(result), open_image(expected)
    if source.size != target.size:
        source = source.resize(target.size, Image.Resampling.LANCZOS)
    smallest = min(target.size)
    window = _MIN_SIDE if smallest >= _MIN_SIDE else smallest - (1 - smallest % 2)
    if window < 3:
        return 0.0
    return float(_ssim_rgb(source, target, window) >= ssim_threshold)


def check_file_exists_and_structure_sim(result: str | None, expected: str | None) -> float:
    """1 when the exported file exists and has the expected image's structure."""
    if result is None or expected is None or not os.path.isfile(result):
        return 0.0
    return float(_same_structure(open_image(result), open_image(expected)))


def check_palette_and_structure_sim(result: str | None, expected: str | None) -> float:
    """1 when the result is a palette ("P" mode) image with the expected image's structure."""
    if result is None or expected is None:
        return 0.0
    source = open_image(result)
    return float(
        source.mode == "P" and _same_structure(source.convert("RGB"), open_image(expected))
    )


def check_image_mirror(result: str | None, expected: str | None) -> float:
    """1 when the result flipped left to right has the expected image's structure (SSIM ≥ 0.99:
    GIMP's flip is not always pixel-exact)."""
    if result is None or expected is None:
        return 0.0
    flipped = open_image(result).transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return float(_same_structure(flipped, open_image(expected), 0.99))


def check_brightness_decrease_and_structure_sim(
    result: str | None, expected: str | None, threshold: float = 0.03
) -> float:
    """1 when the result is darker than the expected image and, both brought to the same mean
    brightness (128), their mean squared difference in RGB (0–1 scale) is under ``threshold``."""
    if result is None or expected is None:
        return 0.0
    source, target = open_image(result), open_image(expected)
    darker = _brightness(target) > _brightness(source)
    similar = _mse(_normalized(source), _normalized(target)) < threshold
    return float(darker and similar)


def _brightness(image: Image.Image) -> float:
    mean: float = ImageStat.Stat(image.convert("L")).mean[0]
    return mean


def _normalized(image: Image.Image) -> Image.Image:
    """Every channel scaled so that the grey mean becomes 128 (clipped to 0–255)."""
    factor = _BRIGHTNESS_TARGET / _brightness(image)
    return image.point(lambda value: min(255, max(0, int(value * factor))))


def _mse(first: Image.Image, second: Image.Image) -> float:
    """Mean squared RGB difference on a 0–1 scale, the first resized to the second's size."""
    if first.size != second.size:
        first = first.resize(second.size, Image.Resampling.LANCZOS)
    # float32 throughout, as OSWorld computes it.
    x = np.asarray(first.convert("RGB"), dtype=np.float32) / 255
    y = np.asarray(second.convert("RGB"), dtype=np.float32) / 255
    return float(np.mean((x - y) ** 2))


def check_saturation_increase_and_structure_sim(result: str | None, expected: str | None) -> float:
    """1 when the result's mean HSV saturation is above the expected image's and their hue and
    value channels each have the same structure."""
    if result is None or expected is None:
        return 0.0
    source = open_image(result).convert("HSV")
    target = open_image(expected).convert("HSV")
    more_saturated = _saturation(target) < _saturation(source)
    hue_1, _, value_1 = source.split()
    hue_2, _, value_2 = target.split()
    same = _same_structure(hue_1, hue_2) and _same_structure(value_1, value_2)
    return float(more_saturated and same)


def _saturation(hsv: Image.Image) -> float:
    return float(np.mean(np.asarray(hsv.split()[1])))


def check_contrast_increase_and_structure_sim(result: str | None, expected: str | None) -> float:
    """1 when the result's contrast (standard deviation of its raw pixel values, alpha included)
    is above the expected image's and their structure is the same at SSIM ≥ 0.65."""
    if result is None or expected is None:
        return 0.0
    source, target = open_image(result), open_image(expected)
    higher = _contrast(target) < _contrast(source)
    return float(higher and _same_structure(source, target, 0.65))


def _contrast(image: Image.Image) -> float:
    return float(np.std(np.asarray(image, dtype=np.float32)))


def check_triangle_position(result: str | None) -> float:
    """1 when the triangle's centroid lies within 5% (of each side) of the image's centre.

    The triangle's colour is OSWorld's pick: the colours sorted by pixel count, ascending, and
    the second one taken.
    """
    if result is None:
        return 0.0
    pixels = np.asarray(open_image(result))
    colours, counts = np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0, return_counts=True)
    triangle = colours[np.argsort(counts)][1]
    centroid = np.argwhere(np.all(pixels == triangle, axis=2)).mean(axis=0)
    shape = np.array(pixels.shape[:2])
    return float(np.all(np.abs(centroid - shape / 2) < 0.05 * shape))


def check_textbox_on_leftside(result: str | None) -> float:
    """1 when the leftmost dark pixel (grey below 128) lies in the image's left 5%."""
    if result is None:
        return 0.0
    image = open_image(result)
    dark_columns = np.flatnonzero((np.asarray(image.convert("L")) < 128).any(axis=0))
    leftmost = dark_columns[0] if dark_columns.size else image.width
    return float(leftmost < image.width * 0.05)


def check_green_background(result: str | None, expected: str | None) -> float:
    """1 when every pixel that is not black in the expected image (its background) is green in
    the result: its green above both its red and its blue."""
    if result is None or expected is None:
        return 0.0
    source, target = _rgb_pixels(result), _rgb_pixels(expected)
    height, width = target.shape[:2]
    # Deliberate difference from OSWorld: it indexes pixels as [x, y], so any image that is not
    # square raises IndexError; this reads [y, x], the same pixels for a square image.
    if source.shape[0] < height or source.shape[1] < width:
        return 0.0
    source = source[:height, :width]
    background = np.any(target != 0, axis=2)
    red, green, blue = source[..., 0], source[..., 1], source[..., 2]
    green_enough = (green > red) & (green > blue)
    return float(np.all(green_enough[background]))


def _rgb_pixels(path: str) -> np.ndarray:
    """The first three channels of an RGB or RGBA image; other modes converted to RGB."""
    image = open_image(path)
    # Deliberate difference from OSWorld: it reads grey and palette images as 2-D arrays and
    # fails on them; they are converted to RGB instead.
    if image.mode not in ("RGB", "RGBA"):
        image = image.convert("RGB")
    return np.asarray(image)[..., :3]


def check_image_file_size(result: str | None, rule: dict[str, Any]) -> float:
    """1 when the file is smaller than ``rule["max_size"]`` bytes."""
    if "max_size" not in rule:
        raise MetricError("check_image_file_size needs rule max_size")
    if result is None:
        return 0.0
    return float(os.path.getsize(result) < rule["max_size"])


def compare_image_list(result: str | list[str] | None, expected: str | list[str] | None) -> float:
    """1 when each result image equals its expected image pixel for pixel (after resizing the
    result to the expected size and converting it to the expected mode), 0 at the first that
    differs or is missing. Pairs are taken as far as the shorter list goes."""
    results = result if isinstance(result, list) else [result]
    expecteds = expected if isinstance(expected, list) else [expected]
    for result_path, expected_path in zip(results, expecteds, strict=False):
        if not result_path or not expected_path:
            return 0.0
        predicted, gold = open_image(result_path), open_image(expected_path)
        if predicted.size != gold.size:
            predicted = predicted.resize(gold.size, Image.Resampling.LANCZOS)
        if predicted.mode != gold.mode:
            predicted = predicted.convert(gold.mode)
        # Pillow's getbbox looks only at alpha in RGBA images, as it does in OSWorld.
        if ImageChops.difference(predicted, gold).getbbox():
            return 0.0
    return 1.0
