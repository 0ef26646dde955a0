"""The evaluator self-check on a desktop's host: a task's setup, then its evaluator, on a fresh
desktop nobody touched (the rules and verdicts: ``annotation.projects.evaluator_checks``).

The check leases a ready desktop of the project's template on this host (in the name of who
asked for the check), waiting up to
``WAIT_FOR_DESKTOP_S`` (the job is then sent again, up to ``DESKTOP_TRIES`` times, before the
check fails with "no desktop was ready"); runs the setup; waits for the screen to stay quiet as
an evaluation after a last step does; runs the evaluator as if the episode had just ended
(``gave_up`` false); and releases the desktop, whose reset runs as any other. A check whose task
changed since it was requested is left to the newer request.
"""

import logging
import time
from typing import Any

from django.conf import settings
from django.utils import timezone

from annotation.episodes import observations
from annotation.models import EvaluatorCheck, EvaluatorCheckStatus
from annotation.projects.evaluator_checks import content_sha
from vm_pool import pool
from vm_pool.evaluation.evaluator import EvaluationFailed, Score, evaluate
from vm_pool.setup.runner import SetupFailed, run_setup
from vm_pool.task_files.downloads import DownloadRefused, fetch_task_file

logger = logging.getLogger(__name__)

WAIT_FOR_DESKTOP_S = 120.0
DESKTOP_TRIES = 5
LEASE_S = 900
QUIET_LIMIT_S = 10.0


class NoDesktopYet(Exception):
    """No desktop was ready in time: the job is sent again later."""


def run(check_id: int, sha: str, tries_left: int = 0) -> str:
    """Run one requested check on this host; its status (``pending`` when superseded)."""
    check = (
        EvaluatorCheck.objects.select_related("task__project", "requested_by")
        .filter(pk=check_id)
        .first()
    )
    if check is None or check.content_sha != sha or check.status != EvaluatorCheckStatus.PENDING:
        return "superseded"
    task = check.task
    if content_sha(task) != sha:
        return "superseded"
    template = pool.template_named(task.project.environment_template)
    holder = check.requested_by
    if holder is None:  # its requester's account is gone: nobody to run it for
        return _store(check, sha, EvaluatorCheckStatus.FAILED, "its requester is gone")
    desktop = _lease(template, holder, f"evaluator-check:{check.pk}")
    if desktop is None:
        if tries_left > 0:
            raise NoDesktopYet(f"no {template.name} desktop was ready")
        return _store(check, sha, EvaluatorCheckStatus.FAILED, "no desktop was ready")
    try:
        control = pool.control_for(desktop)
        run_setup(control, task.setup)
        observations.settled_quietly(control, settings.TANDEM_EVALUATION_QUIET_MS, QUIET_LIMIT_S)
        score = evaluate(control, task.evaluator, False, fetch_task_file)
    except (SetupFailed, pool.DesktopError) as error:
        return _store(check, sha, EvaluatorCheckStatus.FAILED, f"the setup: {error}")
    except (EvaluationFailed, DownloadRefused) as error:
        return _store(check, sha, EvaluatorCheckStatus.CANNOT_EVALUATE, str(error))
    except Exception as error:  # never left pending: the reason is the manager's to read
        logger.exception("evaluator check %s failed", check.pk)
        reason = f"the check failed: {type(error).__name__}: {error}"
        return _store(check, sha, EvaluatorCheckStatus.FAILED, reason)
    finally:
        pool.release_desktop(desktop.pk, holder, generation=desktop.generation)
    return _verdict(check, sha, score)


def _lease(template: Any, holder: Any, ref: str) -> Any:
    deadline = time.monotonic() + WAIT_FOR_DESKTOP_S
    while True:
        try:
            return pool.lease_desktop(template, holder, ref, LEASE_S, host=settings.TANDEM_HOST)
        except pool.NoDesktopAvailable:
            if time.monotonic() > deadline:
                return None
            time.sleep(2.0)


def _verdict(check: EvaluatorCheck, sha: str, score: Score) -> str:
    errors = [
        f"metric {entry.get('index')} ({entry.get('func')}): {entry['error']}"
        for entry in score.metrics
        if entry.get("error")
    ]
    details = score.as_json()
    if errors:
        reason = "; ".join(errors)
        return _store(check, sha, EvaluatorCheckStatus.CANNOT_EVALUATE, reason, score, details)
    if score.value > 0:
        reason = f"scores {score.value:g} on the untouched desktop: {score.reason}"
        return _store(check, sha, EvaluatorCheckStatus.PASSES_WITHOUT_WORK, reason, score, details)
    return _store(
        check, sha, EvaluatorCheckStatus.TRUSTED, "scores 0 with no work done", score, details
    )


def _store(
    check: EvaluatorCheck,
    sha: str,
    status: str,
    reason: str,
    score: Score | None = None,
    details: dict[str, Any] | None = None,
) -> str:
    """Keep the verdict, unless the check was requested again meanwhile."""
    EvaluatorCheck.objects.filter(
        pk=check.pk, content_sha=sha, status=EvaluatorCheckStatus.PENDING
    ).update(
        status=status,
        reason=reason[:1000],
        score=None if score is None else score.value,
        details=details or {},
        checked_at=timezone.now(),
    )
    return status
