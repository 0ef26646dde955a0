"""What a task's evaluator made of an episode, in headless Chromium against uvicorn serving the
built app: the manager's episodes table gives each episode's task success (a score, "scoring…",
"not scored" with its reason); the episode viewer's Evaluation panel gives the score, its reason,
each metric with what the getters returned, the postconfig log and what the setup went on after;
the charts give task success per model version beside acceptance. The reviewer's queue shows
the score too. Screenshots go to var/e2e-screenshots/.
"""

from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.models import (
    Decision,
    Episode,
    EpisodeOutcome,
    EvaluationStatus,
    Proposal,
    Step,
    Task,
    TaskStatus,
)
from backend.accounts.roles import Role
from tests.e2e.browser import accessibility_problems, chromium, sign_in
from tests.support.pngs import solid_png
from tests.support.services import BIN, child_env, free_port, port_open, running
from vm_pool.screen.screenshots import store_screenshot

# Redis databases of this suite alone, so that it can run beside the other live suites.
BROKER, CHANNELS = "redis://127.0.0.1:6379/2", "redis://127.0.0.1:6379/3"
SHOTS = Path(__file__).resolve().parents[2] / "var" / "e2e-screenshots"
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

EVALUATION = {
    "score": 1.0,
    "reason": "every metric ran",
    "conjunction": "and",
    "metrics": [
        {
            "index": 0,
            "func": "compare_table",
            "score": 1.0,
            "result": "/tmp/tandem-evaluation-x/result.xlsx",
            "expected": "/tmp/tandem-evaluation-x/gold.xlsx",
        },
        {
            "index": 1,
            "func": "exact_match",
            "score": 1.0,
            "result": "Total: 42",
            "expected": "Total: 42",
        },
    ],
    "postconfig_log": ["activate_window: no window named 'Calc'"],
}


def ended(project, annotator, instruction, **evaluation) -> Episode:
    task = Task.objects.create(
        project=project,
        external_id=instruction.split()[0].lower(),
        instruction=instruction,
        status=TaskStatus.SUBMITTED,
        assignee=annotator,
    )
    now = timezone.now()
    return Episode.objects.create(
        task=task,
        annotator=annotator,
        model_version="ui-tars-1.5-7b",
        started_at=now - timedelta(hours=1, minutes=5),
        ended_at=now - timedelta(hours=1),
        outcome=EpisodeOutcome.FINISHED,
        **evaluation,
    )


def test_managers_and_reviewers_read_the_evaluation(
    make_user, project, settings, tmp_path, monkeypatch
):
    settings.MEDIA_ROOT = tmp_path / "media"
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_user("mona", project, Role.MANAGER)
    make_user("rita", project, Role.REVIEWER)
    scored = ended(
        project,
        ann,
        "Sum the column in Calc",
        evaluation_status=EvaluationStatus.SCORED,
        task_success=1.0,
        evaluation=EVALUATION,
        setup_log=["command 'soffice --calc' exited 1"],
    )
    failed = ended(
        project,
        ann,
        "Rename the file",
        evaluation_status=EvaluationStatus.FAILED,
        evaluation={"error": "the desktop was lost"},
    )
    step = Step.objects.create(
        episode=scored, index=1, observation=store_screenshot(solid_png(1280, 800))
    )
    proposal = Proposal.objects.create(
        step=step,
        raw_text="Thought: Done.\nAction: finished(content='')",
        thought="Done.",
        action={"type": "finished", "content": ""},
        model_version="ui-tars-1.5-7b",
    )
    Step.objects.filter(pk=step.pk).update(
        decision=Decision.ACCEPTED,
        chosen_proposal=proposal,
        final_thought="Done.",
        final_action={"type": "finished", "content": ""},
        decided_by=ann,
        decided_at=scored.ended_at,
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    env = child_env(
        TANDEM_MEDIA_ROOT=str(settings.MEDIA_ROOT),
        TANDEM_CELERY_BROKER_URL=BROKER,
        TANDEM_REDIS_URL=CHANNELS,
    )
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"

    with ExitStack() as stack:
        command = [str(BIN / "uvicorn"), "backend.asgi:application", "--port", str(port)]
        stack.enter_context(running(command, env, port_open(port)))
        browser = stack.enter_context(chromium(monkeypatch))

        context, page, errors = sign_in(
            browser, base_url, "mona", f"/app/manage/projects/{project.pk}/episodes"
        )
        expect(page.get_by_test_id(f"task-success-{scored.pk}")).to_have_text("1.00")
        not_scored = page.get_by_test_id(f"task-success-{failed.pk}")
        expect(not_scored).to_have_text("not scored")
        expect(not_scored).to_have_attribute("title", "the desktop was lost")
        page.screenshot(path=str(SHOTS / "evaluation-episodes-table.png"), full_page=True)

        page.get_by_role("link", name=f"Episode {scored.pk}", exact=True).click()
        panel = page.get_by_test_id("evaluation-panel")
        expect(panel.get_by_test_id("task-success")).to_have_text("1.00")
        expect(panel).to_contain_text("every metric ran")
        metrics = panel.get_by_test_id("evaluation-metrics")
        expect(metrics.get_by_role("cell", name="compare_table")).to_be_visible()
        expect(metrics).to_contain_text("Total: 42")
        expect(panel.get_by_test_id("postconfig-log")).to_have_text(
            "activate_window: no window named 'Calc'"
        )
        expect(panel.get_by_test_id("setup-log")).to_contain_text(
            "Setup went on after:command 'soffice --calc' exited 1"
        )
        page.screenshot(path=str(SHOTS / "evaluation-episode-viewer.png"), full_page=True)
        assert accessibility_problems(page) == []

        page.goto(f"/app/manage/projects/{project.pk}/charts")
        table = page.get_by_test_id("task-success-table")
        row = table.get_by_role("row", name="ui-tars-1.5-7b")
        expect(row).to_contain_text("1.00")  # mean task success of the one scored episode
        expect(row).to_contain_text("100%")  # its success rate, and the acceptance rate
        expect(page.get_by_test_id("task-success-chart").locator("circle")).to_have_count(1)
        page.screenshot(path=str(SHOTS / "evaluation-charts.png"), full_page=True)
        assert accessibility_problems(page) == []
        errors.assert_none()
        context.close()

        context, page, errors = sign_in(browser, base_url, "rita", "/app/review")
        expect(page.get_by_test_id(f"task-success-{scored.pk}")).to_have_text("1.00")
        page.get_by_role("link", name=f"Episode {failed.pk}", exact=True).click()
        expect(page.get_by_test_id("evaluation-panel")).to_contain_text(
            "Not scored: the desktop was lost"
        )
        page.screenshot(path=str(SHOTS / "evaluation-reviewer-failed.png"), full_page=True)
        errors.assert_none()
        context.close()
