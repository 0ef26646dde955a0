"""Offline evaluation: the held-out split, the step success rate on a hand-checked set (the
model's answers come from the fake OpenAI-compatible server, through the live proposer), and
the evaluation job on a project's held-out steps, shown next to the live acceptance rate."""

import math

import pytest

from annotation.datasets import pairs
from annotation.flywheel import model_versions
from annotation.models import Review, Step
from backend.accounts.roles import Role
from model_serving.evaluation import HeldOutStep, evaluate, is_held_out, score_step
from model_serving.models import EvaluationRun, ModelVersion
from model_serving.proposers.base import Candidate, ProposalRequest
from model_serving.proposers.openai import OpenAIProposer
from tests.support.export_data import make_episodes
from tests.support.fake_model_server import Reply, serving
from tests.support.pngs import solid_png
from vm_pool.actions import Action, ScreenSize

SCREEN = ScreenSize(1280, 800)  # seen by UI-TARS-1.5 as 1288x812: its (644,406) is (640,400)
LIMIT = 0.05 * math.hypot(1280, 800)  # 75.5 px
MODEL = "ui-tars-1.5-7b"

CLICK = {"type": "click", "point": [640, 400]}
TYPED = {"type": "type", "content": "hello\n"}
COPY = {"type": "hotkey", "keys": ["ctrl", "c"]}
SCROLL_DOWN = {"type": "scroll", "point": [640, 400], "direction": "down"}
DONE = {"type": "finished", "content": "done"}

# (what the annotator did, what the model answers, success?) — checked by hand.
HAND_CHECKED = [
    (CLICK, "Thought: a.\nAction: click(start_box='(644,406)')", True),  # exactly there
    (CLICK, "Thought: b.\nAction: click(start_box='(700,406)')", True),  # x 696: 56 px off
    (CLICK, "Thought: c.\nAction: click(start_box='(900,406)')", False),  # x 894: 254 px off
    (TYPED, "Thought: d.\nAction: type(content='hello\\n')", True),
    (TYPED, "Thought: e.\nAction: type(content='hullo\\n')", False),  # other text
    (COPY, "Thought: f.\nAction: hotkey(key='ctrl c')", True),
    (CLICK, "I am not sure what to do.", False),  # no Action: invalid
    (SCROLL_DOWN, "Thought: g.\nAction: scroll(start_box='(644,406)', direction='up')", False),
    (DONE, "Thought: h.\nAction: finished(content='all good')", True),  # answers not compared
    (CLICK, "Thought: i.\nAction: type(content='x')", False),  # another action
    (CLICK, "Thought: j.\nAction: click(start_box='(5000,406)')", False),  # off the screen
]


def request(n: int) -> ProposalRequest:
    return ProposalRequest(
        instruction=f"Task {n}",
        platform="desktop",
        screenshot_png=solid_png(1280, 800),
        screen=SCREEN,
    )


def test_held_out_episodes_are_a_fixed_share_chosen_by_id():
    first = [is_held_out(i, 0.1) for i in range(1, 5001)]
    assert first == [is_held_out(i, 0.1) for i in range(1, 5001)]
    assert 0.08 < sum(first) / len(first) < 0.12
    assert not any(is_held_out(i, 0.0) for i in range(100))
    assert all(is_held_out(i, 1.0) for i in range(100))
    # A larger share only adds episodes: none leaves the held-out split.
    assert all(is_held_out(i, 0.2) for i in range(1, 5001) if first[i - 1])


def test_scoring_a_step_checks_type_points_and_arguments():
    def score(expected, text):
        from model_serving.uitars import parse_response

        candidate = parse_response(text, SCREEN, "uitars15", "desktop")
        return score_step(Action.from_json(expected), candidate, SCREEN, 0.05)

    assert [score(e, text).success for e, text, _ in HAND_CHECKED] == [
        ok for _, _, ok in HAND_CHECKED
    ]
    far = score(CLICK, HAND_CHECKED[2][1])
    assert far.reason == f"point Point(x=894, y=400) is over {LIMIT:.0f} px from the target"
    invalid = score(CLICK, "I am not sure what to do.")
    assert invalid.invalid and invalid.reason.startswith("invalid answer: ")
    unusable = Candidate("", "", None, "the model's answer is empty")
    assert score_step(Action.from_json(CLICK), unusable, SCREEN, 0.05).invalid


def test_step_success_rate_of_a_hand_checked_set_through_the_live_proposer():
    steps = [
        HeldOutStep(step_id=n, request=request(n), expected=Action.from_json(expected))
        for n, (expected, _, _) in enumerate(HAND_CHECKED, start=1)
    ]
    with serving(model=MODEL) as server:
        server.script(*(Reply.text(text) for _, text, _ in HAND_CHECKED))
        proposer = OpenAIProposer(server.base_url, MODEL, model_version="v1")
        result = evaluate_sync(steps, proposer)

    assert (result.total, result.succeeded, result.invalid) == (11, 5, 2)
    assert result.success_rate == round(5 / 11, 4)
    assert result.by_action == {
        "click": {"total": 6, "succeeded": 2},
        "finished": {"total": 1, "succeeded": 1},
        "hotkey": {"total": 1, "succeeded": 1},
        "scroll": {"total": 1, "succeeded": 0},
        "type": {"total": 2, "succeeded": 1},
    }
    assert [r["success"] for r in result.results] == [ok for _, _, ok in HAND_CHECKED]
    assert result.results[4]["reason"] == "content differs"
    # The request is the live one: UI-TARS-1.5's prompt with the instruction, then the screen.
    first = server.chat_requests[0].body
    assert first["model"] == MODEL
    assert "## User Instruction\nTask 1" in first["messages"][1]["content"][0]["text"]


def test_a_step_the_model_could_not_answer_counts_as_a_failure():
    steps = [HeldOutStep(step_id=1, request=request(1), expected=Action.from_json(CLICK))]
    with serving(model=MODEL) as server:
        server.script(Reply.error(503, "overloaded"))
        proposer = OpenAIProposer(server.base_url, MODEL, retries=0)
        result = evaluate_sync(steps, proposer)
    assert (result.total, result.succeeded, result.success_rate) == (1, 0, 0.0)
    assert result.results[0]["reason"].startswith("model unavailable: ")


def evaluate_sync(steps, proposer):
    import asyncio

    return asyncio.run(evaluate(steps, proposer, 0.05, concurrency=1))


# --- the split in the data and the evaluation job -------------------------------------------


@pytest.fixture
def recorded_project(db, settings, tmp_path, project, make_user):
    settings.MEDIA_ROOT = tmp_path / "media"
    annotator = make_user("ann", project, Role.ANNOTATOR)
    ids = make_episodes(project, annotator, episodes=3, steps=4, size=(1280, 800))
    return project, ids


def test_the_pair_builder_leaves_held_out_episodes_out_when_asked(recorded_project, settings):
    project, ids = recorded_project
    filters = pairs.Filters(project_id=project.pk, exclude_held_out=True)
    settings.TANDEM_HELD_OUT_SHARE = 1.0
    tally = pairs.Tally()
    assert list(pairs.iter_samples(filters, "sft", tally=tally)) == []
    assert tally.skipped[pairs.HELD_OUT] == 3
    settings.TANDEM_HELD_OUT_SHARE = 0.0
    assert {s.episode_id for s in pairs.iter_samples(filters, "sft")} == set(ids)
    everything = pairs.Filters(project_id=project.pk)
    settings.TANDEM_HELD_OUT_SHARE = 1.0
    assert {s.episode_id for s in pairs.iter_samples(everything, "sft")} == set(ids)


def test_held_out_steps_leave_out_kept_errors_and_rejected_steps(
    recorded_project, settings, make_user
):
    project, ids = recorded_project
    settings.TANDEM_HELD_OUT_SHARE = 1.0
    reviewer = make_user("rev", project, Role.REVIEWER)
    Review.objects.create(episode_id=ids[1], reviewer=reviewer, verdict="rejected")
    Review.objects.create(
        episode_id=ids[2], reviewer=reviewer, verdict="rejected", first_wrong_step=2
    )
    chosen = list(
        Step.objects.filter(pk__in=model_versions.held_out_steps(project))
        .order_by("episode_id", "index")
        .values_list("episode_id", "index")
    )
    # Step 3 of each episode is an error_kept; episode 2 was rejected outright; episode 3
    # keeps the prefix before its first wrong step.
    assert chosen == [(ids[0], 1), (ids[0], 2), (ids[0], 4), (ids[2], 1)]
    settings.TANDEM_HELD_OUT_SHARE = 0.0
    assert model_versions.held_out_steps(project) == []


def test_an_evaluation_job_scores_a_version_and_shows_next_to_live_acceptance(
    recorded_project,
    settings,
    make_user,
    token_client_for,
    client_for,
    django_capture_on_commit_callbacks,
):
    project, ids = recorded_project
    settings.TANDEM_HELD_OUT_SHARE = 1.0
    engineer = make_user("erin", project, Role.ENGINEER)
    client, _ = token_client_for(engineer, ["models:write"])
    with serving(model=MODEL) as server:
        server.default = Reply.text("Thought: Click it.\nAction: click(start_box='(644,406)')")
        version = ModelVersion.objects.create(
            name=MODEL, base_model=MODEL, base_url=server.base_url
        )
        with django_capture_on_commit_callbacks(execute=False) as queued:
            started = client.post(
                f"/api/model-versions/{version.pk}/evaluations/",
                {"project": project.pk},
                format="json",
            )
        assert started.status_code == 201, started.json()
        assert len(queued) == 1 and not server.chat_requests  # queued, not run in the request
        run = started.json()
        assert (run["status"], run["total"]) == ("queued", 9)

        assert model_versions.run_evaluation(run["id"]) == "succeeded"

    run = EvaluationRun.objects.get(pk=run["id"])
    # Per episode: the accepted click (step 1) matches; the typed corrections do not.
    assert (run.status, run.total, run.succeeded, run.invalid) == ("succeeded", 9, 3, 0)
    assert run.success_rate == round(3 / 9, 4)
    assert len(server.chat_requests) == 9
    listed = client.get(f"/api/model-versions/{version.pk}/evaluations/").json()
    assert [r["success_rate"] for r in listed] == [run.success_rate]

    overview = client_for(make_user("mia", project, Role.MANAGER)).get(
        f"/api/projects/{project.pk}/model-versions/"
    )
    row = overview.json()["versions"][0]
    assert row["model_version"] == MODEL
    assert row["offline"]["step_success_rate"] == run.success_rate
    # Live: per episode 1 accepted, 2 corrected, 1 error_kept (make_episodes' pattern).
    assert row["live"]["accepted"] == 3 and row["live"]["rate"] == 0.25


def test_evaluations_that_cannot_run_are_refused(recorded_project, settings, make_user, client_for):
    project, _ = recorded_project
    engineer = client_for(make_user("erin", project, Role.ENGINEER))
    version = ModelVersion.objects.create(name=MODEL, base_model=MODEL, base_url="http://m/v1")
    url = f"/api/model-versions/{version.pk}/evaluations/"
    settings.TANDEM_HELD_OUT_SHARE = 0.0
    none = engineer.post(url, {"project": project.pk}, format="json")
    assert none.status_code == 400
    assert none.json()["error"]["code"] == "evaluation_rejected"
    assert "no held-out steps" in none.json()["error"]["message"]
    settings.TANDEM_HELD_OUT_SHARE = 1.0
    wide = engineer.post(url, {"project": project.pk, "tolerance": 3}, format="json")
    assert wide.status_code == 400
    manager = client_for(make_user("mia", project, Role.MANAGER))
    assert manager.post(url, {"project": project.pk}, format="json").status_code == 403
    assert not EvaluationRun.objects.exists()


def test_an_evaluation_that_breaks_is_failed_with_the_reason(recorded_project, settings):
    project, _ = recorded_project
    settings.TANDEM_HELD_OUT_SHARE = 1.0
    version = ModelVersion.objects.create(name=MODEL, base_model=MODEL, base_url="http://m/v1")
    run = model_versions.start_evaluation(version, project, None)
    version.coordinate_style = "no-such-style"  # the proposer refuses these settings
    version.save()

    assert model_versions.run_evaluation(run.pk) == "failed"

    run.refresh_from_db()
    assert run.status == "failed" and "unknown coordinate style" in run.error
    assert model_versions.run_evaluation(run.pk) == "skipped"
