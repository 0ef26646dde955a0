"""Content-addressed screenshot storage.

A screenshot is stored once, at ``screenshots/<aa>/<bb>/<sha256>.png``, through Django's default
storage (local files, or S3 when configured). Storing the same bytes twice returns the same
row and writes nothing. Only real PNGs are accepted; their size is read from the IHDR chunk.
"""

import hashlib

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction

from vm_pool.models import Screenshot
from vm_pool.screen.png import png_size


def screenshot_path(sha256: str) -> str:
    return f"screenshots/{sha256[:2]}/{sha256[2:4]}/{sha256}.png"


def screenshot_png(screenshot: Screenshot) -> bytes:
    """A stored screenshot's PNG bytes."""
    name = screenshot.file.name
    assert name is not None
    with default_storage.open(name, "rb") as f:
        return bytes(f.read())


def store_screenshot(data: bytes) -> Screenshot:
    """Store PNG bytes once and return their row."""
    width, height = png_size(data)
    digest = hashlib.sha256(data).hexdigest()
    existing = Screenshot.objects.filter(pk=digest).first()
    if existing is not None:
        return existing
    path = screenshot_path(digest)
    if not default_storage.exists(path):
        saved = default_storage.save(path, ContentFile(data))
        if saved != path:  # a concurrent writer got there first; keep one copy
            default_storage.delete(saved)
    try:
        with transaction.atomic():
            return Screenshot.objects.create(
                sha256=digest, width=width, height=height, size_bytes=len(data), file=path
            )
    except IntegrityError:
        return Screenshot.objects.get(pk=digest)
