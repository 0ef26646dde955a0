"""The local web pages of the "Demo: desktop basics" project, and the setup steps that show them.

A desktop reaches no network unless its template allows the internet, and never the platform's
own services (design §6). So the demo's browser task brings its page along: the task's setup
writes the page into the desktop user's HOME (a ``file`` step) and opens it in the browser from
there (``chrome_open_tabs`` with a ``file://`` URL). The pages are plain HTML with their styles
inline and nothing fetched from anywhere.
"""

from pathlib import Path
from typing import Any

PAGES = Path(__file__).resolve().parent / "pages"
LIBRARY_PAGE = PAGES / "riverside-library.html"
LIBRARY_TITLE = "Riverside Library: Opening Hours"
LIBRARY_PATH = "/home/user/Documents/riverside-library.html"  # the desktop's own path
LIBRARY_URL = f"file://{LIBRARY_PATH}"


def library_setup() -> list[dict[str, Any]]:
    """The library's page put in the desktop user's Documents, then shown in the browser."""
    return [
        {"type": "file", "parameters": {"path": LIBRARY_PATH, "content": LIBRARY_PAGE.read_text()}},
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [LIBRARY_URL]}},
    ]
