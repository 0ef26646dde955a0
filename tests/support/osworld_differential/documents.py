"""Case makers for the metrics that read PDFs (text and pictures, with PyMuPDF on both sides)
and HTML pages (BeautifulSoup on OSWorld's side): pages as a browser's or LibreOffice's PDF
export leaves them, and HTML as LibreOffice Calc saves a sheet (with its ``sdnum`` number
formats)."""

import io
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import pymupdf
from PIL import Image, ImageDraw

from tests.support.osworld_differential.core import Case, makes, words


def _pdf(path: Path, pages: list[str], pictures: Sequence[bytes] = ()) -> str:
    """A PDF with one page per text (wrapped lines, as an export writes them) and the pictures
    placed on the first page."""
    document = pymupdf.open()
    for text in pages:
        page = document.new_page(width=595, height=842)
        page.insert_textbox(pymupdf.Rect(50, 50, 545, 800), text, fontsize=11)
    for index, picture in enumerate(pictures):
        box = pymupdf.Rect(50 + 160 * (index % 3), 400 + 160 * (index // 3), 200, 550)
        box = pymupdf.Rect(box.x0, box.y0, box.x0 + 150, box.y0 + 150)
        document[0].insert_image(box, stream=picture)
    document.save(path)
    document.close()
    return str(path)


def _paragraph(rng: random.Random, count: int) -> str:
    return " ".join(words(rng, count)) + "."


def _picture(rng: random.Random, seed: int) -> bytes:
    """A PNG with shapes placed by ``seed``: the same seed, the same picture."""
    local = random.Random(seed)
    image = Image.new("RGB", (96, 96), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    for _ in range(4):
        x, y = local.randint(0, 70), local.randint(0, 70)
        colour = (local.randint(0, 255), local.randint(0, 255), local.randint(0, 255))
        draw.rectangle((x, y, x + local.randint(10, 30), y + local.randint(10, 30)), fill=colour)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


@makes("compare_pdfs")
def _pdfs(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Published tasks compare one result with one expected PDF, or lists of them."""
    for index in range(14):
        pages = [_paragraph(rng, rng.randint(20, 60)) for _ in range(rng.randint(1, 3))]
        expected = _pdf(folder / f"gold{index}.pdf", pages)
        kind = rng.choice(["same", "word", "page", "other", "missing", "broken"])
        if kind == "same":
            result: str | None = _pdf(folder / f"res{index}.pdf", pages)
        elif kind == "word":
            changed = [p.replace(p.split()[2], "zulu", 1) for p in pages]
            result = _pdf(folder / f"res{index}.pdf", changed)
        elif kind == "page":
            result = _pdf(folder / f"res{index}.pdf", pages[:1])
        elif kind == "other":
            result = _pdf(folder / f"res{index}.pdf", [_paragraph(rng, 30)])
        elif kind == "missing":
            result = None
        else:
            (folder / f"res{index}.pdf").write_bytes(b"%PDF-1.7\nnot really a PDF")
            result = str(folder / f"res{index}.pdf")
        if index % 4 == 3:  # the list form: several pairs scored as their mean
            second = _pdf(folder / f"gold{index}b.pdf", [_paragraph(rng, 25)])
            yield Case(f"list, {kind}", ([result, second], [expected, second]))
        else:
            yield Case(kind, (result, expected))


@makes("compare_pdf_images")
def _pdf_images(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(12):
        seeds = [rng.randint(0, 10_000) for _ in range(rng.randint(0, 3))]
        text = [_paragraph(rng, 20)]
        expected = _pdf(folder / f"gold{index}.pdf", text, [_picture(rng, s) for s in seeds])
        kind = rng.choice(["same", "one changed", "one more", "text only changed"])
        if kind == "same" or kind == "text only changed":
            shown = text if kind == "same" else [_paragraph(rng, 20)]
            result = _pdf(folder / f"res{index}.pdf", shown, [_picture(rng, s) for s in seeds])
        elif kind == "one changed" and seeds:
            changed = [*seeds[:-1], seeds[-1] + 1]
            result = _pdf(folder / f"res{index}.pdf", text, [_picture(rng, s) for s in changed])
        else:
            more = [*seeds, rng.randint(0, 10_000)]
            result = _pdf(folder / f"res{index}.pdf", text, [_picture(rng, s) for s in more])
        yield Case(f"{len(seeds)} pictures, {kind}", (result, expected))


def _sheet_html(rng: random.Random, rows: list[list[str]], sdnum: str) -> str:
    """A sheet as LibreOffice Calc's "Save as HTML" writes it."""
    cells = "\n".join(
        "<tr>"
        + "".join(
            f'<td height="17" align="right" sdval="{v}" sdnum="{sdnum}">{v}</td>'
            if v.isdigit()
            else f'<td height="17" align="left">{v}</td>'
            for v in row
        )
        + "</tr>"
        for row in rows
    )
    return (
        '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.0 Transitional//EN">\n<html>\n<head>\n'
        '\t<meta http-equiv="content-type" content="text/html; charset=utf-8"/>\n'
        '\t<title></title>\n\t<style type="text/css">\n\t\tbody,div,table { font-size:x-small }'
        '\n\t</style>\n</head>\n<body>\n<table cellspacing="0" border="0">\n'
        f"{cells}\n</table>\n<!-- ************************************************ -->\n"
        "</body>\n</html>\n"
    )


@makes("compare_htmls")
def _htmls(rng: random.Random, folder: Path) -> Iterator[Case]:
    """The published task passes ``ignore_sdnum``; cases with and without it."""
    for index in range(16):
        rows = [[w, str(rng.randint(1, 999))] for w in words(rng, rng.randint(2, 5))]
        expected = folder / f"gold{index}.html"
        expected.write_text(_sheet_html(rng, rows, "1033;0;0"), encoding="utf-8")
        kind = rng.choice(["same", "sdnum", "cell", "row", "spacing"])
        changed = [list(row) for row in rows]
        sdnum = "1033;0;0"
        if kind == "sdnum":
            sdnum = "1033;1033;#,##0"
        elif kind == "cell":
            changed[0][1] = str(int(changed[0][1]) + 1)
        elif kind == "row":
            changed.append(["zulu", "7"])
        html = _sheet_html(rng, changed, sdnum)
        if kind == "spacing":
            html = html.replace("<tr>", "<tr>\n  ")
        result = folder / f"res{index}.html"
        result.write_text(html, encoding="utf-8")
        options = {"ignore_sdnum": True} if index % 3 else {}
        yield Case(kind, (str(result) if index else None, str(expected)), options)
