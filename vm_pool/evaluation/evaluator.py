"""Scoring an episode with its task's OSWorld ``evaluator``, on the desktop as it was left.

The evaluator is read as OSWorld reads it:

- ``postconfig``: setup steps run first (saving a document, closing a program, ``sleep``);
- ``func``: a metric name, or a list of them combined by ``conj`` (``and``, the default: the
  mean, and 0 as soon as one scores 0; ``or``: 1 as soon as one scores 1, else the best);
- ``result`` / ``expected``: getter configs (lists of them with a list of metrics), read from
  the desktop or the task's files (``vm_pool.evaluation.getters``);
- ``options``: the metrics' keyword arguments.

Before the getters read the desktop, its programs have finished what the episode and the
postconfig started: where the desktop's work is accounted (``vm_pool.sandbox.activity``: a local
or container desktop), the evaluator waits until it is idle, up to ``IDLE_WAIT_S``. OSWorld reads
right after the postconfig's own ``sleep``, which its tasks size for an idle machine: a document
saved with ctrl+s a moment before is read as it was before the save when the save is late (a
loaded host, a disk busy with other desktops). A desktop still at work after the limit is read
as it is, and the postconfig's log says so.

``infeasible`` scores 1 only when the episode ended by giving up (``call_user``, which the
UI-TARS agent in OSWorld maps to FAIL); any other task scores 0 when it did.

Two halves, on two sides of a boundary. Here, in the desktop host's worker: the postconfig and
the getters, which talk to the desktop and gather what it gives back without opening it. In the
evaluation jail (``vm_pool.evaluation.jail``): the readers and the metrics, which parse it.

The result is a ``Score``: the value from 0 to 1 and, per metric, its score, what its getters
returned (shortened) or the error that stopped it. A malformed evaluator, an unknown getter or
metric, or a postconfig that fails is an ``EvaluationFailed``; a file that broke a bound of the
jail (memory, CPU, time, a spreadsheet's cells, an image's pixels, …) is ``NotScored`` with the
limit named: no score at all rather than a wrong one.
"""

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vm_pool.desktop import DesktopControl, DesktopError
from vm_pool.evaluation import jail
from vm_pool.evaluation.getters import GETTERS, Gathered, GetterError, Reading, failed
from vm_pool.evaluation.metrics import METRICS
from vm_pool.sandbox.activity import activity_of, wait_until_idle
from vm_pool.setup.base import SetupFailed, SetupRun
from vm_pool.setup.runner import run_steps

INFEASIBLE = "infeasible"
FILE_GETTERS = ("vm_file", "cloud_file", "cache_file")
# Getters whose file a reader takes out of a document on the desktop: named by that document.
PART_GETTERS = {"audio_in_slide": "ppt_file_path", "background_image_in_slide": "ppt_file_path"}
# The longest wait for the desktop's programs to finish before it is read (see the module).
IDLE_WAIT_S = 10.0


class EvaluationFailed(RuntimeError):
    """The evaluator could not run: nothing is scored."""


class NotScored(EvaluationFailed):
    """What the desktop left broke a bound of the evaluation jail; ``limit`` names it (None:
    the jail could not tell which, or the evaluator is wrong)."""

    def __init__(self, limit: str | None, reason: str) -> None:
        super().__init__(f"{limit}: {reason}" if limit else reason)
        self.limit = limit


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
            if config and not isinstance(config, dict):
                raise EvaluationFailed(f"'{key}' must be a getter config (an object)")
            kind = config.get("type") if config else None
            if config and (not isinstance(kind, str) or kind not in GETTERS):
                raise EvaluationFailed(f"getter {kind!r} is not supported here")
    return names


def evaluate(
    control: DesktopControl,
    evaluator: dict[str, Any],
    gave_up: bool,
    fetch_url: Callable[[str], bytes],
    limits: jail.JailLimits | None = None,
) -> Score:
    """Run the postconfig and the getters here, the metrics in the jail (with the deployment's
    limits unless given); ``gave_up``: the episode's last action was ``call_user`` (OSWorld's
    FAIL)."""
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
    _until_idle(control, run)
    with tempfile.TemporaryDirectory(prefix="tandem-evaluation-") as folder:
        reading = Reading(control, Path(folder), fetch_url, run.outputs)
        request = gather(reading, evaluator, names)
        verdict = jail.run(request, Path(folder), limits or jail.limits_from_settings())
    score = as_score(verdict)
    score.postconfig_log = run.log
    return score


def _until_idle(control: DesktopControl, run: SetupRun) -> None:
    """Wait until the desktop's programs are idle, where their work is seen (see the module)."""
    activity = activity_of(control)
    if activity is not None and wait_until_idle(activity, IDLE_WAIT_S) is None:
        run.log.append(f"the desktop was still at work after {IDLE_WAIT_S:g}s: read as it was")


def as_score(verdict: dict[str, Any]) -> Score:
    """A jail's checked verdict as a ``Score``, or ``NotScored``."""
    if not verdict["scored"]:
        raise NotScored(verdict["limit"], verdict["reason"])
    return Score(verdict["value"], verdict["reason"], verdict["conjunction"], verdict["metrics"])


def gather(reading: Reading, evaluator: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The jail's request: per metric its name, options and what its getters gathered."""
    single = not isinstance(evaluator.get("func"), list)
    count = len(names)
    results = _as_list(evaluator.get("result"), count, "result")
    expected = _as_list(evaluator.get("expected"), count, "expected")
    options = _as_list(evaluator.get("options") or {}, count, "options")
    conjunction = "single" if single else str(evaluator.get("conj", "and"))
    if conjunction not in ("single", "and", "or"):
        raise EvaluationFailed(f"'conj' must be 'and' or 'or', not {conjunction!r}")
    metrics = []
    for index, name in enumerate(names):
        if not isinstance(results[index], dict):
            raise EvaluationFailed(f"metric {name}: 'result' must be a getter config")
        if not isinstance(options[index] or {}, dict):
            raise EvaluationFailed(f"metric {name}: 'options' must be an object")
        metrics.append(
            {
                "func": name,
                "options": options[index] or {},
                "result": _gathered(reading, results[index]),
                "result_label": _label(results[index]),
                "expected": _gathered(reading, expected[index]) if expected[index] else None,
                "expected_label": _label(expected[index]),
            }
        )
    return {"conjunction": conjunction, "metrics": metrics}


def _label(config: Any) -> str | None:
    """How a person names a file getter's file: its path on the desktop, or its URL (a part of a
    document: the document's path, and the part)."""
    if not isinstance(config, dict):
        return None
    kind = config.get("type")
    if kind in FILE_GETTERS:
        return str(config.get("path"))
    if kind in PART_GETTERS:
        return f"{config.get(PART_GETTERS[kind])} ({kind}, slide {config.get('slide_index')})"
    return None


def _gathered(reading: Reading, config: dict[str, Any]) -> Gathered:
    try:
        return GETTERS[config["type"]](reading, config)
    except (GetterError, DesktopError, KeyError, ValueError, TypeError, OSError) as error:
        # OSWorld scores a metric whose file cannot be had as 0 (its "file not found").
        return failed(f"getter: {type(error).__name__}: {error}")
    except Exception as error:  # anything else is no verdict on the episode: not scored
        label = _label(config)
        named = f"getter {config['type']}" + (f" ({label})" if label else "")
        raise NotScored(None, f"{named}: {type(error).__name__}: {error}") from error
