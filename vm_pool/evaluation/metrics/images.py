"""Image metrics: structural similarity (SSIM) of two images, and an image's size.

OSWorld computes SSIM with scikit-image; ``structural_similarity`` below is the same measure
(7×7 uniform window, sample covariance, K1=0.01, K2=0.03, data range 255, mean over the windows
that fit inside the image) written with numpy, so no scikit-image is needed.
"""

from typing import Any

import numpy as np
from PIL import Image

from vm_pool.evaluation.bounds import open_image

_WINDOW = 7


def compare_images(result: str | None, expected: str | None, **options: Any) -> float:
    """SSIM of the two images in grey, both resized to the smaller size, from 0 to 1.

    With ``reference_base_result`` (the SSIM of the untouched start image), the score is the
    share of the remaining way to 1 that the result covers, 0 unless it beats the base by 0.01.
    """
    if not result or not expected:
        return 0.0
    first = open_image(result).convert("L")
    second = open_image(expected).convert("L")
    # OSWorld takes the smaller size by tuple order (width first), not by area.
    size = min(first.size, second.size)
    first = first.resize(size, Image.Resampling.LANCZOS)
    second = second.resize(size, Image.Resampling.LANCZOS)
    similarity = structural_similarity(np.asarray(first), np.asarray(second))
    base = options.get("reference_base_result")
    if base is None:
        return similarity
    if similarity >= base + 0.01:
        return (similarity - base) / (1 - base)
    return 0.0


def structural_similarity(first: np.ndarray, second: np.ndarray, window: int = _WINDOW) -> float:
    """Mean SSIM of two same-sized 8-bit grey images over ``window``×``window`` squares (odd, at
    least 3, scikit-image's ``win_size``); 0 when they are smaller than the window."""
    if first.shape != second.shape or min(first.shape) < window:
        return 0.0
    # Integer window sums are exact; skimage's float filter agrees to rounding.
    x = first.astype(np.int64)
    y = second.astype(np.int64)
    mean_x, mean_y = _window_mean(x, window), _window_mean(y, window)
    sample_norm = window**2 / (window**2 - 1)
    var_x = sample_norm * (_window_mean(x * x, window) - mean_x * mean_x)
    var_y = sample_norm * (_window_mean(y * y, window) - mean_y * mean_y)
    cov_xy = sample_norm * (_window_mean(x * y, window) - mean_x * mean_y)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    ssim_map = ((2 * mean_x * mean_y + c1) * (2 * cov_xy + c2)) / (
        (mean_x**2 + mean_y**2 + c1) * (var_x + var_y + c2)
    )
    return float(ssim_map.mean())


def _window_mean(values: np.ndarray, w: int) -> np.ndarray:
    """Mean over every w×w window lying wholly inside the array (a "valid" box filter)."""
    summed = np.pad(values, ((1, 0), (1, 0))).cumsum(axis=0).cumsum(axis=1)
    window_sums = summed[w:, w:] - summed[:-w, w:] - summed[w:, :-w] + summed[:-w, :-w]
    return window_sums / (w * w)


def check_image_size(result: str | None, rule: dict[str, Any]) -> float:
    """1 when the image is ``rule["width"]`` wide and ``rule["height"]`` high (either optional).

    With ``ignore_transparent``, only the box around non-transparent pixels counts.
    """
    if result is None:
        return 0.0
    image = open_image(result)
    # OSWorld's condition, precedence included: any image with a transparency key is cropped.
    if (rule.get("ignore_transparent", False) and image.mode in ("RGBA", "LA")) or (
        "transparency" in image.info
    ):
        bbox = image.convert("RGBA").split()[-1].getbbox()
        width, height = (bbox[2] - bbox[0], bbox[3] - bbox[1]) if bbox else (0, 0)
    else:
        width, height = image.size
    height_ok = rule.get("height") is None or height == rule["height"]
    width_ok = rule.get("width") is None or width == rule["width"]
    return float(height_ok and width_ok)
