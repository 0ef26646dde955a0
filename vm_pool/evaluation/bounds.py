"""What a parser of desktop-produced bytes may be asked to do, checked before it starts.

Every file an evaluator reads came from the desktop (or from a task file a manager imported):
the model's actions, the annotator's corrections and the task's own setup control its bytes. The
evaluation jail (``vm_pool.evaluation.jail``) bounds memory, CPU time, disk and wall-clock time
whatever a parser does; these checks come first so that the ordinary bombs are refused cheaply
and reported precisely, by the limit they would have broken:

- a zip container (docx, xlsx, pptx, odt, ods, odp, and archives) is read from its central
  directory before any member is inflated: at most ``MAX_ZIP_MEMBERS`` members, at most
  ``MAX_ZIP_BYTES`` inflated in all, no member over ``MAX_ZIP_RATIO`` times its compressed size
  once it is past ``RATIO_FLOOR_BYTES`` (Python's zipfile never inflates past a member's declared
  size, so the declared sizes bound what the parsers read);
- a spreadsheet's sheets are scanned for the cells they hold before pandas builds a dense frame:
  at most ``MAX_SHEET_CELLS`` rows × columns;
- an image is opened with a pixel cap that raises (``MAX_IMAGE_PIXELS``);
- a PDF with more than ``MAX_PDF_PAGES`` pages is not read;
- nesting deeper than Python's recursion limit (JSON, YAML) is a limit, not a crash.

A check that fails raises ``LimitHit`` with the limit's name: the evaluation is "not scored",
never a score of 0 (the episode may have been right) and never a hang.
"""

import re
import sqlite3
import warnings
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from lxml import etree
from PIL import Image

MAX_FILE_BYTES = 100 * 1024 * 1024  # what the desktop's agent hands back at most
MAX_ZIP_MEMBERS = 10_000
MAX_ZIP_BYTES = 256 * 1024 * 1024
MAX_ZIP_RATIO = 100
RATIO_FLOOR_BYTES = 1024 * 1024  # small members compress as they like
MAX_SHEET_CELLS = 2_000_000
MAX_IMAGE_PIXELS = 4096 * 4096
MAX_PDF_PAGES = 200
SQLITE_STEPS = 20_000_000  # virtual-machine steps a query may take
SQLITE_CHECK_EVERY = 10_000

_SHEET_PART = re.compile(r"^xl/worksheets/[^/]+\.xml$")
_CELL_REF = re.compile(r"^([A-Z]{1,3})(\d+)$")
_MAIN_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"

Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
warnings.simplefilter("error", Image.DecompressionBombWarning)


class LimitHit(Exception):
    """A file asks for more than an evaluation may spend; ``limit`` names what it broke."""

    def __init__(self, limit: str, detail: str) -> None:
        super().__init__(f"{limit}: {detail}")
        self.limit = limit


# What a metric's "unreadable file scores 0" must let through: these are not verdicts.
NOT_A_VERDICT = (LimitHit, MemoryError, RecursionError)


def check_size(path: str | Path) -> None:
    size = Path(path).stat().st_size
    if size > MAX_FILE_BYTES:
        raise LimitHit("file size", f"{Path(path).name} is {size} bytes")


def check_zip(path: str | Path) -> None:
    """Refuse a zip container whose members would inflate past the caps (see the docstring).
    A file that is not a zip is left to its parser."""
    check_size(path)
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return
    if len(members) > MAX_ZIP_MEMBERS:
        raise LimitHit("archive members", f"{len(members)} members (at most {MAX_ZIP_MEMBERS})")
    total = sum(member.file_size for member in members)
    if total > MAX_ZIP_BYTES:
        raise LimitHit("archive size", f"{total} bytes inflated (at most {MAX_ZIP_BYTES})")
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > RATIO_FLOOR_BYTES and ratio > MAX_ZIP_RATIO:
            raise LimitHit(
                "compression ratio",
                f"{member.filename!r} inflates {ratio:.0f} times (at most {MAX_ZIP_RATIO})",
            )


def _column(letters: str) -> int:
    number = 0
    for letter in letters:
        number = number * 26 + ord(letter) - ord("A") + 1
    return number


def check_sheets(path: str | Path) -> None:
    """Refuse a workbook whose sheets span more than ``MAX_SHEET_CELLS`` cells, counted as
    pandas will lay them out (the last row times the last column any cell is in)."""
    check_zip(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return
    with archive:
        for name in archive.namelist():
            if not _SHEET_PART.match(name):
                continue
            rows = columns = 0
            with archive.open(name) as part:
                parser = etree.iterparse(
                    part, events=("end",), tag=f"{_MAIN_NS}c", resolve_entities=False
                )
                try:
                    for _, cell in parser:
                        found = _CELL_REF.match(cell.get("r") or "")
                        if found:
                            columns = max(columns, _column(found.group(1)))
                            rows = max(rows, int(found.group(2)))
                        cell.clear()
                except etree.XMLSyntaxError:
                    return  # not a sheet pandas could read either: its parser says so
            if rows * columns > MAX_SHEET_CELLS:
                raise LimitHit(
                    "spreadsheet cells",
                    f"{name} spans {rows} rows × {columns} columns (at most {MAX_SHEET_CELLS} "
                    "cells)",
                )


def open_image(path: str | Path) -> Image.Image:
    """An image opened lazily, refusing one past ``MAX_IMAGE_PIXELS``."""
    check_size(path)
    try:
        image = Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise LimitHit("image pixels", str(error)) from error
    width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        raise LimitHit(
            "image pixels", f"{width}×{height} pixels (at most {MAX_IMAGE_PIXELS} per image)"
        )
    return image


def check_page_count(count: int) -> None:
    if count > MAX_PDF_PAGES:
        raise LimitHit("pdf pages", f"{count} pages (at most {MAX_PDF_PAGES})")


@contextmanager
def read_only_sqlite(path: str | Path) -> Iterator[sqlite3.Connection]:
    """A desktop's SQLite database, opened read-only and immutable (no journal, no lock,
    nothing written beside it), its path quoted into the URI; a query past ``SQLITE_STEPS``
    steps is stopped and raises ``LimitHit("sqlite work")``."""
    check_size(path)
    db = sqlite3.connect(f"file:{quote(str(path))}?mode=ro&immutable=1", uri=True)
    steps = 0

    def progress() -> int:
        nonlocal steps
        steps += SQLITE_CHECK_EVERY
        return 1 if steps > SQLITE_STEPS else 0  # non-zero interrupts the query

    db.set_progress_handler(progress, SQLITE_CHECK_EVERY)
    try:
        yield db
    except sqlite3.OperationalError as error:
        if steps > SQLITE_STEPS:
            raise LimitHit("sqlite work", f"more than {SQLITE_STEPS} steps") from error
        raise
    finally:
        db.close()
