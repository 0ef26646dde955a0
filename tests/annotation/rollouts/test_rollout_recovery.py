"""An ended rollout whose validation's job was lost with its worker (a retry held while the
evaluator scored, a job fetched ahead) is validated again: the periodic check finds its heartbeat
stale and sends the job again, once; a validation that is alive is left alone. (A worker killed for
real, mid-batch and mid-evaluation: ``tests/annotation/rollouts/test_rollouts.py``.)"""

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import (
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    Rollout,
    RolloutBatch,
    RolloutStatus,
    Task,
)
from annotation.rollouts import batches as rollouts
from annotation.rollouts import validation
from model_serving.models import ModelVersion

pytestmark = pytest.mark.django_db


@pytest.fixture
def ended(make_user, project):
    """Two rollouts that ended: one silent for longer than the stale time, one just now."""
    engineer = make_user("engineer")
    task = Task.objects.create(project=project, external_id="t1", instruction="Do t1")
    version = ModelVersion.objects.create(
        name="ui-tars-a", base_model="ui-tars", serving_status=ModelVersion.Serving.SERVING
    )
    batch = RolloutBatch.objects.create(
        project=project, model_version=version, task_ids=[task.pk], created_by=engineer
    )
    now = timezone.now()
    rows = []
    for sample, beat in enumerate((now - timedelta(seconds=rollouts.stale_seconds() + 5), now)):
        episode = Episode.objects.create(
            task=task,
            mode=EpisodeMode.AUTONOMOUS,
            annotator=engineer,
            ended_at=now,
            outcome=EpisodeOutcome.FINISHED,
        )
        rows.append(
            Rollout.objects.create(
                batch=batch,
                task=task,
                sample=sample,
                episode=episode,
                status=RolloutStatus.ENDED,
                stop_reason="finished",
                attempt=1,
                heartbeat_at=beat,
                ended_at=now,
            )
        )
    return rows


def test_a_validation_gone_silent_is_sent_again_once_and_a_live_one_is_left(ended, caplog):
    silent, alive = ended
    alive_beat = alive.heartbeat_at
    with caplog.at_level(logging.INFO, logger="annotation.rollouts.batches"):
        rollouts.recover_stale()
        rollouts.recover_stale()  # the job sent by the first check is not silent yet
    sent = [r.getMessage() for r in caplog.records if "validation's job was lost" in r.getMessage()]
    assert sent == [f"rollout {silent.pk}: its validation's job was lost; sent again"]
    silent.refresh_from_db()
    alive.refresh_from_db()
    assert silent.heartbeat_at > alive_beat and alive.heartbeat_at == alive_beat
    assert (silent.status, alive.status) == (RolloutStatus.ENDED, RolloutStatus.ENDED)

    # The job sent again, as its worker runs it: the rollout is validated and stays so.
    validation.validate(silent.pk)
    silent.refresh_from_db()
    assert silent.status == RolloutStatus.VALIDATED and silent.validation["parts"]
    later = timezone.now() + timedelta(seconds=rollouts.stale_seconds() + 1)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="annotation.rollouts.batches"):
        rollouts.recover_stale(now=later)
    again = {r.getMessage() for r in caplog.records if "validation" in r.getMessage()}
    assert again == {f"rollout {alive.pk}: its validation's job was lost; sent again"}
