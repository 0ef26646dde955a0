"""An episode's hold on its desktop and task: ownership of one desktop generation, pausing an
absent annotator's episode, resuming it, and ending it after the grace period.

On database rows (no desktop runs, nothing is sent: the tests' transactions roll back), except
the last test, which runs a real desktop to show that an episode whose desktop went to someone
else can neither act on it nor read its screen.
"""

import uuid
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from annotation.episodes import leases
from annotation.episodes import loop as episodes
from annotation.episodes import ownership as episode_ownership
from annotation.models import (
    Decision,
    Episode,
    EpisodeOutcome,
    Project,
    Step,
    Task,
    TaskEvent,
    TaskStatus,
)
from annotation.projects.queue import lease_duration, return_lapsed_leases
from tests.conftest import MODEL_CLICK
from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus

CLICK = MODEL_CLICK


@pytest.fixture
def held(open_episode):
    """An annotator's running episode on a leased desktop row, with an open step."""
    episode, _, ann = open_episode
    return episode, ann


def after_the_lease() -> timezone.datetime:
    return timezone.now() + lease_duration() + timedelta(seconds=1)


@pytest.mark.django_db
def test_an_absent_annotators_episode_is_paused_and_keeps_its_task_and_desktop(held, settings):
    episode, ann = held
    later = after_the_lease()
    assert leases.pause_lapsed_episodes(now=later) == {"paused": 1, "ended": 0}
    assert return_lapsed_leases(now=later) == 0  # the task is not given away

    episode.refresh_from_db()
    task = Task.objects.get(pk=episode.task_id)
    grace = timedelta(seconds=settings.TANDEM_EPISODE_GRACE_SECONDS)
    assert episode.paused_at == later and episode.ended_at is None
    assert task.status == TaskStatus.IN_PROGRESS and task.assignee == ann
    assert task.lease_expires_at == later + grace
    desktop = Desktop.objects.get(pk=episode.desktop_id)
    assert desktop.status == DesktopStatus.LEASED and desktop.leased_by == ann
    assert desktop.lease_expires_at > later + grace  # the desktop reaper leaves it alone
    assert TaskEvent.objects.filter(task=task, kind=TaskEvent.Kind.PAUSED).count() == 1
    assert episodes.episode_state(episode)["paused"] is True
    # A second pass in the grace period changes nothing.
    assert leases.pause_lapsed_episodes(now=later + grace / 2) == {"paused": 0, "ended": 0}


@pytest.mark.django_db
def test_a_heartbeat_or_starting_work_again_resumes_a_paused_episode(held, project):
    episode, ann = held
    leases.pause_lapsed_episodes(now=after_the_lease())
    leases.heartbeat(episode.pk, ann)
    episode.refresh_from_db()
    assert episode.paused_at is None
    task = Task.objects.get(pk=episode.task_id)
    assert task.lease_expires_at > timezone.now() + lease_duration() - timedelta(seconds=5)
    assert TaskEvent.objects.filter(task=task, kind=TaskEvent.Kind.RESUMED).count() == 1

    leases.pause_lapsed_episodes(now=after_the_lease())
    resumed = episodes.start_episode(ann, Project.objects.filter(pk=project.pk))
    assert resumed.pk == episode.pk and resumed.paused_at is None
    assert Episode.objects.get(pk=episode.pk).paused_at is None


@pytest.mark.django_db
def test_a_decision_resumes_a_paused_episode(held):
    episode, ann = held
    leases.pause_lapsed_episodes(now=after_the_lease())
    receipt = episodes.decide(episode.pk, ann, 1, Decision.ACCEPTED, proposal_rank=0)
    assert not receipt.duplicate
    assert Episode.objects.get(pk=episode.pk).paused_at is None


@pytest.mark.django_db
def test_after_the_grace_the_episode_ends_abandoned_and_gives_back_task_and_desktop(held, settings):
    episode, ann = held
    paused_at = after_the_lease()
    leases.pause_lapsed_episodes(now=paused_at)
    grace = timedelta(seconds=settings.TANDEM_EPISODE_GRACE_SECONDS)
    assert leases.pause_lapsed_episodes(now=paused_at + grace + timedelta(seconds=1)) == {
        "paused": 0,
        "ended": 1,
    }
    episode.refresh_from_db()
    assert episode.outcome == EpisodeOutcome.ABANDONED
    assert "away for more than 15 min" in episode.end_reason
    task = Task.objects.get(pk=episode.task_id)
    assert (task.status, task.assignee, task.lease_id) == (TaskStatus.QUEUED, None, None)
    desktop = Desktop.objects.get(pk=episode.desktop_id)
    assert desktop.status == DesktopStatus.RESETTING and desktop.leased_by is None


def lease_to_someone_else(episode: Episode, make_user) -> Desktop:
    """The episode's desktop lease ends behind its back; the desktop is reset and leased on."""
    assert pool.release_desktop(episode.desktop_id)
    Desktop.objects.filter(pk=episode.desktop_id).update(status=DesktopStatus.READY)
    desktop = Desktop.objects.get(pk=episode.desktop_id)
    return pool.lease_desktop(desktop.template, make_user(f"next-{uuid.uuid4().hex[:6]}"), "x", 60)


@pytest.mark.django_db
def test_an_episode_whose_desktop_went_to_someone_else_cannot_decide(held, make_user):
    episode, ann = held
    taken = lease_to_someone_else(episode, make_user)
    with pytest.raises(episode_ownership.DesktopNotOwned, match="no longer this episode's"):
        episodes.decide(episode.pk, ann, 1, Decision.ACCEPTED, proposal_rank=0)
    episode.refresh_from_db()
    assert episode.outcome == EpisodeOutcome.ENV_FAILED
    assert Step.objects.get(episode=episode, index=1).decided_at is None  # nothing recorded
    # Ending the old episode left the next holder's lease alone.
    now = Desktop.objects.get(pk=taken.pk)
    assert (now.status, now.leased_by_id, now.generation) == (
        DesktopStatus.LEASED,
        taken.leased_by_id,
        taken.generation,
    )


@pytest.mark.django_db
def test_an_episode_whose_desktop_went_to_someone_else_neither_executes_nor_observes(
    held, make_user
):
    episode, ann = held
    episodes.decide(episode.pk, ann, 1, Decision.ACCEPTED, proposal_rank=0)
    taken = lease_to_someone_else(episode, make_user)
    step = Step.objects.get(episode=episode, index=1)
    episodes.execute_step(step.pk)  # the job, as the host's worker would run it
    episode.refresh_from_db()
    assert episode.outcome == EpisodeOutcome.ENV_FAILED
    assert episode.end_reason == episode_ownership.DESKTOP_LOST
    assert not episode.steps.filter(index=2).exists()  # no screen of the next holder stored
    assert Desktop.objects.get(pk=taken.pk).leased_by_id == taken.leased_by_id


@pytest.mark.django_db
def test_the_stream_of_an_episode_whose_desktop_went_to_someone_else_is_refused(
    held, make_user, client_for
):
    episode, ann = held
    assert client_for(ann).post(f"/api/episodes/{episode.pk}/stream/").status_code == 201
    lease_to_someone_else(episode, make_user)
    response = client_for(ann).post(f"/api/episodes/{episode.pk}/stream/")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "desktop_not_owned"


@pytest.mark.django_db
def test_a_paused_episode_says_until_when_it_is_kept(held, settings, client_for):
    episode, ann = held
    later = after_the_lease()
    leases.pause_lapsed_episodes(now=later)
    shown = client_for(ann).get(f"/api/episodes/{episode.pk}/").json()
    grace = timedelta(seconds=settings.TANDEM_EPISODE_GRACE_SECONDS)
    assert shown["kept_until"] is not None
    assert datetime.fromisoformat(shown["kept_until"].replace("Z", "+00:00")) == later + grace
