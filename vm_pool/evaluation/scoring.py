"""Scoring what the getters gathered with the metrics: the part of an evaluation that opens
desktop-made bytes, run inside the evaluation jail (``vm_pool.evaluation.jail``).

``score(request, folder)`` takes the request the worker wrote (plain JSON: per metric its name,
options and what its getters gathered, see ``getters.Gathered``) and the read-only folder of
gathered files, and returns the verdict, plain JSON too:

- ``{"scored": true, "value", "reason", "conjunction", "metrics"}``: the score and per metric its
  score and what it saw (shortened) or the error that stopped it;
- ``{"scored": false, "limit", "reason"}``: no score. ``limit`` names the bound a file broke
  (``bounds.LimitHit``: "spreadsheet cells", "image pixels", …; a reader's "file format" or
  "sqlite schema"; "memory", "nesting depth", "disk", "file size"), or is None when the evaluator
  itself is wrong (``MetricError``).

The conjunction is OSWorld's: ``and`` (the mean, and 0 as soon as one scores 0), ``or`` (1 as
soon as one scores 1, else the best); the metrics after a decided one are skipped. A getter that
failed on the desktop scores its metric 0 (OSWorld's "file not found"), and so does a document a
metric cannot read; a bound broken, memory exhausted or nesting too deep is never a score.
"""

import errno
import json
from pathlib import Path
from typing import Any

from vm_pool.evaluation.bounds import LimitHit
from vm_pool.evaluation.metrics import METRICS, MetricError
from vm_pool.evaluation.readers import READERS, Unreadable

SHOWN_CHARS = 300


def _shown(value: Any) -> Any:
    """A value as a person reads it: text as it is, anything else as JSON (not Python's repr)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def not_scored(limit: str | None, reason: str) -> dict[str, Any]:
    return {"scored": False, "limit": limit, "reason": reason[:1000]}


def score(request: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The verdict on one evaluation's gathered values (see the module's docstring)."""
    try:
        return _score(request, folder)
    except LimitHit as hit:
        return not_scored(hit.limit, str(hit))
    except MemoryError:
        return not_scored("memory", "a metric ran out of the evaluation's memory")
    except RecursionError:
        return not_scored("nesting depth", "a file nests deeper than the evaluation reads")
    except MetricError as error:
        return not_scored(None, f"metric: {error}")
    except OSError as error:
        if error.errno == errno.ENOSPC:
            return not_scored("disk", "the evaluation's temporary space is full")
        if error.errno == errno.EFBIG:
            return not_scored("file size", "a metric wrote a file larger than allowed")
        raise


def _score(request: dict[str, Any], folder: Path) -> dict[str, Any]:
    conjunction = str(request["conjunction"])
    entries: list[dict[str, Any]] = request["metrics"]
    details: list[dict[str, Any]] = []
    scores: list[float] = []
    for index, entry in enumerate(entries):
        name = str(entry["func"])
        value, detail = _one(entry, folder)
        details.append({"index": index, "func": name, **detail})
        scores.append(value)
        decided = (conjunction == "and" and value == 0.0) or (conjunction == "or" and value == 1.0)
        if decided:  # OSWorld stops here: the rest cannot change the score
            skipped = range(index + 1, len(entries))
            details += [
                {"index": i, "func": entries[i]["func"], "score": "skipped"} for i in skipped
            ]
            reason = f"metric {index} ({name}) scored {value:g}"
            return _scored(value, reason, conjunction, details)
    value = max(scores) if conjunction == "or" else sum(scores) / len(scores)
    return _scored(float(value), "every metric ran", conjunction, details)


def _scored(
    value: float, reason: str, conjunction: str, details: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "scored": True,
        "value": value,
        "reason": reason,
        "conjunction": conjunction,
        "metrics": details,
    }


def _resolve(gathered: dict[str, Any] | None, folder: Path) -> Any:
    """What the metric is given for a getter's gathered record."""
    if gathered is None:
        return None
    kind = gathered["kind"]
    if kind == "value":
        return gathered["value"]
    if kind == "files":
        paths = [
            None if name is None else str(folder / Path(name).name) for name in gathered["files"]
        ]
        return paths[0] if gathered["single"] else paths
    if kind == "read":
        file = gathered.get("file")
        path = None if file is None else str(folder / Path(file).name)
        return READERS[gathered["reader"]](path, gathered.get("text"), gathered.get("config", {}))
    raise Unreadable(f"a getter gathered a {kind!r}")


def _seen(label: str | None, value: Any) -> Any:
    """What a getter gave, as a person reads it: a file by where it came from (the desktop's
    path, the task file's URL, given as ``label``), not by the evaluation's own copy of it."""
    if label is not None:
        return f"no file {label}" if value is None else _shown(label)
    return _shown(value)


def _one(entry: dict[str, Any], folder: Path) -> tuple[float, dict[str, Any]]:
    """One metric over its gathered values: its score and what it saw."""
    result, expected = entry["result"], entry.get("expected")
    for gathered in (result, expected):
        if gathered is not None and gathered["kind"] == "error":
            return 0.0, {"score": 0.0, "error": _shown(gathered["error"])}
    actual, wanted = _resolve(result, folder), _resolve(expected, folder)
    metric = METRICS[entry["func"]]
    arguments = (actual, wanted) if expected is not None else (actual,)
    shown = {
        "result": _seen(entry.get("result_label"), actual),
        "expected": _seen(entry.get("expected_label"), wanted),
    }
    try:
        value = float(metric(*arguments, **(entry.get("options") or {})))
    except (MetricError, LimitHit, MemoryError, RecursionError):
        raise  # the evaluator is wrong, or the file broke a bound: no verdict
    except Exception as error:  # a document a metric cannot read scores 0, with its reason
        return 0.0, {"score": 0.0, "error": _shown(f"{type(error).__name__}: {error}"), **shown}
    return value, {"score": value, **shown}
