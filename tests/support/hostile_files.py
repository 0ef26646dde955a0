"""Files a hostile task author, model or annotator can leave for an evaluator, each small on disk
and each with the evaluator that reads it and the limit it must be refused by.

``HOSTILE`` maps a case's name to ``Hostile``: the file's bytes, where on the desktop it goes, the
evaluator that reads it there, and the limit the verdict must name.
"""

import io
import sqlite3
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openpyxl
from PIL import Image
from pypdf import PdfWriter

PROFILE = "~/.config/chromium/Default"
# Where the tar's escaping members would land on the host, were it unpacked there.
ESCAPES = ("/tmp/tandem-escaped-parent", "/tmp/tandem-escaped-absolute", "/tmp/tandem-escaped-link")


@dataclass(frozen=True)
class Hostile:
    data: bytes
    path: str  # on the desktop
    evaluator: dict[str, Any]
    limit: str


def _file(path: str, dest: str) -> dict[str, Any]:
    return {"type": "vm_file", "path": path, "dest": dest}


def same(metric: str, path: str, **options: Any) -> dict[str, Any]:
    """``metric`` of the file against itself: only reading it can fail."""
    name = Path(path).name
    evaluator = {"func": metric, "result": _file(path, name), "expected": _file(path, f"e-{name}")}
    return {**evaluator, "options": options} if options else evaluator


def zip_of(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _bloated(members: dict[str, bytes], part: str) -> bytes:
    """An office container with one part 40 MB of one byte repeated (about 40 KB deflated)."""
    return zip_of({**members, part: b"<a>" + b" " * (40 * 1024 * 1024) + b"</a>"})


def tar_escapes() -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name in (f"../../../../..{ESCAPES[0]}", ESCAPES[1]):
            info = tarfile.TarInfo(name)
            info.size = 4
            archive.addfile(info, io.BytesIO(b"pwnd"))
        link = tarfile.TarInfo("link")
        link.type, link.linkname = tarfile.SYMTYPE, "/tmp"
        archive.addfile(link)
        through = tarfile.TarInfo(f"link/{Path(ESCAPES[2]).name}")
        through.size = 4
        archive.addfile(through, io.BytesIO(b"pwnd"))
    return out.getvalue()


def xlsx_dimensions() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"], sheet["XFD1048576"] = 1, 2
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def docx_bomb() -> bytes:
    return _bloated({"[Content_Types].xml": b"<Types/>"}, "word/document.xml")


def pptx_bomb() -> bytes:
    return _bloated({"[Content_Types].xml": b"<Types/>"}, "ppt/slides/slide1.xml")


def odt_bomb() -> bytes:
    return _bloated({"mimetype": b"application/vnd.oasis.opendocument.text"}, "content.xml")


def png_pixels() -> bytes:
    out = io.BytesIO()
    Image.new("L", (5000, 5000)).save(out, "PNG", optimize=True)  # 25 Mpx, about 25 KB
    return out.getvalue()


def pdf_pages() -> bytes:
    writer = PdfWriter()
    for _ in range(2000):
        writer.add_blank_page(width=72, height=72)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def zip_bomb() -> bytes:
    return zip_of({"data/zeros.txt": bytes(200 * 1024 * 1024)})


def sqlite_view() -> bytes:
    """A History whose ``urls`` is a view that never ends."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "History"
        db = sqlite3.connect(path)
        db.execute(
            "CREATE VIEW urls AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
            "SELECT 'https://example.com/' || x AS url, 'page' AS title, x AS last_visit_time "
            "FROM c"
        )
        db.commit()
        db.close()
        return path.read_bytes()


def _history(dest: str) -> dict[str, Any]:
    return {
        "func": "exact_match",
        "result": {"type": "history", "dest": dest},
        "expected": {"type": "rule", "rules": {"expected": "[]"}},
    }


def _bookmarks() -> dict[str, Any]:
    return {
        "func": "exact_match",
        "result": {"type": "bookmarks"},
        "expected": {"type": "rule", "rules": {"expected": "{}"}},
    }


def hostile() -> dict[str, Hostile]:
    """Every case, built afresh."""
    return {
        "tar escapes": Hostile(
            tar_escapes(), "~/out.tar", same("compare_archive", "~/out.tar"), "archive paths"
        ),
        "xlsx dimensions": Hostile(
            xlsx_dimensions(),
            "~/book.xlsx",
            same(
                "compare_table",
                "~/book.xlsx",
                rules=[{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}],
            ),
            "spreadsheet cells",
        ),  # fmt: skip
        "docx zip bomb": Hostile(
            docx_bomb(), "~/a.docx", same("compare_docx_files", "~/a.docx"), "compression ratio"
        ),
        "pptx zip bomb": Hostile(
            pptx_bomb(), "~/a.pptx", same("compare_pptx_files", "~/a.pptx"), "compression ratio"
        ),
        "odt zip bomb": Hostile(
            odt_bomb(), "~/a.odt", same("compare_docx_files", "~/a.odt"), "compression ratio"
        ),
        "png pixel bomb": Hostile(
            png_pixels(), "~/a.png", same("compare_images", "~/a.png"), "image pixels"
        ),
        "many-page pdf": Hostile(
            pdf_pages(), "~/a.pdf", same("compare_pdfs", "~/a.pdf"), "pdf pages"
        ),
        "zip bomb": Hostile(
            zip_bomb(), "~/a.zip", same("compare_archive", "~/a.zip"), "compression ratio"
        ),
        "sqlite view bomb": Hostile(
            sqlite_view(), f"{PROFILE}/History", _history("History"), "sqlite schema"
        ),
        "history not a database": Hostile(
            b"this is no database\n" * 200,
            f"{PROFILE}/History",
            _history("History"),
            "file format",
        ),  # fmt: skip
        "deep json": Hostile(
            b"[" * 200_000 + b"]" * 200_000, f"{PROFILE}/Bookmarks", _bookmarks(), "nesting depth"
        ),
    }
