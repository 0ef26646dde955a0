"""Getters of what the desktop's programs show through AT-SPI: the accessibility tree.

The tree is read by the desktop's agent (``vm_pool.agent.accessibility``) as OSWorld's XML and
parsed only in the jail, by the metric. A tree the agent refused, and a desktop whose AT-SPI
cannot be read, come to the jail with the reason, and the evaluation is not scored
(``readers.accessibility``).
"""

from typing import Any

from vm_pool.desktop import DesktopError
from vm_pool.evaluation.getters.base import Gathered, Getter, Reading, read


def accessibility_tree(reading: Reading, config: dict[str, Any]) -> Gathered:
    try:
        tree = reading.control.accessibility_tree()
    except DesktopError as error:
        return read("accessibility_tree", refused=f"the desktop's AT-SPI cannot be read: {error}")
    return read("accessibility_tree", text=tree.xml, refused=tree.refused)


GETTERS: dict[str, Getter] = {"accessibility_tree": accessibility_tree}
