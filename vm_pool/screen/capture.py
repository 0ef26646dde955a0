"""Screen capture on an X11 desktop: raw frames through MIT-SHM, lossless PNG encoded fast.

Frames come from ``mss`` (XShmGetImage into shared memory, about 1 ms for 1920x1080; the plain
XGetImage round trip takes about 17 ms), with the cursor drawn in from XFixes. A frame is the
server's own BGRX bytes, so two frames compare with one ``bytes`` equality.

PNG encoding skips PNG's per-row filters (filter type 0) and deflates with ISA-L at level 1.
Adaptive filtering, which Pillow and libpng do by default, costs more than the deflate itself,
and on screens (flat colours, text) it barely shrinks the file: for a busy 1920x1080 desktop
this encoder takes about 10 ms and writes 830 kB, where Pillow at level 1 takes 70 ms for
the same size and zlib at level 1 alone (no filter) 30 ms.
"""

import io
import struct
import threading
import zlib
from dataclasses import dataclass

import mss
import numpy as np
from isal import isal_zlib
from PIL import Image

from vm_pool.actions import ScreenSize
from vm_pool.screen.png import PNG_SIGNATURE

DEFLATE_LEVEL = 1


@dataclass(frozen=True)
class Frame:
    """One grab of the whole screen: ``pixels`` are BGRX, 4 bytes a pixel, rows top down, as
    the X server holds them. Nothing modifies them once grabbed."""

    width: int
    height: int
    pixels: bytes | bytearray

    @property
    def size(self) -> ScreenSize:
        return ScreenSize(self.width, self.height)

    def rgb(self) -> Image.Image:
        """The frame as a Pillow RGB image, to look at its pixels."""
        return Image.frombuffer("RGB", (self.width, self.height), self.pixels, "raw", "BGRX", 0, 1)


def frame_of_png(png: bytes) -> Frame:
    """A PNG observation as a frame, to compare with frames grabbed later."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return Frame(image.width, image.height, image.tobytes("raw", "BGRX"))


class PngEncoder:
    """Encodes frames as lossless 8-bit RGB PNG. Keeps its row buffer from one frame to the
    next: allocating fresh megabytes for every screenshot costs more in page faults than the
    encoding itself. Not thread-safe: one user."""

    def __init__(self) -> None:
        self._rows = np.zeros((0, 0), np.uint8)

    def encode(self, frame: Frame) -> bytes:
        width, height = frame.width, frame.height
        if self._rows.shape != (height, width * 3 + 1):
            # Each PNG row starts with its filter type: 0, none, is set once here.
            self._rows = np.zeros((height, width * 3 + 1), np.uint8)
        bgrx = np.frombuffer(frame.pixels, np.uint8).reshape(height, width, 4)
        rgb = self._rows[:, 1:].reshape(height, width, 3)
        for channel in range(3):
            rgb[:, :, channel] = bgrx[:, :, 2 - channel]
        header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        return b"".join(
            (
                PNG_SIGNATURE,
                _chunk(b"IHDR", header),
                _chunk(b"IDAT", isal_zlib.compress(self._rows, DEFLATE_LEVEL)),
                _chunk(b"IEND", b""),
            )
        )


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(data, zlib.crc32(kind))
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


class ScreenGrabber:
    """Grabs frames of one X display. Not thread-safe: one user. ``grabbed`` counts the frames
    every grabber of the process grabbed (the benchmarks' grabs per step)."""

    grabbed = 0
    _counting = threading.Lock()

    def __init__(self, display: str) -> None:
        self._display = display
        self._with_cursor = mss.MSS(display=display, with_cursor=True)
        self._without_cursor: mss.MSS | None = None
        monitor = self._with_cursor.monitors[0]  # the whole screen
        self._area = {key: monitor[key] for key in ("left", "top", "width", "height")}
        self.size = ScreenSize(monitor["width"], monitor["height"])

    def grab(self, cursor: bool = True) -> Frame:
        if cursor:
            shot = self._with_cursor.grab(self._area)
        else:
            # Frames without the cursor are for comparisons in tests; made on first use.
            if self._without_cursor is None:
                self._without_cursor = mss.MSS(display=self._display, with_cursor=False)
            shot = self._without_cursor.grab(self._area)
        with ScreenGrabber._counting:
            ScreenGrabber.grabbed += 1
        return Frame(shot.width, shot.height, shot.raw)

    def close(self) -> None:
        self._with_cursor.close()
        if self._without_cursor is not None:
            self._without_cursor.close()
