"""Case makers for the picture metrics: compare_images (SSIM in grey) and the GIMP checks
(structure similarity after an edit, a palette, a mirror, a green background, a triangle in the
middle, a text box on the left, lists of identical pictures).

Pictures are small photographs stand-ins drawn with Pillow: a sky gradient, a hill, a sun and a
few boxes, with seeded noise; an edit is what the task asks for (darker, more saturated, more
contrast, mirrored, resized, exported as JPEG or as a palette PNG) or a wrong one.
"""

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageOps

from tests.support.osworld_differential.core import Case, makes


def _scene(rng: random.Random, size: tuple[int, int]) -> Image.Image:
    """A seeded landscape: gradient sky, a hill, a sun, some boxes, mild noise."""
    width, height = size
    top = np.array([rng.randint(60, 140), rng.randint(120, 200), rng.randint(180, 255)])
    bottom = np.array([rng.randint(180, 255), rng.randint(180, 255), rng.randint(200, 255)])
    rows = np.linspace(0, 1, height)[:, None, None]
    sky = (top * (1 - rows) + bottom * rows).repeat(width, axis=1)
    noise = np.random.default_rng(rng.randrange(2**32)).normal(0, 2, (height, width, 3))
    image = Image.fromarray(np.clip(sky + noise, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    hill = rng.randint(height // 2, height * 3 // 4)
    green = (rng.randint(20, 80), rng.randint(100, 170), rng.randint(20, 80))
    draw.ellipse((-width // 2, hill, width * 3 // 2, height * 2), fill=green)
    x, y, r = rng.randrange(width), rng.randrange(hill), rng.randint(4, max(5, width // 8))
    draw.ellipse((x - r, y - r, x + r, y + r), fill=(250, 220, rng.randint(40, 120)))
    for _ in range(rng.randint(1, 4)):
        left, upper = rng.randrange(width), rng.randrange(height)
        box = (
            left,
            upper,
            left + rng.randint(3, max(3, width // 3)),
            upper + rng.randint(3, max(3, height // 3)),
        )
        draw.rectangle(box, fill=tuple(rng.randrange(256) for _ in range(3)))
    return image


def _save(image: Image.Image, path: Path, **params: object) -> str:
    image.save(path, **params)
    return str(path)


def _size(rng: random.Random) -> tuple[int, int]:
    return rng.choice([(64, 48), (80, 80), (96, 64), (120, 90)])


@makes("compare_images")
def _compare_images(rng: random.Random, folder: Path) -> Iterator[Case]:
    """The published tasks: a frame or picture saved as asked ({}), and a wallpaper set from a
    picture, scored above the untouched wallpaper's SSIM (reference_base_result)."""
    published: list[dict[str, float]] = [{}, {}, {}, {"reference_base_result": 0.54},
                                         {"reference_base_result": 0.11}]  # fmt: skip
    edits = ["same", "jpeg", "gif", "resized", "shifted", "other", "brighter", "cropped"]
    for index in range(32):
        gold_image = _scene(rng, _size(rng))
        gold = _save(gold_image, folder / f"gold{index}.png")
        edit = edits[index % len(edits)]
        result_image = gold_image
        params: dict[str, object] = {}
        suffix = "png"
        if edit == "jpeg":
            suffix, params = "jpg", {"quality": rng.choice([75, 90, 95])}
        elif edit == "gif":
            suffix = "gif"
        elif edit == "resized":
            result_image = gold_image.resize((gold_image.width * 2, gold_image.height * 2))
        elif edit == "shifted":
            result_image = ImageOps.expand(gold_image, (2, 0, 0, 0)).crop((0, 0, *gold_image.size))
        elif edit == "other":
            result_image = _scene(rng, gold_image.size)
        elif edit == "brighter":
            result_image = ImageEnhance.Brightness(gold_image).enhance(1.3)
        elif edit == "cropped":
            result_image = gold_image.crop((0, 0, gold_image.width - 5, gold_image.height))
        result = _save(result_image, folder / f"result{index}.{suffix}", **params)
        if index == 0:
            result = ""
        yield Case(edit, (result, gold), published[index % len(published)])
    tiny = _save(_scene(rng, (6, 6)), folder / "tiny.png")
    yield Case("smaller than the window", (tiny, tiny))


def _edited_pair(rng: random.Random, folder: Path, index: int, edit: str) -> tuple[str, str]:
    """(result, original): the original scene and the result of ``edit`` on it."""
    original = _scene(rng, _size(rng))
    result = original
    if edit == "darker":
        result = ImageEnhance.Brightness(original).enhance(rng.choice([0.6, 0.8, 0.95]))
    elif edit == "brighter":
        result = ImageEnhance.Brightness(original).enhance(1.25)
    elif edit == "saturated":
        result = ImageEnhance.Color(original).enhance(rng.choice([1.3, 1.8]))
    elif edit == "desaturated":
        result = ImageEnhance.Color(original).enhance(0.6)
    elif edit == "more contrast":
        result = ImageEnhance.Contrast(original).enhance(rng.choice([1.3, 1.8]))
    elif edit == "less contrast":
        result = ImageEnhance.Contrast(original).enhance(0.7)
    elif edit == "other":
        result = _scene(rng, original.size)
    elif edit == "mirrored":
        result = ImageOps.mirror(original)
    elif edit == "flipped":
        result = ImageOps.flip(original)
    elif edit == "resized":
        result = original.resize((original.width // 2, original.height // 2))
    elif edit == "rgba":
        result = original.convert("RGBA")
    elif edit == "palette":
        result = original.quantize(colors=rng.choice([64, 256]))
    elif edit == "noise":
        noise = np.random.default_rng(index).normal(0, 25, (original.height, original.width, 3))
        result = Image.fromarray(np.clip(np.asarray(original) + noise, 0, 255).astype(np.uint8))
    suffix = "jpg" if edit == "jpeg" else "png"
    result_path = _save(result, folder / f"result{index}.{suffix}")
    return result_path, _save(original, folder / f"original{index}.png")


_GIMP_EDITS = {
    "check_structure_sim": ["same", "same", "jpeg", "noise", "other", "resized", "rgba",
                            "darker", "mirrored"],
    "check_file_exists_and_structure_sim": ["same", "jpeg", "noise", "other", "resized",
                                            "missing"],
    "check_brightness_decrease_and_structure_sim": ["darker", "darker", "brighter", "same",
                                                    "other", "noise", "resized"],
    "check_saturation_increase_and_structure_sim": ["saturated", "saturated", "desaturated",
                                                    "same", "other", "noise"],
    "check_contrast_increase_and_structure_sim": ["more contrast", "more contrast",
                                                  "less contrast", "same", "other", "noise"],
    "check_palette_and_structure_sim": ["palette", "palette", "same", "other", "noise"],
    "check_image_mirror": ["mirrored", "mirrored", "same", "flipped", "other"],
    "check_structure_sim_with_threshold": ["same", "jpeg", "noise", "other", "resized", "rgba"],
}  # fmt: skip

# metric -> the options its published tasks pass (each used in turn)
_GIMP_OPTIONS: dict[str, list[dict[str, float]]] = {
    "check_brightness_decrease_and_structure_sim": [{}, {"threshold": 0.15}],
    "check_structure_sim_with_threshold": [{"ssim_threshold": 0.85}],
}


def _gimp_edit(rng: random.Random, folder: Path, metric: str) -> Iterator[Case]:
    edits = _GIMP_EDITS[metric]
    options = _GIMP_OPTIONS.get(metric, [{}])
    for index in range(3 * len(edits)):
        edit = edits[index % len(edits)]
        result, original = _edited_pair(rng, folder, index, edit)
        if edit == "missing":
            result = str(folder / "not-exported.jpg")
        args = (result, original) if index % 5 else (None, original)
        yield Case(edit if args[0] else "no result", args, options[index % len(options)])


for _metric in _GIMP_EDITS:

    def _maker(rng: random.Random, folder: Path, metric: str = _metric) -> Iterator[Case]:
        return _gimp_edit(rng, folder, metric)

    makes(_metric)(_maker)


@makes("check_structure_sim_resized")
def _structure_sim_resized(rng: random.Random, folder: Path) -> Iterator[Case]:
    """The task resizes a picture to fit a smaller canvas: GIMP may leave the scaled layer on a
    transparent canvas, so results with transparency are cropped to their content first."""
    for index in range(16):
        original = _scene(rng, _size(rng))
        scale = rng.choice([0.5, 0.75, 1.0])
        small = original.resize((int(original.width * scale), int(original.height * scale)))
        kind = rng.choice(["plain", "on transparent canvas", "other", "transparent only"])
        if kind == "on transparent canvas":
            canvas = Image.new("RGBA", original.size, (0, 0, 0, 0))
            canvas.paste(small, (rng.randrange(3), rng.randrange(3)))
            small = canvas
        elif kind == "other":
            small = _scene(rng, small.size)
        elif kind == "transparent only":
            small = Image.new("RGBA", small.size, (0, 0, 0, 0))
        result = _save(small, folder / f"result{index}.png")
        yield Case(f"{kind}, scale {scale}", (result, _save(original, folder / f"o{index}.png")))


@makes("compare_image_list")
def _image_list(rng: random.Random, folder: Path) -> Iterator[Case]:
    for index in range(12):
        count = rng.randint(1, 3)
        originals = [_scene(rng, _size(rng)) for _ in range(count)]
        gold = [_save(image, folder / f"g{index}-{n}.png") for n, image in enumerate(originals)]
        change = rng.choice(["same", "same", "one changed", "one resized", "one missing",
                             "jpeg", "rgba"])  # fmt: skip
        results = []
        for n, image in enumerate(originals):
            params: dict[str, object] = {}
            suffix = "png"
            if n == 0 and change == "one changed":
                image = ImageEnhance.Brightness(image).enhance(1.1)
            elif n == 0 and change == "one resized":
                image = image.resize((image.width + 4, image.height))
            elif change == "jpeg":
                suffix, params = "jpg", {"quality": 95}
            elif change == "rgba":
                image = image.convert("RGBA")
            results.append(_save(image, folder / f"r{index}-{n}.{suffix}", **params))
        if change == "one missing":
            results[-1] = ""
        if count == 1 and rng.random() < 0.5:
            yield Case(f"single path, {change}", (results[0], gold[0]))
        else:
            yield Case(f"{count} pictures, {change}", (results, gold))


def _object_mask(rng: random.Random, size: tuple[int, int]) -> Image.Image:
    """A black object (a person-like blob) on white: the task's expected picture."""
    mask = Image.new("L", size, 0)
    draw = ImageDraw.Draw(mask)
    width, height = size
    cx = rng.randint(width // 3, 2 * width // 3)
    draw.ellipse((cx - width // 8, height // 6, cx + width // 8, height // 6 + width // 4),
                 fill=255)  # fmt: skip
    draw.rectangle((cx - width // 5, height // 2, cx + width // 5, height - 1), fill=255)
    return mask


@makes("check_green_background")
def _green_background(rng: random.Random, folder: Path) -> Iterator[Case]:
    """The result keeps the object and paints the rest green; the expected picture is the object
    in black on white. OSWorld reads pixels as [x, y], so only square pictures are counted; a
    wide one and a palette one are the deliberate differences."""
    for index in range(14):
        side = rng.choice([24, 32, 40])
        mask = _object_mask(rng, (side, side))
        expected = Image.new("RGB", mask.size, "white")
        expected.paste((0, 0, 0), mask=mask)
        colour = rng.choice([(0, 255, 0), (40, 180, 60), (0, 128, 0), (200, 200, 200),
                             (0, 200, 220), (90, 90, 20)])  # fmt: skip
        result = Image.new("RGB", mask.size, colour)
        result.paste(_scene(rng, mask.size), mask=mask)
        change = rng.choice(["", "", "object shifted", "a stray pixel", "rgba"])
        if change == "object shifted":
            result = ImageOps.expand(result, (0, 2, 0, 0), fill=colour).crop((0, 0, side, side))
        elif change == "a stray pixel":
            result.putpixel((0, 0), (255, 0, 0))
        elif change == "rgba":
            result = result.convert("RGBA")
        args = (_save(result, folder / f"r{index}.png"), _save(expected, folder / f"e{index}.png"))
        yield Case(f"{side}x{side} background {colour} {change}", args)
    for name, size, mode in (("wide", (40, 24), "RGB"), ("palette", (32, 32), "P")):
        mask = _object_mask(rng, size)
        expected = Image.new("RGB", size, "white")
        expected.paste((0, 0, 0), mask=mask)
        result = Image.new("RGB", size, (0, 200, 0))
        result.paste((120, 60, 30), mask=mask)
        if mode == "P":
            result = result.quantize(colors=8)
        args = (_save(result, folder / f"{name}.png"), _save(expected, folder / f"{name}-e.png"))
        yield Case(f"{name} green background", args, difference=f"green background {name}")


@makes("check_triangle_position")
def _triangle_position(rng: random.Random, folder: Path) -> Iterator[Case]:
    """A filled triangle on a plain canvas, moved to the middle (or not) as the task asks."""
    for index in range(16):
        width, height = rng.choice([(100, 100), (120, 80), (90, 120)])
        background = rng.choice(["white", (30, 30, 30), (240, 240, 200)])
        image = Image.new(rng.choice(["RGB", "RGBA"]), (width, height), background)
        draw = ImageDraw.Draw(image)
        cx = width // 2 + rng.choice([0, 0, 1, -2, width // 6, -width // 4])
        cy = height // 2 + rng.choice([0, 0, 2, height // 5])
        r = rng.randint(8, 20)
        draw.polygon([(cx, cy - r), (cx - r, cy + r // 2), (cx + r, cy + r // 2)],
                     fill=rng.choice([(255, 220, 0), (200, 30, 30)]))  # fmt: skip
        if rng.random() < 0.3:
            draw.rectangle((2, 2, 8, 6), fill=(0, 0, 255))
        yield Case(f"{image.mode} {width}x{height} at {cx},{cy}",
                   (_save(image, folder / f"t{index}.png"),))  # fmt: skip
    yield Case("no result", (None,))


@makes("check_textbox_on_leftside")
def _textbox_on_leftside(rng: random.Random, folder: Path) -> Iterator[Case]:
    """Dark text in a box on a light picture, placed at the left edge or further in."""
    for index in range(14):
        width, height = rng.choice([(120, 60), (200, 80)])
        image = _scene(rng, (width, height)).point(lambda v: 150 + v // 3)
        draw = ImageDraw.Draw(image)
        left = rng.choice([0, 2, 5, int(width * 0.05), width // 3])
        draw.text((left, height // 3), "Hello GIMP", fill=(0, 0, 0))
        yield Case(f"text at x={left} of {width}", (_save(image, folder / f"x{index}.png"),))
    yield Case("no result", (None,))
