"""The reader of the accessibility tree: the agent's XML, or why there is none.

A tree the agent refused (past one of its bounds, or not read in time) and a desktop whose
AT-SPI could not be read are no verdict on the episode: the evaluation is not scored, with the
reason. The XML itself is parsed by the metric (``metrics.accessibility``), as in OSWorld.
"""

from typing import Any

from vm_pool.evaluation.bounds import LimitHit
from vm_pool.evaluation.readers.base import Reader


def accessibility_tree(path: str | None, text: str | None, config: dict[str, Any]) -> Any:
    refused = str(config.get("refused") or "")
    if refused or text is None:
        raise LimitHit("accessibility tree", refused or "the desktop gave no tree")
    return text


READERS: dict[str, Reader] = {"accessibility_tree": accessibility_tree}
