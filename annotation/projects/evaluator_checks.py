"""The evaluator self-check: is a task's evaluator to be trusted before anyone works the task?

A task's evaluator is run, with no work done, on a fresh desktop right after the task's setup
(``annotation.episodes.evaluator_self_check`` runs it on a desktop's host). Rules:

- **What is checked.** Every task whose evaluator names a metric other than ``infeasible`` (an
  infeasible task scores 0 unless the agent gives up: nothing on the desktop to check). Importing
  requests the check for each task that is new, whose content changed, or that was never
  checked; a manager can request it again for any tasks (``request``).
- **Verdicts** (``EvaluatorCheck.status``):
  - ``trusted``: it scored 0, every getter and metric ran without an error;
  - ``passes_without_work``: it scored above 0 (a result file the setup already puts in place,
    a rule that holds on the untouched desktop): **flagged**;
  - ``cannot_evaluate``: it cannot score here, with the reason: a getter or metric this platform
    does not support (known at once, no desktop needed), a getter that could not gather (a task
    file missing from the cache, a command of the postconfig that failed), a metric that could
    not read what it was given, or a limit of the evaluation jail: **flagged**;
  - ``failed``: the check itself did not run (no desktop was ready, the setup failed): the
    reason says why; it says nothing of the evaluator;
  - ``pending`` while it is queued or running.
- **What a flag does.** A task whose evaluator passes without work is kept out of V(s): its
  rollouts' evaluator part is "not known" (``blocks_validation``), so they reach no dataset, until
  a manager clears the flag (``clear``, recorded with who and when). A ``cannot_evaluate`` task's
  episodes end unscored anyway. Both are shown on the task board and in the import report.
- **Which content.** A check is for the setup and evaluator it ran (``content_sha``); a check
  of other content is stale, and the next import or request checks again. Clearing holds for the
  content that was cleared.
"""

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from annotation.job_names import CHECK_EVALUATOR
from annotation.models import EvaluatorCheck, EvaluatorCheckStatus, Project, Task
from backend.accounts.models import User
from backend.celery import send_after_commit
from backend.errors import DomainError
from vm_pool.evaluation.evaluator import INFEASIBLE, EvaluationFailed
from vm_pool.evaluation.evaluator import check as check_evaluator
from vm_pool.models import Desktop, host_queue

FLAGGED = (EvaluatorCheckStatus.PASSES_WITHOUT_WORK, EvaluatorCheckStatus.CANNOT_EVALUATE)


class NotClearable(DomainError):
    code = "evaluator_check_not_clearable"
    status_code = 409


def content_sha(task: Task) -> str:
    """The digest of what a check runs: the task's setup and its evaluator."""
    content = json.dumps([task.setup, task.evaluator], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(content.encode()).hexdigest()


def checkable(evaluator: Any) -> bool:
    """Has the evaluator anything to check on a desktop (a metric other than infeasible)?"""
    if not isinstance(evaluator, dict):
        return False
    func = evaluator.get("func")
    names = func if isinstance(func, list) else [func]
    return any(isinstance(name, str) and name and name != INFEASIBLE for name in names)


def _host(project: Project) -> str:
    """Where the check runs: the host with the most desktops of the project's template."""
    busiest = (
        Desktop.objects.filter(template__name=project.environment_template)
        .values("host")
        .annotate(desktops=Count("id"))
        .order_by("-desktops", "host")
        .first()
    )
    return str(busiest["host"]) if busiest else settings.TANDEM_HOST


def request(
    project: Project, tasks: Iterable[Task], by: User, only_stale: bool = False
) -> Counter[str]:
    """Check these tasks' evaluators (those with one to check; with ``only_stale``, those never
    checked for their content): unsupported ones are flagged at once, the others queued on a
    desktop host. Counts by status, as the checks now stand."""
    counts: Counter[str] = Counter()
    queue = host_queue(_host(project))
    now = timezone.now()
    tasks = [task for task in tasks if checkable(task.evaluator) and not task.cannot_run]
    with transaction.atomic():
        checks = {c.task_id: c for c in EvaluatorCheck.objects.filter(task__in=tasks)}
        for task in tasks:
            sha = content_sha(task)
            existing = checks.get(task.pk)
            if only_stale and existing is not None and existing.content_sha == sha:
                counts[existing.status] += 1
                continue
            fields: dict[str, Any] = {
                "content_sha": sha,
                "requested_at": now,
                "requested_by": by,
                "checked_at": None,
                "score": None,
                "details": {},
                "reason": "",
                "status": EvaluatorCheckStatus.PENDING,
            }
            if existing is None or existing.content_sha != sha:
                fields.update(cleared_by=None, cleared_at=None)
            try:
                check_evaluator(task.evaluator)
            except EvaluationFailed as error:
                fields.update(
                    status=EvaluatorCheckStatus.CANNOT_EVALUATE,
                    reason=str(error)[:1000],
                    checked_at=now,
                )
            check, _ = EvaluatorCheck.objects.update_or_create(task=task, defaults=fields)
            if check.status == EvaluatorCheckStatus.PENDING:
                send_after_commit(CHECK_EVALUATOR, [check.pk, sha], queue)
            counts[check.status] += 1
    return counts


def clear(task: Task, manager: User) -> EvaluatorCheck:
    """A manager trusts a task whose evaluator passes without work (for this content)."""
    with transaction.atomic():
        check = EvaluatorCheck.objects.select_for_update().filter(task=task).first()
        if check is None or check.status != EvaluatorCheckStatus.PASSES_WITHOUT_WORK:
            raise NotClearable("only an evaluator that passes without work can be cleared")
        if check.content_sha != content_sha(task):
            raise NotClearable("the task changed since its check: check it again first")
        check.cleared_by, check.cleared_at = manager, timezone.now()
        check.save(update_fields=["cleared_by", "cleared_at"])
    return check


def blocks_validation(task: Task) -> str:
    """Why the task's evaluator may not count in V(s) now, else "" (see the module's rules)."""
    check = EvaluatorCheck.objects.filter(task=task).first()
    if check is None or check.status != EvaluatorCheckStatus.PASSES_WITHOUT_WORK:
        return ""
    if check.cleared_at is not None and check.content_sha == content_sha(task):
        return ""
    return (
        f"the task's evaluator scores {check.score:g} with no work done "
        "(its self-check): a manager must clear it before it counts"
    )


def as_json(check: EvaluatorCheck | None, task: Task) -> dict[str, Any] | None:
    """A task's check as the board and the import report show it."""
    if check is None:
        return None
    return {
        "status": check.status,
        "flagged": check.status in FLAGGED and check.cleared_at is None,
        "score": check.score,
        "reason": check.reason,
        "stale": check.content_sha != content_sha(task),
        "requested_at": check.requested_at,
        "checked_at": check.checked_at,
        "cleared_by": check.cleared_by.username if check.cleared_by else None,
        "cleared_at": check.cleared_at,
    }
