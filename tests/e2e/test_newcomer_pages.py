"""A newcomer's walk through the pages of each role, in headless Chromium against uvicorn
serving the built app: every link leads to the page of that project, a project's exports and
fine-tuning jobs stay inside the project, the episode viewer leads back to the project's
episodes and marks the reflection steps, counts are written with their plurals, an unassigned
task that nobody held is told apart from a started one, and a page the user's role cannot use
says whom it is for instead of offering controls the server would refuse.
Screenshots go to var/e2e-screenshots/newcomer-*.png.
"""

import json
import re
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from annotation.datasets.exports import ExportFilters
from annotation.models import (
    DatasetExport,
    Decision,
    Episode,
    EpisodeOutcome,
    Project,
    Proposal,
    Step,
    Task,
    TaskEvent,
    TaskStatus,
)
from backend.accounts.roles import Role
from model_serving.models import FineTuneJob
from tests.e2e.browser import accessibility_problems, chromium, sign_in
from tests.support.pngs import solid_png
from tests.support.services import BIN, child_env, free_port, port_open, running
from vm_pool.screen.screenshots import store_screenshot

# A Redis database of this suite alone, so that it can run beside the other live suites.
REDIS = "redis://127.0.0.1:6379/1"
SHOTS = Path(__file__).resolve().parents[2] / "var" / "e2e-screenshots"
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

INSTRUCTION = "Rename report.txt to final.txt in the Documents folder"
CLICK = {"type": "click", "point": [640, 400]}
# (decision, final thought, final action): the annotator keeps the model's wrong click at step
# 2 on purpose, and step 3 is the reflection that recovers from it.
STEPS = [
    (Decision.ACCEPTED, "Open the Documents folder.", {"type": "click", "point": [120, 200]}),
    (Decision.ERROR_KEPT, "Click the file.", CLICK),
    (
        Decision.CORRECTED,
        "That opened the wrong file; go back and select report.txt instead.",
        {"type": "hotkey", "keys": ["alt", "left"]},
    ),
    (Decision.ACCEPTED, "Done.", {"type": "finished", "content": ""}),
]
REFLECTION = (
    "Reflection step: the annotator kept the model's wrong action at step 2 on purpose, "
    "and this step recovers from it."
)


def recorded_episode(project: Project, annotator) -> Episode:
    """A submitted episode with a kept error and its reflection."""
    task = Task.objects.create(
        project=project,
        external_id="rename-report",
        instruction=INSTRUCTION,
        status=TaskStatus.SUBMITTED,
        assignee=annotator,
    )
    now = timezone.now()
    episode = Episode.objects.create(
        task=task,
        annotator=annotator,
        model_version="ui-tars-1.5-7b",
        started_at=now - timedelta(minutes=20),
        ended_at=now - timedelta(minutes=5),
        outcome=EpisodeOutcome.FINISHED,
    )
    screen = store_screenshot(solid_png(1280, 800, (70, 90, 120)))
    for index, (decision, thought, action) in enumerate(STEPS, start=1):
        step = Step.objects.create(episode=episode, index=index, observation=screen)
        proposal = Proposal.objects.create(
            step=step,
            raw_text="Thought: Click.\nAction: click(start_box='(644,406)')",
            thought="Click.",
            action=CLICK,
            model_version="ui-tars-1.5-7b",
        )
        Step.objects.filter(pk=step.pk).update(
            decision=decision,
            chosen_proposal=None if decision == Decision.CORRECTED else proposal,
            final_thought=thought,
            final_action=action,
            decided_by=annotator,
            decided_at=now - timedelta(minutes=15 - index),
            decision_ms=2000,
        )
    return episode


def exports_and_jobs(project: Project, other: Project, engineer) -> FineTuneJob:
    """A succeeded SFT export of the project, a job trained on it and one of another project."""
    filters = ExportFilters(exclude_held_out=True, min_task_success=1.0).as_json()
    export = DatasetExport.objects.create(
        project=project,
        kind=DatasetExport.Kind.SFT,
        filters=filters,
        status=DatasetExport.Status.SUCCEEDED,
        progress=1.0,
        counts={"samples": 12, "episodes": 3},
        files=[{"name": "train.parquet", "size": 20480, "sha256": "0" * 64}],
        created_by=engineer,
        finished_at=timezone.now(),
    )

    def job(name: str, on: Project, export_id: int) -> FineTuneJob:
        stage = {"kind": "sft", "dataset": {"export_id": export_id, "kind": "sft", "files": []}}
        return FineTuneJob.objects.create(
            name=name,
            base_model="ui-tars-1.5-7b",
            base_model_path="/models/ui-tars-1.5-7b",
            stages=[stage],
            project_ids=[on.pk],
            version_name=f"{name}-v1",
            status="succeeded",
            progress=1.0,
            created_by=engineer,
        )

    job("web-forms-sft", other, 9999)
    return job("office-sft", project, export.pk)


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"newcomer-{name}.png"), full_page=True)
    assert accessibility_problems(page) == []


def check_home_links(browser, base_url: str, project: Project) -> None:
    """Each role's link on the home page leads to that project's page of the role."""
    context, page, errors = sign_in(browser, base_url, "mona", "/app/")
    link = page.get_by_role("link", name="Manage the project")
    expect(link).to_have_attribute("href", f"/app/manage/projects/{project.pk}/board")
    shot(page, "home-manager")
    link.click()
    expect(page).to_have_url(re.compile(rf"/app/manage/projects/{project.pk}/board$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(project.name)
    errors.assert_none()
    context.close()

    context, page, errors = sign_in(browser, base_url, "rita", "/app/")
    page.get_by_role("link", name="Review episodes").click()
    expect(page).to_have_url(re.compile(rf"/app/review\?project={project.pk}$"))
    expect(page.get_by_label("Project")).to_have_value(str(project.pk))
    expect(page.get_by_role("link", name=re.compile(r"^Episode \d+$"))).to_have_count(1)
    shot(page, "review-queue-of-project")
    errors.assert_none()
    context.close()

    context, page, errors = sign_in(browser, base_url, "eve", "/app/")
    page.get_by_role("link", name="Datasets and models").last.click()
    expect(page).to_have_url(re.compile(rf"/app/engineer/exports\?project={project.pk}$"))
    expect(page.get_by_label("Project")).to_have_value(str(project.pk))
    errors.assert_none()
    context.close()


def check_exports_and_jobs_stay_in_the_project(
    browser, base_url: str, project: Project, job: FineTuneJob
) -> None:
    context, page, errors = sign_in(
        browser, base_url, "mona", f"/app/manage/projects/{project.pk}/board"
    )
    tabs = page.get_by_role("navigation", name="Project sections")
    tabs.get_by_role("link", name="Dataset exports").click()
    expect(page).to_have_url(re.compile(rf"/app/manage/projects/{project.pk}/exports$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(project.name)
    expect(tabs.get_by_role("link", name="Dataset exports")).to_have_class("active")
    table = page.get_by_test_id("exports-table")
    expect(table.locator("tbody td").nth(2)).to_have_text(
        "min task success 1 · held-out excluded · require approved thoughts: yes"
    )
    expect(page.get_by_role("button", name="Start export")).to_have_count(0)
    expect(page.get_by_label("Project", exact=True)).to_have_count(0)  # the page's own
    shot(page, "project-exports")

    tabs.get_by_role("link", name="Fine-tuning jobs").click()
    expect(page).to_have_url(re.compile(rf"/app/manage/projects/{project.pk}/finetune$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(project.name)
    jobs = page.get_by_role("link", name=re.compile(r"^#\d+ "))
    expect(jobs).to_have_text([f"#{job.pk} office-sft"])  # not the other project's job
    expect(page.get_by_role("button", name="Start fine-tuning")).to_have_count(0)
    shot(page, "project-finetune")

    # The job's own page is the engineers' section, which a manager reads too.
    jobs.first.click()
    expect(page).to_have_url(re.compile(rf"/app/engineer/finetune/{job.pk}$"))
    expect(
        page.get_by_role("heading", name=f"Fine-tuning job #{job.pk}: office-sft")
    ).to_be_visible()
    expect(page.get_by_test_id("not-for-role")).to_have_count(0)
    errors.assert_none()
    context.close()


def check_episodes_and_the_viewer(
    browser, base_url: str, project: Project, episode: Episode
) -> None:
    context, page, errors = sign_in(
        browser, base_url, "mona", f"/app/manage/projects/{project.pk}/episodes"
    )
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=f"Episode {episode.pk}"))
    task_cell = row.get_by_role("cell").nth(1)
    expect(task_cell).to_contain_text(INSTRUCTION)
    expect(task_cell.locator(".meta")).to_have_text("rename-report")
    shot(page, "project-episodes")

    row.get_by_role("link", name=f"Episode {episode.pk}").click()
    back = page.get_by_role("link", name=f"← Episodes of {project.name}")
    expect(back).to_be_visible()
    steps = page.get_by_role("navigation", name="Steps")
    expect(steps.locator(".badge-reflection")).to_have_count(1)
    expect(steps.get_by_role("button", name="Step 3")).to_contain_text("reflection")
    steps.get_by_role("button", name="Step 3").click()
    expect(page.get_by_test_id("reflection-note")).to_have_text(REFLECTION)
    shot(page, "episode-reflection-manager")
    steps.get_by_role("button", name="Step 2").click()
    expect(page.get_by_test_id("reflection-note")).to_have_text(
        "Error kept on purpose: the model's wrong action was executed, and step 3 reflects on it."
    )
    back.click()
    expect(page).to_have_url(re.compile(rf"/app/manage/projects/{project.pk}/episodes$"))
    errors.assert_none()
    context.close()

    context, page, errors = sign_in(browser, base_url, "rita", f"/app/review/episodes/{episode.pk}")
    steps = page.get_by_role("navigation", name="Steps")
    expect(steps.get_by_role("button", name="Step 3")).to_contain_text("reflection")
    steps.get_by_role("button", name="Step 3").click()
    expect(page.get_by_test_id("reflection-note")).to_have_text(REFLECTION)
    expect(page.get_by_role("link", name="← Review queue")).to_be_visible()
    shot(page, "episode-reflection-reviewer")
    errors.assert_none()
    context.close()


def check_counts_and_unassigning(browser, base_url: str, project: Project) -> None:
    pooled = Task.objects.create(project=project, external_id="pooled", instruction="Open Files")
    context, page, errors = sign_in(
        browser, base_url, "mona", f"/app/manage/projects/{project.pk}/tasks"
    )
    one = json.dumps([{"id": "new-1", "instruction": "Empty the trash"}])
    page.get_by_label("Task file").set_input_files(
        files=[{"name": "one.json", "mimeType": "application/json", "buffer": one.encode()}]
    )
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_test_id("import-report")).to_have_text(
        "Imported 1 task: 1 created, 0 updated, 0 unchanged."
    )

    stored = Task.objects.get(pk=pooled.pk)
    events = TaskEvent.objects.filter(task=pooled).count()
    page.get_by_label("Select task pooled").check()
    page.get_by_role("button", name="Unassign selected").click()
    expect(page.get_by_test_id("assign-result")).to_have_text(
        "No task went back to the pool. 1 task was not assigned to anyone."
    )
    after = Task.objects.get(pk=pooled.pk)
    assert (after.status, after.assignee, after.updated_at) == (
        TaskStatus.QUEUED,
        None,
        stored.updated_at,
    )
    assert TaskEvent.objects.filter(task=pooled).count() == events
    shot(page, "tasks-unassign-not-assigned")

    page.get_by_label("Select task pooled").check()
    page.get_by_label("Select task new-1").check()
    page.get_by_label("Annotator").select_option("ann")
    page.get_by_role("button", name="Assign 2 selected").click()
    expect(page.get_by_test_id("assign-result")).to_have_text("2 tasks assigned to ann.")
    page.get_by_label("Select task pooled").check()
    page.get_by_label("Select task rename-report").check()
    page.get_by_role("button", name="Unassign selected").click()
    expect(page.get_by_test_id("assign-result")).to_have_text(
        "1 task back in the pool. 1 task already started: left alone."
    )
    assert Task.objects.get(pk=pooled.pk).status == TaskStatus.QUEUED
    assert Task.objects.get(external_id="rename-report").status == TaskStatus.SUBMITTED
    errors.assert_none()
    context.close()


def check_pages_not_for_the_role(browser, base_url: str, project: Project) -> None:
    """An annotator who opens a manager's, a reviewer's or an engineer's address is told
    whom the page is for, and offered none of its controls."""
    context, page, errors = sign_in(
        browser, base_url, "ann", f"/app/manage/projects/{project.pk}/tasks"
    )
    notice = page.get_by_test_id("not-for-role")
    expect(notice.get_by_role("heading")).to_have_text("This page is for project managers.")
    expect(notice).to_contain_text("Your role in this project: annotator.")
    expect(page.get_by_role("navigation", name="Project sections")).to_have_count(0)
    for control in ("Import", "Unassign selected"):
        expect(page.get_by_role("button", name=control)).to_have_count(0)
    expect(page.get_by_label("Task file")).to_have_count(0)
    shot(page, "annotator-on-manager-page")

    page.goto(f"/app/manage/projects/{project.pk}/episodes")
    expect(notice.get_by_role("heading")).to_have_text(
        "This page is for project managers and reviewers."
    )
    page.goto("/app/review")
    expect(notice.get_by_role("heading")).to_have_text(
        "This page is for reviewers and project managers."
    )
    expect(page.get_by_role("button", name="Refresh")).to_have_count(0)
    shot(page, "annotator-on-review-page")
    page.goto("/app/engineer/exports")
    expect(notice.get_by_role("heading")).to_have_text(
        "This page is for ML engineers and project managers."
    )
    expect(page.get_by_role("navigation", name="Engineer sections")).to_have_count(0)
    notice.get_by_role("link", name="Your projects").click()
    expect(page.get_by_role("link", name="Work the queue")).to_be_visible()
    errors.assert_none()  # no request the server would refuse was made
    context.close()

    # A reviewer reads the project's board, episodes, annotators' quality and rollout batches,
    # not its tasks.
    context, page, errors = sign_in(
        browser, base_url, "rita", f"/app/manage/projects/{project.pk}/tasks"
    )
    notice = page.get_by_test_id("not-for-role")
    expect(notice.get_by_role("heading")).to_have_text("This page is for project managers.")
    expect(notice).to_contain_text("Your role in this project: reviewer.")
    tabs = page.get_by_role("navigation", name="Project sections")
    expect(tabs.get_by_role("link")).to_have_text(
        ["Progress", "Charts", "Episodes", "Quality", "Rollouts"]
    )
    errors.assert_none()
    context.close()


def test_each_role_is_offered_only_its_own_pages(
    make_user, project, other_project, settings, tmp_path, monkeypatch
):
    settings.MEDIA_ROOT = tmp_path / "media"
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_user("mona", project, Role.MANAGER)
    make_user("rita", project, Role.REVIEWER)
    eve = make_user("eve", project, Role.ENGINEER)
    episode = recorded_episode(project, ann)
    job = exports_and_jobs(project, other_project, eve)
    SHOTS.mkdir(parents=True, exist_ok=True)
    env = child_env(
        TANDEM_MEDIA_ROOT=str(settings.MEDIA_ROOT),
        TANDEM_CELERY_BROKER_URL=REDIS,
        TANDEM_REDIS_URL=REDIS,
    )
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"

    with ExitStack() as stack:
        command = [str(BIN / "uvicorn"), "backend.asgi:application", "--port", str(port)]
        stack.enter_context(running(command, env, port_open(port)))
        browser = stack.enter_context(chromium(monkeypatch))
        check_home_links(browser, base_url, project)
        check_exports_and_jobs_stay_in_the_project(browser, base_url, project, job)
        check_episodes_and_the_viewer(browser, base_url, project, episode)
        check_counts_and_unassigning(browser, base_url, project)
        check_pages_not_for_the_role(browser, base_url, project)
