"""Gold steps over the API (``annotation.quality.gold``): a manager marks the right answers of an
episode known to be right; bad gold is refused with its reason and nothing is stored; annotators
never read it."""

import pytest
from django.utils import timezone

from annotation.episodes.reviews import review_episode
from annotation.models import Decision, Episode, GoldStep, Step, Task
from backend.accounts.roles import Role
from tests.support.pngs import solid_png
from vm_pool.screen.screenshots import store_screenshot

pytestmark = pytest.mark.django_db

ACTIONS = [
    {"type": "click", "point": [640, 400]},
    {"type": "type", "content": "Hello from Tandem"},
    {"type": "finished", "content": ""},
]


@pytest.fixture
def ended(project, make_user, settings, tmp_path):
    """An ended episode of three decided steps on 1280x800 screens."""
    settings.MEDIA_ROOT = tmp_path
    ann = make_user("ann", project, Role.ANNOTATOR)
    task = Task.objects.create(project=project, external_id="t1", instruction="Greet")
    episode = Episode.objects.create(
        task=task, annotator=ann, ended_at=timezone.now(), outcome="finished"
    )
    screen = store_screenshot(solid_png(1280, 800))
    for index, action in enumerate(ACTIONS, start=1):
        Step.objects.create(
            episode=episode, index=index, observation=screen, decision=Decision.CORRECTED,
            final_thought="t", final_action=action, decided_by=ann, decided_at=timezone.now(),
        )  # fmt: skip
    return episode


@pytest.fixture
def manager(ended, make_user):
    return make_user("maria", ended.task.project, Role.MANAGER)


def test_a_manager_marks_the_right_answers_of_an_accepted_episode(ended, manager, client_for):
    review_episode(ended, manager, "accepted", None, "")
    client = client_for(manager)
    body = {
        "steps": [
            {"step": 1, "answers": [
                {"type": "click", "region": [600, 380, 700, 420]},
                {"type": "left_double", "point": [640, 400], "radius": 30},
            ]},
            {"step": 2},  # the answer its own final action makes
        ]
    }  # fmt: skip
    answer = client.put(f"/api/episodes/{ended.pk}/gold/", body, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "steps": [
            {"step": 1, "source": "review", "answers": [
                {"type": "click", "region": [600, 380, 700, 420]},
                {"type": "left_double", "point": [640, 400], "radius": 30},
            ]},
            {"step": 2, "source": "review", "answers": [
                {"type": "type", "text": "Hello from Tandem", "normalise": "whitespace"},
            ]},
        ]
    }  # fmt: skip
    assert client.get(f"/api/episodes/{ended.pk}/gold/").json() == answer.json()
    # Every decided step, when none is named.
    client.put(f"/api/episodes/{ended.pk}/gold/", {}, format="json")
    assert GoldStep.objects.filter(step__episode=ended).count() == 3

    # The annotator reads no gold: not its endpoint, not a field of their episode.
    ann = client_for(ended.annotator)
    assert ann.get(f"/api/episodes/{ended.pk}/gold/").status_code == 403
    assert "gold" not in str(ann.get(f"/api/episodes/{ended.pk}/").json())


def test_an_episode_its_evaluator_scored_1_gives_evaluator_gold(ended, manager, client_for):
    Episode.objects.filter(pk=ended.pk).update(task_success=1.0)
    answer = client_for(manager).put(f"/api/episodes/{ended.pk}/gold/", {}, format="json")
    assert {s["source"] for s in answer.json()["steps"]} == {"evaluator"}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"steps": [{"step": 1, "answers": [{"type": "click", "region": [1200, 700, 1400, 790]}]}]},
         "Step 1: Answer 1: the region [1200, 700, 1400, 790] is not a box on the 1280x800"),
        ({"steps": [{"step": 2}, {"step": 1, "answers": []}]},
         "Step 1: A gold step needs at least one right answer."),
        ({"steps": [{"step": 9}]}, "Step 9 is not a decided step"),
        ({"steps": []}, "Name at least one step"),
        ({"steps": "all"}, "steps is a list"),
    ],
)  # fmt: skip
def test_bad_gold_is_refused_with_its_reason_and_nothing_is_stored(
    ended, manager, client_for, body, why
):
    review_episode(ended, manager, "accepted", None, "")
    answer = client_for(manager).put(f"/api/episodes/{ended.pk}/gold/", body, format="json")
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, "bad_gold")
    assert answer.json()["error"]["message"].startswith(why)
    assert not GoldStep.objects.exists()  # the valid step of the same request is not kept


def test_only_an_episode_known_to_be_right_gives_gold(ended, manager, client_for):
    client = client_for(manager)
    answer = client.put(f"/api/episodes/{ended.pk}/gold/", {}, format="json")
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "gold_not_allowed")
    review_episode(ended, manager, "rejected", 2, "step 2 is wrong")
    Episode.objects.filter(pk=ended.pk).update(task_success=1.0)
    assert client.put(f"/api/episodes/{ended.pk}/gold/", {}, format="json").status_code == 409
    Episode.objects.filter(pk=ended.pk).update(ended_at=None, outcome="")
    answer = client.put(f"/api/episodes/{ended.pk}/gold/", {}, format="json")
    assert "running episode" in answer.json()["error"]["message"]
    assert not GoldStep.objects.exists()
