"""compare_pdf_images: do two PDFs embed the same pictures, compared by perceptual hash.

OSWorld lists each page's image objects with PyMuPDF and hashes them with imagehash's ``phash``;
this reads them with pypdf and computes the same hash with numpy: the image in grey, resized to
32×32 with Lanczos, a 2-D DCT-II, the top-left 8×8 coefficients compared with their median (the
same bits as imagehash's). Images drawn inline in a page's content stream are not listed, as
PyMuPDF does not list them; an image that cannot be decoded is left out, as in OSWorld. Pages
holding several images may list them in a different order than PyMuPDF.
"""

from typing import Any

import numpy as np
from PIL import Image
from pypdf import PageObject, PdfReader
from pypdf.errors import LimitReachedError

from vm_pool.evaluation.bounds import (
    MAX_IMAGE_PIXELS,
    NOT_A_VERDICT,
    LimitHit,
    check_page_count,
    check_size,
)

_HASH_SIDE = 8
_SAMPLE_SIDE = 32
_MAX_DISTANCE = 5  # OSWorld's threshold: at most this many bits differ
_DCT = 2 * np.cos(
    np.pi
    * np.arange(_SAMPLE_SIDE)[:, None]
    * (2 * np.arange(_SAMPLE_SIDE)[None, :] + 1)
    / (2 * _SAMPLE_SIDE)
)


def compare_pdf_images(result: str | None, expected: str | None, **options: Any) -> float:
    """The share of image pairs (in order) whose hashes differ in at most 5 bits; 0 when the
    PDFs hold different numbers of images or one cannot be read, 1 when neither holds any."""
    if not result or not expected:
        return 0.0
    try:
        hashes_1, hashes_2 = _hashes(result), _hashes(expected)
    except NOT_A_VERDICT:
        raise
    except Exception:  # an unreadable PDF scores 0, as in OSWorld
        return 0.0
    if len(hashes_1) != len(hashes_2):
        return 0.0
    if not hashes_1:
        return 1.0
    close = sum(
        int(np.count_nonzero(first != second)) <= _MAX_DISTANCE
        for first, second in zip(hashes_1, hashes_2, strict=True)
    )
    return close / len(hashes_1)


def _hashes(path: str) -> list[np.ndarray]:
    """The perceptual hash of each image object on each page, in order."""
    check_size(path)
    reader = PdfReader(path)
    check_page_count(len(reader.pages))
    hashes = []
    for page in reader.pages:
        names = page.images.keys()  # iterating page.images itself decodes every image
        for key in names:
            if isinstance(key, str) and key.startswith("~"):
                continue  # an inline image
            _check_pixels(page, key)
            try:
                image = page.images[key].image
            except LimitReachedError as error:
                raise LimitHit("pdf image", str(error)) from error
            except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
                raise LimitHit("image pixels", str(error)) from error
            except NOT_A_VERDICT:
                raise
            except Exception:  # an image that cannot be decoded is left out
                continue
            if image is not None:
                hashes.append(_phash(image))
    return hashes


def _check_pixels(page: PageObject, key: str | list[str]) -> None:
    """Refuse an image object whose declared size is past ``MAX_IMAGE_PIXELS`` before it is
    decoded (``key`` is its name, or the names of the forms that lead to it and its own)."""
    holder: Any = page
    names = [key] if isinstance(key, str) else key
    try:
        for name in names:
            holder = holder["/Resources"]["/XObject"][name]
        width, height = int(holder["/Width"]), int(holder["/Height"])
    except (KeyError, TypeError, ValueError):
        return  # pypdf reports what it cannot decode
    if width * height > MAX_IMAGE_PIXELS:
        raise LimitHit(
            "image pixels", f"{width}×{height} pixels (at most {MAX_IMAGE_PIXELS} per image)"
        )


def _phash(image: Image.Image) -> np.ndarray:
    """imagehash's ``phash`` bits (8×8, row by row)."""
    grey = image.convert("L").resize((_SAMPLE_SIDE, _SAMPLE_SIDE), Image.Resampling.LANCZOS)
    coefficients = (_DCT @ np.asarray(grey, dtype=np.float64) @ _DCT.T)[:_HASH_SIDE, :_HASH_SIDE]
    bits: np.ndarray = (coefficients > np.median(coefficients)).flatten()
    return bits
