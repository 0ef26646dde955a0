"""Readers of a presentation's media: a slide's audio and the picture behind a slide, taken out
of the pptx as OSWorld's ``audio_in_slide`` and ``background_image_in_slide`` getters take them.

The metrics that compare them (``compare_images``, ``compare_audios``) compare files, so a
reader writes the part it takes out to a file and returns its path (None when the slide has
none, which scores 0): a new folder under the temporary folder, in the jail its private
``/tmp``, which is gone with the jail; the file is named by the getter's ``dest`` (a file name,
which the getter checks).

Where OSWorld looks, in the slide's relationships (``ppt/slides/_rels/slideN.xml.rels``):

- audio: the first relationship whose type names ``audio``;
- background: the relationship that the first picture (``a:blip``) of the slide's own
  background fill (``p:bgPr``) embeds; a slide whose background comes from its layout or
  master has none.

A relationship's target ``../…`` is a part of the pptx, looked up by name (a name that climbs
out of the package is simply not there); a ``file://`` target is a file the presentation only
links to. Anything else, a part not in the package, or a presentation that does not open
scores 0, as OSWorld fails there. The package is checked against the zip bounds
(``bounds.check_zip``) first, and its XML parsed with no entities resolved.
"""

import posixpath
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lxml import etree

from vm_pool.evaluation.bounds import check_zip
from vm_pool.evaluation.readers.base import Reader, Unreadable

_RELATIONSHIP = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_BACKGROUND = "{http://schemas.openxmlformats.org/presentationml/2006/main}bgPr"
_PICTURE = "{http://schemas.openxmlformats.org/drawingml/2006/main}blip"
_EMBED = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed"
_LINKED = "file://"


class _NoPart(Exception):
    """The presentation has no such part, or not one OSWorld could take out: scores 0."""


def slide_audio(path: str | None, text: str | None, config: dict[str, Any]) -> str | None:
    """The first audio of slide ``slide_index`` (from 0), as a file named ``dest``."""
    return _taken_out(path, config, _audio_target)


def slide_background_image(
    path: str | None, text: str | None, config: dict[str, Any]
) -> str | None:
    """The picture of slide ``slide_index``'s own background, as a file named ``dest``."""
    return _taken_out(path, config, _background_target)


def _taken_out(
    path: str | None, config: dict[str, Any], target: Callable[[zipfile.ZipFile, int], str]
) -> str | None:
    if path is None:
        return None
    check_zip(path)
    index = int(config["slide_index"])
    try:
        with zipfile.ZipFile(path) as package:
            found = target(package, index)
            if found.startswith(_LINKED):
                # Deliberate difference from OSWorld: it fetches a linked file from the
                # desktop, a read that depends on the package's contents, which only the jail
                # may open; the episode may be right, so it is not scored.
                raise Unreadable(
                    f"slide {index + 1} only links to {found[:200]!r}: the evaluation reads "
                    "media embedded in the presentation",
                    limit="linked media",
                )
            if not found.startswith(".."):
                raise _NoPart(found)
            member = posixpath.normpath(posixpath.join("ppt/slides", found)).replace("\\", "/")
            if member not in package.namelist():
                raise _NoPart(member)
            data = package.read(member)
    except (_NoPart, zipfile.BadZipFile, etree.XMLSyntaxError, KeyError, OSError, EOFError):
        return None
    stored = Path(tempfile.mkdtemp(prefix="slide-part-")) / Path(str(config["dest"])).name
    stored.write_bytes(data)
    return str(stored)


def _xml(package: zipfile.ZipFile, name: str) -> Any:
    if name not in package.namelist():
        raise _NoPart(name)
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    return etree.fromstring(package.read(name), parser)


def _relationships(package: zipfile.ZipFile, index: int) -> list[Any]:
    relationships = _xml(package, f"ppt/slides/_rels/slide{index + 1}.xml.rels")
    return list(relationships.iterchildren(_RELATIONSHIP))


def _audio_target(package: zipfile.ZipFile, index: int) -> str:
    for relationship in _relationships(package, index):
        if "audio" in relationship.attrib["Type"]:
            return str(relationship.attrib["Target"])
    raise _NoPart("no audio")


def _background_target(package: zipfile.ZipFile, index: int) -> str:
    slide = _xml(package, f"ppt/slides/slide{index + 1}.xml")
    embedded = None
    for background in slide.iter(_BACKGROUND):
        picture = next(background.iter(_PICTURE), None)
        embedded = picture.get(_EMBED) if picture is not None else None
        if embedded is not None:
            break
    if embedded is None:
        raise _NoPart("no background picture")
    for relationship in _relationships(package, index):
        if "image" in relationship.attrib["Type"] and relationship.attrib["Id"] == embedded:
            return str(relationship.attrib["Target"])
    raise _NoPart(f"no picture {embedded!r}")


READERS: dict[str, Reader] = {
    "slide_audio": slide_audio,
    "slide_background_image": slide_background_image,
}
