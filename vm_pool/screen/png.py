"""A PNG's signature and its size from its header, with nothing but the standard library: the
desktop agent's client, the trainer's length counter and the demo model read it without Django."""

import struct

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class NotAPng(ValueError):
    """The bytes given as a screenshot are not a PNG image."""


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG, from its IHDR chunk."""
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise NotAPng("screenshot is not a PNG image")
    width, height = struct.unpack(">II", data[16:24])
    if width == 0 or height == 0:
        raise NotAPng("PNG has an empty size")
    return int(width), int(height)
