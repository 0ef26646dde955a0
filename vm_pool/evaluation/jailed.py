"""The inside of the evaluation jail: ``python -P -m vm_pool.evaluation.jailed``.

It reads the request (JSON) on stdin, scores it over the gathered files in ``INPUT`` (read-only)
with ``scoring.score`` and writes the verdict (JSON) on stdout: nothing else, whatever happens.
What it may use is bounded from the outside (``vm_pool.evaluation.jail``); what it can tell in
words (memory, nesting, disk) it says itself, so the limit is named precisely.
"""

import json
import sys
from pathlib import Path
from typing import Any

INPUT = Path("/evaluation/in")
REQUEST_BYTES = 256 * 1024 * 1024


def verdict(raw: bytes) -> dict[str, Any]:
    from vm_pool.evaluation.scoring import not_scored, score  # inside the jail, after its limits

    try:
        request = json.loads(raw)
    except RecursionError:
        return not_scored("nesting depth", "a gathered value nests deeper than the jail reads")
    return score(request, INPUT)


def main() -> int:
    raw = sys.stdin.buffer.read(REQUEST_BYTES)
    try:
        answer = verdict(raw)
    except MemoryError:
        answer = {"scored": False, "limit": "memory", "reason": "out of the evaluation's memory"}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
