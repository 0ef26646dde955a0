"""A rollout handed to people from its first wrong step, end to end in headless Chromium, on real
sandboxed desktops: uvicorn serving the built app, one Celery worker owning the desktops and the
rollout batches' queue, websockify streaming, and the scripted model server as the model.

The model does the demo's text-editor task but, at step 2, types ' and goodbye' after the
greeting (the wrong step), then saves. A batch of two rollouts runs it. A reviewer marks step 2
of each rollout as its first wrong one and sends it to annotators; a manager assigns both branch
tasks to Annie. On each, the desktop replays step 1 and hands over at step 2, its screen the
rollout's recorded one within the stated tolerance, with the rollout's own step proposed.

- On the first she corrects step 2 (save instead), accepts the model's next steps and finishes:
  an error-correction pair whose rejected side is the rollout's step 2.
- On the second she keeps the error: ' and goodbye' is typed, the screen is the rollout's step 3
  again, so the rollout's own step 3 (save) is offered; she reflects instead (undo the mistake):
  a post-reflection pair whose rejected side is the rollout's step 3.

The DPO export of people's data holds both pairs and nothing else. A third branch, of a task
whose setup writes the time into the editor, diverges at once and is refused, saying by how
much. Screenshots go to var/e2e-screenshots/branch-*.png.
"""

import json
from pathlib import Path
from typing import Any

import datasets
import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from annotation.datasets import exports
from annotation.management.commands.seed_demo import DEMO_TASKS
from annotation.models import (
    DatasetExport,
    Decision,
    Episode,
    EpisodeOutcome,
    Project,
    Rollout,
    RolloutStatus,
    Step,
    Task,
    TaskStatus,
)
from annotation.projects import importer, queue
from annotation.rollouts.batches import BatchRequest, create_batch
from backend.accounts.models import User
from backend.accounts.roles import Role
from model_serving.models import ModelVersion
from tests.e2e.browser import sign_in
from tests.e2e.workspace import (
    MODEL,
    SHOTS,
    decided,
    eventually,
    live_workspace,
    look,
    off_the_loop,
    start_task,
    wait_for_proposal,
)
from tests.support.fake_model_server import Reply
from vm_pool.models import Desktop, DesktopStatus
from vm_pool.screen.compare import screen_difference
from vm_pool.screen.screenshots import screenshot_png

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

GREETING = "Thought: Write the greeting.\nAction: type(content='Hello from Tandem')"
WRONG = "Thought: Add a farewell.\nAction: type(content=' and goodbye')"
SAVE = "Thought: Save it.\nAction: hotkey(key='ctrl s')"
NAME = "Thought: Name the file.\nAction: type(content='hello.txt\\n')"
DONE = "Thought: Saved.\nAction: finished(content='hello.txt holds the greeting')"
# The clock task: its setup fills the editor with the time in nanoseconds, forty lines of it, so
# no replay can match it.
CLOCK_LINES = "for i in $(seq 40); do date +%N%N%N%N; done > /tmp/now.txt"
CLOCK = {
    "id": "clock-note",
    "instruction": "Save the note the text editor shows as note.txt in the home folder.",
    "config": [
        {"type": "execute", "parameters": {"command": ["sh", "-c", CLOCK_LINES]}},
        {"type": "launch", "parameters": {"command": ["mousepad", "/tmp/now.txt"]}},
    ],
    "related_apps": ["mousepad"],
}


def answer(body: Any) -> Reply | None:
    """The model's next step, from the last step in its history."""
    if not isinstance(body, dict):
        return None
    said = [json.dumps(m.get("content")) for m in body.get("messages") or []]
    said = [s for s, m in zip(said, body["messages"], strict=True) if m.get("role") == "assistant"]
    last = said[-1] if said else ""
    if "note.txt" in json.dumps(body.get("messages")) and not said:
        return Reply.text(SAVE)
    for after, then in (("goodbye", SAVE), ("ctrl s", NAME), ("hello.txt", DONE)):
        if after in last:
            return Reply.text(then)
    if "Hello from Tandem" in last:
        return Reply.text(WRONG)
    return Reply.text(GREETING if not said else DONE)


def import_row(project: Project, row: dict[str, Any], manager: User) -> Task:
    report = importer.import_tasks(project, json.dumps(row).encode(), "tasks.jsonl", manager)
    assert report.created == [row["id"]], report
    return Task.objects.get(project=project, external_id=row["id"])


def ready_desktops(count: int) -> None:
    """Wait for the pool to have ``count`` ready desktops (ended work resets them first)."""
    eventually(
        lambda: Desktop.objects.filter(status=DesktopStatus.READY).count() >= count or None,
        f"{count} ready desktops",
        120,
    )


def run_rollouts(project: Project, task: Task, version: ModelVersion, samples: int) -> list:
    engineer = User.objects.get(username="erin")
    ready_desktops(samples)
    batch = create_batch(
        project,
        engineer,
        BatchRequest(
            tasks=[task],
            samples_per_task=samples,
            model_version=version,
            sampling={"temperature": 0.7},
            stop_rules={"invalid_in_row": 2, "same_action_repeats": 3},
            max_concurrent=2,
            desktop_share=1.0,
        ),
    )
    try:
        return eventually(
            lambda: (
                list(batch.rollouts.select_related("episode").order_by("sample"))
                if not batch.rollouts.exclude(status=RolloutStatus.VALIDATED).exists()
                else None
            ),
            f"the {samples} rollouts of {task.external_id}",
            240,
        )
    except AssertionError as error:
        rows = batch.rollouts.select_related("episode").values_list(
            "status", "stop_reason", "episode__end_reason", "episode__evaluation_status"
        )
        raise AssertionError(f"{error}: {list(rows)}") from None


def mark_first_wrong(page: Page, episode_id: int, step: int) -> str:
    """In the reviewer's episode viewer: show the step, mark it, send it on; the status line."""
    page.goto(f"/app/review/episodes/{episode_id}")
    page.get_by_role("navigation", name="Steps").get_by_role(
        "button", name=f"Step {step}", exact=False
    ).first.click()
    panel = page.get_by_test_id("branch-panel")
    panel.get_by_label("Comment (optional)").fill("It typed a farewell nobody asked for.")
    panel.get_by_role("button", name=f"Mark step {step} first wrong & send to annotators").click()
    status = panel.get_by_role("status")
    expect(status).to_contain_text(f"Step {step} is marked as the first wrong one")
    return status.inner_text()


def diff_to_rollout(branch_step: Step, rollout_episode: Episode) -> float:
    recorded = rollout_episode.steps.select_related("observation").get(index=branch_step.index)
    return screen_difference(
        screenshot_png(branch_step.observation), screenshot_png(recorded.observation)
    )


def loaded(project: Project, kind: str) -> datasets.Dataset:
    export = DatasetExport.objects.create(
        project=project,
        kind=kind,
        format="trl",
        filters=exports.ExportFilters().as_json(),
        created_by=User.objects.get(username="erin"),
    )
    exports.build_export(export.pk)
    export.refresh_from_db()
    assert export.status == DatasetExport.Status.SUCCEEDED, export.error
    root = exports.local_path(export, export.files[0]["name"])
    assert root is not None
    return datasets.load_dataset(
        "parquet", data_files=str(Path(root).parent / "*.parquet"), split="train"
    )


def text_of(messages: list[dict[str, Any]]) -> str:
    return " ".join(part["text"] or "" for m in messages for part in m["content"])


def test_a_rollout_goes_to_annotators_from_its_first_wrong_step(
    host, project, make_user, monkeypatch, tmp_path
):
    manager = make_user("mona", project, Role.MANAGER)
    make_user("rita", project, Role.REVIEWER)
    make_user("erin", project, Role.ENGINEER)
    (row,) = [t for t in DEMO_TASKS if t["id"] == "demo-text-editor"]
    editor_task = import_row(project, row, manager)
    clock_task = import_row(project, CLOCK, manager)
    tolerance = settings.TANDEM_BRANCH_REPLAY_TOLERANCE

    with live_workspace(
        host, project, monkeypatch, [], desktops=2, queues="default", beat=tmp_path / "beat"
    ) as live:
        live.model.responder = answer
        project.refresh_from_db()  # on the workspace's desktop template now
        version = ModelVersion.objects.create(
            name=MODEL,
            base_model=MODEL,
            base_url=live.model.base_url,
            serving_status=ModelVersion.Serving.SERVING,
        )
        first, second = run_rollouts(project, editor_task, version, samples=2)
        for rollout in (first, second):
            steps = rollout.episode.steps.order_by("index")
            assert [s.final_action for s in steps][:3] == [
                {"type": "type", "content": "Hello from Tandem"},
                {"type": "type", "content": " and goodbye"},
                {"type": "hotkey", "keys": ["ctrl", "s"]},
            ], rollout.episode.end_reason
        (clock,) = run_rollouts(project, clock_task, version, samples=1)

        # The reviewer marks step 2 of each rollout and sends it on.
        _, review_page, review_errors = sign_in(live.browser, live.base, "rita", "/app/review")
        said = mark_first_wrong(review_page, first.episode_id, 2)
        review_page.screenshot(path=str(SHOTS / "branch-marked.png"))
        mark_first_wrong(review_page, second.episode_id, 2)
        mark_first_wrong(review_page, clock.episode_id, 2)
        branches = {t.branch_of_id: t for t in Task.objects.filter(branch_of__isnull=False)}
        assert branches[first.episode_id].external_id in said
        for rollout in (first, second):
            review = rollout.episode.reviews.get()
            assert (review.verdict, review.first_wrong_step) == ("rejected", 2)
        # Marking again answers the same task.
        again = mark_first_wrong(review_page, first.episode_id, 2)
        assert Task.objects.filter(branch_of=first.episode_id).count() == 1
        assert branches[first.episode_id].external_id in again
        review_errors.assert_none()

        off_the_loop(
            queue.assign_tasks,
            [branches[first.episode_id], branches[second.episode_id]],
            User.objects.get(username="annie"),
            manager,
        )
        page = live.page
        ready_desktops(1)

        # 1. Replayed to step 2; she corrects it.
        a = start_task(page)
        assert Episode.objects.get(pk=a).task_id == branches[first.episode_id].pk
        wait_for_proposal(page, 2)
        note = page.get_by_test_id("branch-note")
        expect(note).to_contain_text("Step 1 of rollout episode")
        expect(note).to_contain_text("every screen matched")
        expect(page.get_by_test_id("proposal-action")).to_contain_text("and goodbye")
        page.screenshot(path=str(SHOTS / "branch-handed-over.png"))
        episode_a = Episode.objects.get(pk=a)
        assert [s["difference"] <= tolerance for s in episode_a.replay["steps"]] == [True, True]
        open_step = episode_a.steps.get(index=2)
        assert diff_to_rollout(open_step, first.episode) <= tolerance
        assert episode_a.steps.get(index=1).decision == Decision.AUTO
        page.get_by_role("button", name="Correct").click()
        correction = page.get_by_role("form", name="Your correction")
        correction.get_by_label("Action").select_option("hotkey")
        correction.get_by_label("Keys").fill("ctrl s")
        correction.get_by_label("Thought").fill("The greeting is complete: save it as it is.")
        page.get_by_role("button", name="Submit step").click()
        assert decided(a, 2).decision == Decision.CORRECTED
        for index in (3, 4):  # the model names the file, then finishes: both accepted
            look(page, index)  # the Save As dialog opens, then closes, after its key
            page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="Episode ended: finished")).to_be_visible()

        # 2. Replayed to step 2 again; she keeps the error and reflects at step 3.
        ready_desktops(1)
        b = start_task(page)
        assert Episode.objects.get(pk=b).task_id == branches[second.episode_id].pk
        wait_for_proposal(page, 2)
        assert diff_to_rollout(Episode.objects.get(pk=b).steps.get(index=2), second.episode) <= (
            tolerance
        )
        page.get_by_role("button", name="Keep error & reflect").click()
        assert decided(b, 2).decision == Decision.ERROR_KEPT
        wait_for_proposal(page, 3)
        expect(page.get_by_test_id("proposal-action")).to_contain_text("ctrl")
        episode_b = Episode.objects.get(pk=b)
        offered = episode_b.replay["after_kept_error"]
        assert offered["offered"] is True and offered["difference"] <= tolerance, offered
        rollout_three = second.episode.steps.get(index=3).proposals.get(action__isnull=False)
        assert episode_b.steps.get(index=3).proposals.get().raw_text == rollout_three.raw_text
        page.screenshot(path=str(SHOTS / "branch-offered.png"))
        # The reflective step opens the editor by itself.
        correction = page.get_by_role("form", name="Your reflective step")
        correction.get_by_label("Action").select_option("hotkey")
        correction.get_by_label("Keys").fill("ctrl z")
        correction.get_by_label("Thought").fill(
            "I typed ' and goodbye', which the task never asked for: undo it before saving."
        )
        page.screenshot(path=str(SHOTS / "branch-reflection.png"))
        page.get_by_role("button", name="Submit step").click()
        assert decided(b, 3).decision == Decision.CORRECTED
        wait_for_proposal(page, 4)
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Abandon episode").click()
        expect(page.get_by_role("heading", name="Episode ended: abandoned")).to_be_visible()

        # 3. The clock's replay diverges at once: nobody is handed that desktop.
        annie = User.objects.get(username="annie")
        off_the_loop(queue.assign_tasks, [branches[clock.episode_id]], annie, manager)
        ready_desktops(1)
        c = start_task(page)
        expect(page.get_by_role("heading", name="Episode ended: env failed")).to_be_visible(
            timeout=60_000
        )
        page.screenshot(path=str(SHOTS / "branch-diverged.png"))
        live.errors.assert_none()

    episode_c = Episode.objects.get(pk=c)
    assert episode_c.outcome == EpisodeOutcome.ENV_FAILED
    assert episode_c.replay["diverged_at"] == 1 and not episode_c.steps.exists()
    assert "the replay diverged: the screen after the setup differs" in episode_c.end_reason
    refused = Task.objects.get(pk=branches[clock.episode_id].pk)
    assert refused.cannot_run.startswith("the replay diverged") and refused.status == (
        TaskStatus.QUEUED
    )
    assert Episode.objects.get(pk=a).outcome == EpisodeOutcome.FINISHED

    pairs = loaded(project, "dpo")
    assert sorted((r["episode_id"], r["step_index"], r["sample_kind"]) for r in pairs) == [
        (a, 2, "error_correction"),
        (b, 3, "post_reflection"),
    ]
    by_kind = {r["sample_kind"]: r for r in pairs}
    correction_pair, reflection_pair = by_kind["error_correction"], by_kind["post_reflection"]
    assert "and goodbye" in text_of(correction_pair["rejected"])  # the rollout's a_2
    assert "ctrl s" in text_of(correction_pair["chosen"])
    assert "hotkey(key='ctrl s')" in text_of(reflection_pair["rejected"])  # the rollout's a_3
    assert "ctrl z" in text_of(reflection_pair["chosen"])
    # The kept error is in the reflection's history; the replayed step 1 in both.
    assert "and goodbye" in text_of(reflection_pair["prompt"])
    assert "Hello from Tandem" in text_of(correction_pair["prompt"])
    # The replayed steps are nobody's: no SFT sample of people's data is one of them.
    sft = loaded(project, "sft")
    assert {(r["episode_id"], r["step_index"]) for r in sft} == {(a, 2), (b, 3)}
    assert not Rollout.objects.exclude(status=RolloutStatus.VALIDATED).exists()
