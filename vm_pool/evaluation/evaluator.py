"""Scoring an episode with its task's OSWorld ``evaluator``, on the desktop as it was left.

The evaluator is read as OSWorld reads it:

- ``postconfig``: setup steps run first (saving a document, closing a program, ``sleep``);
- ``func``: a metric name, or a list of them combined by ``conj`` (``and``, the default: the
  mean, and 0 as soon as one scores 0; ``or``: 1 as soon as one scores 1, else the best);
- ``result`` / ``expected``: getter configs (lists of them with a list of metrics), read from
  the desktop or the task's files (``vm_pool.evaluation.getters``);
- ``options``: the metrics' keyword arguments.

``infeasible`` scores 1 only when the episode ended by giving up (``call_user``, which the
UI-TARS agent in OSWorld maps to FAIL); any other task scores 0 when it did.

The result is a ``Score``: the value from 0 to 1 and, per metric, its score, what its getters
returned (shortened) or the error that stopped it. A malformed evaluator, an unknown getter or
metric, or a postconfig that fails is an ``EvaluationFailed``: no score at all rather than a
wrong one.
"""

import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vm_pool.evaluation.getters import GETTERS, GetterError, Reading
from vm_pool.evaluation.metrics import METRICS, MetricError
from vm_pool.providers.base import DesktopControl, DesktopError
from vm_pool.setup_base import SetupFailed, SetupRun
from vm_pool.setup_runner import run_steps

logger = logging.getLogger(__name__)

INFEASIBLE = "infeasible"
FILE_GETTERS = ("vm_file", "cloud_file", "cache_file")
SHOWN_CHARS = 300


class EvaluationFailed(RuntimeError):
    """The evaluator could not run: nothing is scored."""


@dataclass
class Score:
    value: float
    reason: str  # why it is what it is, in a few words
    conjunction: str = "single"
    metrics: list[dict[str, Any]] = field(default_factory=list)
    postconfig_log: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "score": self.value,
            "reason": self.reason,
            "conjunction": self.conjunction,
            "metrics": self.metrics,
            "postconfig_log": self.postconfig_log,
        }


def _shown(value: Any) -> Any:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def _seen(config: Any, value: Any) -> Any:
    """What a getter gave, as a person reads it: a file by where it came from (the desktop's
    path, the task file's URL), not by the evaluation's own copy of it."""
    if isinstance(config, dict) and config.get("type") in FILE_GETTERS:
        if value is None:
            return f"no file {config.get('path')}"
        return _shown(config.get("path"))
    return _shown(value)


def _as_list(value: Any, count: int, name: str) -> list[Any]:
    if isinstance(value, list):
        if len(value) != count:
            raise EvaluationFailed(f"'{name}' has {len(value)} entries for {count} metrics")
        return value
    return [value] * count


def check(evaluator: dict[str, Any]) -> list[str]:
    """The metric names of an evaluator, refusing what this platform cannot run."""
    func = evaluator.get("func")
    given = func if isinstance(func, list) else [func]
    names = [n for n in given if isinstance(n, str) and n]
    if not names or len(names) != len(given):
        raise EvaluationFailed("'func' must be a metric name or a list of them")
    unknown = [n for n in names if n != INFEASIBLE and n not in METRICS]
    if unknown:
        raise EvaluationFailed(f"metric {', '.join(unknown)} is not supported here")
    for key in ("result", "expected"):
        configs = evaluator.get(key)
        for config in configs if isinstance(configs, list) else [configs]:
            if config and config.get("type") not in GETTERS:
                raise EvaluationFailed(f"getter {config.get('type')!r} is not supported here")
    return names


def evaluate(
    control: DesktopControl,
    evaluator: dict[str, Any],
    gave_up: bool,
    fetch_url: Callable[[str], bytes],
) -> Score:
    """Run the postconfig, the getters and the metrics; ``gave_up``: the episode's last action
    was ``call_user`` (OSWorld's FAIL)."""
    names = check(evaluator)
    run = SetupRun(control)
    try:
        run_steps(run, evaluator.get("postconfig") or [])
    except SetupFailed as error:
        raise EvaluationFailed(f"postconfig: {error}") from error
    if names == [INFEASIBLE]:
        if gave_up:
            return Score(1.0, "infeasible task identified as infeasible", postconfig_log=run.log)
        return Score(0.0, "infeasible task not identified as infeasible", postconfig_log=run.log)
    if gave_up:
        return Score(0.0, "the episode gave up (call_user)", postconfig_log=run.log)
    with tempfile.TemporaryDirectory(prefix="tandem-evaluation-") as folder:
        reading = Reading(control, Path(folder), fetch_url, run.outputs)
        score = _score(reading, evaluator, names)
    score.postconfig_log = run.log
    return score


def _score(reading: Reading, evaluator: dict[str, Any], names: list[str]) -> Score:
    single = not isinstance(evaluator.get("func"), list)
    count = len(names)
    results = _as_list(evaluator.get("result"), count, "result")
    expected = _as_list(evaluator.get("expected"), count, "expected")
    options = _as_list(evaluator.get("options") or {}, count, "options")
    conjunction = "single" if single else str(evaluator.get("conj", "and"))
    if conjunction not in ("single", "and", "or"):
        raise EvaluationFailed(f"'conj' must be 'and' or 'or', not {conjunction!r}")
    details: list[dict[str, Any]] = []
    scores: list[float] = []
    for index, name in enumerate(names):
        value, detail = _one(reading, name, results[index], expected[index], options[index])
        details.append({"index": index, "func": name, **detail})
        scores.append(value)
        decided = (conjunction == "and" and value == 0.0) or (conjunction == "or" and value == 1.0)
        if decided:  # OSWorld stops here: the rest cannot change the score
            skipped = range(index + 1, count)
            details += [{"index": i, "func": names[i], "score": "skipped"} for i in skipped]
            return Score(value, f"metric {index} ({name}) scored {value:g}", conjunction, details)
    value = max(scores) if conjunction == "or" else sum(scores) / len(scores)
    return Score(float(value), "every metric ran", conjunction, details)


def _one(
    reading: Reading, name: str, result: Any, expected: Any, options: Any
) -> tuple[float, dict[str, Any]]:
    """One metric over its getters: its score and what it saw."""
    if not isinstance(result, dict):
        raise EvaluationFailed(f"metric {name}: 'result' must be a getter config")
    try:
        actual = GETTERS[result["type"]](reading, result)
        wanted = GETTERS[expected["type"]](reading, expected) if expected else None
    except (GetterError, DesktopError, KeyError, ValueError, OSError) as error:
        # OSWorld scores a metric whose file cannot be had as 0 (its "file not found").
        return 0.0, {"score": 0.0, "error": f"getter: {type(error).__name__}: {error}"}
    metric = METRICS[name]
    arguments = (actual, wanted) if expected else (actual,)
    try:
        value = float(metric(*arguments, **(options or {})))
    except MetricError as error:  # the evaluator is wrong, not the episode
        raise EvaluationFailed(f"metric {name}: {error}") from error
    except Exception as error:  # a document a metric cannot read scores 0, with its reason
        logger.info("metric %s raised: %s", name, error)
        detail = {"score": 0.0, "error": f"{type(error).__name__}: {error}"}
        return 0.0, {**detail, "result": _seen(result, actual), "expected": _seen(expected, wanted)}
    shown = {"result": _seen(result, actual), "expected": _seen(expected, wanted)}
    return value, {"score": value, **shown}
