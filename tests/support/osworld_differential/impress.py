"""Case makers for LibreOffice Impress's metrics: slide transitions, orientation, background
fills, page-number colours, a stretched picture, and Impress's settings (registrymodifications
.xcu) and left panel (the accessibility tree)."""

import io
import random
from collections.abc import Iterator
from pathlib import Path

from lxml import etree
from PIL import Image
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.util import Emu, Inches

from tests.support.osworld_differential.core import Case, makes

_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_XCU_ITEM = (
    '<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse">'
    "<value>{value}</value></prop></item>"
)


def _xcu(folder: Path, name: str, items: list[str]) -> str:
    path = folder / name
    path.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<oor:items '
        'xmlns:oor="http://openoffice.org/2001/registry" '
        'xmlns:xs="http://www.w3.org/2001/XMLSchema">' + "".join(items) + "</oor:items>\n"
    )
    return str(path)


@makes("check_presenter_console_disable")
def _presenter_console(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(10):
        value = rng.choice(["false", "true", "False", None])
        items = [_XCU_ITEM.format(path="/org.openoffice.Office.Common/Misc", name="X", value=1)]
        if value is not None:
            items.append(_XCU_ITEM.format(path="/org.openoffice.Office.Impress/Misc/Start",
                                          name="EnablePresenterScreen", value=value))  # fmt: skip
        yield Case(f"EnablePresenterScreen {value}", (_xcu(folder, f"r{index}.xcu", items),))


@makes("check_auto_saving_time")
def _auto_saving_time(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(10):
        value = rng.choice([3, 3, 10, None])
        items = []
        if value is not None:
            items.append(_XCU_ITEM.format(path="/org.openoffice.Office.Common/Save/Document",
                                          name="AutoSaveTimeIntervall", value=value))  # fmt: skip
        yield Case(f"interval {value}", (_xcu(folder, f"r{index}.xcu", items), {"minutes": 3}))


@makes("check_left_panel")
def _left_panel(rng: random.Random, folder: Path) -> Iterator[Case]:
    for _ in range(8):
        name = rng.choice(["Slides View", "Outline View", "slides view"])
        tree = (f'<desktop-frame><application name="soffice"><document-frame name="{name}"/>'
                "</application></desktop-frame>")  # fmt: skip
        yield Case(name, (tree,))


def _deck(path: Path, slides: int = 1) -> Presentation:
    deck = Presentation()
    for _ in range(slides):
        deck.slides.add_slide(deck.slide_layouts[6])
    return deck


@makes("check_slide_orientation_Portrait")
def _portrait(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(8):
        deck = _deck(folder)
        width, height = rng.choice([(Inches(10), Inches(7.5)), (Inches(7.5), Inches(10))])
        deck.slide_width, deck.slide_height = width, height
        deck.save(str(folder / f"d{index}.pptx"))
        yield Case(f"{width}x{height}", (str(folder / f"d{index}.pptx"),))


@makes("check_transition")
def _transition(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(10):
        deck = _deck(folder, slides=2)
        kind = rng.choice(["dissolve", "fade", None])
        on = rng.randrange(2)
        if kind is not None:
            element = etree.SubElement(deck.slides[on]._element, f"{{{_P}}}transition")
            etree.SubElement(element, f"{{{_P}}}{kind}")
        deck.save(str(folder / f"d{index}.pptx"))
        rules = {"slide_idx": 0, "transition_type": "dissolve"}
        yield Case(f"{kind} on slide {on}", (str(folder / f"d{index}.pptx"), rules))


@makes("check_page_number_colors")
def _page_number_colors(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(10):
        deck = _deck(folder)
        colour = rng.choice(["FF0000", "0000FF", "000000", None])
        if colour is not None:
            for placeholder in deck.slide_master.placeholders:
                if placeholder.placeholder_format.type == 13:  # the slide number
                    font = placeholder.text_frame.paragraphs[0].font
                    font.color.rgb = RGBColor.from_string(colour)
        deck.save(str(folder / f"d{index}.pptx"))
        color = rng.choice(["red", "red", "blue"])
        yield Case(f"number {colour}", (str(folder / f"d{index}.pptx"), {"color": color}))


@makes("evaluate_presentation_fill_to_rgb_distance")
def _fill_distance(rng: random.Random, folder: Path) -> Iterator[Case]:
    rules = {"rgb": [0, 0, 255], "original_rgb": [255, 255, 255]}
    for index in range(12):
        deck = _deck(folder, slides=rng.randint(1, 3))
        fills = []
        for slide in deck.slides:
            colour = rng.choice([(0, 0, 255), (0, 0, 250), (255, 255, 255), (10, 200, 30), None])
            fills.append(colour)
            if colour is not None:
                slide.background.fill.solid()
                slide.background.fill.fore_color.rgb = RGBColor(*colour)
        deck.save(str(folder / f"d{index}.pptx"))
        yield Case(f"fills {fills}", (str(folder / f"d{index}.pptx"), rules))


@makes("check_image_stretch_and_center")
def _stretch_and_center(rng: random.Random, folder: Path) -> Iterator[Case]:
    picture = io.BytesIO()
    Image.new("RGB", (40, 30), "teal").save(picture, "PNG")
    for index in range(10):
        original = _deck(folder)
        original.slides[0].shapes.add_picture(io.BytesIO(picture.getvalue()), Inches(1), Inches(1))
        original.save(str(folder / f"o{index}.pptx"))
        modified = _deck(folder)
        width, height = modified.slide_width, modified.slide_height
        shrink = rng.choice([0, 0, Inches(0.3), Inches(1)])
        shift = rng.choice([0, 0, Inches(0.2), Inches(2)])
        modified.slides[0].shapes.add_picture(
            io.BytesIO(picture.getvalue()), Emu(shrink // 2 + shift), Emu(shrink // 2),
            Emu(width - shrink), Emu(height - shrink),
        )  # fmt: skip
        modified.save(str(folder / f"m{index}.pptx"))
        label = f"shrunk {shrink}, shifted {shift}"
        yield Case(label, (str(folder / f"m{index}.pptx"), str(folder / f"o{index}.pptx")))
