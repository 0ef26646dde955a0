"""Stored records: screenshots once by content, steps append-only, reviews by the rules."""

import pytest
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.episodes import reviews
from annotation.models import (
    Decision,
    Episode,
    EpisodeOutcome,
    Proposal,
    Review,
    Step,
    StepRevision,
    Task,
    TaskStatus,
)
from backend.accounts.roles import Role
from tests.support.pngs import solid_png
from vm_pool.screen.png import NotAPng
from vm_pool.screen.screenshots import store_screenshot

CLICK = {"type": "click", "point": [640, 400]}


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


@pytest.fixture
def episode(make_user, project, media) -> Episode:
    ann = make_user("ann", project, Role.ANNOTATOR)
    task = Task.objects.create(
        project=project,
        external_id="t1",
        instruction="Save",
        status=TaskStatus.SUBMITTED,
        assignee=ann,
    )
    return Episode.objects.create(task=task, annotator=ann)


def decided_step(episode: Episode, index: int = 1) -> Step:
    step = Step.objects.create(
        episode=episode, index=index, observation=store_screenshot(solid_png(1280, 800))
    )
    proposal = Proposal.objects.create(
        step=step, raw_text="Action: click(start_box='(1,1)')", action=CLICK
    )
    step.decision = Decision.ACCEPTED
    step.chosen_proposal = proposal
    step.final_action = CLICK
    step.decided_by = episode.annotator
    step.decided_at = timezone.now()
    step.save()
    return step


@pytest.mark.django_db
def test_same_screenshot_bytes_are_stored_once(media):
    data = solid_png(1280, 800)
    first = store_screenshot(data)
    second = store_screenshot(data)
    assert first.pk == second.pk
    assert (first.width, first.height, first.size_bytes) == (1280, 800, len(data))
    assert default_storage.open(first.file.name).read() == data
    assert len(list(media.rglob("*.png"))) == 1


@pytest.mark.django_db
def test_bytes_that_are_not_a_png_are_refused(media):
    with pytest.raises(NotAPng):
        store_screenshot(b"GIF89a not a png at all")
    assert list(media.rglob("*")) == []


@pytest.mark.django_db
def test_a_decided_step_cannot_be_updated_even_outside_the_orm_rules(episode):
    step = decided_step(episode)
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        Step.objects.filter(pk=step.pk).update(final_thought="rewritten history")
    step.refresh_from_db()
    assert step.final_thought == "" and step.decision == Decision.ACCEPTED


@pytest.mark.django_db
def test_a_decided_step_takes_only_its_execution_time(episode):
    step = decided_step(episode)
    taken = timezone.now()
    assert Step.objects.filter(pk=step.pk).update(executing_since=taken) == 1
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        Step.objects.filter(pk=step.pk).update(executing_since=None, final_thought="sneaked in")
    step.refresh_from_db()
    assert (step.executing_since, step.final_thought) == (taken, "")


@pytest.mark.django_db
def test_proposals_cannot_be_updated_except_to_mark_them_superseded(episode):
    step = decided_step(episode)
    with pytest.raises(IntegrityError), transaction.atomic():
        Proposal.objects.filter(step=step).update(thought="nicer thought")
    with pytest.raises(IntegrityError), transaction.atomic():
        Proposal.objects.filter(step=step).update(superseded=True, thought="nicer thought")
    assert Proposal.objects.filter(step=step).update(superseded=True) == 1
    with pytest.raises(IntegrityError), transaction.atomic():  # never offered again
        Proposal.objects.filter(step=step).update(superseded=False)
    proposal = Proposal.objects.get(step=step)
    assert (proposal.thought, proposal.superseded) == ("", True)


@pytest.mark.django_db
def test_a_change_to_a_decided_step_is_a_revision_with_its_author(episode, make_user, project):
    step = decided_step(episode)
    reviewer = make_user("rita", project, Role.REVIEWER)
    StepRevision.objects.create(
        step=step,
        number=1,
        decision=Decision.CORRECTED,
        final_action={"type": "wait"},
        author=reviewer,
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        StepRevision.objects.filter(step=step).update(note="edited")
    step.refresh_from_db()
    assert step.final_action == CLICK
    assert step.revisions.get().author == reviewer


@pytest.mark.django_db
def test_a_step_cannot_be_marked_decided_without_its_final_action(episode):
    step = Step.objects.create(
        episode=episode, index=1, observation=store_screenshot(solid_png(64, 64))
    )
    step.decision, step.decided_at = Decision.ACCEPTED, timezone.now()
    with pytest.raises(IntegrityError), transaction.atomic():
        step.save()


@pytest.mark.django_db
def test_review_of_a_running_episode_is_refused(episode, make_user, project):
    reviewer = make_user("rita", project, Role.REVIEWER)
    with pytest.raises(reviews.ReviewRefused, match="still running"):
        reviews.review_episode(episode, reviewer, Review.Verdict.ACCEPTED, None, "")
    assert not Review.objects.exists()


@pytest.mark.django_db
def test_rejection_marks_the_first_wrong_step_and_the_task_follows(episode, make_user, project):
    decided_step(episode, 1)
    decided_step(episode, 2)
    Episode.objects.filter(pk=episode.pk).update(
        ended_at=timezone.now(), outcome=EpisodeOutcome.FINISHED
    )
    episode.refresh_from_db()
    reviewer = make_user("rita", project, Role.REVIEWER)

    with pytest.raises(reviews.ReviewRefused, match="no step 7"):
        reviews.review_episode(episode, reviewer, Review.Verdict.REJECTED, 7, "")
    with pytest.raises(reviews.ReviewRefused, match="Only a rejection"):
        reviews.review_episode(episode, reviewer, Review.Verdict.ACCEPTED, 2, "")
    review = reviews.review_episode(episode, reviewer, Review.Verdict.REJECTED, 2, "wrong menu")

    assert review.first_wrong_step == 2
    assert Task.objects.get(pk=episode.task_id).status == TaskStatus.REJECTED
    assert Review.objects.count() == 1
