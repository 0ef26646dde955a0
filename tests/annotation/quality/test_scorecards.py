"""Annotator scorecards (``annotation.quality.scorecards``): each figure from episodes, steps,
reviews and scores written here, over the API as JSON and CSV; an annotator reads only their
own."""

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.episodes.reviews import review_episode
from annotation.models import Decision, Episode, EpisodeMode, Step, Task
from backend.accounts.roles import Role
from tests.support.pngs import solid_png
from vm_pool.screen.screenshots import store_screenshot

pytestmark = pytest.mark.django_db
START = timezone.now() - timedelta(days=1)


@pytest.fixture
def worked(project, make_user, settings, tmp_path):
    """Two annotators' episodes: ann's two (one accepted, one rejected, both scored), bob's one
    demonstrated (unreviewed), and a rollout that counts for nobody."""
    settings.MEDIA_ROOT = tmp_path
    screen = store_screenshot(solid_png(64, 48))
    manager = make_user("maria", project, Role.MANAGER)
    people = {name: make_user(name, project, Role.ANNOTATOR) for name in ("ann", "bob")}

    def episode(who, minutes, decisions, ms=(), score=None, verdict=None, mode="interactive"):
        task = Task.objects.create(
            project=project, external_id=f"t{Task.objects.count()}", instruction="x"
        )
        e = Episode.objects.create(
            task=task, annotator=people[who], mode=mode, started_at=START,
            ended_at=START + timedelta(minutes=minutes), outcome="finished",
            evaluation_status="scored" if score is not None else "", task_success=score,
        )  # fmt: skip
        for index, decision in enumerate(decisions, start=1):
            Step.objects.create(
                episode=e, index=index, observation=screen, decision=decision,
                final_action={"type": "wait"}, decided_by=people[who], decided_at=START,
                decision_ms=ms[index - 1] if index <= len(ms) else None,
            )  # fmt: skip
        if verdict:
            review_episode(e, manager, verdict, 1 if verdict == "rejected" else None, "")
        return e

    a, c = Decision.ACCEPTED, Decision.CORRECTED
    episode("ann", 30, [a, c, a], ms=(1000, 3000, 2000), score=1.0, verdict="accepted")
    episode("ann", 30, [a], ms=(5000,), score=0.0, verdict="rejected")
    episode("bob", 15, [Decision.DEMONSTRATED] * 4)
    episode("bob", 60, [Decision.AUTO] * 5, mode=EpisodeMode.AUTONOMOUS)
    return manager, people


def test_each_annotator_s_figures_as_json_and_csv(worked, project, client_for):
    manager, _ = worked
    client = client_for(manager)
    cards = client.get(f"/api/projects/{project.pk}/scorecards/").json()["scorecards"]
    ann, bob = cards
    assert {k: ann[k] for k in ("annotator", "episodes", "decided_steps", "demonstrated_steps",
                                "reviewed", "accepted", "scored")} == {
        "annotator": "ann", "episodes": 2, "decided_steps": 4, "demonstrated_steps": 0,
        "reviewed": 2, "accepted": 1, "scored": 2,
    }  # fmt: skip
    assert ann["review_acceptance"] == 0.5
    assert 0.09 < ann["review_acceptance_low"] < 0.1 and 0.9 < ann["review_acceptance_high"] < 0.91
    assert ann["evaluator_success"] == 0.5
    assert ann["median_decision_ms"] == 2500.0  # of 1000, 2000, 3000 and 5000
    assert ann["steps_per_hour"] == 4.0  # four steps in an hour of episodes
    assert (bob["episodes"], bob["decided_steps"], bob["demonstrated_steps"]) == (1, 0, 4)
    assert bob["review_acceptance"] is None and bob["median_decision_ms"] is None
    assert bob["steps_per_hour"] == 16.0  # the rollout is nobody's work

    answer = client.get(f"/api/projects/{project.pk}/scorecards/?as=csv")
    assert answer["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(answer.content.decode())))
    assert [r["annotator"] for r in rows] == ["ann", "bob"]
    assert rows[0]["median_decision_ms"] == "2500.0" and rows[1]["review_acceptance"] == ""

    later = (START + timedelta(days=2)).date().isoformat()
    empty = client.get(f"/api/projects/{project.pk}/scorecards/?ended_from={later}").json()
    assert empty == {"scorecards": [], "pairs": [], "tasks": [], "timeline": []}
    bad = client.get(f"/api/projects/{project.pk}/scorecards/?ended_from=yesterday")
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "bad_period")


def test_an_annotator_reads_only_their_own_scorecard(worked, project, client_for):
    _, people = worked
    client = client_for(people["bob"])
    assert client.get(f"/api/projects/{project.pk}/scorecards/").status_code == 403
    mine = client.get(f"/api/projects/{project.pk}/scorecards/mine/").json()["scorecard"]
    assert (mine["annotator"], mine["demonstrated_steps"]) == ("bob", 4)
