"""Readers: inside the evaluation jail, what a getter gathered becomes the metric's value.

A getter (``vm_pool.evaluation.getters``) only brings bytes back from the desktop; where
OSWorld's getter also parses them (the browser's History database, its Bookmarks and
Preferences JSON, a spreadsheet's last row, ``find``'s or ``wmctrl``'s listing), the parsing is
done here, in the jail, by the reader the getter names. A reader takes the gathered file's path
(None when the desktop had none) or text, and the getter's own settings.

A reader that cannot read what it was given raises ``Unreadable`` (the limit "file format", or
"sqlite schema"), and a file past a bound ``bounds.LimitHit``: either way the evaluation is not
scored, with the reason (a History that is not a database is no verdict on the episode).

The History database is opened read-only and immutable (no journal, no lock, nothing written
beside it), its ``urls`` must be a table (a view can be made to compute forever), and a progress
handler stops a query past ``SQLITE_STEPS`` virtual-machine steps.

The readers live by what they read: ``browser`` (the browser's profile files),
``browser_pages`` (a page's HTML), ``relative_time`` (dates relative to today), ``files``
(spreadsheets, listings), ``programs`` (applications' answers), ``slides`` (a presentation's
media, written to files of the jail's own); ``base`` holds the error and the bounds they share.
"""

from vm_pool.evaluation.readers import (
    accessibility,
    browser,
    browser_pages,
    files,
    programs,
    relative_time,
    slides,
    urls,
)
from vm_pool.evaluation.readers.base import Reader, Unreadable

__all__ = ["READERS", "Reader", "Unreadable"]

READERS: dict[str, Reader] = {
    **browser.READERS,
    **browser_pages.READERS,
    **relative_time.READERS,
    **files.READERS,
    **accessibility.READERS,
    **programs.READERS,
    **slides.READERS,
    **urls.READERS,
}
