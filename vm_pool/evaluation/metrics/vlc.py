"""VLC's metrics, as OSWorld scores them: what it is playing, its window, its settings file.

``is_vlc_playing`` reads the ``status.xml`` of VLC's web interface (the ``vlc_playing_info``
getter); the ``check_*`` settings metrics and ``is_vlc_recordings_folder`` read ``vlcrc``, VLC's
settings file (``key=value`` lines under ``[section]`` headers, every default written commented
out as ``#key=value``). OSWorld's settings checks look for their key anywhere in a line, so a
commented-out default counts too, and the last line that names the key wins; a key never named
gives VLC's default. The expected value is compared as text (a rule's ``1`` is ``"1"``).

``compare_videos`` and ``compare_audios`` are left out: they need video decoding (OpenCV) and
audio fingerprints (librosa), which the jail does not have (``vm_pool.evaluation.unsupported``).
"""

import os
from typing import Any
from urllib.parse import urlparse

from lxml import etree

from vm_pool.evaluation.bounds import check_size
from vm_pool.evaluation.metrics.errors import MetricError

PLAYING_RULES = ("file_name", "url")
SLIDER_RULES = ("match", "blackish")
BLACKISH_BELOW = 100  # every channel of a blackish colour is under this

# Where VLC's status.xml may name what plays, in the order OSWorld looks.
_FILE_PATHS = [
    f'information/category[@name="meta"]/info[@name="{name}"]'
    for name in ("filename", "title", "uri", "location", "name")
]
_URL_PATHS = [
    f'information/category[@name="meta"]/info[@name="{name}"]'
    for name in ("url", "URI", "location", "title", "filename")
] + [
    f'information/category[@name="Stream 0"]/info[@name="{name}"]'
    for name in ("Codec", "Type", "Language")
]


def _status(path: str) -> Any:
    check_size(path)
    with open(path, "rb") as f:
        data = f.read()
    data.decode("utf-8")  # OSWorld decodes it first: a file that is not UTF-8 is unreadable
    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    return etree.fromstring(data, parser)


def _first_text(tree: Any, paths: list[str]) -> str | None:
    for path in paths:
        element = tree.find(path)
        if element is not None and element.text:
            return str(element.text)
    return None


def is_vlc_playing(actual_status_path: str | None, rule: dict[str, str]) -> float:
    """1 when VLC plays what the rule names: ``{"type": "file_name", "file_name": ...}`` (the
    file's name, or the end of its path) or ``{"type": "url", "url": ...}`` (the address, its
    file name, or the same host with the path inside)."""
    if rule.get("type") not in PLAYING_RULES:
        raise MetricError(f"is_vlc_playing rule type {rule.get('type')!r} is unknown")
    if actual_status_path is None:
        return 0.0
    tree = _status(actual_status_path)
    if tree.findtext("state") != "playing":
        return 0.0
    if rule["type"] == "file_name":
        return float(_plays_file(_first_text(tree, _FILE_PATHS), rule["file_name"]))
    return float(_plays_url(_first_text(tree, _URL_PATHS), rule["url"]))


def _plays_file(found: str | None, expected: str) -> bool:
    if not found:
        return False
    # OSWorld also accepts the name after a '/' or '\\', which ends the path as well.
    return os.path.basename(found) == expected or found.endswith(expected)


def _plays_url(found: str | None, expected: str) -> bool:
    if not found:
        return False
    if expected in found:
        return True
    try:
        wanted = urlparse(expected)
        if found == os.path.basename(wanted.path):  # a stream VLC names by its file
            return True
        if "://" in found:
            playing = urlparse(found)
            return wanted.netloc == playing.netloc and wanted.path in playing.path
    except ValueError:  # an address urlparse refuses matches nothing, as in OSWorld
        return False
    return False


def is_vlc_fullscreen(actual_window_size: Any, screen_size: Any) -> float:
    """1 when VLC's window is as large as the screen (both ``{"width", "height"}``)."""
    if screen_size is None or actual_window_size is None:
        return 0.0
    same_width = actual_window_size["width"] == screen_size["width"]
    return float(same_width and actual_window_size["height"] == screen_size["height"])


def _vlcrc_lines(path: str) -> list[str]:
    check_size(path)
    with open(path, "rb") as f:
        return f.read().decode("utf-8").split("\n")


def _setting(path: str, marker: str, default: str) -> str:
    """The value of the last line holding ``marker`` (commented out or not), else ``default``."""
    value = default
    for line in _vlcrc_lines(path):
        if marker in line:
            value = line.split("=")[-1].strip()
    return value


def _as_text(expected: Any) -> Any:
    return str(expected) if isinstance(expected, int) else expected


def is_vlc_recordings_folder(actual_config_path: str | None, rule: dict[str, str]) -> float:
    """1 when the first set (not commented-out) ``input-record-path`` is
    ``rule["recording_file_path"]``."""
    if actual_config_path is None:
        return 0.0
    for line in _vlcrc_lines(actual_config_path):
        if line.startswith("#") or not line.strip():
            continue
        if "input-record-path" in line:
            return float(line.split("=")[-1].strip() == rule["recording_file_path"])
    return 0.0


def check_qt_bgcone(actual_config_path: str | None, rule: dict[str, Any]) -> float:
    """``qt-bgcone`` (the cone behind the video; default 1) is ``expected_qt_bgcone``."""
    if actual_config_path is None:
        return 0.0
    found = _setting(actual_config_path, "qt-bgcone=", "1")
    return float(found == _as_text(rule["expected_qt_bgcone"]))


def check_qt_max_volume(actual_config_path: str | None, rule: dict[str, Any]) -> float:
    """``qt-max-volume`` (default 125) is ``expected_qt_max_volume``."""
    if actual_config_path is None:
        return 0.0
    found = _setting(actual_config_path, "qt-max-volume=", "125")
    return float(found == _as_text(rule["expected_qt_max_volume"]))


def check_qt_minimal_view(actual_config_path: str | None, rule: dict[str, Any]) -> float:
    """``qt-minimal-view`` (default 0) is ``expected_qt_minimal_view``."""
    if actual_config_path is None:
        return 0.0
    found = _setting(actual_config_path, "qt-minimal-view=", "0")
    return float(found == _as_text(rule["expected_qt_minimal_view"]))


def check_play_and_exit(actual_config_path: str | None, rule: dict[str, Any]) -> float:
    """``play-and-exit`` (default 0) is ``expected_play_and_exit``."""
    if actual_config_path is None:
        return 0.0
    found = _setting(actual_config_path, "play-and-exit=", "0")
    return float(found == _as_text(rule["expected_play_and_exit"]))


def check_one_instance_when_started_from_file(
    actual_config_path: str | None, rule: dict[str, Any]
) -> float:
    """``one-instance-when-started-from-file`` (default 1) is its expected value."""
    if actual_config_path is None:
        return 0.0
    found = _setting(actual_config_path, "one-instance-when-started-from-file=", "1")
    return float(found == _as_text(rule["expected_one_instance_when_started_from_file"]))


def check_global_key_play_pause(actual_config_path: str | None, rule: dict[str, Any]) -> float:
    """A global play/pause key is set ("1": ``global-key-play-pause`` has a value) or not ("0"),
    as ``expected_global_key_play_pause`` says."""
    if actual_config_path is None:
        return 0.0
    found = "0"
    for line in _vlcrc_lines(actual_config_path):
        if "global-key-play-pause=" in line:
            found = "0" if line.split("=")[-1].strip() == "" else "1"
    return float(found == _as_text(rule["expected_global_key_play_pause"]))


def check_qt_slider_colours(actual_config_path: str | None, rule: dict[str, Any]) -> float:
    """The volume slider's colours (``qt-slider-colours``, twelve ``;``-separated numbers, four
    RGB colours): ``{"type": "match", "expected_qt_slider_colours": ...}`` compares the text,
    ``{"type": "blackish"}`` wants every channel of every colour under 100. Numbers that do not
    read score 0."""
    if rule.get("type") not in SLIDER_RULES:
        raise MetricError(f"check_qt_slider_colours rule type {rule.get('type')!r} is unknown")
    if actual_config_path is None:
        return 0.0
    default = "153;210;153;20;210;20;255;199;15;245;39;29"
    colours = _setting(actual_config_path, "qt-slider-colours", default)
    if rule["type"] == "match":
        return float(colours == rule["expected_qt_slider_colours"])
    try:
        values = [int(x) for x in colours.split(";")]
    except ValueError:
        return 0.0
    rgbs = zip(values[0::3], values[1::3], values[2::3], strict=False)
    return float(all(channel < BLACKISH_BELOW for rgb in rgbs for channel in rgb))
