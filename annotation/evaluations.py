"""An ended episode scored by its task's OSWorld evaluator (``vm_pool.evaluation``).

When an episode ends with work to score (``finished``, ``call_user``, ``max_steps``) and its
task has an evaluator, its desktop is not released at once: the episode is marked ``pending``
and ``evaluate_episode`` runs on the desktop's host, on the desktop as the annotator left it.
Before anything is read, the desktop is left to come to rest: the screen must stay the same
for ``TANDEM_EVALUATION_QUIET_MS`` (at most ``EVALUATION_QUIET_LIMIT_S``). A program finishes
what the last step started: GTK's Save As dialog closes and its file is written about half a
second after the Enter that confirmed it, while a model answering "finished" at once, or a
person quick on the button, has already ended the episode. OSWorld sleeps a fixed 20 s there.
It runs the postconfig, the getters and the metrics, stores the score (``task_success``, 0–1)
and each metric's details on the episode, and only then releases the desktop (whose reset
follows). An evaluator that cannot run stores ``failed`` with its reason, never a score.

The desktop stays the episode's generation throughout: if it was lost meanwhile (its lease
lapsed, the pool reset it), nothing is read from whatever it shows now.
"""

import logging
from typing import Any

from django.conf import settings
from django.db import transaction

from annotation import observations
from annotation.episode_leases import owns_desktop, tell
from annotation.models import Episode, EpisodeOutcome, EvaluationStatus
from backend.celery import send_after_commit
from vm_pool import pool
from vm_pool.downloads import DownloadRefused, fetch_task_file
from vm_pool.models import host_queue

logger = logging.getLogger(__name__)

SCORED_OUTCOMES = (EpisodeOutcome.FINISHED, EpisodeOutcome.CALL_USER, EpisodeOutcome.MAX_STEPS)
# How long the desktop stays leased for its evaluation (postconfigs sleep, documents are read).
EVALUATION_LEASE_S = 600
# How long the wait for a still screen may take: a clock or a video never stands still.
EVALUATION_QUIET_LIMIT_S = 10.0


def scores(episode: Episode, outcome: str) -> bool:
    """Is this ending one the task's evaluator scores, on a desktop the episode still owns?"""
    return (
        outcome in SCORED_OUTCOMES
        and bool(episode.task.evaluator.get("func"))
        and episode.desktop_id is not None
        and owns_desktop(episode)
    )


def start(episode: Episode) -> None:
    """Inside the ending's transaction: keep the desktop and queue the evaluation."""
    episode.evaluation_status = EvaluationStatus.PENDING
    episode.save(update_fields=["evaluation_status"])
    assert episode.desktop is not None
    send_after_commit(
        "annotation.jobs.evaluate_episode", [episode.pk], host_queue(episode.desktop.host)
    )


def _store(episode_id: int, status: str, success: float | None, details: dict[str, Any]) -> None:
    Episode.objects.filter(pk=episode_id).update(
        evaluation_status=status, task_success=success, evaluation=details
    )
    tell(episode_id, "evaluated", {"status": status, "task_success": success})


def evaluate_episode(episode_id: int) -> None:
    """On the desktop's host: score the ended episode, then release its desktop."""
    from vm_pool.evaluation.evaluator import EvaluationFailed, evaluate

    episode = Episode.objects.select_related("task", "desktop", "annotator").get(pk=episode_id)
    if episode.evaluation_status != EvaluationStatus.PENDING:
        return  # a duplicate delivery: the first one scored it
    desktop_id = episode.desktop_id
    if episode.desktop is None or desktop_id is None or not owns_desktop(episode):
        _store(episode.pk, EvaluationStatus.FAILED, None, {"error": "the desktop was lost"})
        return
    try:
        pool.renew_desktop_lease(
            desktop_id, episode.annotator, EVALUATION_LEASE_S, episode.desktop_generation
        )
        control = pool.control_for(episode.desktop)
        observations.settled_quietly(
            control, settings.TANDEM_EVALUATION_QUIET_MS, EVALUATION_QUIET_LIMIT_S
        )
        gave_up = episode.outcome == EpisodeOutcome.CALL_USER
        score = evaluate(control, episode.task.evaluator, gave_up, fetch_task_file)
    except (EvaluationFailed, pool.DesktopError, pool.DesktopLeaseLost, DownloadRefused) as error:
        logger.info("episode %s not scored: %s", episode.pk, error)
        _store(episode.pk, EvaluationStatus.FAILED, None, {"error": str(error)[:1000]})
    else:
        if owns_desktop(episode):
            _store(episode.pk, EvaluationStatus.SCORED, score.value, score.as_json())
        else:  # reset while it was read: what was read may be another desktop's
            _store(episode.pk, EvaluationStatus.FAILED, None, {"error": "the desktop was lost"})
    finally:
        with transaction.atomic():
            pool.release_desktop(
                desktop_id, episode.annotator, generation=episode.desktop_generation
            )
