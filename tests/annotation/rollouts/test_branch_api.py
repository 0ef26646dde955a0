"""Marking a rollout's first wrong step and sending it to annotators
(``annotation.episodes.replay``), over the API: who may, what is refused with a clear error and
stores nothing, what a branch task is, and what the exports make of the valid prefix and of a
branch's replayed steps. No desktop
runs here (the replay itself is shown on real desktops by tests/e2e/test_branch_task.py).
"""

import pytest
from django.utils import timezone

from annotation.datasets import pairs
from annotation.models import (
    Decision,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    Proposal,
    Review,
    Rollout,
    RolloutBatch,
    RolloutStatus,
    Step,
    Task,
    TaskEvent,
    TaskStatus,
)
from annotation.rollouts.batches import BatchRequest, RolloutRejected, create_batch
from backend.accounts.roles import Role
from model_serving.models import ModelVersion
from tests.support.pngs import solid_png
from vm_pool.models import DesktopTemplate
from vm_pool.screen.screenshots import store_screenshot

pytestmark = pytest.mark.django_db

CLICK = {"type": "click", "point": [640, 400]}


def decided_step(
    episode: Episode,
    index: int,
    decision: str,
    shade: int,
    final: tuple[str, dict] | None = None,
) -> Step:
    """A step decided as ``decision`` on the model's click, or on ``final`` (thought, action)."""
    step = Step.objects.create(
        episode=episode, index=index, observation=store_screenshot(solid_png(8, 8, (shade, 0, 0)))
    )
    proposal = Proposal.objects.create(
        step=step, raw_text=f"Thought: step {index}", thought=f"step {index}", action=CLICK
    )
    Step.objects.filter(pk=step.pk).update(
        decision=decision,
        chosen_proposal=proposal,
        final_thought=final[0] if final else f"step {index}",
        final_action=final[1] if final else CLICK,
        decided_at=timezone.now(),
    )
    return step


@pytest.fixture
def world(make_user, project, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    users = {
        role: make_user(role, project, role)
        for role in (Role.ANNOTATOR, Role.REVIEWER, Role.MANAGER, Role.ENGINEER)
    }
    DesktopTemplate.objects.create(name=project.environment_template, min_ready=0)
    task = Task.objects.create(
        project=project,
        external_id="t1",
        instruction="Write the greeting",
        setup=[{"type": "launch", "parameters": {"command": ["mousepad"]}}],
        priority=3,
        max_steps=12,
    )
    version = ModelVersion.objects.create(
        name="ui-tars-a", base_model="ui-tars", serving_status=ModelVersion.Serving.SERVING
    )
    batch = RolloutBatch.objects.create(
        project=project,
        model_version=version,
        task_ids=[task.pk],
        samples_per_task=1,
        created_by=users[Role.ENGINEER],
    )
    episode = Episode.objects.create(
        task=task,
        mode=EpisodeMode.AUTONOMOUS,
        annotator=users[Role.ENGINEER],
        served_version=version,
        model_version="ui-tars-a",
        ended_at=timezone.now(),
        outcome=EpisodeOutcome.STOPPED,
    )
    for index in (1, 2, 3):
        decided_step(episode, index, Decision.AUTO, 10 * index)
    # The rules failed it (a loop): V = 0.
    Rollout.objects.create(
        batch=batch,
        task=task,
        sample=0,
        episode=episode,
        status=RolloutStatus.VALIDATED,
        stop_reason="loop",
        verdict=False,
    )
    return users, task, episode, version


def url(episode: Episode) -> str:
    return f"/api/episodes/{episode.pk}/branch/"


def test_a_reviewer_marks_the_first_wrong_step_and_gets_one_branch_task(world, client_for):
    users, task, episode, _ = world
    client = client_for(users[Role.REVIEWER])
    answer = client.post(url(episode), {"step": 2, "comment": "typed too much"}, format="json")
    assert answer.status_code == 201, answer.json()
    branch = Task.objects.get(branch_of=episode)
    assert answer.json()["id"] == branch.pk and answer.json()["branch_step"] == 2
    assert (branch.instruction, branch.setup, branch.priority, branch.max_steps) == (
        task.instruction,
        task.setup,
        3,
        12,
    )
    assert branch.status == TaskStatus.QUEUED and branch.branch_step == 2
    assert branch.source == {"branch_of": {"task": "t1", "episode": episode.pk, "step": 2}}
    assert branch.events.get().kind == TaskEvent.Kind.BRANCHED
    review = episode.reviews.get()
    assert (review.verdict, review.first_wrong_step, review.comment) == (
        "rejected",
        2,
        "typed too much",
    )
    # Again: the same task, no second one, no second review (the repeat rule of reviews).
    again = client.post(url(episode), {"step": 2, "comment": "typed too much"}, format="json")
    assert again.status_code == 200 and again.json()["id"] == branch.pk
    assert Task.objects.filter(branch_of=episode).count() == 1 and episode.reviews.count() == 1
    # The rollout's viewer lists it; the task list says what it is.
    detail = client_for(users[Role.MANAGER]).get(f"/api/episodes/{episode.pk}/").json()
    assert [(b["id"], b["branch_step"], b["status"]) for b in detail["branches"]] == [
        (branch.pk, 2, "queued")
    ]
    listed = client_for(users[Role.MANAGER]).get(f"/api/tasks/{branch.pk}/").json()
    assert (listed["branch_of"], listed["branch_step"]) == (episode.pk, 2)


@pytest.mark.parametrize(
    ("change", "body", "status", "words"),
    [
        ("interactive", {"step": 2}, 409, "only a rollout is branched"),
        ("running", {"step": 2}, 409, "still running"),
        (None, {"step": 7}, 409, "has no step 7"),
        ("gap", {"step": 3}, 409, "did not all run"),
        (None, {"step": 0}, 400, "step"),
        (None, {}, 400, "step"),
    ],
)
def test_a_branch_that_cannot_be_made_is_refused_and_stores_nothing(
    world, client_for, change, body, status, words
):
    users, task, episode, _ = world
    if change == "interactive":
        Episode.objects.filter(pk=episode.pk).update(mode=EpisodeMode.INTERACTIVE)
    elif change == "running":
        Episode.objects.filter(pk=episode.pk).update(ended_at=None, outcome="")
    elif change == "gap":  # step 2 never ran: the model's answer was invalid
        episode = Episode.objects.create(
            task=task,
            mode=EpisodeMode.AUTONOMOUS,
            annotator=users[Role.ENGINEER],
            ended_at=timezone.now(),
            outcome=EpisodeOutcome.STOPPED,
        )
        decided_step(episode, 1, Decision.AUTO, 10)
        Step.objects.create(
            episode=episode, index=2, observation=store_screenshot(solid_png(8, 8, (1, 2, 3)))
        )
        decided_step(episode, 3, Decision.AUTO, 90)
    answer = client_for(users[Role.REVIEWER]).post(url(episode), body, format="json")
    assert answer.status_code == status, answer.json()
    assert words in str(answer.json()).lower() if words.islower() else words in str(answer.json())
    assert not Task.objects.filter(branch_of__isnull=False).exists()
    assert not Review.objects.exists()


# An annotator does not see rollouts at all; an engineer reads them but does not review.
@pytest.mark.parametrize(("role", "status"), [(Role.ANNOTATOR, 404), (Role.ENGINEER, 403)])
def test_only_those_who_review_may_mark_a_first_wrong_step(world, client_for, role, status):
    users, _, episode, _ = world
    answer = client_for(users[role]).post(url(episode), {"step": 2}, format="json")
    assert answer.status_code == status, answer.json()
    assert not Task.objects.filter(branch_of__isnull=False).exists()
    assert not Review.objects.exists()


def test_a_branch_task_is_for_people_never_for_a_rollout_batch(world, client_for):
    users, task, episode, version = world
    client_for(users[Role.REVIEWER]).post(url(episode), {"step": 2}, format="json")
    branch = Task.objects.get(branch_of=episode)
    with pytest.raises(RolloutRejected, match="branch tasks are for people"):
        create_batch(
            task.project,
            users[Role.ENGINEER],
            BatchRequest(tasks=[branch], samples_per_task=1, model_version=version),
        )
    runnable = client_for(users[Role.ENGINEER]).get(
        f"/api/rollout-batches/tasks/?project={task.project_id}"
    )
    assert [t["external_id"] for t in runnable.json()["runnable"]] == ["t1"]


def test_the_valid_prefix_of_a_marked_rollout_is_sft_data_whatever_v_says(world, client_for):
    users, task, episode, _ = world
    filters = pairs.Filters(project_id=task.project_id, source="rollout")
    assert list(pairs.iter_samples(filters, "sft")) == []  # V = 0: no SFT sample
    client_for(users[Role.REVIEWER]).post(url(episode), {"step": 3}, format="json")
    samples = list(pairs.iter_samples(filters, "sft"))
    assert [(s.step_index, s.kind) for s in samples] == [(1, "rollout"), (2, "rollout")]
    # V = 0 still routes the whole trajectory to CT.
    (ct,) = pairs.iter_samples(filters, "ct")
    assert [t.step_index for t in ct.steps] == [1, 2, 3]


def test_a_branchs_replayed_steps_are_history_in_peoples_data_never_targets(world, client_for):
    users, task, episode, version = world
    client_for(users[Role.REVIEWER]).post(url(episode), {"step": 2}, format="json")
    branch = Task.objects.get(branch_of=episode)
    worked = Episode.objects.create(
        task=branch,
        annotator=users[Role.ANNOTATOR],
        served_version=version,
        ended_at=timezone.now(),
        outcome=EpisodeOutcome.FINISHED,
    )
    decided_step(worked, 1, Decision.AUTO, 10)  # replayed
    save = {"type": "hotkey", "keys": ["ctrl", "s"]}
    decided_step(worked, 2, Decision.CORRECTED, 20, final=("save it", save))
    filters = pairs.Filters(project_id=task.project_id)
    sft = list(pairs.iter_samples(filters, "sft"))
    assert [(s.episode_id, s.step_index, s.kind) for s in sft] == [(worked.pk, 2, "corrected")]
    assert [t.decision for t in sft[0].context.history] == ["auto"]
    (pair,) = pairs.iter_samples(filters, "dpo")
    assert pair.rejected.action_json == CLICK  # the rollout's step 2, copied with its proposal
    assert pair.chosen.action_json == {"type": "hotkey", "keys": ["ctrl", "s"]}
