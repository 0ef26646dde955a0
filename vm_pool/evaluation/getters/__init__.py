"""OSWorld's getters: what an evaluator reads from the desktop, or from the task's files.

A getter takes the evaluation under way and its config (``{"type": ..., ...}``) and gathers
what the metric will compare, without opening it: it runs in the desktop host's worker, and
everything it brings back was made on the desktop, so it is parsed only in the evaluation jail
(``vm_pool.evaluation.jail``). What a getter returns is a ``Gathered`` record, plain JSON:

- ``value``: a string, number, list or dict as it came (a command's output, the open tabs);
- ``files``: files it put in the evaluation's folder, named by the config's ``dest`` (None where
  the desktop has no such file); the metric gets their paths inside the jail;
- ``read``: a file or a text that a reader of ``vm_pool.evaluation.readers`` turns into the
  metric's value inside the jail (the browser's History database, its Bookmarks and Preferences
  JSON, a spreadsheet's last row, a folder listing);
- ``error``: why it could not be had (OSWorld scores such a metric 0, as its "file not found").

Everything on the desktop is read through its agent, inside its sandbox: files of HOME and
``/tmp``, a command's output, the running browser over its debugging port.

The getters live by what they read: ``files`` (files, commands, sizes), ``browser`` (Chromium's
profile and tabs), ``browser_pages`` and ``recreation`` (pages read or driven over DevTools),
``clock`` (rules whose dates are relative to today), ``settings_files`` (other
applications' settings files), ``apps_state`` (what running applications answer: VLC's
playback, a VS Code command's file, the default video player), ``accessibility`` (the AT-SPI
tree), ``slides`` (a presentation's media); ``base`` holds what they share. Getters not listed
in ``GETTERS`` are not supported here; ``manage.py osworld_coverage`` names them with the tasks
they block.
"""

from vm_pool.evaluation.getters import (
    accessibility,
    apps_state,
    browser,
    browser_pages,
    clock,
    files,
    recreation,
    settings_files,
    slides,
)
from vm_pool.evaluation.getters.base import Gathered, Getter, GetterError, Reading, failed

__all__ = ["GETTERS", "Gathered", "Getter", "GetterError", "Reading", "failed"]

GETTERS: dict[str, Getter] = {
    **files.GETTERS,
    **browser.GETTERS,
    **browser_pages.GETTERS,
    **recreation.GETTERS,
    **clock.GETTERS,
    **settings_files.GETTERS,
    **apps_state.GETTERS,
    **accessibility.GETTERS,
    **slides.GETTERS,
}
