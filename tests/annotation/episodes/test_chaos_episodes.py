"""Chaos under running episodes on real sandboxed desktops, the loop's jobs run in this process as
the host's worker runs them: an X connection killed while an episode prepares, and an episode
whose desktop lease lapsed and whose desktop was reset and leased to someone else.

Throughout, another desktop of the same host keeps stepping (a click, a settle, an observation,
as its step jobs do) in a thread of the same process: every one of its steps must succeed, and
their times are printed.
"""

import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

from annotation.episodes import loop as episodes
from annotation.episodes import ownership
from annotation.models import Decision, Episode, EpisodeOutcome, Project, Step, Task
from backend.accounts.roles import Role
from tests.vm_pool.test_chaos import click, kill_connections, opened_by, pointer
from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate

pytestmark = pytest.mark.django_db(transaction=True)  # jobs in threads read committed rows


def ready(template: DesktopTemplate, host: str) -> Desktop:
    desktop = pool.start_desktop(pool.create_desktop(template, host).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    return desktop


@contextmanager
def stepping(desktop: Desktop) -> Iterator[list[float]]:
    """Step ``desktop`` in a thread until the block ends; the steps' durations in seconds."""
    times: list[float] = []
    failed: list[BaseException] = []
    stop = threading.Event()

    def run() -> None:
        try:
            while not stop.is_set():
                started = time.perf_counter()
                control = pool.control_for(Desktop.objects.get(pk=desktop.pk))
                control.execute(click(100 + len(times) % 400, 120))
                control.observe(settle=True)
                times.append(time.perf_counter() - started)
        except BaseException as error:
            failed.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield times
    finally:
        stop.set()
        thread.join(30)
    assert not failed, failed
    assert len(times) >= 3, times
    print(
        f"\nthe other desktop's {len(times)} steps meanwhile: median "
        f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
    )


@pytest.fixture
def episode_and_other(loop_settings, make_user, project):
    """An annotator's episode on a desktop of template "chaos", with the task's ``setup`` still
    to run, and a ready desktop of another template on the same host."""
    template = DesktopTemplate.objects.create(name="chaos", width=800, height=600, min_ready=0)
    elsewhere = DesktopTemplate.objects.create(name="other", width=800, height=600, min_ready=0)
    Project.objects.filter(pk=project.pk).update(environment_template="chaos")
    ann = make_user("ann", project, Role.ANNOTATOR)
    ready(template, loop_settings.TANDEM_HOST)
    other = ready(elsewhere, loop_settings.TANDEM_HOST)

    def start(setup: list) -> Episode:
        Task.objects.create(project=project, external_id="t", instruction="Look", setup=setup)
        return episodes.start_episode(ann, Project.objects.filter(pk=project.pk))

    return start, other, ann


def in_thread(function, *args) -> threading.Thread:
    def run() -> None:
        try:
            function(*args)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_an_x_connection_killed_while_an_episode_prepares_is_replaced(episode_and_other):
    start, other, _ = episode_and_other
    episode = start([{"type": "sleep", "parameters": {"seconds": 2}}])
    control = pool.control_for(episode.desktop)
    sockets = opened_by(lambda: control.observe(settle=False))  # the host's X connection

    with stepping(other):
        preparing = in_thread(episodes.prepare_episode, episode.pk)
        time.sleep(0.5)  # the setup runs
        kill_connections(sockets)
        preparing.join(60)
        assert not preparing.is_alive(), "prepare_episode hung"

    # The start is not stuck: the first observation was taken on a new connection.
    episode.refresh_from_db()
    assert episode.ended_at is None, episode.end_reason
    first = Step.objects.select_related("observation").get(episode=episode, index=1)
    assert (first.observation.width, first.observation.height) == (800, 600)


def lease_to_carol(episode: Episode, make_user) -> Desktop:
    """The desktop lease lapses behind the open episode (the reapers run apart): the desktop
    is released, reset by its host, and leased to Carol, whose pointer goes to (300, 300)."""
    assert pool.release_desktop(episode.desktop_id)  # as release_lapsed_desktop_leases does
    desktop = pool.reset_desktop(episode.desktop_id)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    carol = make_user("carol")
    taken = pool.lease_desktop(desktop.template, carol, "carol's task", 60)
    assert taken.pk == episode.desktop_id
    pool.control_for(taken).execute(click(300, 300))
    return taken


def test_an_open_episode_whose_desktop_went_to_someone_else_sees_and_does_nothing(
    episode_and_other, make_user
):
    start, other, ann = episode_and_other
    episode = start([])
    episodes.prepare_episode(episode.pk)  # step 1 is open, and its screen watched
    open_step = Step.objects.get(episode=episode, index=1)

    with stepping(other):
        taken = lease_to_carol(episode, make_user)
        carols = pool.control_for(taken)
        assert carols.launch(["xterm", "-title", "carols"], window_timeout=10).window
        time.sleep(1.5)  # the watch would have stored Carol's new window by now
        # The old episode's step still shows its own screen: nothing of Carol's was stored.
        seen = Step.objects.get(pk=open_step.pk)
        assert (seen.observation_id, seen.reobserved) == (open_step.observation_id, 0)
        # Its decision is refused; the episode ends, saying why; Carol's pointer stays put.
        with pytest.raises(ownership.DesktopNotOwned):
            episodes.decide(
                episode.pk, ann, 1, Decision.CORRECTED, thought="Click.",
                action={"type": "click", "point": [700, 500]},
            )  # fmt: skip
        assert pointer(carols) == (300, 300)

    episode.refresh_from_db()
    assert (episode.outcome, episode.end_reason) == (
        EpisodeOutcome.ENV_FAILED,
        ownership.DESKTOP_LOST,
    )
    assert Step.objects.get(pk=open_step.pk).decided_at is None
    now = Desktop.objects.get(pk=taken.pk)
    assert (now.status, now.leased_by_id) == (DesktopStatus.LEASED, taken.leased_by_id)


def test_a_decided_step_never_runs_on_the_next_holders_desktop(episode_and_other, make_user):
    start, other, ann = episode_and_other
    episode = start([])
    episodes.prepare_episode(episode.pk)
    episodes.decide(
        episode.pk, ann, 1, Decision.CORRECTED, thought="Click.",
        action={"type": "click", "point": [700, 500]},
    )  # fmt: skip
    step = Step.objects.get(episode=episode, index=1)

    with stepping(other):
        taken = lease_to_carol(episode, make_user)  # before the step's job ran
        episodes.execute_step(step.pk)  # the job, late
        assert pointer(pool.control_for(taken)) == (300, 300)  # no click of the old episode

    episode.refresh_from_db()
    assert (episode.outcome, episode.end_reason) == (
        EpisodeOutcome.ENV_FAILED,
        ownership.DESKTOP_LOST,
    )
    assert not episode.steps.filter(index=2).exists()  # no screen of Carol's stored
