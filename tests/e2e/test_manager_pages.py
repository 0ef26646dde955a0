"""The manager, reviewer and engineer pages in headless Chromium against real services.

An episode is recorded the way an annotator records one: a real ASGI server, a real Celery
worker owning a real desktop, the baseline proposer, and a WebSocket client deciding each
step. The browser then works the pages the way people do: the manager's board, charts and
episode viewer and the reviewer's verdict (``manager_flow``), a task import that is refused
with its bad rows listed and one that goes through, a bulk assignment, access tokens created
and revoked, and a dataset export asked for and downloaded.
"""

import json
import re
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from django.test import Client
from django.utils import timezone
from playwright.sync_api import expect

from annotation.models import (
    Episode,
    EpisodeOutcome,
    EvaluatorCheck,
    EvaluatorCheckStatus,
    Project,
    Review,
    Step,
    Task,
    TaskStatus,
)
from annotation.projects import evaluator_checks
from backend.accounts.models import AccessToken
from backend.accounts.roles import Role
from tests.e2e.browser import accessibility_problems, chromium, sign_in
from tests.e2e.manager_flow import check_manager_and_reviewer
from tests.support.live import CSRF, TERMINAL, Socket, asgi, service_env, websockify, worker
from tests.support.services import celery_worker, free_port, running, worker_answers
from vm_pool import pool
from vm_pool.models import DesktopStatus, DesktopTemplate

# Redis databases of this suite alone, so that it can run beside the other live suites.
BROKER, CHANNELS = "redis://127.0.0.1:6379/8", "redis://127.0.0.1:6379/9"
SHOTS = Path(__file__).resolve().parents[2] / "var" / "e2e-shots"
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def export_worker(host: str):
    """A Celery worker of the ``exports`` queue on this suite's own broker."""
    name = f"{host}@exports"
    command = celery_worker(name, "exports", "threads", 2)

    def ready() -> bool:
        return worker_answers(BROKER, name)

    return running(command, service_env(host, BROKER, CHANNELS), ready, 60)


class Recording:
    """An annotator's episode over the socket: accept the baseline's click, correct the next
    click with the annotator's own, then finish."""

    def __init__(self, server: str, project: Project, annotator) -> None:
        client = Client()
        client.force_login(annotator)
        cookie = f"sessionid={client.cookies['sessionid'].value}"
        started = httpx.post(
            f"http://{server}/api/episodes/start/",
            json={"project": project.pk},
            headers={"Cookie": f"{cookie}; csrftoken={CSRF}", "X-CSRFToken": CSRF},
        )
        assert started.status_code == 201, started.text
        self.episode_id: int = started.json()["episode"]
        self.ws = Socket(server, self.episode_id, cookie)
        self.state = self.ws.next("state")

    def first_step(self) -> None:
        # The first proposal may be ready before the socket connects: then it is in the state.
        steps = self.state["steps"]
        if self.state["open_step"] != 1 or not (steps and steps[0]["proposals"]):
            self.ws.next("proposal", step=1)
        self.ws.send(type="decide", step=1, decision="accepted", proposal=0)
        self.ws.next("decision_ack", step=1)

    def finish(self) -> None:
        ws = self.ws
        ws.next("proposal", step=2)
        click = {"type": "click", "point": [900, 600]}
        ws.send(
            type="decide", step=2, decision="corrected", thought="Click the prompt.", action=click
        )
        ws.next("decision_ack", step=2)
        ws.next("proposal", step=3)
        done = {"type": "finished", "content": ""}
        ws.send(type="decide", step=3, decision="corrected", thought="Done.", action=done)
        ws.next("decision_ack", step=3)
        assert ws.next("ended")["outcome"] == EpisodeOutcome.FINISHED
        ws.close()


def check_live_view(browser, base_url: str, episode_id: int) -> None:
    """A manager watches the running episode's desktop: real frames, view-only."""
    context, page, errors = sign_in(browser, base_url, "mona", f"/app/manage/episodes/{episode_id}")
    page.get_by_role("button", name="Watch live (view-only)").click()
    screen = page.get_by_test_id("live-screen")
    expect(screen.locator("[data-stream=live]")).to_be_attached(timeout=30_000)
    canvas = screen.locator("canvas")
    expect(canvas).to_be_attached()
    page.wait_for_function(
        "c => c.width === 1280 && c.height === 800", arg=canvas.element_handle(), timeout=15_000
    )
    page.screenshot(path=str(SHOTS / "manager-live-view.png"), full_page=True)
    assert accessibility_problems(page) == []
    errors.assert_none()
    context.close()


def check_rejection_with_first_wrong_step(browser, base_url: str, episode_id: int) -> None:
    """The manager walks the steps with the arrow keys, then rejects the episode from its
    second step on: the steps before it stay usable."""
    context, page, errors = sign_in(browser, base_url, "mona", f"/app/manage/episodes/{episode_id}")
    steps = page.get_by_role("navigation", name="Steps")
    expect(steps.locator("[aria-current=step]")).to_contain_text("Step 1")
    page.keyboard.press("ArrowRight")
    expect(steps.locator("[aria-current=step]")).to_contain_text("Step 2")
    page.get_by_label("Reject it").check()
    page.get_by_label("First wrong step").select_option("2")
    page.get_by_label("Comment").fill("The click missed the prompt.")
    page.get_by_role("button", name="Reject episode").click()
    expect(page.get_by_test_id("latest-review")).to_contain_text("Rejected by mona")
    expect(page.get_by_test_id("latest-review")).to_contain_text("first wrong step 2")
    expect(steps.get_by_role("button", name="Step 2")).to_contain_text("first wrong")
    review = Review.objects.get(episode_id=episode_id, reviewer__username="mona")
    assert (review.verdict, review.first_wrong_step) == (Review.Verdict.REJECTED, 2)
    assert Episode.objects.get(pk=episode_id).task.status == TaskStatus.REJECTED
    page.screenshot(path=str(SHOTS / "manager-rejected-from-step-2.png"), full_page=True)
    assert accessibility_problems(page) == []
    errors.assert_none()
    context.close()


def check_projects(browser, base_url: str) -> None:
    """The manager's project list, and a project created from it."""
    context, page, errors = sign_in(browser, base_url, "mona", "/app/manage")
    expect(page.get_by_role("link", name="Office tasks")).to_be_visible()
    page.get_by_label("Name").fill("Web forms")
    page.get_by_label("Platform").select_option("web")
    page.get_by_role("button", name="Create project").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Web forms")
    created = Project.objects.get(name="Web forms")
    expect(page).to_have_url(re.compile(rf"/app/manage/projects/{created.pk}/board$"))
    assert (created.platform, created.memberships.get().user.username) == ("web", "mona")
    page.get_by_role("link", name="Projects", exact=True).click()
    expect(page.get_by_role("link", name="Web forms")).to_be_visible()
    page.screenshot(path=str(SHOTS / "manager-projects.png"), full_page=True)
    assert accessibility_problems(page) == []
    errors.assert_none()
    context.close()


def check_task_import_and_assignment(browser, base_url: str, project: Project) -> None:
    context, page, errors = sign_in(
        browser, base_url, "mona", f"/app/manage/projects/{project.pk}/tasks"
    )
    before = Task.objects.filter(project=project).count()
    bad = "\n".join(
        [
            '{"id": "n1", "instruction": "Open the editor"}',
            '{"id": "n2"}',
            '{"id": "n3", "max_steps": -1, "instruction": "x"}',
        ]
    )
    page.get_by_label("Task file").set_input_files(
        files=[{"name": "bad.jsonl", "mimeType": "application/x-ndjson", "buffer": bad.encode()}]
    )
    page.get_by_role("button", name="Import", exact=True).click()
    problems = page.get_by_test_id("import-errors")
    expect(problems).to_contain_text("Nothing was imported")
    expect(problems.locator("caption")).to_have_text("2 bad rows, 2 problems")
    rows = problems.locator("tbody tr")
    expect(rows.first).to_be_visible()
    assert {r.split("\t")[0] for r in rows.all_inner_texts()} >= {"2", "3"}
    expect(rows.first.locator("td").nth(1)).to_have_text("instruction")
    assert Task.objects.filter(project=project).count() == before  # nothing written
    page.screenshot(path=str(SHOTS / "manager-import-errors.png"), full_page=True)
    assert accessibility_problems(page) == []

    good = json.dumps([{"id": f"n{i}", "instruction": f"Open document {i}"} for i in range(1, 4)])
    page.get_by_label("Task file").set_input_files(
        files=[{"name": "good.json", "mimeType": "application/json", "buffer": good.encode()}]
    )
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_test_id("import-report")).to_contain_text("3 created")
    assert Task.objects.filter(project=project).count() == before + 3

    table = page.get_by_test_id("task-table")
    expect(table.get_by_role("cell", name="n3", exact=True)).to_be_visible()
    page.get_by_label("Select task n1").check()
    page.get_by_label("Select task n2").check()
    page.get_by_label("Annotator").select_option("ann")
    page.get_by_role("button", name="Assign 2 selected").click()
    expect(page.get_by_test_id("assign-result")).to_contain_text("2 tasks assigned to ann.")
    assigned = Task.objects.filter(project=project, external_id__in=["n1", "n2"])
    assert {(t.status, t.assignee.username) for t in assigned} == {(TaskStatus.ASSIGNED, "ann")}
    page.screenshot(path=str(SHOTS / "manager-tasks-assigned.png"), full_page=True)
    assert accessibility_problems(page) == []
    page.get_by_label("Select task n2").check()
    page.get_by_role("button", name="Unassign selected").click()
    expect(page.get_by_test_id("assign-result")).to_have_text("1 task back in the pool.")
    back = Task.objects.get(project=project, external_id="n2")
    assert (back.status, back.assignee) == (TaskStatus.QUEUED, None)

    # The evaluator self-check: a metric not supported here is flagged at once, in the report
    # and on the task's row.
    ocr = {
        "id": "e1",
        "instruction": "Make the picture say hello",
        "evaluator": {"func": "compare_image_text", "result": {"type": "vm_file", "path": "/x"}},
    }
    page.get_by_label("Task file").set_input_files(
        files=[
            {
                "name": "ocr.json",
                "mimeType": "application/json",
                "buffer": json.dumps([ocr]).encode(),
            }
        ]
    )
    page.get_by_role("button", name="Import", exact=True).click()
    checks = page.get_by_test_id("import-evaluator-checks")
    expect(checks).to_contain_text("1 cannot evaluate")
    expect(checks).to_contain_text("compare_image_text is not supported here")
    expect(
        table.get_by_role("row").filter(has_text="e1").get_by_test_id("cannot-evaluate")
    ).to_be_visible()
    # An evaluator its check found passing without work (as the desktop host records it) is
    # trusted from its row.
    n3 = Task.objects.get(project=project, external_id="n3")
    EvaluatorCheck.objects.create(
        task=n3,
        status=EvaluatorCheckStatus.PASSES_WITHOUT_WORK,
        score=1.0,
        reason="scores 1 on the untouched desktop: every metric ran",
        content_sha=evaluator_checks.content_sha(n3),
        checked_at=timezone.now(),
    )
    page.reload()
    row = page.get_by_test_id("task-table").get_by_role("row").filter(has_text="Open document 3")
    expect(row.get_by_test_id("passes-without-work")).to_be_visible()
    page.screenshot(path=str(SHOTS / "manager-evaluator-checks.png"), full_page=True)
    assert accessibility_problems(page) == []
    row.get_by_role("button", name="Trust evaluator").click()
    expect(row.get_by_test_id("passes-without-work")).to_have_count(0)
    assert EvaluatorCheck.objects.get(task=n3).cleared_by.username == "mona"
    refused = f"status of 400 (Bad Request) ({base_url}/api/projects/{project.pk}/import/)"
    errors.assert_none(expected=(refused,))
    context.close()


def check_tokens(browser, base_url: str, server: str) -> None:
    context, page, errors = sign_in(browser, base_url, "eve", "/app/engineer/tokens")
    page.get_by_label("Name").fill("training box")
    page.get_by_label("projects:read").check()
    page.get_by_label("Expires after (days)").fill("7")
    page.get_by_role("button", name="Create token").click()
    secret = page.get_by_test_id("token-secret").inner_text().strip()
    assert secret.startswith("tdm_")
    bearer = {"Authorization": f"Bearer {secret}"}
    listed = httpx.get(f"http://{server}/api/projects/", headers=bearer)
    assert listed.status_code == 200, listed.text
    page.screenshot(path=str(SHOTS / "engineer-token-created.png"), full_page=True)
    assert accessibility_problems(page) == []
    page.get_by_role("button", name="I have stored it").click()
    expect(page.get_by_test_id("token-secret")).to_have_count(0)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke training box").click()
    expect(page.get_by_role("cell", name="revoked", exact=False)).to_be_visible()
    assert AccessToken.objects.get(name="training box").revoked_at is not None
    refused = httpx.get(f"http://{server}/api/projects/", headers=bearer)
    assert refused.status_code == 401
    errors.assert_none()
    context.close()


def check_exports(browser, base_url: str, project: Project) -> None:
    context, page, errors = sign_in(browser, base_url, "eve", "/app/engineer/exports")
    expect(page.get_by_label("Project")).to_have_value(str(project.pk))
    page.get_by_label("Kind").select_option("sft")
    page.get_by_label("Format").select_option("trl")
    page.get_by_role("button", name="Start export").click()
    table = page.get_by_test_id("exports-table")
    expect(table.get_by_text("succeeded")).to_be_visible(timeout=120_000)
    link = table.get_by_role("link").first
    href = link.get_attribute("href")
    assert href and "/download/?file=" in href
    downloaded = context.request.get(f"{base_url}{href}")
    assert downloaded.status == 200 and len(downloaded.body()) > 0
    page.screenshot(path=str(SHOTS / "engineer-exports.png"), full_page=True)
    assert accessibility_problems(page) == []
    errors.assert_none()
    context.close()

    # The project's manager reads the exports from the project page, and may not ask for one.
    context, page, errors = sign_in(
        browser, base_url, "mona", f"/app/manage/projects/{project.pk}/board"
    )
    page.get_by_role("link", name="Dataset exports").click()
    expect(page.get_by_test_id("exports-table").get_by_text("succeeded")).to_be_visible()
    expect(page.get_by_role("button", name="Start export")).to_have_count(0)
    errors.assert_none()
    context.close()


def test_manager_reviewer_and_engineer_pages(host, make_user, project, monkeypatch):
    template = DesktopTemplate.objects.create(name="pages", width=1280, height=800)
    Project.objects.filter(pk=project.pk).update(environment_template="pages")
    ann = make_user("ann", project, Role.ANNOTATOR)
    make_user("mona", project, Role.MANAGER, can_create_projects=True)
    make_user("rita", project, Role.REVIEWER)
    make_user("eve", project, Role.ENGINEER)
    Task.objects.create(
        project=project,
        external_id="pages-1",
        instruction="Open the Archive folder, then the Reports folder",
        setup=[{"type": "launch", "parameters": {"command": TERMINAL}}],
        max_steps=10,
    )
    desktop = pool.start_desktop(pool.create_desktop(template, host).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    port, stream_port = free_port(), free_port()
    server = f"127.0.0.1:{port}"
    base_url = f"http://{server}"

    with ExitStack() as stack:
        stack.enter_context(worker(host, BROKER, CHANNELS))
        stack.enter_context(export_worker(host))
        stack.enter_context(websockify(stream_port))
        stream_url = f"ws://127.0.0.1:{stream_port}"
        stack.enter_context(
            asgi(host, port, BROKER, CHANNELS, TANDEM_WEBSOCKIFY_PUBLIC_URL=stream_url)
        )
        browser = stack.enter_context(chromium(monkeypatch))
        recording = Recording(server, project, ann)
        recording.first_step()
        check_live_view(browser, base_url, recording.episode_id)
        recording.finish()
        episode_id = recording.episode_id
        assert Step.objects.filter(episode_id=episode_id).count() == 3
        check_manager_and_reviewer(browser, base_url, episode_id, project.pk, SHOTS, "mona", "rita")
        assert Episode.objects.get(pk=episode_id).task.status == TaskStatus.REVIEWED
        check_rejection_with_first_wrong_step(browser, base_url, episode_id)
        check_projects(browser, base_url)
        check_task_import_and_assignment(browser, base_url, project)
        check_tokens(browser, base_url, server)
        check_exports(browser, base_url, project)
