"""OSWorld's Impress metrics and the readers of a slide's media, over presentations made with
python-pptx (shaped as LibreOffice saves them where python-pptx cannot: transitions, the page
number's colour, a background picture), LibreOffice's registrymodifications.xcu, and the
accessibility tree; the slide getters on a real sandboxed desktop."""

import io
import tempfile
import wave
from pathlib import Path
from typing import Any

import pytest
from lxml import etree
from PIL import Image
from pptx import Presentation
from pptx.dml.color import RGBColor
from pptx.enum.dml import MSO_THEME_COLOR
from pptx.media import Video  # python-pptx's media parts, for audio too
from pptx.opc.constants import RELATIONSHIP_TYPE as RT
from pptx.util import Inches

from vm_pool.evaluation.bounds import LimitHit
from vm_pool.evaluation.getters import GETTERS, Reading
from vm_pool.evaluation.metrics import METRICS, MetricError
from vm_pool.evaluation.metrics.impress import (
    check_auto_saving_time,
    check_left_panel,
    check_page_number_colors,
    check_presenter_console_disable,
    check_slide_orientation_Portrait,
    check_transition,
    evaluate_presentation_fill_to_rgb_distance,
)
from vm_pool.evaluation.metrics.slides import compare_pptx_files
from vm_pool.evaluation.readers import READERS
from vm_pool.evaluation.readers.slides import slide_audio, slide_background_image
from vm_pool.evaluation.scoring import score

P = "http://schemas.openxmlformats.org/presentationml/2006/main"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"


@pytest.fixture(autouse=True)
def jail_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The readers write what they take out under the temporary folder (the jail's /tmp)."""
    folder = tmp_path / "jail-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _saved(presentation: Any, path: Path) -> str:
    presentation.save(str(path))
    return str(path)


def _deck(slides: int = 1) -> Any:
    presentation = Presentation()
    for _ in range(slides):
        presentation.slides.add_slide(presentation.slide_layouts[6])  # blank
    return presentation


def test_each_metric_getter_and_reader_is_registered_under_its_osworld_name() -> None:
    assert METRICS["check_transition"] is check_transition
    assert METRICS["check_slide_orientation_Portrait"] is check_slide_orientation_Portrait
    for name in ("audio_in_slide", "background_image_in_slide"):
        assert name in GETTERS
    assert READERS["slide_audio"] is slide_audio
    assert READERS["slide_background_image"] is slide_background_image


# --- the slides ---------------------------------------------------------------------------


def test_portrait_slides_are_higher_than_wide(tmp_path: Path) -> None:
    landscape = _deck()
    assert check_slide_orientation_Portrait(_saved(landscape, tmp_path / "l.pptx")) == 0.0
    portrait = _deck()
    portrait.slide_width, portrait.slide_height = Inches(7.5), Inches(10)
    assert check_slide_orientation_Portrait(_saved(portrait, tmp_path / "p.pptx")) == 1.0
    assert check_slide_orientation_Portrait(None) == 0.0


def _background(slide: Any, rgb: tuple[int, int, int] | None = None, theme: bool = False) -> None:
    fill = slide.background.fill
    fill.solid()
    if theme:
        fill.fore_color.theme_color = MSO_THEME_COLOR.ACCENT_1
    else:
        fill.fore_color.rgb = RGBColor(*(rgb or (0, 0, 0)))


def test_fill_distance_with_the_published_rules(tmp_path: Path) -> None:
    rules = {"rgb": [0, 0, 255], "original_rgb": [255, 255, 255]}
    blue = _deck(2)
    for slide in blue.slides:
        _background(slide, (0, 0, 255))
    assert evaluate_presentation_fill_to_rgb_distance(_saved(blue, tmp_path / "b.pptx"), rules) == 1
    white = _deck(2)
    for slide in white.slides:
        _background(slide, (255, 255, 255))  # still the original: the farthest
    assert (
        evaluate_presentation_fill_to_rgb_distance(_saved(white, tmp_path / "w.pptx"), rules) == 0
    )


def test_fill_distance_is_the_mean_and_reads_the_master_behind_a_slide_without_fill(
    tmp_path: Path,
) -> None:
    presentation = _deck(2)
    _background(presentation.slide_masters[0], (0, 0, 255))  # the second slide shows it
    _background(presentation.slides[0], (255, 0, 255))  # 255 away from blue
    found = evaluate_presentation_fill_to_rgb_distance(
        _saved(presentation, tmp_path / "m.pptx"), {"rgb": [0, 0, 255]}
    )
    assert found == pytest.approx(1 - (255 / (3 * 255**2) ** 0.5) / 2)


def test_fill_distance_of_a_theme_colour_or_no_fill_is_the_farthest(tmp_path: Path) -> None:
    presentation = _deck(2)
    _background(presentation.slides[0], theme=True)
    path = _saved(presentation, tmp_path / "t.pptx")  # the second slide: no fill anywhere
    assert evaluate_presentation_fill_to_rgb_distance(path, {"rgb": [0, 0, 255]}) == 0.0
    with pytest.raises(MetricError):
        evaluate_presentation_fill_to_rgb_distance(path, {"original_rgb": [0, 0, 0]})


def _with_transition(slide: Any, effect: str) -> None:
    """A transition as LibreOffice writes it: PowerPoint 2010's form and the fallback."""
    xml = (
        f'<mc:AlternateContent xmlns:mc="{MC}" xmlns:p="{P}"><mc:Choice '
        'xmlns:p14="http://schemas.microsoft.com/office/powerpoint/2010/main" Requires="p14">'
        f'<p:transition spd="slow" p14:dur="2000"><p:{effect}/></p:transition></mc:Choice>'
        f'<mc:Fallback><p:transition spd="slow"><p:{effect}/></p:transition></mc:Fallback>'
        "</mc:AlternateContent>"
    )
    slide._element.append(etree.fromstring(xml))


def test_transition_of_the_named_slide(tmp_path: Path) -> None:
    presentation = _deck(2)
    _with_transition(presentation.slides[0], "dissolve")
    _with_transition(presentation.slides[1], "fade")
    path = _saved(presentation, tmp_path / "t.pptx")
    assert check_transition(path, {"slide_idx": 0, "transition_type": "dissolve"}) == 1.0
    assert check_transition(path, {"slide_idx": 1, "transition_type": "dissolve"}) == 0.0
    assert check_transition(path, {"slide_idx": 5, "transition_type": "dissolve"}) == 0.0
    plain = _saved(_deck(), tmp_path / "plain.pptx")
    assert check_transition(plain, {"slide_idx": 0, "transition_type": "dissolve"}) == 0.0
    with pytest.raises(MetricError):
        check_transition(path, {"slide_idx": 0, "transition_type": "dissolve]"})


def _page_number_colour(presentation: Any, hex_rgb: str) -> None:
    """The page number field's colour in the first master, as LibreOffice writes it."""
    master = presentation.slide_masters[0]._element
    run = master.find(f".//{{{A}}}fld[@type='slidenum']/{{{A}}}rPr")
    run.append(
        etree.fromstring(f'<a:solidFill xmlns:a="{A}"><a:srgbClr val="{hex_rgb}"/></a:solidFill>')
    )


def test_page_number_colours(tmp_path: Path) -> None:
    red = _deck()
    _page_number_colour(red, "FF0000")
    path = _saved(red, tmp_path / "red.pptx")
    assert check_page_number_colors(path, {"color": "red"}) == 1.0
    assert check_page_number_colors(path, {"color": "blue"}) == 0.0
    dark_red = _deck()
    _page_number_colour(dark_red, "802020")  # red leads by 96: red
    assert check_page_number_colors(_saved(dark_red, tmp_path / "d.pptx"), {"color": "red"}) == 1
    pink = _deck()
    _page_number_colour(pink, "FF8080")  # a light red leads by 127: red too
    assert check_page_number_colors(_saved(pink, tmp_path / "p.pptx"), {"color": "red"}) == 1
    grey = _deck()
    _page_number_colour(grey, "A0A0A0")
    assert check_page_number_colors(_saved(grey, tmp_path / "g.pptx"), {"color": "red"}) == 0


def test_page_number_colour_missing_scores_0(tmp_path: Path) -> None:
    # python-pptx's master gives its page number a theme colour: no RGB to read.
    path = _saved(_deck(), tmp_path / "theme.pptx")
    assert check_page_number_colors(path, {"color": "black"}) == 0.0
    assert check_page_number_colors(None, {"color": "red"}) == 0.0


# --- compare_pptx_files and a theme-coloured background -----------------------------------


def test_a_theme_coloured_background_never_matches(tmp_path: Path) -> None:
    themed = _deck()
    _background(themed.slides[0], theme=True)
    themed_path = _saved(themed, tmp_path / "themed.pptx")
    plain_path = _saved(_deck(), tmp_path / "plain.pptx")  # no background anywhere
    # OSWorld fails on the theme colour: not equal to no background, nor to itself.
    assert compare_pptx_files(themed_path, plain_path) == 0.0
    assert compare_pptx_files(themed_path, themed_path) == 0.0
    assert compare_pptx_files(themed_path, plain_path, examine_background_color=False) == 1.0


def test_rgb_backgrounds_still_compare_by_colour(tmp_path: Path) -> None:
    red, blue = _deck(), _deck()
    _background(red.slides[0], (255, 0, 0))
    _background(blue.slides[0], (0, 0, 255))
    red_path, blue_path = _saved(red, tmp_path / "r.pptx"), _saved(blue, tmp_path / "b.pptx")
    assert compare_pptx_files(red_path, red_path) == 1.0
    assert compare_pptx_files(red_path, blue_path) == 0.0


# --- LibreOffice's settings ---------------------------------------------------------------

XCU = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" \
xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse">\
<value>false</value></prop></item>
{items}
</oor:items>
"""


def _xcu(tmp_path: Path, *items: str) -> str:
    path = tmp_path / "registrymodifications.xcu"
    path.write_text(XCU.format(items="\n".join(items)), encoding="utf-8")
    return str(path)


def _presenter(value: str) -> str:
    return (
        '<item oor:path="/org.openoffice.Office.Impress/Misc/Start"><prop '
        f'oor:name="EnablePresenterScreen" oor:op="fuse"><value>{value}</value></prop></item>'
    )


def _autosave(minutes: str) -> str:
    return (
        '<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop '
        f'oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>{minutes}</value></prop></item>'
    )


def test_presenter_console_disabled(tmp_path: Path) -> None:
    assert check_presenter_console_disable(_xcu(tmp_path, _presenter("false"))) == 1.0
    assert check_presenter_console_disable(_xcu(tmp_path, _presenter("true"))) == 0.0
    assert check_presenter_console_disable(_xcu(tmp_path)) == 0.0  # never changed: on
    assert check_presenter_console_disable(None) == 0.0
    broken = tmp_path / "broken.xcu"
    broken.write_text("<oor:items", encoding="utf-8")
    assert check_presenter_console_disable(str(broken)) == 0.0


def test_auto_saving_time_with_the_published_rule(tmp_path: Path) -> None:
    rules = {"minutes": 3}
    assert check_auto_saving_time(_xcu(tmp_path, _autosave("3")), rules) == 1.0
    assert check_auto_saving_time(_xcu(tmp_path, _autosave("10")), rules) == 0.0
    assert check_auto_saving_time(_xcu(tmp_path), rules) == 0.0
    assert check_auto_saving_time(_xcu(tmp_path, _autosave("")), rules) == 0.0
    with pytest.raises(MetricError):
        check_auto_saving_time(_xcu(tmp_path, _autosave("3")), {})


def test_settings_are_parsed_without_entities(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("false", encoding="utf-8")
    path = tmp_path / "entity.xcu"
    path.write_text(
        f'<!DOCTYPE oor:items [<!ENTITY s SYSTEM "file://{secret}">]>'
        '<oor:items xmlns:oor="http://openoffice.org/2001/registry">'
        '<item oor:path="/org.openoffice.Office.Impress/Misc/Start">'
        '<prop oor:name="EnablePresenterScreen"><value>&s;</value></prop></item></oor:items>',
        encoding="utf-8",
    )
    assert check_presenter_console_disable(str(path)) == 0.0


# --- the accessibility tree ---------------------------------------------------------------

TREE = """<desktop-frame xmlns:st="https://accessibility.ubuntu.example.org/ns/state">
<application name="soffice"><frame name="deck.pptx - LibreOffice Impress">
{panel}<document-frame name="Presentation Slide" st:showing="true"/></frame></application>
</desktop-frame>"""


def test_left_panel_is_the_slides_view() -> None:
    assert check_left_panel(TREE.format(panel='<document-frame name="Slides View"/>')) == 1.0
    assert check_left_panel(TREE.format(panel="")) == 0.0
    assert check_left_panel(TREE.format(panel='<panel name="Slides View"/>')) == 0.0
    assert check_left_panel(None) == 0.0


# --- the slide media readers --------------------------------------------------------------


def _wav() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(8000)
        sound.writeframes(bytes(1600))
    return out.getvalue()


def _png(colour: tuple[int, int, int], vertical: bool = True) -> bytes:
    """A picture of stripes in ``colour`` and its inverse, upright or lying."""
    out = io.BytesIO()
    image = Image.new("RGB", (64, 48), colour)
    inverse = (255 - colour[0], 255 - colour[1], 255 - colour[2])
    for x in range(64):
        for y in range(48):
            if (x if vertical else y) % 8 == 0:
                image.putpixel((x, y), inverse)
    image.save(out, "PNG")
    return out.getvalue()


def _with_audio(slide: Any, linked: str | None = None) -> None:
    """The audio relationship LibreOffice writes for a slide's sound: to a media part, or to
    the file it links to."""
    if linked is not None:
        slide.part.relate_to(linked, RT.AUDIO, is_external=True)
        return
    media = Video.from_blob(_wav(), "audio/x-wav", "planet.wav")
    part = slide.part.package.get_or_add_media_part(media)
    slide.part.relate_to(part, RT.AUDIO)


def _with_background_picture(slide: Any, png: bytes) -> None:
    """A picture filling the slide's own background, as LibreOffice writes it."""
    _, rid = slide.part.get_or_add_image_part(io.BytesIO(png))
    background = etree.fromstring(
        f'<p:bg xmlns:p="{P}" xmlns:a="{A}" xmlns:r="{R}"><p:bgPr><a:blipFill>'
        f'<a:blip r:embed="{rid}"/><a:stretch><a:fillRect/></a:stretch></a:blipFill>'
        "<a:effectLst/></p:bgPr></p:bg>"
    )
    slide._element.cSld.insert(0, background)


def test_the_audio_of_a_slide_is_taken_out_as_a_file(tmp_path: Path, jail_tmp: Path) -> None:
    presentation = _deck(2)
    _with_audio(presentation.slides[0])
    path = _saved(presentation, tmp_path / "deck.pptx")
    found = slide_audio(path, None, {"slide_index": 0, "dest": "planet.wav"})
    assert found is not None and Path(found).name == "planet.wav"
    assert Path(found).is_relative_to(jail_tmp)
    assert Path(found).read_bytes() == _wav()
    assert slide_audio(path, None, {"slide_index": 1, "dest": "planet.wav"}) is None
    assert slide_audio(None, None, {"slide_index": 0, "dest": "planet.wav"}) is None


def test_linked_audio_is_not_scored(tmp_path: Path) -> None:
    presentation = _deck()
    _with_audio(presentation.slides[0], linked="file:///home/user/Desktop/Baseball.mp3")
    path = _saved(presentation, tmp_path / "deck.pptx")
    with pytest.raises(LimitHit) as hit:
        slide_audio(path, None, {"slide_index": 0, "dest": "Baseball.mp3"})
    assert hit.value.limit == "linked media"


def test_a_relationship_climbing_out_of_the_package_finds_nothing(tmp_path: Path) -> None:
    presentation = _deck()
    slide = presentation.slides[0]
    slide.part.relate_to("../../../../etc/passwd", RT.AUDIO, is_external=True)
    path = _saved(presentation, tmp_path / "deck.pptx")
    assert slide_audio(path, None, {"slide_index": 0, "dest": "x.wav"}) is None


def test_the_background_picture_scores_with_compare_images(tmp_path: Path) -> None:
    """The reader's file reaches the metric as the jail hands it over (``scoring.score``)."""
    landscape, other = _png((20, 120, 40)), _png((20, 120, 40), vertical=False)
    presentation = _deck(2)
    _with_background_picture(presentation.slides[1], landscape)
    folder = tmp_path / "in"
    folder.mkdir()
    _saved(presentation, folder / "Robotic_Workshop_Infographics.pptx")
    (folder / "gold_landscape.png").write_bytes(landscape)
    (folder / "gold_other.png").write_bytes(other)

    def verdict(slide_index: int, gold: str) -> Any:
        result = {
            "kind": "read",
            "reader": "slide_background_image",
            "file": "Robotic_Workshop_Infographics.pptx",
            "text": None,
            "config": {"slide_index": slide_index, "dest": "landscape.png"},
        }
        expected = {"kind": "files", "files": [gold], "single": True}
        entry = {"func": "compare_images", "options": {}, "result": result, "expected": expected}
        return score({"conjunction": "single", "metrics": [entry]}, folder)

    assert verdict(1, "gold_landscape.png")["value"] == pytest.approx(1.0)
    assert verdict(1, "gold_other.png")["value"] < 0.5
    assert verdict(0, "gold_landscape.png")["value"] == 0.0  # the first slide has none


def test_a_background_from_the_master_is_not_the_slides_own(tmp_path: Path) -> None:
    presentation = _deck()
    _background(presentation.slides[0], (0, 0, 255))  # a colour, no picture
    path = _saved(presentation, tmp_path / "deck.pptx")
    assert slide_background_image(path, None, {"slide_index": 0, "dest": "bg.png"}) is None
    text = tmp_path / "text.pptx"
    text.write_text("not a presentation", encoding="utf-8")
    assert slide_background_image(str(text), None, {"slide_index": 0, "dest": "b.png"}) is None


# --- the getters on a desktop -------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_slide_getters_fetch_the_presentation_for_the_jail(
    sandboxed_control: Any, tmp_path: Path
) -> None:
    presentation = _deck()
    _with_audio(presentation.slides[0])
    _with_background_picture(presentation.slides[0], _png((20, 120, 40)))
    deck = _saved(presentation, tmp_path / "deck.pptx")
    sandboxed_control.put_file("~/Desktop/deck.pptx", Path(deck).read_bytes())
    folder = tmp_path / "gathered"
    folder.mkdir()
    reading = Reading(sandboxed_control, folder, fetch_url=lambda url: b"")
    config = {"ppt_file_path": "/home/user/Desktop/deck.pptx", "slide_index": 0}

    gathered = GETTERS["audio_in_slide"](reading, {**config, "dest": "planet.wav"})
    assert gathered["reader"] == "slide_audio" and gathered["file"] == "deck.pptx"
    found = READERS["slide_audio"](str(folder / "deck.pptx"), None, gathered["config"])
    assert found is not None and Path(found).read_bytes() == _wav()

    gathered = GETTERS["background_image_in_slide"](reading, {**config, "dest": "bg.png"})
    assert gathered["config"] == {"slide_index": 0, "dest": "bg.png"}
    missing = GETTERS["audio_in_slide"](
        reading, {**config, "ppt_file_path": "/home/user/Desktop/none.pptx", "dest": "a.wav"}
    )
    assert missing["file"] is None
