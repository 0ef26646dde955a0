"""Stand-ins for the libraries OSWorld's metric modules import but this machine cannot have.

OSWorld's modules import these at their top, so the modules cannot be loaded without them. The
compared functions never call them; a stand-in that is used raises ``AbsentLibrary``, and the
differential suite fails the case loudly instead of scoring it. A metric whose reference does
call one of them is listed in the suite's ``NOT_COMPARABLE`` with the library it needs.
"""

import importlib
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager

# module name -> what OSWorld uses it for (none of it is compared here); the libraries OSWorld's
# modules need for the compared metrics are in pyproject.toml's `test` extra instead
ABSENT: dict[str, str] = {
    "bs4": "compare_htmls and the HTML readers (BeautifulSoup)",
    "fitz": "compare_pdfs' and compare_pdf_images' PDF text and images (PyMuPDF)",
    "borb": "PDF pictures in chrome.py (borb)",
    "borb.pdf": "PDF pictures in chrome.py (borb)",
    "easyocr": "OCR of documents (compare_image_text, docx pictures)",
    "pdfplumber": "is_gold_text_included_in_pdf",
    "acoustid": "audio fingerprints (compare_audios)",
    "librosa": "audio features (compare_audios)",
    "fastdtw": "audio alignment (compare_audios)",
    "PyPDF2": "compare_zip_files' PDF members",
}


class AbsentLibrary(RuntimeError):
    """A reference function reached a library this machine does not have."""


class _Placeholder:
    """Any name taken from an absent library: usable as a name, raises once really used."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> "_Placeholder":
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return _Placeholder(f"{self._name}.{attribute}")

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise AbsentLibrary(f"{self._name} is not installed here")

    def __mro_entries__(self, bases: tuple[object, ...]) -> tuple[type, ...]:
        return (object,)


class _AbsentModule(types.ModuleType):
    def __getattr__(self, attribute: str) -> _Placeholder:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return _Placeholder(f"{self.__name__}.{attribute}")


def _importable(name: str) -> bool:
    """Whether the library really imports here (found on the path is not enough: a wheel
    built for another platform is found and fails)."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


@contextmanager
def standing_in() -> Iterator[list[str]]:
    """Within the block, each absent library imports as a stand-in; afterwards they are gone
    again from ``sys.modules`` (the modules imported meanwhile keep their references)."""
    added = [name for name in ABSENT if name not in sys.modules and not _importable(name)]
    for name in added:
        sys.modules[name] = _AbsentModule(name)
    try:
        yield added
    finally:
        for name in added:
            sys.modules.pop(name, None)
