"""The rollout pages in headless Chromium against uvicorn serving the built app.

A batch's rows are written straight into the database as a finished run leaves them (no
desktop, no worker): one rollout V=1, one V=0 stopped by a loop, one whose judge gave no
verdict, one still queued, over two model versions. A manager reads the batch page, whose
figures must be those of ``annotation.rollouts.stats.summary``, pauses and resumes it, follows a
rollout to its episode and back, starts a batch from the form (first with a mistake the form
names, then for real: the batch and its queued rollouts are stored, nothing runs them) and
cancels it, and sets the project's validation with a judge whose key is never shown again. An
engineer reaches the same pages from the engineers' section, a reviewer reads them and reviews
a rollout, and an annotator sees none of it. Screenshots go to
var/e2e-screenshots/rollouts-*.png.
"""

import math
import re
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from annotation.models import (
    BatchStatus,
    Decision,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    EvaluationStatus,
    Project,
    Proposal,
    Review,
    Rollout,
    RolloutBatch,
    RolloutStatus,
    Step,
    Task,
)
from annotation.rollouts import stats
from annotation.rollouts.batches import refresh_counts
from annotation.rollouts.rules import StopRules
from backend.accounts.roles import Role
from model_serving.models import ModelVersion
from tests.e2e.browser import accessibility_problems, chromium, sign_in
from tests.support.pngs import solid_png
from tests.support.services import BIN, child_env, free_port, port_open, running
from vm_pool.models import DesktopTemplate
from vm_pool.screen.screenshots import store_screenshot

# Channels of this suite's own Redis database; jobs go nowhere (an in-memory broker).
REDIS = "redis://127.0.0.1:6379/1"
SHOTS = Path(__file__).resolve().parents[2] / "var" / "e2e-screenshots"
SECRET = "sk-judge-e2e-secret"
CLICK = {"type": "click", "point": [640, 400]}
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def percent(rate: float | None) -> str:
    """As the web app writes a rate (JavaScript's Math.round)."""
    return "—" if rate is None else f"{math.floor(rate * 100 + 0.5)}%"


def score(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def check(name: str, passed: bool, reason: str = "") -> dict:
    return {"name": name, "passed": passed, "reason": reason, "details": {}}


PASSED_CHECKS = [
    check(name, True)
    for name in ("no_op_actions", "loops", "invalid_outputs", "call_user", "stopped_by_rule")
]
LOOP_CHECKS = [
    check("no_op_actions", False, "steps 2, 3 changed nothing"),
    check("loops", False, "click(640,400) 3 times in a row at steps 1-3"),
    check("invalid_outputs", True),
    check("call_user", True),
    check("stopped_by_rule", False, "stopped by the rule: loop"),
]


def part(name: str, passed: bool | None, reason: str, details: dict | None = None) -> dict:
    return {"name": name, "passed": passed, "reason": reason, "details": details or {}}


def rollout_episode(task: Task, engineer, version: str, outcome: str, steps: int, success):
    now = timezone.now()
    episode = Episode.objects.create(
        task=task,
        mode=EpisodeMode.AUTONOMOUS,
        annotator=engineer,
        model_version=version,
        started_at=now - timedelta(minutes=10),
        ended_at=now - timedelta(minutes=5),
        outcome=outcome,
        evaluation_status=EvaluationStatus.SCORED if success is not None else "",
        task_success=success,
    )
    screen = store_screenshot(solid_png(1280, 800, (60, 80, 110)))
    for index in range(1, steps + 1):
        step = Step.objects.create(episode=episode, index=index, observation=screen)
        proposal = Proposal.objects.create(
            step=step,
            raw_text="Thought: Click the file.\nAction: click(start_box='(644,406)')",
            thought="Click the file.",
            action=CLICK,
            model_version=version,
        )
        Step.objects.filter(pk=step.pk).update(
            decision=Decision.AUTO,
            chosen_proposal=proposal,
            final_thought="Click the file.",
            final_action=CLICK,
            decided_at=now - timedelta(minutes=9 - index),
        )
    return episode


def recorded_batch(project: Project, engineer) -> tuple[RolloutBatch, dict[str, Rollout]]:
    """A running batch of two tasks × 2 samples, A and B sharing them, as its run left it."""
    a = ModelVersion.objects.create(
        name="ui-tars-a", base_model="ui-tars", serving_status=ModelVersion.Serving.SERVING
    )
    b = ModelVersion.objects.create(
        name="ui-tars-b", base_model="ui-tars", serving_status=ModelVersion.Serving.SERVING
    )
    rename = Task.objects.create(
        project=project, external_id="rename-report", instruction="Rename report.txt"
    )
    trash = Task.objects.create(
        project=project, external_id="empty-trash", instruction="Empty the trash"
    )
    Task.objects.create(project=project, external_id="open-files", instruction="Open Files")
    Task.objects.create(
        project=project, external_id="needs-file", instruction="Open a file", cannot_run="no file"
    )
    now = timezone.now()
    batch = RolloutBatch.objects.create(
        project=project,
        name="nightly",
        model_version=a,
        version_b=b,
        version_b_share=0.5,
        task_ids=[rename.pk, trash.pk],
        samples_per_task=2,
        sampling={"temperature": 0.7},
        stop_rules=StopRules().as_json(),
        status=BatchStatus.RUNNING,
        created_by=engineer,
        started_at=now - timedelta(minutes=11),
    )

    def rollout(task, sample, episode, stop, verdict, parts, steps, tokens) -> Rollout:
        return Rollout.objects.create(
            batch=batch,
            task=task,
            sample=sample,
            episode=episode,
            attempt=1,
            status=RolloutStatus.VALIDATED,
            stop_reason=stop,
            verdict=verdict,
            validation={
                "parts": parts,
                "verdict": verdict,
                "routed": {True: "sft", False: "ct", None: ""}[verdict],
                "at": (now - timedelta(minutes=4)).isoformat(),
            },
            steps=steps,
            tokens=tokens,
            started_at=now - timedelta(minutes=10),
            ended_at=now - timedelta(minutes=5),
        )

    rows = {
        "passed": rollout(
            rename,
            0,
            rollout_episode(rename, engineer, "ui-tars-a", EpisodeOutcome.FINISHED, 2, 1.0),
            "finished",
            True,
            [
                part("rules", True, "every rule check passed", {"checks": PASSED_CHECKS}),
                part("evaluator", True, "task success 1 reaches 1"),
                part("judge", True, "score 0.9 reaches 0.5: The file was renamed."),
            ],
            2,
            2400,
        ),
        "loop": rollout(
            rename,
            1,
            rollout_episode(rename, engineer, "ui-tars-b", EpisodeOutcome.STOPPED, 3, 0.0),
            "loop",
            False,
            [
                part(
                    "rules",
                    False,
                    "steps 2, 3 changed nothing; a loop; stopped by the rule: loop",
                    {"checks": LOOP_CHECKS},
                ),
                part("evaluator", False, "task success 0 is below 1"),
                part("judge", False, "score 0.1 is below 0.5: It clicked the same spot."),
            ],
            3,
            3600,
        ),
        "unknown": rollout(
            trash,
            0,
            rollout_episode(trash, engineer, "ui-tars-a", EpisodeOutcome.FINISHED, 1, None),
            "finished",
            None,
            [
                part("rules", True, "every rule check passed", {"checks": PASSED_CHECKS}),
                part("judge", None, "the judge gave no verdict: timed out"),
                part("human", None, "waiting for a review"),
            ],
            1,
            900,
        ),
    }
    rows["queued"] = Rollout.objects.create(batch=batch, task=trash, sample=1)
    refresh_counts(batch.pk)
    batch.refresh_from_db()
    return batch, rows


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"rollouts-{name}.png"), full_page=True)
    assert accessibility_problems(page) == []


def table_rows(page: Page, test_id: str) -> list[list[str]]:
    rows = page.get_by_test_id(test_id).locator("tbody tr")
    return [[cell.strip() for cell in row.locator("td").all_inner_texts()] for row in rows.all()]


def check_list_and_batch_page(browser, base_url: str, project: Project, batch: RolloutBatch):
    context, page, errors = sign_in(
        browser, base_url, "mona", f"/app/manage/projects/{project.pk}/board"
    )
    page.get_by_role("navigation", name="Project sections").get_by_role(
        "link", name="Rollouts"
    ).click()
    expect(page).to_have_url(re.compile(rf"/app/manage/projects/{project.pk}/rollouts$"))
    listed = page.get_by_test_id("batches-table")
    row = listed.locator("tbody tr").first
    expect(row).to_contain_text(f"#{batch.pk} nightly")
    expect(row).to_contain_text("ui-tars-a · B ui-tars-b takes 50%")
    expect(row).to_contain_text("2 tasks × 2 = 4 rollouts")
    expect(row).to_contain_text("running")
    expect(row.get_by_role("progressbar")).to_have_attribute("value", str(batch.progress))
    expect(row.get_by_test_id(f"verdicts-{batch.pk}")).to_have_text("1 / 1")
    expect(page.get_by_role("form", name="New rollout batch")).to_be_visible()
    shot(page, "list")

    row.get_by_role("link", name=f"#{batch.pk} nightly").click()
    expect(page.get_by_role("heading", name=f"Rollout batch #{batch.pk}: nightly")).to_be_visible()
    summary = stats.summary(batch)
    solved = sum(1 for t in summary["by_task"] if t["passed"])
    expect(page.get_by_test_id("pass-at-k")).to_have_text(
        f"{percent(summary['pass_at_k'])} ({solved} of {len(summary['by_task'])} tasks "
        "with a sample at V=1)"
    )
    overall = summary["success"]
    expect(page.get_by_test_id("success-rate")).to_have_text(
        f"{percent(overall['success_rate'])} ({overall['passed']} of {overall['validated']} "
        "whose V is known)"
    )
    expect(page.get_by_test_id("task-success-mean")).to_have_text(score(overall["task_success"]))
    expect(page.get_by_test_id("batch-status")).to_contain_text("3 of 4 rollouts done · 1 queued")
    assert table_rows(page, "by-task") == [
        [
            t["task"],
            str(t["rollouts"]),
            f"{t['passed']} of {t['validated']}",
            percent(t["success_rate"]),
            score(t["task_success"]),
        ]
        for t in summary["by_task"]
    ]
    assert sorted(table_rows(page, "by-version")) == sorted(
        [
            v["model_version"],
            str(v["rollouts"]),
            f"{v['passed']} of {v['validated']}",
            percent(v["success_rate"]),
            score(v["task_success"]),
        ]
        for v in summary["by_version"]
    )
    labels = {
        "rules": "Rule checks",
        "evaluator": "Task evaluator",
        "judge": "Judge model",
        "human": "Human review",
    }
    assert table_rows(page, "verdicts-by-part") == [
        [labels[name], *(str(counts.get(k, 0)) for k in ("passed", "failed", "unknown"))]
        for name, counts in sorted(
            summary["verdicts"].items(), key=lambda item: list(labels).index(item[0])
        )
    ]
    for reason, count in summary["stop_reasons"].items():
        expect(page.get_by_test_id(f"stop-{reason}")).to_have_text(str(count))
    cost = summary["cost"]
    expect(page.get_by_test_id("cost")).to_have_text(
        f"Cost: {cost['steps']} steps, {cost['tokens']:,} tokens "
        f"({round(cost['tokens_per_rollout']):,} per ended rollout)."
    )
    rollouts = page.get_by_test_id("rollouts-table")
    expect(rollouts.locator("tbody tr")).to_have_count(4)
    shot(page, "batch")

    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_test_id("batch-status")).to_contain_text("paused")
    assert RolloutBatch.objects.get(pk=batch.pk).status == BatchStatus.PAUSED
    expect(page.get_by_role("button", name="Pause")).to_be_disabled()
    expect(page.get_by_test_id("steering")).to_contain_text("The batch is already paused.")
    page.get_by_role("button", name="Resume").click()
    expect(page.get_by_test_id("batch-status")).to_contain_text("running")
    assert RolloutBatch.objects.get(pk=batch.pk).status == BatchStatus.RUNNING
    expect(page.get_by_test_id("steering")).to_contain_text("The batch is not paused.")
    errors.assert_none()
    context.close()


def check_rollout_episode(browser, base_url: str, project: Project, batch, loop: Rollout):
    """From the batch's table to the loop's episode, its panel, and back."""
    context, page, errors = sign_in(
        browser, base_url, "mona", f"/app/manage/projects/{project.pk}/rollouts/{batch.pk}"
    )
    page.get_by_test_id("rollouts-table").get_by_role(
        "link", name=f"Episode {loop.episode_id}", exact=True
    ).click()
    expect(page).to_have_url(re.compile(rf"/app/manage/episodes/{loop.episode_id}$"))
    panel = page.get_by_test_id("rollout-panel")
    expect(panel.get_by_test_id("rollout-verdict")).to_have_text("V=0")
    expect(panel).to_contain_text("its trajectory is a CT sample")
    expect(panel.get_by_test_id("rollout-stop")).to_have_text("loop (the same action repeated)")
    expect(panel).to_contain_text("task rename-report, sample 2")
    rules = panel.get_by_test_id("part-rules")
    expect(rules).to_contain_text("Rule checks failed")
    expect(rules.get_by_test_id("check-loops")).to_have_text(
        "failed No loops — click(640,400) 3 times in a row at steps 1-3"
    )
    expect(rules.get_by_test_id("check-invalid_outputs")).to_have_text("passed No invalid outputs")
    expect(panel.get_by_test_id("part-judge")).to_contain_text(
        "Judge model failed score 0.1 is below 0.5: It clicked the same spot."
    )
    expect(panel.get_by_test_id("part-evaluator")).to_contain_text("Task evaluator failed")
    expect(page.get_by_test_id("episode-meta")).to_contain_text("rollout started by eve")
    steps = page.get_by_role("navigation", name="Steps")
    expect(steps.get_by_role("button", name="Step 1")).to_contain_text("Run as proposed")
    expect(page.get_by_test_id("decision")).to_have_text("Run as proposed")
    expect(page.get_by_role("form", name="Review")).to_be_visible()
    expect(panel.get_by_test_id("human-part-note")).to_have_count(0)  # V has no human part
    shot(page, "episode-panel")

    panel.get_by_role("link", name=f"← Rollout batch #{batch.pk}").click()
    expect(page).to_have_url(re.compile(rf"/app/manage/projects/{project.pk}/rollouts/{batch.pk}$"))
    expect(page.get_by_role("heading", name=f"Rollout batch #{batch.pk}: nightly")).to_be_visible()
    errors.assert_none()
    context.close()


def check_new_batch_then_cancel(browser, base_url: str, project: Project) -> None:
    context, page, errors = sign_in(
        browser, base_url, "mona", f"/app/manage/projects/{project.pk}/rollouts"
    )
    form = page.get_by_role("form", name="New rollout batch")
    form.get_by_label("Model version A").select_option("ui-tars-a")
    expect(form.get_by_label("Version B (optional)").locator("option")).to_have_text(
        ["— none —", "ui-tars-b"]
    )
    expect(form.get_by_label(re.compile(r"^ *All runnable tasks \(3\)"))).to_be_checked()
    expect(form).to_contain_text("1 task of the project cannot run here and is left out")
    expect(form.get_by_test_id("batch-size")).to_have_text("3 tasks × 4 = 12 rollouts")
    form.get_by_label("Name (optional)").fill("from the form")
    form.get_by_label(re.compile("Some of them")).check()
    form.get_by_label("Run task rename-report").check()
    form.get_by_label("Run task open-files").check()
    expect(form.get_by_test_id("chosen-count")).to_have_text("2 of 3 chosen")
    form.get_by_label("Samples per task").fill("3")
    form.get_by_label("Temperature").fill("0.5")
    form.get_by_label("Max concurrent rollouts").fill("2")
    form.get_by_label("Desktop share").fill("25")
    form.get_by_label("Invalid outputs in a row").fill("2")
    form.get_by_label("Same action repeats").fill("1")
    form.get_by_label("Steps in a row that left the screen unchanged").fill("6")
    form.get_by_role("button", name="Start rollout batch").click()
    problem = form.get_by_text("a whole number from 2 to 500")
    expect(problem).to_be_visible()
    assert RolloutBatch.objects.count() == 1  # the form's mistake never reached the server
    expect(form.get_by_test_id("batch-size")).to_have_text("2 tasks × 3 = 6 rollouts")
    shot(page, "new-batch")
    form.get_by_label("Same action repeats").fill("4")
    expect(problem).to_have_count(0)

    form.get_by_role("button", name="Start rollout batch").click()
    heading = page.get_by_role("heading", name=re.compile(r"Rollout batch #\d+: from the form"))
    expect(heading).to_be_visible()
    batch_id = int(re.search(r"/rollouts/(\d+)$", page.url).group(1))
    batch = RolloutBatch.objects.get(pk=batch_id)
    assert (batch.status, batch.created_by.username) == (BatchStatus.QUEUED, "mona")
    assert sorted(
        Task.objects.filter(pk__in=batch.task_ids).values_list("external_id", flat=True)
    ) == [
        "open-files",
        "rename-report",
    ]
    assert (batch.samples_per_task, batch.sampling, batch.max_concurrent) == (
        3,
        {"temperature": 0.5},
        2,
    )
    assert batch.desktop_share == pytest.approx(0.25)
    assert batch.stop_rules == {
        "invalid_in_row": 2,
        "same_action_repeats": 4,
        "unchanged_steps": 6,
        "max_steps": 30,
    }
    assert list(batch.rollouts.values_list("status", flat=True)) == [RolloutStatus.QUEUED] * 6
    expect(page.get_by_test_id("batch-status")).to_contain_text("0 of 6 rollouts done · 6 queued")
    expect(page.get_by_test_id("batch-settings")).to_contain_text(
        "2 invalid outputs in a row · the same action 4 times (loop) · 6 unchanged steps · "
        "at most 30 steps"
    )

    page.get_by_role("button", name="Cancel batch").click()
    confirm = page.get_by_role("group", name="Confirm cancelling")
    expect(confirm).to_contain_text("Its 6 queued or running rollouts will not finish.")
    confirm.get_by_role("button", name="Yes, cancel the batch").click()
    expect(page.get_by_test_id("batch-status")).to_contain_text("cancelled")
    expect(page.get_by_test_id("batch-status")).to_contain_text("6 of 6 rollouts done")
    batch.refresh_from_db()
    assert batch.status == BatchStatus.CANCELLED and batch.finished_at is not None
    assert set(batch.rollouts.values_list("status", flat=True)) == {RolloutStatus.CANCELLED}
    statuses = page.get_by_test_id("rollouts-table").locator("tbody tr td:nth-child(4)")
    expect(statuses).to_have_text(["cancelled"] * 6)
    for name in ("Pause", "Resume", "Cancel batch"):
        expect(page.get_by_role("button", name=name)).to_be_disabled()
    expect(page.get_by_test_id("disabled-reason")).to_have_text(["This batch was cancelled."] * 3)
    shot(page, "cancelled")
    errors.assert_none()
    context.close()


def check_validation_settings(browser, base_url: str, project: Project) -> None:
    context, page, errors = sign_in(
        browser, base_url, "mona", f"/app/manage/projects/{project.pk}/rollouts"
    )
    form = page.get_by_role("form", name="Validation of rollouts")
    expect(form.get_by_test_id("judge-key-status")).to_have_text("No key is set.")
    form.get_by_label("Judge endpoint base URL").fill("http://judge-host:8000/v1")
    form.get_by_label("Judge model", exact=True).fill("qwen2.5-vl-72b")
    form.get_by_label("Pass threshold").fill("0.6")
    form.get_by_label("Judge API key").fill(SECRET)
    form.get_by_label("Minimum task success").fill("0.8")
    form.get_by_label(re.compile("Human review")).check()
    form.get_by_role("button", name="Save validation settings").click()
    expect(form.get_by_test_id("validation-saved")).to_have_text("Saved.")
    expect(form.get_by_test_id("judge-key-status")).to_have_text("A key is set; it is never shown.")
    stored = Project.objects.get(pk=project.pk).validation_settings
    assert stored == {
        "min_task_success": 0.8,
        "human_review": True,
        "judge": {
            "base_url": "http://judge-host:8000/v1",
            "model": "qwen2.5-vl-72b",
            "threshold": 0.6,
            "api_key": SECRET,
        },
    }

    page.reload()
    form = page.get_by_role("form", name="Validation of rollouts")
    expect(form.get_by_label("Judge endpoint base URL")).to_have_value("http://judge-host:8000/v1")
    expect(form.get_by_label("Pass threshold")).to_have_value("0.6")
    expect(form.get_by_label("Judge API key")).to_have_value("")
    expect(form.get_by_label(re.compile("Human review"))).to_be_checked()
    assert SECRET not in page.content()
    shot(page, "validation")
    # Saved again without typing the key: the stored key stays.
    form.get_by_label("Minimum task success").fill("1")
    form.get_by_role("button", name="Save validation settings").click()
    expect(form.get_by_test_id("validation-saved")).to_have_text("Saved.")
    stored = Project.objects.get(pk=project.pk).validation_settings
    assert (stored["min_task_success"], stored["judge"]["api_key"]) == (1, SECRET)
    errors.assert_none()
    context.close()


def check_engineer_section(browser, base_url: str, project: Project, batch, passed: Rollout):
    context, page, errors = sign_in(browser, base_url, "eve", "/app/engineer/exports")
    page.get_by_role("navigation", name="Engineer sections").get_by_role(
        "link", name="Rollouts"
    ).click()
    expect(page.get_by_label("Project")).to_have_value(str(project.pk))
    page.get_by_role("link", name=f"#{batch.pk} nightly").click()
    expect(page).to_have_url(re.compile(rf"/app/engineer/rollouts/{batch.pk}$"))
    expect(page.get_by_role("button", name="Pause")).to_be_enabled()
    page.get_by_test_id("rollouts-table").get_by_role(
        "link", name=f"Episode {passed.episode_id}", exact=True
    ).click()
    expect(page).to_have_url(re.compile(rf"/app/engineer/episodes/{passed.episode_id}$"))
    panel = page.get_by_test_id("rollout-panel")
    expect(panel.get_by_test_id("rollout-verdict")).to_have_text("V=1")
    expect(panel).to_contain_text("its steps are SFT samples (rejection sampling)")
    expect(panel.get_by_test_id("part-rules").locator("li")).to_have_count(5)
    expect(page.get_by_role("form", name="Review")).to_have_count(0)  # engineers do not review
    shot(page, "engineer-episode")
    page.get_by_role("link", name=f"← Rollout batch #{batch.pk}").first.click()
    expect(page).to_have_url(re.compile(rf"/app/engineer/rollouts/{batch.pk}$"))
    page.get_by_role("link", name="← Rollout batches").click()
    expect(page).to_have_url(re.compile(rf"/app/engineer/rollouts\?project={project.pk}$"))
    errors.assert_none()
    context.close()


def check_reviewer_reads_and_reviews(browser, base_url: str, project: Project, batch, unknown):
    context, page, errors = sign_in(
        browser, base_url, "rita", f"/app/manage/projects/{project.pk}/rollouts"
    )
    expect(page.get_by_test_id("batches-table")).to_contain_text(f"#{batch.pk} nightly")
    expect(page.get_by_role("form", name="New rollout batch")).to_have_count(0)
    expect(page.get_by_role("form", name="Validation of rollouts")).to_have_count(0)
    page.get_by_role("link", name=f"#{batch.pk} nightly").click()
    expect(page.get_by_test_id("pass-at-k")).to_be_visible()
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    page.get_by_role("link", name=f"Episode {unknown.episode_id}", exact=True).click()
    panel = page.get_by_test_id("rollout-panel")
    expect(panel.get_by_test_id("rollout-verdict")).to_have_text("not known")
    expect(panel).to_contain_text("in no dataset until every part is known")
    expect(panel.get_by_test_id("part-judge")).to_contain_text("Judge model not known")
    expect(panel.get_by_test_id("part-human")).to_contain_text("waiting for a review")
    expect(panel.get_by_test_id("human-part-note")).to_be_visible()
    shot(page, "reviewer-episode")
    page.get_by_label("Reject it").check()
    page.get_by_label("First wrong step").select_option("1")
    page.get_by_role("button", name="Reject episode").click()
    expect(page.get_by_test_id("latest-review")).to_contain_text("Rejected by rita")
    review = Review.objects.get(episode_id=unknown.episode_id)
    assert (review.verdict, review.first_wrong_step) == (Review.Verdict.REJECTED, 1)
    errors.assert_none()
    context.close()


def check_annotator_sees_none_of_it(browser, base_url: str, project: Project) -> None:
    context, page, errors = sign_in(browser, base_url, "ann", "/app/")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link")).to_have_text(["Annotate"])
    expect(page.get_by_role("link", name=re.compile("rollout", re.I))).to_have_count(0)
    page.goto(f"/app/manage/projects/{project.pk}/rollouts")
    notice = page.get_by_test_id("not-for-role")
    expect(notice.get_by_role("heading")).to_have_text(
        "This page is for project managers and reviewers."
    )
    expect(page.get_by_role("navigation", name="Project sections")).to_have_count(0)
    page.goto("/app/engineer/rollouts")
    expect(notice.get_by_role("heading")).to_have_text(
        "This page is for ML engineers and project managers."
    )
    for control in ("Start rollout batch", "Pause", "Save validation settings"):
        expect(page.get_by_role("button", name=control)).to_have_count(0)
    shot(page, "annotator")
    errors.assert_none()  # no request the server would refuse was made
    context.close()


def test_rollout_batches_are_started_read_and_steered_in_the_browser(
    make_user, project, settings, tmp_path, monkeypatch
):
    settings.MEDIA_ROOT = tmp_path / "media"
    make_user("ann", project, Role.ANNOTATOR)
    make_user("mona", project, Role.MANAGER)
    make_user("rita", project, Role.REVIEWER)
    eve = make_user("eve", project, Role.ENGINEER)
    DesktopTemplate.objects.create(name=project.environment_template, min_ready=0)
    batch, rows = recorded_batch(project, eve)
    SHOTS.mkdir(parents=True, exist_ok=True)
    env = child_env(
        TANDEM_MEDIA_ROOT=str(settings.MEDIA_ROOT),
        TANDEM_CELERY_BROKER_URL="memory://",
        TANDEM_CELERY_RESULT_BACKEND="cache+memory://",
        TANDEM_REDIS_URL=REDIS,
    )
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"

    with ExitStack() as stack:
        command = [str(BIN / "uvicorn"), "backend.asgi:application", "--port", str(port)]
        stack.enter_context(running(command, env, port_open(port)))
        browser = stack.enter_context(chromium(monkeypatch))
        check_list_and_batch_page(browser, base_url, project, batch)
        check_rollout_episode(browser, base_url, project, batch, rows["loop"])
        check_new_batch_then_cancel(browser, base_url, project)
        check_validation_settings(browser, base_url, project)
        check_engineer_section(browser, base_url, project, batch, rows["passed"])
        check_reviewer_reads_and_reviews(browser, base_url, project, batch, rows["unknown"])
        check_annotator_sees_none_of_it(browser, base_url, project)
