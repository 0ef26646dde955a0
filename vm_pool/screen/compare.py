"""Whether two screens differ, with the tolerances named once.

- ``same_screen`` / ``screen_difference``, on stored screenshots (PNG bytes): the share of
  pixels that differ, within ``SAME_SCREEN_TOLERANCE`` one screen. A rollout's stop rules and
  screen identities, a branch task's replay, the "no visible effect" flag and waiting for a
  screen to stay quiet ask this.
- ``meaningful_change``, on captured frames: a change whose bounding box is at least
  ``MIN_EXTENT_PX`` wide and high, so that a blinking text caret is no change. The screen watch
  before a decision and a setup waiting for a window to be drawn ask this.

Settling (``vm_pool.screen.settle``) asks neither: it waits for identical frames in a row.
Plain data, no desktop.
"""

import io
import struct

import numpy as np
from isal import isal_zlib
from PIL import Image

from vm_pool.screen.capture import Frame
from vm_pool.screen.png import PNG_SIGNATURE

# The share of pixels two observations may differ by and still be the same screen. A blinking
# caret changes about 0.002 % of a 1280x800 screen, a panel clock's minute about 0.02 %, the
# pointer moved elsewhere about 0.03 %; a tooltip, a hover highlight or a menu is 0.2 % and more.
SAME_SCREEN_TOLERANCE = 0.001
# The smallest width and height of a changed area that is a change of a captured frame: a text
# caret (one or two pixels wide) blinks below it, a window, menu or dialog is far above it.
MIN_EXTENT_PX = 4


def screen_difference(png_a: bytes, png_b: bytes) -> float:
    """The share of pixels (0 to 1) whose colour differs between two PNG screenshots.

    Screens of different sizes differ entirely (1.0). Pixels are compared exactly in RGB (alpha
    is dropped); whether a difference matters is the caller's tolerance, usually
    ``SAME_SCREEN_TOLERANCE`` (see ``same_screen``). Equal bytes answer 0.0 without decoding.
    Screenshots as the capture encoder writes them (``vm_pool.screen.capture.PngEncoder``: 8-bit
    RGB rows without filters) are read directly, inflated by ISA-L, about 2 ms for 1920x1080
    where Pillow takes 8 ms; any other PNG is read by Pillow. A damaged PNG raises ``OSError``,
    bytes that are not a PNG its subclass ``PIL.UnidentifiedImageError``.
    """
    if png_a == png_b:
        return 0.0
    pixels_a, pixels_b = _rgb_pixels(png_a), _rgb_pixels(png_b)
    if pixels_a.shape != pixels_b.shape:
        return 1.0
    height, width = pixels_a.shape[:2]
    # Only the rows that differ are looked at pixel by pixel: a change is usually a few rows.
    rows_a, rows_b = pixels_a.reshape(height, -1), pixels_b.reshape(height, -1)
    rows = np.flatnonzero((rows_a != rows_b).any(axis=1))
    differs = pixels_a[rows] != pixels_b[rows]
    # Three boolean planes or-ed together: ten times faster than ``any(axis=2)``.
    changed = differs[..., 0] | differs[..., 1] | differs[..., 2]
    return int(np.count_nonzero(changed)) / (height * width)


def same_screen(png_a: bytes, png_b: bytes, tolerance: float = SAME_SCREEN_TOLERANCE) -> bool:
    """Whether two screenshots show the same screen, give or take ``tolerance`` (equal bytes
    are answered without decoding, by ``screen_difference``)."""
    return screen_difference(png_a, png_b) <= tolerance


def _rgb_pixels(png: bytes) -> np.ndarray:
    """A PNG's pixels as a height x width x 3 array."""
    pixels = _unfiltered_rgb_pixels(png)
    if pixels is not None:
        return pixels
    with Image.open(io.BytesIO(png), formats=["PNG"]) as image:
        return np.asarray(image if image.mode == "RGB" else image.convert("RGB"))


def _unfiltered_rgb_pixels(png: bytes) -> np.ndarray | None:
    """The pixels of an 8-bit RGB PNG, not interlaced, whose rows all have filter type 0 (none);
    None for any other PNG, or a damaged one, which Pillow then reads or refuses."""
    if not png.startswith(PNG_SIGNATURE) or png[12:16] != b"IHDR" or len(png) < 33:
        return None
    width, height, depth, colour, _, _, interlace = struct.unpack_from(">IIBBBBB", png, 16)
    if (depth, colour, interlace) != (8, 2, 0) or width * height > Image.MAX_IMAGE_PIXELS:
        return None
    deflated, position = [], 33
    while position + 8 <= len(png):
        length, kind = struct.unpack_from(">I4s", png, position)
        if kind == b"IDAT":
            deflated.append(png[position + 8 : position + 8 + length])
        position += 12 + length
    row_bytes = 1 + 3 * width  # each row starts with its filter type
    try:
        rows = isal_zlib.decompressobj().decompress(b"".join(deflated), height * row_bytes)
    except isal_zlib.error:  # type: ignore[misc]  # isal's stubs type its error class as an instance
        return None
    if len(rows) != height * row_bytes:
        return None
    pixels = np.frombuffer(rows, np.uint8).reshape(height, row_bytes)
    if pixels[:, 0].any():
        return None
    return pixels[:, 1:].reshape(height, width, 3)


def meaningful_change(before: Frame, after: Frame, min_extent: int = MIN_EXTENT_PX) -> bool:
    """Do two frames differ by more than a caret's blink?"""
    if before.size != after.size:
        return True
    if before.pixels == after.pixels:  # the common case: a memcmp
        return False
    shape = (after.height, after.width)
    # A pixel is one little-endian word, B | G << 8 | R << 16, the fourth byte padding.
    a = np.frombuffer(before.pixels, "<u4").reshape(shape)
    b = np.frombuffer(after.pixels, "<u4").reshape(shape)
    changed_rows = np.flatnonzero((a != b).any(axis=1))
    if not len(changed_rows):
        return False
    changed = ((a[changed_rows] ^ b[changed_rows]) & 0x00FFFFFF) != 0
    rows = changed_rows[changed.any(axis=1)]
    if not len(rows):
        return False  # only the padding differs
    columns = np.flatnonzero(changed.any(axis=0))
    height = int(rows[-1] - rows[0] + 1)
    width = int(columns[-1] - columns[0] + 1)
    return width >= min_extent and height >= min_extent
