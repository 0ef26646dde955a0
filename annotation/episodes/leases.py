"""An episode's hold on its task and its desktop: heartbeats, pausing, ending.

Rules:

- An episode owns its desktop at the generation it leased (``annotation.episodes.ownership``).
  The loop (``annotation.episodes.loop``) checks it before it prepares, decides, executes or stores
  an observation; a desktop that is no longer the episode's ends it ``env_failed``, saying so.
- The desktop's lease is the task's lease plus the grace period, so that the episode, not the
  desktop reaper, decides when an absent annotator's desktop goes back to the pool.
- Away is not gone: when the annotator's heartbeats stop past the task's lease, the episode is
  *paused* (``pause_lapsed_episodes``, periodic) and its task and desktop are kept for
  ``TANDEM_EPISODE_GRACE_SECONDS``. A heartbeat, a decision or starting work again resumes it
  with fresh leases. After the grace the episode ends ``abandoned`` with the reason, its
  desktop goes back to the pool and its task to the queue.
- Ending is once: it releases only the desktop lease the episode holds, and submits the task
  (finished, call_user, max steps) or gives it back to the pool.
"""

import contextlib
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.episodes import scoring
from annotation.episodes.events import tell
from annotation.episodes.ownership import (
    DESKTOP_LOST,
    DesktopNotOwned,
    EpisodeError,
    desktop_lease_seconds,
    owned_when_read,
)
from annotation.job_names import CHECK_QUALITY, QUEUES
from annotation.models import (
    Demonstration,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    Task,
    TaskEvent,
    TaskStatus,
)
from annotation.projects import queue
from backend.accounts.models import User
from backend.celery import send_after_commit
from backend.notifications import notify_user
from vm_pool import pool
from vm_pool.recording.gate import end_recording

# The outcomes that submit the task an episode held; the others give it back to the pool.
SUBMITTING = (EpisodeOutcome.FINISHED, EpisodeOutcome.CALL_USER, EpisodeOutcome.MAX_STEPS)

# --- ending --------------------------------------------------------------------------------


def end_episode(episode_id: int, outcome: str, reason: str) -> bool:
    """End an episode once: release its desktop, submit its task or give it back to the pool."""
    with transaction.atomic():
        episode = Episode.objects.select_for_update().select_related("task").get(pk=episode_id)
        if episode.ended_at is not None:
            return False
        episode.ended_at = timezone.now()
        episode.outcome = outcome
        episode.end_reason = reason[:300]
        episode.save(update_fields=["ended_at", "outcome", "end_reason"])
        # A person driving the desktop stops here: the gate passes nothing more of theirs.
        for driving in Demonstration.objects.filter(episode=episode, ended_at__isnull=True):
            end_recording(driving.recording_id)
            Demonstration.objects.filter(pk=driving.pk).update(ended_at=episode.ended_at)
        if scoring.scores(episode, outcome):
            scoring.start(episode)  # it releases the desktop once the score is stored
        elif episode.desktop_id is not None:
            # Only the lease this episode holds: a desktop reset since may be someone else's.
            pool.release_desktop(
                episode.desktop_id, episode.annotator, generation=episode.desktop_generation
            )
        task = Task.objects.select_for_update().get(pk=episode.task_id)
        held = task.status == TaskStatus.IN_PROGRESS and task.assignee_id == episode.annotator_id
        if held and episode.mode == EpisodeMode.INTERACTIVE:  # a rollout never holds its task
            if outcome in SUBMITTING:
                queue.end_held_task(
                    task, TaskStatus.SUBMITTED, TaskEvent.Kind.SUBMITTED, episode.annotator
                )
            else:
                queue.end_held_task(
                    task, TaskStatus.QUEUED, TaskEvent.Kind.RELEASED, episode.annotator, reason
                )
        if episode.mode == EpisodeMode.INTERACTIVE:
            send_after_commit(CHECK_QUALITY, [episode.pk], QUEUES[CHECK_QUALITY])
        tell(episode.pk, "ended", {"outcome": outcome, "reason": reason})
    return True


def heartbeat(episode_id: int, user: User) -> None:
    """Keep the task's lease and the desktop's lease alive together (resuming a paused episode)."""
    episode = Episode.objects.select_related("task").get(pk=episode_id, annotator=user)
    task = episode.task
    if episode.ended_at is not None or task.lease_id is None:
        raise EpisodeError("This episode has ended.")
    if episode.paused_at is not None:
        resume(episode)
        return
    queue.heartbeat(task.pk, task.lease_id, user)
    if episode.desktop_id is not None:
        pool.renew_desktop_lease(
            episode.desktop_id, user, desktop_lease_seconds(), episode.desktop_generation
        )


def refuse_without_desktop(episode_id: int) -> None:
    """A running episode whose desktop is no longer its own ends, and its decision is refused."""
    episode = Episode.objects.select_related("desktop").get(pk=episode_id)
    if episode.ended_at is None and not owned_when_read(episode):
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, DESKTOP_LOST)
        raise DesktopNotOwned(f"Episode {episode.pk} ended: {DESKTOP_LOST}.")


# --- away and back: pausing and resuming ---------------------------------------------------


def pause_lapsed_episodes(now: Any = None) -> dict[str, int]:
    """Periodic: pause the running episodes whose task lease lapsed (the annotator went away),
    keeping their task and desktop for the grace period; end those paused past it."""
    now = now or timezone.now()
    grace = timedelta(seconds=settings.TANDEM_EPISODE_GRACE_SECONDS)
    done = {"paused": 0, "ended": 0}
    lapsed = Episode.objects.filter(
        ended_at__isnull=True,
        mode=EpisodeMode.INTERACTIVE,  # a rollout has no annotator to go away
        task__status=TaskStatus.IN_PROGRESS,
        task__lease_expires_at__lte=now,
    ).values_list("pk", flat=True)
    for episode_id in list(lapsed):
        with transaction.atomic():
            episode = (
                Episode.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("task")
                .filter(pk=episode_id, ended_at__isnull=True)
                .first()
            )
            if episode is None:
                continue
            if episode.paused_at is None:
                _pause(episode, now, grace)
                done["paused"] += 1
                continue
        minutes = settings.TANDEM_EPISODE_GRACE_SECONDS // 60
        reason = f"away for more than {minutes} min: the desktop went back to the pool"
        if end_episode(episode_id, EpisodeOutcome.ABANDONED, reason):
            done["ended"] += 1
    return done


def _pause(episode: Episode, now: Any, grace: timedelta) -> None:
    task = Task.objects.select_for_update().get(pk=episode.task_id)
    episode.paused_at = now
    episode.save(update_fields=["paused_at"])
    seconds = settings.TANDEM_LEASE_SECONDS
    reason = f"no heartbeat for {seconds} s: paused, kept for the annotator"
    queue.keep_for(task, now + grace, TaskEvent.Kind.PAUSED, reason)
    _extend_desktop_lease(episode, int(grace.total_seconds()) + seconds, now)
    tell(episode.pk, "paused", {"reason": reason})
    notify_user(episode.annotator_id, "episode_paused", {"episode": episode.pk, "reason": reason})


def resume(episode: Episode) -> None:
    """The annotator is back: a paused episode runs again with fresh leases."""
    with transaction.atomic():
        locked = Episode.objects.select_for_update().get(pk=episode.pk)
        if locked.ended_at is None and locked.paused_at is not None:
            unpause(locked)
            episode.paused_at = None


def unpause(episode: Episode) -> None:
    """Within the caller's transaction, with the episode's row locked."""
    task = Task.objects.select_for_update().get(pk=episode.task_id)
    episode.paused_at = None
    episode.save(update_fields=["paused_at"])
    queue.keep_for(task, timezone.now() + queue.lease_duration(), TaskEvent.Kind.RESUMED, "")
    _extend_desktop_lease(episode, desktop_lease_seconds(), timezone.now())
    tell(episode.pk, "resumed", {})


def _extend_desktop_lease(episode: Episode, seconds: int, now: Any) -> None:
    """A desktop that went to someone else meanwhile keeps its new lease: the episode finds
    out when it next uses the desktop (``owns_desktop``)."""
    if episode.desktop_id is None or episode.desktop_generation is None:
        return
    with contextlib.suppress(pool.DesktopLeaseLost):
        pool.renew_desktop_lease(
            episode.desktop_id, episode.annotator_id, seconds, episode.desktop_generation, now
        )
