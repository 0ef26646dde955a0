"""Comparing frames and screenshots, on made pictures: what counts as a change of a frame (a
caret's blink and the padding byte do not), and the share of pixels two screenshots differ by,
wherever the difference lies."""

import numpy as np
import pytest

from vm_pool.screen.capture import Frame, PngEncoder
from vm_pool.screen.compare import MIN_EXTENT_PX, meaningful_change, screen_difference

WIDTH, HEIGHT = 320, 200


def picture() -> np.ndarray:
    """A BGRX picture with some texture, so that equal rows are not all alike."""
    pixels = np.full((HEIGHT, WIDTH, 4), 200, np.uint8)
    pixels[20:80, 30:200, :3] = np.random.default_rng(0).integers(0, 255, (60, 170, 3))
    return pixels


def frame(pixels: np.ndarray) -> Frame:
    return Frame(WIDTH, HEIGHT, pixels.tobytes())


def changed(rows: slice, columns: slice, channels: slice = slice(0, 3)) -> np.ndarray:
    pixels = picture()
    pixels[rows, columns, channels] ^= 0x55
    return pixels


@pytest.mark.parametrize(
    ("pixels", "meaningful"),
    [
        (picture(), False),  # the same picture
        (changed(slice(50, 70), slice(40, 41 + MIN_EXTENT_PX - 2)), False),  # a caret's width
        (changed(slice(50, 50 + MIN_EXTENT_PX - 1), slice(40, 140)), False),  # an underline
        (changed(slice(0, HEIGHT), slice(0, WIDTH), slice(3, 4)), False),  # the padding byte
        (changed(slice(10, 10 + MIN_EXTENT_PX), slice(10, 10 + MIN_EXTENT_PX)), True),
        (changed(slice(199, 200), slice(0, 5)), False),  # the last row alone
        (changed(slice(150, 200), slice(300, 320), slice(2, 3)), True),  # red alone, a corner
    ],
)
def test_a_change_of_a_frame_is_one_larger_than_a_caret_in_colour(pixels, meaningful):
    assert meaningful_change(frame(picture()), frame(pixels)) is meaningful


def test_two_separate_small_changes_span_a_change():
    pixels = picture()
    pixels[5, 5, 0] ^= 1
    pixels[100, 200, 1] ^= 1  # a single pixel each, far apart: the box between them counts
    assert meaningful_change(frame(picture()), frame(pixels))


def test_frames_of_different_sizes_differ():
    smaller = Frame(WIDTH - 1, HEIGHT, np.zeros((HEIGHT, WIDTH - 1, 4), np.uint8).tobytes())
    assert meaningful_change(frame(picture()), smaller)


@pytest.mark.parametrize(
    ("rows", "columns", "share"),
    [
        (slice(0, 1), slice(0, 1), 1 / (WIDTH * HEIGHT)),
        (slice(199, 200), slice(0, WIDTH), 1 / HEIGHT),
        (slice(0, HEIGHT), slice(319, 320), 1 / WIDTH),
        (slice(40, 60), slice(100, 150), 20 * 50 / (WIDTH * HEIGHT)),
        (slice(0, HEIGHT), slice(0, WIDTH), 1.0),
    ],
)
def test_the_share_of_pixels_screenshots_differ_by_wherever_they_differ(rows, columns, share):
    encoder = PngEncoder()
    before = encoder.encode(frame(picture()))
    after = encoder.encode(frame(changed(rows, columns)))
    assert screen_difference(before, after) == pytest.approx(share)
    assert screen_difference(after, before) == pytest.approx(share)
