"""Getters of what the desktop's programs show: their accessibility tree, a terminal's text.

The tree is read by the desktop's agent (``vm_pool.agent.accessibility``) as OSWorld's XML and
parsed only in the jail, by the metric. A tree the agent refused, and a desktop whose AT-SPI
cannot be read, come to the jail with the reason, and the evaluation is not scored
(``readers.accessibility``).

The terminal's text is what the active xterm shows, xterm's equivalent of what OSWorld reads
of GNOME Terminal over AT-SPI (``vm_pool.desktop``'s terminal script); None when no terminal
is active.
"""

from typing import Any

from vm_pool.desktop import (
    NO_TERMINAL,
    TERMINAL_PRINT_TIMEOUT_S,
    TERMINAL_READ_SCRIPT,
    DesktopError,
)
from vm_pool.evaluation.getters.base import Gathered, Getter, GetterError, Reading, read, value

# The script's own wait for xterm, and the time to start its programs.
TERMINAL_TIMEOUT_S = TERMINAL_PRINT_TIMEOUT_S + 10.0


def accessibility_tree(reading: Reading, config: dict[str, Any]) -> Gathered:
    try:
        tree = reading.control.accessibility_tree()
    except DesktopError as error:
        return read("accessibility_tree", refused=f"the desktop's AT-SPI cannot be read: {error}")
    return read("accessibility_tree", text=tree.xml, refused=tree.refused)


def vm_terminal_output(reading: Reading, config: dict[str, Any]) -> Gathered:
    """The active terminal's screen text, trailing whitespace cut (as OSWorld's ``rstrip``)."""
    done = reading.control.run(["sh", "-c", TERMINAL_READ_SCRIPT], TERMINAL_TIMEOUT_S)
    if done.returncode == NO_TERMINAL:
        return value(None)
    if done.returncode != 0:
        raise GetterError(f"the terminal's text cannot be read: {done.stderr.strip()[-300:]}")
    return value(done.stdout.rstrip())


GETTERS: dict[str, Getter] = {
    "accessibility_tree": accessibility_tree,
    "vm_terminal_output": vm_terminal_output,
}
