"""A rollout's episode is the model's alone: nobody decides its steps, a person cannot send the
decision ``auto``, and people's figures (acceptance, throughput) never count a rollout's steps."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.episodes import loop
from annotation.episodes.ownership import EpisodeError
from annotation.flywheel import figures as stats
from annotation.models import Decision, Episode, EpisodeMode, Step

pytestmark = pytest.mark.django_db


def test_nobody_decides_a_rollouts_step_and_it_stays_open(open_episode):
    episode, step, ann = open_episode
    Episode.objects.filter(pk=episode.pk).update(mode=EpisodeMode.AUTONOMOUS)
    with pytest.raises(EpisodeError, match="nobody decides"):
        loop.decide(episode.pk, ann, 1, "accepted", proposal_rank=0)
    step.refresh_from_db()
    assert (step.decision, step.decided_at, step.final_action) == ("", None, None)


def test_a_person_cannot_send_the_decision_auto(open_episode):
    episode, step, ann = open_episode
    with pytest.raises(loop.InvalidDecision, match="unknown decision 'auto'"):
        loop.decide(episode.pk, ann, 1, "auto", proposal_rank=0)
    step.refresh_from_db()
    assert step.decided_at is None


def test_people_s_acceptance_leaves_a_rollouts_steps_out(open_episode, project):
    episode, step, ann = open_episode
    loop.decide(episode.pk, ann, 1, "accepted", proposal_rank=0)
    rollout = Episode.objects.create(task=episode.task, annotator=ann, mode=EpisodeMode.AUTONOMOUS)
    Step.objects.create(
        episode=rollout,
        index=1,
        observation=step.observation,
        decision=Decision.AUTO,
        final_action={"type": "wait"},
        decided_at=timezone.now(),
    )
    now = timezone.now()
    span = stats.window("day", now - timedelta(days=1), now + timedelta(minutes=1))
    counted = stats.acceptance(project, span)
    total = counted["versions"][0]["total"]
    assert (total["accepted"], stats._rate(total)) == (1, 1.0)
    assert "auto" not in total
