"""The OSWorld demo project: six published tasks, one per domain, that run with no internet.

The task files (``annotation/osworld_tasks/``) are OSWorld's, unchanged. The files their setups
download and their evaluators compare with are made here, small and plain, and kept in the
task-file cache under the tasks' own URLs, as a manager does with ``/api/task-files/`` on a
machine without internet. Every evaluator runs: a solved episode scores 1, an unsolved one 0.

| domain | task | what is made |
| --- | --- | --- |
| Calc | sort the amounts ascendingly | a workbook of amounts, and the sorted one |
| Writer | capitalise every word | a document in lower case, and the capitalised one |
| Impress | a 5×2 table on the "Features" slide | a deck, and the deck with the table |
| GIMP | open the Vignette filter window | a picture to open |
| Chrome | make Bing the search engine | nothing (the browser's own settings) |
| OS | rename a folder | nothing (the setup makes the folder) |
"""

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from vm_pool.models import TaskFile
from vm_pool.task_files.downloads import store_task_file

TASKS = Path(__file__).resolve().parent / "osworld_tasks"
HF = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main"
AMOUNTS = [42, 7, 19, 3, 25]
WORDS = ["geography and magical realism", "a short essay on maps that dream"]


def amounts_workbook(amounts: list[int]) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["Amount"])
    for amount in amounts:
        sheet.append([amount])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def _document(paragraphs: list[str]) -> bytes:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _deck(with_table: bool) -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    for title in ("Tandem", "Features"):
        slide = deck.slides.add_slide(deck.slide_layouts[5])  # title only
        slide.shapes.title.text = title
    if with_table:
        features = deck.slides[1]
        features.shapes.add_table(5, 2, Inches(1), Inches(2), Inches(8), Inches(3))
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def _picture() -> bytes:
    image = Image.new("RGB", (640, 480), (90, 140, 200))
    draw = ImageDraw.Draw(image)
    draw.ellipse((220, 140, 420, 340), fill=(160, 110, 60))  # a round dog, seen from above
    draw.ellipse((270, 200, 300, 230), fill=(20, 20, 20))
    draw.ellipse((340, 200, 370, 230), fill=(20, 20, 20))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


# URL → how its file is made.
FILES: dict[str, Callable[[], bytes]] = {
    f"{HF}/libreoffice_calc/51b11269-2ca8-4b2a-9163-f21758420e78/Arrang_Value_min_to_max.xlsx": (
        lambda: amounts_workbook(AMOUNTS)
    ),
    f"{HF}/libreoffice_calc/51b11269-2ca8-4b2a-9163-f21758420e78/"
    "Arrang_Value_min_to_max_gold.xlsx": lambda: amounts_workbook(sorted(AMOUNTS)),
    f"{HF}/libreoffice_writer/e528b65e-1107-4b8c-8988-490e4fece599/"
    "Geography_And_Magical_Realism.docx": lambda: _document(WORDS),
    f"{HF}/libreoffice_writer/e528b65e-1107-4b8c-8988-490e4fece599/"
    "Geography_And_Magical_Realism_Gold.docx": lambda: _document([w.title() for w in WORDS]),
    f"{HF}/libreoffice_impress/39be0d19-634d-4475-8768-09c130f5425d/41_3.pptx": (
        lambda: _deck(with_table=False)
    ),
    f"{HF}/libreoffice_impress/39be0d19-634d-4475-8768-09c130f5425d/41_3_Gold.pptx": (
        lambda: _deck(with_table=True)
    ),
    f"{HF}/gimp/a746add2-cab0-4740-ac36-c3769d9bfb46/dog_with_background.png": _picture,
}


def task_rows() -> list[dict[str, Any]]:
    """The published task files, as they are."""
    return [json.loads(path.read_text()) for path in sorted(TASKS.glob("*.json"))]


def fill_cache(uploaded_by: Any = None) -> int:
    """Keep every demo file under its URL (replacing what was kept); return how many."""
    for url, make in FILES.items():
        store_task_file(url, make(), TaskFile.Source.UPLOADED, uploaded_by)
    return len(FILES)
