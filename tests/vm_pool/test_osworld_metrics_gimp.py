"""OSWorld's image metrics (GIMP exports, image lists, PDF pictures, a stretched slide picture)
and its config-text metrics, on PNG, JPEG, PDF and PPTX files built in the test with Pillow,
pypdf and python-pptx."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageEnhance
from pptx import Presentation
from pptx.util import Inches
from pypdf import PdfWriter

from vm_pool.evaluation.bounds import LimitHit
from vm_pool.evaluation.metrics import METRICS, MetricError
from vm_pool.evaluation.metrics.configs import check_config_status, compare_config
from vm_pool.evaluation.metrics.gimp import (
    check_brightness_decrease_and_structure_sim,
    check_contrast_increase_and_structure_sim,
    check_file_exists_and_structure_sim,
    check_green_background,
    check_image_file_size,
    check_image_mirror,
    check_palette_and_structure_sim,
    check_saturation_increase_and_structure_sim,
    check_structure_sim,
    check_structure_sim_resized,
    check_structure_sim_with_threshold,
    check_textbox_on_leftside,
    check_triangle_position,
    compare_image_list,
)
from vm_pool.evaluation.metrics.pdf_images import compare_pdf_images
from vm_pool.evaluation.metrics.slide_pictures import check_image_stretch_and_center
from vm_pool.evaluation.unsupported import UNSUPPORTED_METRICS


def _picture(width: int = 96, height: int = 72, seed: int = 0) -> Image.Image:
    """A smooth, asymmetric colour picture: gradients, a disc and a bar."""
    rows, columns = np.mgrid[0:height, 0:width]
    pixels = np.stack(
        [columns * 255 // width, rows * 255 // height, (rows + columns + seed * 40) % 256], axis=2
    ).astype(np.uint8)
    image = Image.fromarray(pixels)
    draw = ImageDraw.Draw(image)
    draw.ellipse((width // 8, height // 5, width // 2, height * 3 // 4), fill=(230, 200, 40))
    draw.rectangle(
        (width * 2 // 3, height // 10, width * 3 // 4, height - height // 10), fill=(20, 30, 120)
    )
    return image


def _save(image: Image.Image, folder: Path, name: str) -> str:
    path = folder / name
    image.save(path)
    return str(path)


def _noise(width: int, height: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def test_every_name_is_registered() -> None:
    for name in (
        "check_config_status",
        "check_structure_sim",
        "check_brightness_decrease_and_structure_sim",
        "compare_image_list",
        "check_saturation_increase_and_structure_sim",
        "check_contrast_increase_and_structure_sim",
        "check_palette_and_structure_sim",
        "check_file_exists_and_structure_sim",
        "check_structure_sim_resized",
        "check_structure_sim_with_threshold",
        "check_triangle_position",
        "check_textbox_on_leftside",
        "check_image_mirror",
        "check_green_background",
        "check_image_stretch_and_center",
        "check_image_file_size",
        "compare_config",
        "compare_pdf_images",
    ):
        assert callable(METRICS[name])
    assert "compare_image_text" in UNSUPPORTED_METRICS


def test_ssim_matches_scikit_image(tmp_path: Path) -> None:
    """The numbers scikit-image 0.26 gives for these pairs (structural_similarity with
    channel_axis=2, win_size 7, or 3 for the 4×3 pair): the metric flips exactly at them."""
    rng = np.random.default_rng(1)
    pairs = []
    for height, width in [(50, 60), (7, 9), (33, 8), (100, 100), (5, 12), (3, 4)]:
        first = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        noise = rng.integers(-40, 40, (height, width, 3))
        second = np.clip(first.astype(int) + noise, 0, 255).astype(np.uint8)
        pairs.append((first, second))
    scikit = {0: 0.9550620092262566, 3: 0.9550813752402311, 5: 0.9627399981801915}
    for index, value in scikit.items():
        first = _save(Image.fromarray(pairs[index][0]), tmp_path, f"a{index}.png")
        second = _save(Image.fromarray(pairs[index][1]), tmp_path, f"b{index}.png")
        assert check_structure_sim_with_threshold(first, second, ssim_threshold=value - 1e-9)
        assert not check_structure_sim_with_threshold(first, second, ssim_threshold=value + 1e-9)


def test_structure_sim_needs_the_same_picture_at_the_same_size(tmp_path: Path) -> None:
    gold = _save(_picture(), tmp_path, "gold.png")
    assert check_structure_sim(_save(_picture(), tmp_path, "same.png"), gold) == 1.0
    assert check_structure_sim(_save(_noise(96, 72, 1), tmp_path, "noise.png"), gold) == 0.0
    bigger = _save(_picture().resize((192, 144)), tmp_path, "bigger.png")
    assert check_structure_sim(bigger, gold) == 0.0
    assert check_structure_sim(None, gold) == 0.0
    tiny = _save(_picture(6, 6), tmp_path, "tiny.png")
    assert check_structure_sim(tiny, tiny) == 0.0  # under 7×7 is never "the same"


def test_structure_sim_resized_crops_the_transparent_canvas(tmp_path: Path) -> None:
    gold = _save(_picture(), tmp_path, "gold.png")
    canvas = Image.new("RGBA", (200, 200), (0, 0, 0, 0))
    canvas.paste(_picture().resize((48, 36)), (30, 50))
    assert check_structure_sim_resized(_save(canvas, tmp_path, "canvas.png"), gold) == 1.0
    plain = _save(_picture().resize((48, 36)), tmp_path, "small.png")
    assert check_structure_sim_resized(plain, gold) == 1.0
    empty = _save(Image.new("RGBA", (50, 50), (0, 0, 0, 0)), tmp_path, "empty.png")
    assert check_structure_sim_resized(empty, gold) == 0.0
    other = Image.new("RGBA", (200, 200), (0, 0, 0, 0))
    other.paste(_noise(48, 36, 2), (30, 50))
    assert check_structure_sim_resized(_save(other, tmp_path, "other.png"), gold) == 0.0


def test_structure_sim_with_threshold_resizes_and_takes_the_threshold(tmp_path: Path) -> None:
    gold = _save(_picture(), tmp_path, "gold.png")
    bigger = _save(_picture().resize((192, 144)), tmp_path, "bigger.png")
    assert check_structure_sim_with_threshold(bigger, gold) == 1.0
    noisy = np.asarray(_picture()).astype(int) + np.random.default_rng(3).integers(
        -30, 30, (72, 96, 3)
    )
    noisy_path = _save(Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)), tmp_path, "n.png")
    assert check_structure_sim_with_threshold(noisy_path, gold, ssim_threshold=0.3) == 1.0
    assert check_structure_sim_with_threshold(noisy_path, gold, ssim_threshold=0.99) == 0.0
    line = _save(_picture(20, 2), tmp_path, "line.png")
    assert check_structure_sim_with_threshold(line, line) == 0.0  # no window fits 2 pixels


def test_file_exists_and_structure_sim(tmp_path: Path) -> None:
    gold = _save(_picture(), tmp_path, "gold.png")
    export = _save(_picture(), tmp_path, "export.png")
    assert check_file_exists_and_structure_sim(export, gold) == 1.0
    assert check_file_exists_and_structure_sim(str(tmp_path / "absent.png"), gold) == 0.0
    noise = _save(_noise(96, 72, 4), tmp_path, "noise.png")
    assert check_file_exists_and_structure_sim(noise, gold) == 0.0


def test_palette_needs_an_indexed_image_of_the_same_picture(tmp_path: Path) -> None:
    gold = _save(_picture(), tmp_path, "gold.png")
    indexed = _picture().convert("P", palette=Image.Palette.ADAPTIVE, colors=256)
    assert check_palette_and_structure_sim(_save(indexed, tmp_path, "p.png"), gold) == 1.0
    assert check_palette_and_structure_sim(_save(_picture(), tmp_path, "rgb.png"), gold) == 0.0
    noise = _noise(96, 72, 5).convert("P", palette=Image.Palette.ADAPTIVE)
    assert check_palette_and_structure_sim(_save(noise, tmp_path, "np.png"), gold) == 0.0


def test_mirror_needs_the_picture_flipped_left_to_right(tmp_path: Path) -> None:
    gold = _save(_picture(), tmp_path, "gold.png")
    flipped = _picture().transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    assert check_image_mirror(_save(flipped, tmp_path, "mirror.png"), gold) == 1.0
    assert check_image_mirror(_save(_picture(), tmp_path, "same.png"), gold) == 0.0
    upside = _picture().transpose(Image.Transpose.FLIP_TOP_BOTTOM)
    assert check_image_mirror(_save(upside, tmp_path, "upside.png"), gold) == 0.0


def test_brightness_decrease_keeps_the_structure(tmp_path: Path) -> None:
    gold = _save(_picture(), tmp_path, "gold.png")
    darker = ImageEnhance.Brightness(_picture()).enhance(0.6)
    assert check_brightness_decrease_and_structure_sim(_save(darker, tmp_path, "d.png"), gold)
    brighter = ImageEnhance.Brightness(_picture()).enhance(1.3)
    assert (
        check_brightness_decrease_and_structure_sim(_save(brighter, tmp_path, "b.png"), gold) == 0
    )
    dark_noise = _save(ImageEnhance.Brightness(_noise(96, 72, 6)).enhance(0.3), tmp_path, "n.png")
    assert check_brightness_decrease_and_structure_sim(dark_noise, gold) == 0.0
    assert check_brightness_decrease_and_structure_sim(dark_noise, gold, threshold=1.0) == 1.0


def test_saturation_increase_keeps_hue_and_value(tmp_path: Path) -> None:
    gold = _save(_picture(), tmp_path, "gold.png")
    vivid = ImageEnhance.Color(_picture()).enhance(1.2)
    assert check_saturation_increase_and_structure_sim(_save(vivid, tmp_path, "v.png"), gold) == 1
    dull = ImageEnhance.Color(_picture()).enhance(0.5)
    assert check_saturation_increase_and_structure_sim(_save(dull, tmp_path, "d.png"), gold) == 0
    noise = _save(_noise(96, 72, 7), tmp_path, "noise.png")
    assert check_saturation_increase_and_structure_sim(noise, gold) == 0.0


def test_contrast_increase_keeps_the_structure(tmp_path: Path) -> None:
    gold = _save(_picture(), tmp_path, "gold.png")
    stronger = ImageEnhance.Contrast(_picture()).enhance(1.5)
    assert check_contrast_increase_and_structure_sim(_save(stronger, tmp_path, "s.png"), gold) == 1
    weaker = ImageEnhance.Contrast(_picture()).enhance(0.6)
    assert check_contrast_increase_and_structure_sim(_save(weaker, tmp_path, "w.png"), gold) == 0
    noise = _save(_noise(96, 72, 8), tmp_path, "noise.png")
    assert check_contrast_increase_and_structure_sim(noise, gold) == 0.0


def _triangle_scene(tmp_path: Path, apex_x: int) -> str:
    """A yellow triangle on white, and one red pixel: OSWorld takes the second rarest colour."""
    image = Image.new("RGB", (200, 100), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    draw.polygon([(apex_x - 20, 63), (apex_x + 20, 63), (apex_x, 23)], fill=(255, 220, 0))
    image.putpixel((0, 0), (255, 0, 0))
    return _save(image, tmp_path, f"triangle_{apex_x}.png")


def test_triangle_in_the_middle(tmp_path: Path) -> None:
    assert check_triangle_position(_triangle_scene(tmp_path, 100)) == 1.0
    assert check_triangle_position(_triangle_scene(tmp_path, 30)) == 0.0
    assert check_triangle_position(None) == 0.0


def test_textbox_on_the_left(tmp_path: Path) -> None:
    def scene(left: int) -> str:
        image = Image.new("RGB", (200, 100), (250, 150, 40))
        ImageDraw.Draw(image).rectangle((left, 40, left + 60, 55), fill=(0, 0, 0))
        return _save(image, tmp_path, f"text_{left}.png")

    assert check_textbox_on_leftside(scene(3)) == 1.0
    assert check_textbox_on_leftside(scene(80)) == 0.0
    blank = _save(Image.new("RGB", (200, 100), (250, 150, 40)), tmp_path, "blank.png")
    assert check_textbox_on_leftside(blank) == 0.0


def test_green_background_behind_the_object(tmp_path: Path) -> None:
    # Not square on purpose: OSWorld's [x, y] indexing fails there (see the metric).
    def scene(background: tuple[int, int, int], name: str) -> str:
        image = Image.new("RGB", (120, 80), background)
        ImageDraw.Draw(image).ellipse((30, 20, 70, 60), fill=(0, 0, 0))
        return _save(image, tmp_path, name)

    gold = scene((255, 255, 255), "white.png")
    assert check_green_background(scene((20, 200, 30), "green.png"), gold) == 1.0
    assert check_green_background(scene((255, 255, 255), "still_white.png"), gold) == 0.0
    assert check_green_background(scene((20, 200, 230), "cyan.png"), gold) == 0.0


def test_image_file_size(tmp_path: Path) -> None:
    photo = tmp_path / "compressed.jpeg"
    _picture(400, 300).save(photo, quality=50)
    size = photo.stat().st_size
    assert check_image_file_size(str(photo), {"max_size": size + 1}) == 1.0
    assert check_image_file_size(str(photo), {"max_size": size}) == 0.0
    assert check_image_file_size(None, {"max_size": 600000}) == 0.0
    with pytest.raises(MetricError):
        check_image_file_size(str(photo), {})


def test_image_list_needs_every_image_identical(tmp_path: Path) -> None:
    golds = [_save(_picture(seed=i), tmp_path, f"gold{i}.jpg") for i in range(3)]
    same = [_save(Image.open(gold), tmp_path, f"same{i}.png") for i, gold in enumerate(golds)]
    assert compare_image_list(golds, golds) == 1.0
    assert compare_image_list(golds[0], golds[0]) == 1.0
    different = [*golds[:2], _save(_picture(seed=7), tmp_path, "other.jpg")]
    assert compare_image_list(different, golds) == 0.0
    assert compare_image_list([golds[0], None, golds[2]], golds) == 0.0
    assert compare_image_list(same, golds) == 1.0  # decoded pixels, not file bytes


@pytest.mark.filterwarnings("error::PIL.Image.DecompressionBombWarning")  # as in the jail
def test_image_bigger_than_the_pixel_cap_is_not_scored(tmp_path: Path) -> None:
    huge = _save(Image.new("1", (5000, 5000)), tmp_path, "huge.png")
    with pytest.raises(LimitHit):
        check_structure_sim(huge, huge)


_GIMPRC = """# GIMP gimprc
#
# This is your personal gimprc file.

(theme "Light")
(undo-levels 100)
(default-image
    (width 1920)
    (height 1080))
)
(layer-new-name "Square")

# end of gimprc
"""


def test_config_status_finds_the_setting(tmp_path: Path) -> None:
    gimprc = tmp_path / "gimprc"
    gimprc.write_text(_GIMPRC)
    assert check_config_status(str(gimprc), {"key": "theme", "value": '"Light"'}) == 1.0
    assert check_config_status(str(gimprc), {"key": "theme", "value": '"Dark"'}) == 0.0
    assert check_config_status(str(gimprc), {"key": "undo-levels", "value": "100"}) == 1.0
    assert check_config_status(str(gimprc), {"key": "layer-new-name", "value": '"Square"'})
    assert check_config_status(str(gimprc), {"key": ["default-image", "width"], "value": "x"}) == 0
    assert check_config_status(str(gimprc), {"key": ["undo-levels", "100"], "value": "100"}) == 1
    assert check_config_status(None, {"key": "theme", "value": '"Light"'}) == 0.0
    with pytest.raises(MetricError):
        check_config_status(str(gimprc), {"key": "theme"})


def test_config_status_reads_nested_sessionrc_lines(tmp_path: Path) -> None:
    sessionrc = tmp_path / "sessionrc"
    sessionrc.write_text(
        '(session-info "toolbox"\n    (position 30 30))\n(hide-docks yes)\n(end of sessionrc)\n'
    )
    assert check_config_status(str(sessionrc), {"key": "hide-docks", "value": "yes"}) == 1.0
    assert check_config_status(str(sessionrc), {"key": "hide-docks", "value": "no"}) == 0.0


def test_compare_config_contains_the_expected_text_or_object(tmp_path: Path) -> None:
    opened = tmp_path / "OpenProject.txt"
    opened.write_text("/home/user/Desktop/project\n")
    assert compare_config(str(opened), {"expected": "project"}) == 1.0
    assert compare_config(str(opened), {"expected": "other"}) == 0.0
    assert compare_config(str(opened), {"expected": ""}) == 0.0
    assert compare_config(None, {"expected": "project"}) == 0.0
    settings = tmp_path / "settings.json"
    settings.write_text('{"workbench.colorTheme": "Visual Studio Dark", "editor.fontSize": 14}')
    wanted = {"expected": '{"workbench.colorTheme": "Visual Studio Dark"}\n'}
    assert compare_config(str(settings), wanted, containment_ok=True) == 1.0
    assert compare_config(str(settings), {"expected": '{"workbench.colorTheme": "Light"}'}) == 0.0
    assert compare_config(str(settings), wanted, containment_ok=False) == 0.0  # an extra key


def test_compare_config_strict_takes_equal_text_or_equal_json(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text('{\n  "a": 1,\n  "b": [1, 2]\n}')
    assert compare_config(
        str(settings), {"expected": '{"b": [1, 2], "a": 1}'}, containment_ok=False
    )
    assert compare_config(str(settings), {"expected": '{"a": 1}'}, containment_ok=False) == 0.0
    plain = tmp_path / "plain.txt"
    plain.write_text("project")
    assert compare_config(str(plain), {"expected": "project"}, containment_ok=False) == 1.0
    assert compare_config(str(plain), {"expected": "projects"}, containment_ok=False) == 0.0


def _slides(path: Path, picture: str, full: bool) -> str:
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    if full:
        slide.shapes.add_picture(picture, 0, 0, deck.slide_width, deck.slide_height)
    else:
        slide.shapes.add_picture(picture, Inches(1), Inches(1), Inches(3), Inches(2))
    deck.save(path)
    return str(path)


def test_image_stretched_over_the_slide_and_centred(tmp_path: Path) -> None:
    picture = _save(_picture(), tmp_path, "photo.png")
    original = _slides(tmp_path / "original.pptx", picture, full=False)
    stretched = _slides(tmp_path / "stretched.pptx", picture, full=True)
    assert check_image_stretch_and_center(stretched, original) == 1.0
    assert check_image_stretch_and_center(original, original) == 0.0
    other = _slides(tmp_path / "other.pptx", _save(_picture(seed=3), tmp_path, "o.png"), True)
    assert check_image_stretch_and_center(other, original) == 0.0
    assert check_image_stretch_and_center(None, original) == 0.0


def _pdf(path: Path, *images: Image.Image) -> str:
    images[0].save(path, save_all=True, append_images=list(images[1:]))
    return str(path)


def test_pdf_images_compared_by_perceptual_hash(tmp_path: Path) -> None:
    gold = _pdf(tmp_path / "gold.pdf", _picture(400, 300))
    assert compare_pdf_images(_pdf(tmp_path / "same.pdf", _picture(400, 300)), gold) == 1.0
    rescaled = _pdf(tmp_path / "rescaled.pdf", _picture(400, 300).resize((600, 450)))
    assert compare_pdf_images(rescaled, gold) == 1.0
    assert compare_pdf_images(_pdf(tmp_path / "noise.pdf", _noise(400, 300, 9)), gold) == 0.0
    two = _pdf(tmp_path / "two.pdf", _picture(400, 300), _noise(400, 300, 9))
    assert compare_pdf_images(two, gold) == 0.0  # a different number of images
    assert (
        compare_pdf_images(
            two, _pdf(tmp_path / "two_gold.pdf", _picture(400, 300), _picture(400, 300, 2))
        )
        == 0.5
    )
    assert compare_pdf_images(None, gold) == 0.0


def test_pdfs_without_images_match(tmp_path: Path) -> None:
    paths = []
    for name in ("a.pdf", "b.pdf"):
        writer = PdfWriter()
        writer.add_blank_page(200, 200)
        writer.write(tmp_path / name)
        paths.append(str(tmp_path / name))
    assert compare_pdf_images(*paths) == 1.0
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"not a pdf")
    assert compare_pdf_images(str(broken), paths[0]) == 0.0
