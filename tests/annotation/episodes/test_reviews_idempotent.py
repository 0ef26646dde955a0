"""A review submitted twice (a double click, a retried request) is stored once; the second
submission is answered with the review already stored (``annotation.episodes.reviews``)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.episodes import reviews
from annotation.models import (
    Decision,
    Episode,
    EpisodeOutcome,
    Proposal,
    Review,
    Step,
    Task,
    TaskEvent,
    TaskStatus,
)
from backend.accounts.roles import Role
from tests.support.at_once import at_once
from tests.support.pngs import solid_png
from vm_pool.screen.screenshots import store_screenshot

CLICK = {"type": "click", "point": [640, 400]}


@pytest.fixture
def episode(make_user, project, settings, tmp_path) -> Episode:
    settings.MEDIA_ROOT = tmp_path
    ann = make_user("ann", project, Role.ANNOTATOR)
    task = Task.objects.create(
        project=project, external_id="t1", instruction="Save", status=TaskStatus.SUBMITTED
    )
    episode = Episode.objects.create(
        task=task, annotator=ann, ended_at=timezone.now(), outcome=EpisodeOutcome.FINISHED
    )
    for index in (1, 2):
        step = Step.objects.create(
            episode=episode, index=index, observation=store_screenshot(solid_png(64, 64))
        )
        proposal = Proposal.objects.create(step=step, raw_text="…", action=CLICK)
        Step.objects.filter(pk=step.pk).update(
            decision=Decision.ACCEPTED,
            chosen_proposal=proposal,
            final_action=CLICK,
            decided_by=ann,
            decided_at=timezone.now(),
        )
    return episode


@pytest.fixture
def reviewer(make_user, project):
    return make_user("rita", project, Role.REVIEWER)


def post(client, episode: Episode, **body):
    return client.post(f"/api/episodes/{episode.pk}/reviews/", body, format="json")


def review_events() -> int:
    return TaskEvent.objects.filter(kind=TaskEvent.Kind.REVIEWED).count()


@pytest.mark.django_db
def test_a_double_click_stores_one_review_and_answers_the_second_with_it(
    episode, reviewer, client_for
):
    client = client_for(reviewer)
    body = {"verdict": "rejected", "first_wrong_step": 2, "comment": "wrong menu"}
    first = post(client, episode, **body)
    second = post(client, episode, **body)
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json() == first.json()
    assert Review.objects.count() == 1
    assert review_events() == 1
    assert Task.objects.get(pk=episode.task_id).status == TaskStatus.REJECTED


@pytest.mark.django_db
def test_a_review_that_differs_in_anything_is_a_new_review(episode, reviewer, client_for):
    client = client_for(reviewer)
    assert post(client, episode, verdict="rejected", comment="wrong").status_code == 201
    assert post(client, episode, verdict="rejected", comment="wrong!").status_code == 201
    assert (
        post(client, episode, verdict="rejected", comment="wrong!", first_wrong_step=2).status_code
        == 201
    )
    assert post(client, episode, verdict="accepted", comment="wrong!").status_code == 201
    assert Review.objects.count() == 4
    assert review_events() == 4


@pytest.mark.django_db
def test_changing_ones_mind_back_is_a_new_review_in_force(episode, reviewer, client_for):
    """Reject, accept, reject again within seconds: the last rejection must be in force, so it
    is stored, although the reviewer sent the same rejection a moment before."""
    client = client_for(reviewer)
    for verdict in ("rejected", "accepted", "rejected"):
        assert post(client, episode, verdict=verdict).status_code == 201
    assert Review.objects.count() == 3
    assert episode.reviews.order_by("-created_at", "-id").first().verdict == "rejected"
    assert Task.objects.get(pk=episode.task_id).status == TaskStatus.REJECTED


@pytest.mark.django_db
def test_another_reviewers_identical_verdict_is_their_own_review(
    episode, reviewer, make_user, project, client_for
):
    manager = make_user("mona", project, Role.MANAGER)
    assert post(client_for(reviewer), episode, verdict="accepted").status_code == 201
    assert post(client_for(manager), episode, verdict="accepted").status_code == 201
    assert list(Review.objects.values_list("reviewer__username", flat=True).order_by("id")) == [
        "rita",
        "mona",
    ]


@pytest.mark.django_db
def test_the_same_review_after_the_window_is_stored_again(episode, reviewer, client_for):
    client = client_for(reviewer)
    assert post(client, episode, verdict="accepted").status_code == 201
    Review.objects.update(created_at=timezone.now() - reviews.REPEAT_WINDOW - timedelta(1))
    assert post(client, episode, verdict="accepted").status_code == 201
    assert Review.objects.count() == 2


@pytest.mark.django_db
def test_the_domain_function_says_which_submission_repeated(episode, reviewer):
    first = reviews.submit_review(episode, reviewer, "rejected", 1, "")
    again = reviews.submit_review(episode, reviewer, "rejected", 1, "")
    assert (first.duplicate, again.duplicate) == (False, True)
    assert again.review.pk == first.review.pk
    assert reviews.review_episode(episode, reviewer, "rejected", 1, "").pk == first.review.pk
    assert Review.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_submissions_racing_each_other_store_one_review(episode, reviewer, client_for):
    """Both requests arrive together (a double click): the episode's row lock makes the
    second wait for the first and then see its review."""
    clients = [client_for(reviewer), client_for(reviewer)]

    def submit() -> int:
        answer = post(clients.pop(), episode, verdict="accepted", comment="ok")
        return int(answer.status_code)

    assert sorted(at_once(submit, 2)) == [200, 201]
    assert Review.objects.count() == 1
    assert review_events() == 1
