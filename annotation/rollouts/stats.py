"""What a rollout batch's page shows: success by task and by model version, pass@k, the
validation's verdicts and the cost.

- **Success** of a rollout is its validation's V = 1. A rate counts the validated rollouts only
  (those whose V is known); ``task_success`` is the mean score of the task's evaluator over
  the rollouts it scored, where the task has one.
- **pass@k** is the share of tasks with at least one of their k samples validated V = 1.
- **Verdicts** count every part's pass, fail and not-known over the batch, by part.
- **Cost**: decided steps and the model's tokens (prompt and completion), in all and per
  rollout that ran to its end (a queued or running one has not counted its tokens yet).
"""

from collections import Counter, defaultdict
from typing import Any

from annotation.models import Rollout, RolloutBatch


def _rate(passed: int, known: int) -> float | None:
    return passed / known if known else None


def summary(batch: RolloutBatch) -> dict[str, Any]:
    rows = list(
        Rollout.objects.filter(batch=batch)
        .select_related("task", "episode")
        .order_by("task_id", "sample")
    )
    by_task: dict[int, list[Rollout]] = defaultdict(list)
    by_version: dict[str, list[Rollout]] = defaultdict(list)
    parts: dict[str, Counter[str]] = defaultdict(Counter)
    stops: Counter[str] = Counter()
    for rollout in rows:
        by_task[rollout.task_id].append(rollout)
        if rollout.episode is not None:
            by_version[rollout.episode.model_version].append(rollout)
        if rollout.stop_reason:
            stops[rollout.stop_reason] += 1
        for part in rollout.validation.get("parts", []):
            word = {True: "passed", False: "failed", None: "unknown"}[part["passed"]]
            parts[part["name"]][word] += 1
    ran = [r for r in rows if r.ended_at is not None and r.episode_id is not None]
    tasks = [_group(group) | {"task": group[0].task.external_id} for group in by_task.values()]
    solved = sum(1 for group in by_task.values() if any(r.verdict for r in group))
    return {
        "pass_at_k": _rate(solved, len(by_task)),
        "k": batch.samples_per_task,
        "success": _group(rows),
        "by_task": tasks,
        "by_version": [_group(group) | {"model_version": v} for v, group in by_version.items()],
        "verdicts": {name: dict(counts) for name, counts in parts.items()},
        "stop_reasons": dict(stops),
        "cost": {
            "steps": sum(r.steps for r in rows),
            "tokens": sum(r.tokens for r in rows),
            "tokens_per_rollout": _rate(sum(r.tokens for r in rows), len(ran)),
        },
    }


def _group(rows: list[Rollout]) -> dict[str, Any]:
    known = [r for r in rows if r.verdict is not None]
    passed = sum(1 for r in known if r.verdict)
    scored = [
        r.episode.task_success
        for r in rows
        if r.episode is not None and r.episode.task_success is not None
    ]
    return {
        "rollouts": len(rows),
        "validated": len(known),
        "passed": passed,
        "success_rate": _rate(passed, len(known)),
        "task_success": sum(scored) / len(scored) if scored else None,
    }
