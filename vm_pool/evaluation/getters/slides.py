"""Getters of a presentation's media: a slide's audio (``audio_in_slide``) and the picture behind
a slide (``background_image_in_slide``), with OSWorld's config: ``ppt_file_path`` (the pptx on
the desktop), ``slide_index`` (from 0) and ``dest`` (the name of the part's file).

OSWorld opens the pptx where it fetched it; here the getter only fetches it (as ``vm_file``,
under its own name), and the jail's reader (``readers.slides``) takes the part out and hands
the metric its file. A part the presentation only links to is not fetched: which file that is
can only be known by opening the package (see the reader).
"""

from pathlib import PurePosixPath
from typing import Any

from vm_pool.evaluation.getters.base import (
    Gathered,
    Getter,
    GetterError,
    Reading,
    one_file,
    read,
    require,
)
from vm_pool.evaluation.getters.files import vm_file


def audio_in_slide(reading: Reading, config: dict[str, Any]) -> Gathered:
    return _slide_part(reading, config, "slide_audio")


def background_image_in_slide(reading: Reading, config: dict[str, Any]) -> Gathered:
    return _slide_part(reading, config, "slide_background_image")


def _slide_part(reading: Reading, config: dict[str, Any], reader: str) -> Gathered:
    presentation = str(require(config, "ppt_file_path"))
    dest = reading.local(str(require(config, "dest"))).name
    try:
        index = int(require(config, "slide_index"))
    except (TypeError, ValueError) as error:
        raise GetterError(f"slide_index must be a number: {error}") from error
    fetched = vm_file(reading, {"path": presentation, "dest": PurePosixPath(presentation).name})
    return read(reader, one_file(fetched), slide_index=index, dest=dest)


GETTERS: dict[str, Getter] = {
    "audio_in_slide": audio_in_slide,
    "background_image_in_slide": background_image_in_slide,
}
