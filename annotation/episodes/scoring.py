"""An ended episode scored by its task's OSWorld evaluator (``vm_pool.evaluation``).

When an episode ends with work to score (``finished``, ``call_user``, ``max_steps``) and its
task has an evaluator, its desktop is not released at once: the episode is marked ``pending``
and ``evaluate_episode`` runs on the desktop's host, on the desktop as the annotator left it.
Before anything is read, the desktop is left to come to rest: the screen must stay the same
for ``TANDEM_EVALUATION_QUIET_MS`` (at most ``EVALUATION_QUIET_LIMIT_S``). A program finishes
what the last step started: GTK's Save As dialog closes and its file is written about half a
second after the Enter that confirmed it, while a model answering "finished" at once, or a
person quick on the button, has already ended the episode. OSWorld sleeps a fixed 20 s there.
It runs the postconfig and the getters here, the metrics in the evaluation jail
(``vm_pool.evaluation.jail``: what the desktop left is opened only there, with limits), stores
the score (``task_success``, 0–1) and each metric's details on the episode, and only then
releases the desktop (whose reset follows). An evaluator that cannot run stores ``failed`` with
its reason, never a score; one whose files broke a limit of the jail stores ``failed`` with the
limit named (``limit`` in ``evaluation``: "memory", "cpu", "time", "spreadsheet cells", …), and
is not sent again.

The desktop stays the episode's generation throughout: if it was lost meanwhile (its lease
lapsed, the pool reset it), nothing is read from whatever it shows now.

**A lost job.** Each sending of the job is an attempt (``Episode.evaluation_attempt``); the job
runs only the attempt in force, claims it (``started_at`` in ``evaluation``) and beats
``evaluation_beat_at`` from a thread while it works. A worker killed with the job taken (running,
or only fetched ahead) leaves it pending and silent; the broker would give it back only after its
visibility timeout, an hour. ``recover_lost`` (periodic) finds a pending evaluation silent for
``TANDEM_EVALUATION_STALE_SECONDS``: one that never started, or whose evaluator only reads the
desktop, is sent again as the next attempt; one whose postconfig may have run (it changes the
desktop: saves, closes, types) is not read again from a desktop half-changed, and ends ``failed``
with the reason, its desktop released, as does one lost ``MAX_ATTEMPTS`` times. A job still at
work ``EVALUATION_LEASE_S`` after it started stops beating; one found silent after beating that
long is taken for stuck, ends ``failed`` with the limit "time" and is not sent again. A
superseded attempt stores nothing and releases nothing.
"""

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.episodes import observations
from annotation.episodes.events import tell
from annotation.episodes.ownership import owns_desktop
from annotation.job_names import EVALUATE_EPISODE
from annotation.models import Episode, EpisodeOutcome, EvaluationStatus
from backend.celery import send_after_commit
from backend.heartbeats import Heartbeat
from vm_pool import pool
from vm_pool.evaluation.evaluator import EvaluationFailed, NotScored, evaluate
from vm_pool.models import host_queue
from vm_pool.task_files.downloads import DownloadRefused, fetch_task_file

logger = logging.getLogger(__name__)


SCORED_OUTCOMES = (EpisodeOutcome.FINISHED, EpisodeOutcome.CALL_USER, EpisodeOutcome.MAX_STEPS)
# How long the desktop stays leased for its evaluation (postconfigs sleep, documents are read),
# and how long its job may take: past it, its heartbeat stops and it is taken for stuck.
EVALUATION_LEASE_S = 600
# How long the wait for a still screen may take: a clock or a video never stands still.
EVALUATION_QUIET_LIMIT_S = 10.0
MAX_ATTEMPTS = 3  # a job lost this often is not sent again: something kills it
LOST_DESKTOP = {"error": "the desktop was lost"}
LOST_MIDWAY = {
    "error": "its worker was lost during the evaluation, after the postconfig may have changed "
    "the desktop: it is not read again"
}
LOST_TOO_OFTEN = {"error": f"its job was lost {MAX_ATTEMPTS} times"}
STUCK = {"error": f"its job was still at work after {EVALUATION_LEASE_S} s", "limit": "time"}


def scores(episode: Episode, outcome: str) -> bool:
    """Is this ending one the task's evaluator scores, on a desktop the episode still owns?"""
    return (
        outcome in SCORED_OUTCOMES
        and bool(episode.task.evaluator.get("func"))
        and episode.desktop_id is not None
        and owns_desktop(episode)
    )


def stale_seconds() -> int:
    """A pending evaluation silent this long lost its job."""
    return int(settings.TANDEM_EVALUATION_STALE_SECONDS)


def start(episode: Episode) -> None:
    """Inside the ending's transaction: keep the desktop and queue the evaluation."""
    episode.evaluation_status = EvaluationStatus.PENDING
    _send(episode)


def _send(episode: Episode) -> None:
    """Queue the evaluation's next attempt (after the transaction commits)."""
    episode.evaluation_attempt += 1
    episode.evaluation_beat_at = timezone.now()
    episode.evaluation = {}
    episode.save(
        update_fields=[
            "evaluation_status",
            "evaluation_attempt",
            "evaluation_beat_at",
            "evaluation",
        ]
    )
    assert episode.desktop is not None
    send_after_commit(
        EVALUATE_EPISODE, [episode.pk, episode.evaluation_attempt], host_queue(episode.desktop.host)
    )


def _in_force(episode_id: int, attempt: int) -> Any:
    return Episode.objects.filter(
        pk=episode_id, evaluation_status=EvaluationStatus.PENDING, evaluation_attempt=attempt
    )


def _store(
    episode_id: int, attempt: int, status: str, success: float | None, details: dict[str, Any]
) -> bool:
    """Store the result of the attempt in force; False (nothing stored) for any other."""
    stored = _in_force(episode_id, attempt).update(
        evaluation_status=status, task_success=success, evaluation=details
    )
    if stored:
        tell(episode_id, "evaluated", {"status": status, "task_success": success})
    return bool(stored)


def evaluate_episode(episode_id: int, attempt: int | None = None) -> None:
    """On the desktop's host: score the ended episode, then release its desktop. ``attempt``:
    the attempt this job was sent as (a job queued before attempts were counted is the first)."""
    attempt = attempt or 1
    now = timezone.now()
    claimed = (
        _in_force(episode_id, attempt)
        .exclude(evaluation__has_key="started_at")
        .update(evaluation={"started_at": now.isoformat()}, evaluation_beat_at=now)
    )
    if not claimed:
        return  # scored already, superseded, or another delivery of this attempt runs it
    episode = Episode.objects.select_related("task", "desktop", "annotator").get(pk=episode_id)
    desktop_id = episode.desktop_id
    if episode.desktop is None or desktop_id is None or not owns_desktop(episode):
        _store(episode.pk, attempt, EvaluationStatus.FAILED, None, LOST_DESKTOP)
        return
    stored = False
    try:
        rows = _in_force(episode_id, attempt)
        with Heartbeat(rows, stale_seconds() / 4, "evaluation_beat_at", EVALUATION_LEASE_S):
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
        details = {"error": str(error)[:1000]}
        if isinstance(error, NotScored) and error.limit:
            details["limit"] = error.limit
        stored = _store(episode.pk, attempt, EvaluationStatus.FAILED, None, details)
    except Exception as error:  # never left pending for recovery to send into it again
        logger.exception("episode %s: its evaluation failed", episode.pk)
        reason = {"error": f"the evaluation failed: {type(error).__name__}: {error}"[:1000]}
        stored = _store(episode.pk, attempt, EvaluationStatus.FAILED, None, reason)
    else:
        if owns_desktop(episode):
            stored = _store(
                episode.pk, attempt, EvaluationStatus.SCORED, score.value, score.as_json()
            )
        else:  # reset while it was read: what was read may be another desktop's
            stored = _store(episode.pk, attempt, EvaluationStatus.FAILED, None, LOST_DESKTOP)
    finally:
        if stored:  # a superseded attempt leaves the desktop to the attempt in force
            _release(episode)


def _release(episode: Episode) -> None:
    assert episode.desktop_id is not None
    with transaction.atomic():
        pool.release_desktop(
            episode.desktop_id, episode.annotator, generation=episode.desktop_generation
        )


def _ran_past_limit(episode: Episode) -> bool:
    """Did its job beat until its limit (stuck), rather than fall silent early (killed)?"""
    started = datetime.fromisoformat(episode.evaluation["started_at"])
    if timezone.is_naive(started):
        started = started.replace(tzinfo=UTC)
    beat = episode.evaluation_beat_at
    alive = timedelta(seconds=EVALUATION_LEASE_S - stale_seconds())
    return beat is not None and beat - started >= alive


def recover_lost(now: Any = None) -> int:
    """Periodic: take up the pending evaluations whose job went silent; how many."""
    now = now or timezone.now()
    before = now - timedelta(seconds=stale_seconds())
    silent = Episode.objects.filter(
        evaluation_status=EvaluationStatus.PENDING, evaluation_beat_at__lt=before
    )
    return sum(_recover(pk, before) for pk in list(silent.values_list("pk", flat=True)))


def _recover(episode_id: int, before: Any) -> bool:
    with transaction.atomic():
        episode = (
            Episode.objects.select_for_update(of=("self",))
            .select_related("task", "desktop", "annotator")
            .filter(
                pk=episode_id,
                evaluation_status=EvaluationStatus.PENDING,
                evaluation_beat_at__lt=before,
            )
            .first()
        )
        if episode is None:  # it spoke meanwhile, or ended
            return False
        attempt = episode.evaluation_attempt
        started = "started_at" in episode.evaluation
        if episode.desktop is None or not owns_desktop(episode):
            _store(episode.pk, attempt, EvaluationStatus.FAILED, None, LOST_DESKTOP)
        elif started and _ran_past_limit(episode):  # not sent again into what stuck it
            _store(episode.pk, attempt, EvaluationStatus.FAILED, None, STUCK)
            _release(episode)
        elif (started and episode.task.evaluator.get("postconfig")) or attempt >= MAX_ATTEMPTS:
            reason = LOST_MIDWAY if attempt < MAX_ATTEMPTS else LOST_TOO_OFTEN
            _store(episode.pk, attempt, EvaluationStatus.FAILED, None, reason)
            _release(episode)
        else:
            _send(episode)
    logger.info("episode %s: its evaluation's job (attempt %s) was lost", episode_id, attempt)
    return True
