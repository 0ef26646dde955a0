"""The figures of the manager pages (``annotation.flywheel.figures``) on known records: the progress
board, throughput per annotator and the acceptance rate per model version, bucketed by hour
and by day; and the episode viewer's step details."""

from datetime import UTC, datetime, timedelta

import pytest

from annotation.episodes.reviews import review_episode
from annotation.models import (
    Decision,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    Proposal,
    Step,
    StepRevision,
    Task,
    TaskStatus,
)
from backend.accounts.roles import Role
from tests.support.pngs import solid_png
from vm_pool.screen.screenshots import store_screenshot

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 10, 15, tzinfo=UTC)
CLICK = {"type": "click", "point": [640, 400]}
TYPE = {"type": "type", "content": "hello\n"}


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path


def record(task, annotator, version, steps, ended_at, outcome) -> Episode:
    """An episode with decided steps: (at, decision, proposal's model version or None for no
    valid proposal, decision_ms)."""
    episode = Episode.objects.create(
        task=task,
        annotator=annotator,
        model_version=version,
        started_at=steps[0][0] - timedelta(minutes=1),
        ended_at=ended_at,
        outcome=outcome,
    )
    screenshot = store_screenshot(solid_png(1280, 800))
    for index, (at, decision, proposed_by, ms) in enumerate(steps, start=1):
        step = Step.objects.create(episode=episode, index=index, observation=screenshot)
        if proposed_by is None:
            proposal = Proposal.objects.create(
                step=step, raw_text="", invalid_reason="model unavailable: timed out"
            )
        else:
            proposal = Proposal.objects.create(
                step=step,
                raw_text="Thought: Click OK.\nAction: click(start_box='(644,406)')",
                thought="Click OK.",
                action=CLICK,
                model_version=proposed_by,
            )
        picked = decision != Decision.CORRECTED
        Step.objects.filter(pk=step.pk).update(
            decision=decision,
            chosen_proposal=proposal if picked else None,
            final_thought="Click OK." if picked else "Type a greeting.",
            final_action=CLICK if picked else TYPE,
            decided_by=annotator,
            decided_at=at,
            decision_ms=ms,
        )
    return episode


@pytest.fixture
def history(media, make_user, project):
    """ann works on 2 March (v1, one step proposed by v1.1) and submits; bob works on 3 March
    (v2, one step without a valid proposal) and abandons."""
    ann = make_user("ann", project, Role.ANNOTATOR)
    bob = make_user("bob", project, Role.ANNOTATOR)
    manager = make_user("manager", project, Role.MANAGER)
    a = Task.objects.create(
        project=project, external_id="a", instruction="Greet", status=TaskStatus.SUBMITTED,
        assignee=ann,
    )  # fmt: skip
    b = Task.objects.create(project=project, external_id="b", instruction="Close")
    first = record(
        a,
        ann,
        "v1",
        [
            (T0, Decision.ACCEPTED, "v1", 1000),
            (T0 + timedelta(minutes=10), Decision.CORRECTED, "v1", 3000),
            (T0 + timedelta(hours=2), Decision.ERROR_KEPT, "v1.1", 2000),
        ],
        T0 + timedelta(hours=2, minutes=5),
        EpisodeOutcome.FINISHED,
    )
    day2 = T0 + timedelta(days=1)
    record(
        b,
        bob,
        "v2",
        [
            (day2, Decision.ACCEPTED, "v2", 500),
            (day2 + timedelta(minutes=1), Decision.ACCEPTED, "v2", 700),
            (day2 + timedelta(minutes=2), Decision.CORRECTED, None, 9000),
        ],
        day2 + timedelta(hours=1),
        EpisodeOutcome.ABANDONED,
    )
    return manager, first


def get(client, url: str) -> dict:
    response = client.get(url)
    assert response.status_code == 200, response.content
    return response.json()


def test_throughput_by_day_counts_decided_steps_and_submitted_episodes(
    history, client_for, project
):
    manager, _ = history
    body = get(
        client_for(manager),
        f"/api/projects/{project.pk}/throughput/?bucket=day"
        "&since=2026-03-01T12:00:00Z&until=2026-03-04T01:00:00Z",
    )
    days = ["2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04"]
    assert [b[:10] for b in body["buckets"]] == days
    series = {s["annotator"]: s for s in body["annotators"]}
    assert set(series) == {"ann", "bob"}
    assert [(p["steps"], p["episodes"]) for p in series["ann"]["points"]] == [
        (0, 0), (3, 1), (0, 0), (0, 0),
    ]  # fmt: skip
    # bob abandoned his episode: his steps count, no submitted episode does.
    assert [(p["steps"], p["episodes"]) for p in series["bob"]["points"]] == [
        (0, 0), (0, 0), (3, 0), (0, 0),
    ]  # fmt: skip
    assert series["ann"]["points"][1]["mean_decision_ms"] == 2000
    assert (series["bob"]["steps"], series["bob"]["episodes"]) == (3, 0)


def test_throughput_by_hour_puts_each_step_in_its_hour(history, client_for, project):
    manager, _ = history
    body = get(
        client_for(manager),
        f"/api/projects/{project.pk}/throughput/?bucket=hour"
        "&since=2026-03-02T10:00:00Z&until=2026-03-02T12:30:00Z",
    )
    assert [b[11:16] for b in body["buckets"]] == ["10:00", "11:00", "12:00"]
    (ann,) = body["annotators"]
    assert [(p["steps"], p["episodes"], p["mean_decision_ms"]) for p in ann["points"]] == [
        (2, 0, 2000), (0, 0, None), (1, 1, 2000),
    ]  # fmt: skip


def test_acceptance_rate_per_model_version_and_day(history, client_for, project):
    manager, _ = history
    body = get(
        client_for(manager),
        f"/api/projects/{project.pk}/acceptance/?bucket=day"
        "&since=2026-03-02T00:00:00Z&until=2026-03-03T23:00:00Z",
    )
    versions = {v["model_version"]: v for v in body["versions"]}
    assert set(versions) == {"v1", "v1.1", "v2"}
    counts = ("accepted", "corrected", "error_kept", "without_proposal", "rate")
    assert [tuple(p[k] for k in counts) for p in versions["v1"]["points"]] == [
        (1, 1, 0, 0, 0.5), (0, 0, 0, 0, None),
    ]  # fmt: skip
    # The error kept on purpose was proposed by v1.1: it counts against v1.1, not v1.
    assert tuple(versions["v1.1"]["total"][k] for k in counts) == (0, 0, 1, 0, 0.0)
    # A step without a valid proposal is counted apart and leaves v2's rate alone.
    assert tuple(versions["v2"]["total"][k] for k in counts) == (2, 0, 0, 1, 1.0)


def test_figures_outside_the_range_are_not_counted(history, client_for, project):
    manager, _ = history
    body = get(
        client_for(manager),
        f"/api/projects/{project.pk}/acceptance/?bucket=day"
        "&since=2026-02-01T00:00:00Z&until=2026-02-10T00:00:00Z",
    )
    assert body["versions"] == []
    assert len(body["buckets"]) == 10


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("bucket=week", "bucket"),
        ("since=yesterday", "since"),
    ],
)
def test_a_malformed_range_is_refused_with_the_field(history, client_for, project, query, field):
    manager, _ = history
    response = client_for(manager).get(f"/api/projects/{project.pk}/throughput/?{query}")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]


@pytest.mark.parametrize(
    "query",
    [
        "since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z",
        "bucket=hour&since=2025-01-01T00:00:00Z&until=2026-01-01T00:00:00Z",
        "until=9999-12-31T23:00:00Z",  # its bucket would end past the year 9999
        "until=0001-01-02T00:00:00Z",  # its default span would begin before the year 1
    ],
)
def test_an_empty_or_too_long_range_is_refused(history, client_for, project, query):
    manager, _ = history
    response = client_for(manager).get(f"/api/projects/{project.pk}/acceptance/?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_range"


def test_board_counts_every_status_and_links_the_latest_episode(history, client_for, project):
    manager, first = history
    for n in range(3):
        Task.objects.create(project=project, external_id=f"q{n}", instruction=f"Queued {n}")
    body = get(client_for(manager), f"/api/projects/{project.pk}/board/?limit=2")
    columns = {c["status"]: c for c in body["columns"]}
    assert list(columns) == [
        "queued", "assigned", "in_progress", "submitted", "reviewed", "rejected", "gold",
    ]  # fmt: skip
    assert {s: c["count"] for s, c in columns.items()} == {
        "queued": 4, "assigned": 0, "in_progress": 0, "submitted": 1, "reviewed": 0,
        "rejected": 0, "gold": 0,
    }  # fmt: skip
    assert body["total"] == 5
    assert len(columns["queued"]["tasks"]) == 2  # capped at the limit
    (submitted,) = columns["submitted"]["tasks"]
    assert (submitted["external_id"], submitted["assignee"], submitted["episode"]) == (
        "a",
        "ann",
        first.pk,
    )


def test_episode_detail_gives_actions_as_ui_tars_text(history, client_for):
    manager, first = history
    StepRevision.objects.create(
        step=Step.objects.get(episode=first, index=2),
        number=1,
        decision=Decision.CORRECTED,
        final_thought="Greet in capitals.",
        final_action={"type": "type", "content": "HELLO\n"},
        author=manager,
        note="Capitals were asked for.",
    )
    body = get(client_for(manager), f"/api/episodes/{first.pk}/")
    assert (body["instruction"], body["task_external_id"], body["task_status"]) == (
        "Greet",
        "a",
        "submitted",
    )
    accepted, corrected, _ = body["steps"]
    assert accepted["proposals"][0]["action_text"] == "click(start_box='(640,400)')"
    assert accepted["final_action_text"] == "click(start_box='(640,400)')"
    assert (accepted["chosen_rank"], corrected["chosen_rank"]) == (0, None)
    assert corrected["final_action_text"] == "type(content='hello\\n')"
    assert corrected["screen_size"] == [1280, 800]
    (revision,) = corrected["revisions"]
    assert (revision["author"], revision["final_action_text"]) == (
        "manager",
        "type(content='HELLO\\n')",
    )


def test_board_refuses_a_limit_out_of_range(history, client_for, project):
    manager, _ = history
    response = client_for(manager).get(f"/api/projects/{project.pk}/board/?limit=0")
    assert response.status_code == 400
    assert "limit" in response.json()["error"]["details"]


def test_review_queue_narrows_to_one_project_and_refuses_a_bad_id(
    history, client_for, project, other_project, make_user
):
    manager, first = history
    reviewer = make_user("rev", project, Role.REVIEWER)
    client = client_for(reviewer)
    queued = client.get(f"/api/review-queue/?project={project.pk}").json()["results"]
    assert [(e["id"], e["instruction"], e["project_name"]) for e in queued] == [
        (first.pk, "Greet", project.name)
    ]
    assert client.get(f"/api/review-queue/?project={other_project.pk}").json()["results"] == []
    for not_an_id in ("office", "²", "9" * 30):
        refused = client.get("/api/review-queue/", {"project": not_an_id})
        assert refused.status_code == 400
        assert "project" in refused.json()["error"]["details"]


def test_episode_list_names_each_episodes_task_and_project(history, client_for, project):
    manager, first = history
    listed = get(client_for(manager), f"/api/episodes/?task__project={project.pk}")["results"]
    by_id = {e["id"]: e for e in listed}
    assert (
        by_id[first.pk]["task"],
        by_id[first.pk]["task_external_id"],
        by_id[first.pk]["instruction"],
        by_id[first.pk]["project"],
        by_id[first.pk]["project_name"],
    ) == (first.task_id, "a", "Greet", project.pk, "Office tasks")
    assert {e["task_external_id"] for e in listed} == {"a", "b"}


def test_a_rollout_of_a_task_reviewed_already_still_waits_for_its_own_review(
    history, client_for, project, make_user
):
    manager, first = history
    review_episode(first, manager, "accepted", None, "")  # the person's episode: reviewed
    assert Task.objects.get(pk=first.task_id).status == TaskStatus.REVIEWED
    rollout = Episode.objects.create(
        task=first.task, annotator=manager, mode=EpisodeMode.AUTONOMOUS,
        ended_at=T0 + timedelta(days=3), outcome=EpisodeOutcome.FINISHED,
    )  # fmt: skip
    Episode.objects.create(
        task=first.task, annotator=manager, mode=EpisodeMode.AUTONOMOUS,
        ended_at=T0 + timedelta(days=3), outcome=EpisodeOutcome.ENV_FAILED,
    )  # fmt: skip
    reviewer = make_user("rev", project, Role.REVIEWER)
    queued = client_for(reviewer).get(f"/api/review-queue/?project={project.pk}").json()["results"]
    assert [(e["id"], e["mode"]) for e in queued] == [(rollout.pk, EpisodeMode.AUTONOMOUS)]
