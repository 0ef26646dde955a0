"""How people see what a task's evaluator made of an episode: the episode list and detail give
the score and its details to those who view the project's episodes (managers, reviewers); an
annotator reading their own episode sees its score, never the details (the expected values would
tell the answer); the acceptance chart gives task success per model version beside
acceptance, over the same buckets."""

from datetime import UTC, datetime, timedelta

import pytest

from annotation.models import (
    Decision,
    Episode,
    EpisodeOutcome,
    EvaluationStatus,
    Membership,
    Proposal,
    Step,
    Task,
    TaskStatus,
)
from backend.accounts.roles import Role
from tests.support.pngs import solid_png
from vm_pool.screen.screenshots import store_screenshot

pytestmark = pytest.mark.django_db

DAY1 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)
WINDOW = "bucket=day&since=2026-03-02T00:00:00Z&until=2026-03-03T23:00:00Z"
EVALUATION_FIELDS = {"evaluation_status", "task_success", "evaluation_reason"}
DETAIL_FIELDS = EVALUATION_FIELDS | {"evaluation", "setup_log"}
HIDDEN = {"evaluation_reason": "", "evaluation": {}, "setup_log": []}


def hidden(row: dict, fields: set[str]) -> bool:
    """The row has the fields (the schema is the same for everyone) with the details empty."""
    return fields <= set(row) and all(row[f] == HIDDEN[f] for f in fields & set(HIDDEN))


SCORED = {
    "score": 1.0,
    "reason": "every metric ran",
    "conjunction": "and",
    "metrics": [
        {
            "index": 0,
            "func": "compare_table",
            "score": 1.0,
            "result": "/tmp/result.xlsx",
            "expected": "/tmp/gold.xlsx",
        },
        {"index": 1, "func": "check_include_exclude", "score": "skipped"},
    ],
    "postconfig_log": ["activate_window: no window named 'Calc'"],
}


@pytest.fixture
def people(make_user, project):
    return {
        "ann": make_user("ann", project, Role.ANNOTATOR),
        "manager": make_user("manager", project, Role.MANAGER),
        "reviewer": make_user("reviewer", project, Role.REVIEWER),
    }


def ended(project, annotator, version, at, status="", success=None, evaluation=None, **extra):
    """An ended episode, its task submitted, with the evaluator's verdict stored as given."""
    n = Task.objects.count()
    task = Task.objects.create(
        project=project,
        external_id=f"t{n}",
        instruction=f"Task {n}",
        status=TaskStatus.SUBMITTED,
        assignee=annotator,
    )
    return Episode.objects.create(
        task=task,
        annotator=annotator,
        model_version=version,
        started_at=at - timedelta(minutes=5),
        ended_at=at,
        outcome=EpisodeOutcome.FINISHED,
        evaluation_status=status,
        task_success=success,
        evaluation=evaluation or {},
        **extra,
    )


@pytest.fixture
def scored(people, project):
    """ann's episodes: a scored one (1.0, with a setup log), a failed one, a pending one and
    one without an evaluator."""
    ann = people["ann"]
    return {
        "scored": ended(
            project,
            ann,
            "v1",
            DAY1,
            EvaluationStatus.SCORED,
            1.0,
            SCORED,
            setup_log=["command 'soffice' exited 1"],
        ),
        "failed": ended(
            project,
            ann,
            "v1",
            DAY1,
            EvaluationStatus.FAILED,
            None,
            {"error": "the desktop was lost"},
        ),
        "pending": ended(project, ann, "v1", DAY1, EvaluationStatus.PENDING),
        "none": ended(project, ann, "v1", DAY1),
    }


def listed(client, project) -> dict[int, dict]:
    response = client.get(f"/api/episodes/?task__project={project.pk}&page_size=50")
    assert response.status_code == 200, response.content
    return {row["id"]: row for row in response.json()["results"]}


@pytest.mark.parametrize("role", ["manager", "reviewer"])
def test_the_episode_list_gives_overseers_each_evaluation_status(
    role, people, scored, client_for, project
):
    rows = listed(client_for(people[role]), project)
    shown = {
        name: (
            rows[e.pk]["evaluation_status"],
            rows[e.pk]["task_success"],
            rows[e.pk]["evaluation_reason"],
        )
        for name, e in scored.items()
    }
    assert shown == {
        "scored": ("scored", 1.0, "every metric ran"),
        "failed": ("failed", None, "the desktop was lost"),
        "pending": ("pending", None, ""),
        "none": ("", None, ""),
    }
    # The details stay in the episode itself: a page of episodes does not carry them.
    assert "evaluation" not in rows[scored["scored"].pk]


@pytest.mark.parametrize("role", ["manager", "reviewer"])
def test_the_episode_detail_gives_overseers_the_metrics_and_the_setup_log(
    role, people, scored, client_for
):
    client = client_for(people[role])
    body = client.get(f"/api/episodes/{scored['scored'].pk}/").json()
    assert (body["evaluation_status"], body["task_success"]) == ("scored", 1.0)
    assert body["evaluation"] == SCORED
    assert body["setup_log"] == ["command 'soffice' exited 1"]
    failed = client.get(f"/api/episodes/{scored['failed'].pk}/").json()
    assert failed["evaluation"] == {"error": "the desktop was lost"}
    assert failed["setup_log"] == []


def test_an_annotator_reads_their_own_scores_without_the_evaluations_details(
    people, scored, client_for, project
):
    client = client_for(people["ann"])
    rows = listed(client, project)
    assert set(rows) == {e.pk for e in scored.values()}  # as before: their own episodes
    assert all(hidden(row, EVALUATION_FIELDS) for row in rows.values())
    assert rows[scored["scored"].pk]["task_success"] == 1.0
    detail = client.get(f"/api/episodes/{scored['scored'].pk}/")
    assert detail.status_code == 200
    assert hidden(detail.json(), DETAIL_FIELDS)
    assert detail.json()["steps"] == []


def test_an_annotator_still_may_not_read_the_charts(people, scored, client_for, project):
    response = client_for(people["ann"]).get(f"/api/projects/{project.pk}/acceptance/?{WINDOW}")
    assert response.status_code == 403


def test_a_reviewer_here_and_annotator_there_sees_evaluations_only_here(
    make_user, people, scored, client_for, project, other_project
):
    both = make_user("both", project, Role.REVIEWER)
    Membership.objects.create(project=other_project, user=both, role=Role.ANNOTATOR)
    own = ended(other_project, both, "v1", DAY1, EvaluationStatus.SCORED, 0.0, SCORED)
    client = client_for(both)
    assert listed(client, project)[scored["scored"].pk]["task_success"] == 1.0
    mine = listed(client, other_project)[own.pk]
    assert hidden(mine, EVALUATION_FIELDS) and mine["task_success"] == 0.0


def test_an_admin_sees_the_evaluation(make_user, scored, client_for):
    admin = make_user("root", is_superuser=True, is_staff=True)
    body = client_for(admin).get(f"/api/episodes/{scored['scored'].pk}/").json()
    assert body["evaluation"]["reason"] == "every metric ran"


def test_the_review_queue_shows_reviewers_the_task_success(people, scored, client_for):
    response = client_for(people["reviewer"]).get("/api/review-queue/")
    assert response.status_code == 200
    rows = {row["id"]: row for row in response.json()["results"]}
    assert rows[scored["scored"].pk]["task_success"] == 1.0
    assert rows[scored["failed"].pk]["evaluation_reason"] == "the desktop was lost"


@pytest.fixture
def versions(settings, tmp_path, people, project):
    """Scored episodes of v1 (1.0 and 0.0 on day 1, 0.5 on day 2), of v2 (failed and pending on
    day 1, 1.0 on day 2), one without a model version (0.0), one before the window; and one
    step of v1 accepted on day 1."""
    settings.MEDIA_ROOT = tmp_path
    ann = people["ann"]
    s = EvaluationStatus.SCORED
    first = ended(project, ann, "v1", DAY1, s, 1.0)
    ended(project, ann, "v1", DAY1 + timedelta(hours=1), s, 0.0)
    ended(project, ann, "v1", DAY2, s, 0.5)
    ended(project, ann, "v2", DAY1, EvaluationStatus.FAILED, None, {"error": "lost"})
    ended(project, ann, "v2", DAY1, EvaluationStatus.PENDING)
    ended(project, ann, "v2", DAY2, s, 1.0)
    ended(project, ann, "", DAY2, s, 0.0)
    ended(project, ann, "v1", DAY1 - timedelta(days=5), s, 1.0)
    step = Step.objects.create(
        episode=first, index=1, observation=store_screenshot(solid_png(64, 48))
    )
    proposal = Proposal.objects.create(
        step=step, raw_text="…", thought="Click.", action={"type": "wait"}, model_version="v1"
    )
    Step.objects.filter(pk=step.pk).update(
        decision=Decision.ACCEPTED,
        chosen_proposal=proposal,
        final_thought="Click.",
        final_action={"type": "wait"},
        decided_by=ann,
        decided_at=DAY1,
    )


def test_task_success_per_model_version_sits_beside_acceptance(
    versions, people, client_for, project
):
    response = client_for(people["manager"]).get(f"/api/projects/{project.pk}/acceptance/?{WINDOW}")
    assert response.status_code == 200
    body = response.json()
    by_version = {v["model_version"]: v for v in body["versions"]}
    assert list(by_version) == ["unknown", "v1", "v2"]
    summary = ("scored", "failed", "mean", "success_rate")

    def totals(version: str) -> tuple:
        return tuple(by_version[version]["task_success"][k] for k in summary)

    # v1: 1.0, 0.0 and 0.5 in the window (the 1.0 before it is left out).
    assert totals("v1") == (3, 0, 0.5, 0.3333)
    # v2: the failed evaluation is counted apart, the pending one not at all.
    assert totals("v2") == (1, 1, 1.0, 1.0)
    assert totals("unknown") == (1, 0, 0.0, 0.0)
    assert [tuple(p[k] for k in summary) for p in by_version["v1"]["task_success"]["points"]] == [
        (2, 0, 0.5, 0.5),
        (1, 0, 0.5, 0.0),
    ]
    assert [tuple(p[k] for k in summary) for p in by_version["v2"]["task_success"]["points"]] == [
        (0, 1, None, None),
        (1, 0, 1.0, 1.0),
    ]
    # Acceptance is unchanged beside it; versions with scores only have no decisions.
    assert (by_version["v1"]["total"]["accepted"], by_version["v1"]["total"]["rate"]) == (1, 1.0)
    assert by_version["v2"]["total"]["rate"] is None
    assert body["task_success"] == {"scored": 5, "failed": 1, "mean": 0.5, "success_rate": 0.4}


def test_a_window_without_scored_episodes_has_no_task_success(
    versions, people, client_for, project
):
    response = client_for(people["manager"]).get(
        f"/api/projects/{project.pk}/acceptance/?bucket=day"
        "&since=2026-02-01T00:00:00Z&until=2026-02-10T00:00:00Z"
    )
    body = response.json()
    assert body["versions"] == []
    assert body["task_success"] == {"scored": 0, "failed": 0, "mean": None, "success_rate": None}
