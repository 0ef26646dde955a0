"""The demo's browser task, as ``make demo`` seeds it, worked by an annotator in headless Chromium
on a real sandboxed desktop that has no network: uvicorn serving the built app, a Celery worker
owning the desktop, websockify streaming it, and the scripted model server proposing.

The task's setup writes the library's page into the desktop and opens it from there; the
text editor waits behind the browser. The model reads the title and minimises the browser (the
annotator accepts), types the title without its colon (she corrects it), saves with Ctrl+S and
names the file title.txt (she accepts both), and says it has finished. The file on the desktop
holds the page's title, and the task's evaluator scores the episode 1. No recorded observation
shows an error page, the first shows the page, and from inside the desktop no name resolves and
no address answers. Screenshots go to var/e2e-screenshots/.
"""

import json
import subprocess
from typing import Any

import pytest
from django.core.files.storage import default_storage
from playwright.sync_api import expect

from annotation.demo import basics
from annotation.management.commands.seed_demo import DEMO_TASKS
from annotation.models import (
    Decision,
    Episode,
    EpisodeOutcome,
    EvaluationStatus,
    Project,
    Step,
    Task,
)
from annotation.projects import importer
from backend.accounts.models import User
from backend.accounts.roles import Role
from tests.e2e.workspace import (
    SHOTS,
    decided,
    eventually,
    live_workspace,
    look,
    off_the_loop,
    start_task,
)
from tests.support.fake_model_server import Reply
from vm_pool import pool
from vm_pool.models import DesktopTemplate

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

TITLE = basics.LIBRARY_TITLE
# The model's answers by the number of steps before them, in UI-TARS-1.5's pixels of the
# smart-resized screen (1280×800 becomes 1288×812): (981,30) is the browser's minimise button.
ANSWERS = [
    f"Thought: The page's title is '{TITLE}'. The text editor is behind the browser, so I "
    "minimise the browser.\nAction: click(start_box='(981,30)')",
    "Thought: I type the title into the editor.\n"
    "Action: type(content='Riverside Library Opening Hours')",
    "Thought: I save the file.\nAction: hotkey(key='ctrl s')",
    "Thought: I name the file title.txt.\nAction: type(content='title.txt\\n')",
    f"Thought: The title is saved in title.txt.\nAction: finished(content='{TITLE}')",
]
# What a browser shows when a page cannot be reached, as OCR reads it.
ERROR_PAGE_WORDS = ("ERR_", "can't be reached", "DNS_PROBE", "No internet", "is not available")


def answer(body: Any) -> Reply | None:
    if not isinstance(body, dict):
        return None
    earlier = sum(m.get("role") == "assistant" for m in body.get("messages") or [])
    return Reply.text(ANSWERS[min(earlier, len(ANSWERS) - 1)])


def the_demo_browser_task(project: Project, manager: User) -> Task:
    """The browser task of ``seed_demo``, imported as the command imports it."""
    (row,) = [task for task in DEMO_TASKS if task["id"] == "demo-browser"]
    report = importer.import_tasks(project, json.dumps(row).encode(), "demo.jsonl", manager)
    assert report.created == ["demo-browser"] and report.cannot_run == []
    return Task.objects.get(project=project, external_id="demo-browser")


def screen_text(step: Step) -> str:
    """The words OCR reads on a step's recorded observation."""
    with default_storage.open(step.observation.file.name, "rb") as stored:
        png = stored.read()
    done = subprocess.run(
        ["tesseract", "stdin", "stdout"], input=png, capture_output=True, check=True, timeout=60
    )
    return done.stdout.decode()


def inside_the_desktop(episode_id: int, argv: list[str]) -> tuple[int, str]:
    desktop = Episode.objects.select_related("desktop").get(pk=episode_id).desktop
    assert desktop is not None
    result = pool.control_for(desktop).run(argv, timeout=30)
    return result.returncode, result.output


def desktop_file(episode_id: int, path: str) -> bytes | None:
    desktop = Episode.objects.select_related("desktop").get(pk=episode_id).desktop
    assert desktop is not None
    return pool.control_for(desktop).read_file(path)


def browser_tabs(episode_id: int) -> list[tuple[str, str]]:
    """(url, title) of the pages the desktop's browser shows, over its debugging port."""
    desktop = Episode.objects.select_related("desktop").get(pk=episode_id).desktop
    assert desktop is not None
    reply = pool.control_for(desktop).devtools({"method": "GET", "path": "/json/list"})
    return [(t["url"], t["title"]) for t in json.loads(reply["body"]) if t["type"] == "page"]


def test_the_demo_browser_task_is_done_in_the_workspace_with_no_network(
    host, project, make_user, monkeypatch
):
    task = the_demo_browser_task(project, make_user("mona", project, Role.MANAGER))
    with live_workspace(host, project, monkeypatch, []) as live:
        live.model.responder = answer
        page = live.page
        episode_id = start_task(page)
        expect(page.get_by_text(task.instruction)).to_be_visible()
        expect(page.get_by_test_id("stream-state")).to_have_text("stream: live", timeout=30_000)

        # 1: the page is shown, its title read; accept minimising the browser.
        look(page, 1)
        assert not DesktopTemplate.objects.get(name="e2e").internet
        assert off_the_loop(browser_tabs, episode_id) == [(basics.LIBRARY_URL, TITLE)]
        expect(page.get_by_test_id("proposal-action")).to_have_text("click at (975, 30)")
        page.screenshot(path=str(SHOTS / "demo-browser-task.png"))
        page.keyboard.press("Enter")
        assert decided(episode_id, 1).decision == Decision.ACCEPTED

        # 2: the model drops the colon; the annotator types the title as it is.
        look(page, 2)
        page.get_by_role("button", name="Correct").click()
        correction = page.get_by_role("form", name="Your correction")
        correction.get_by_label("Action").select_option("type")
        correction.get_by_label("Text to type").fill(TITLE)
        correction.get_by_label("Thought").fill("Type the title exactly, colon included.")
        page.screenshot(path=str(SHOTS / "demo-browser-task-correction.png"))
        page.get_by_role("button", name="Submit step").click()
        second = decided(episode_id, 2)
        assert second.decision == Decision.CORRECTED
        assert second.final_action == {"type": "type", "content": TITLE}

        # 3, 4: Ctrl+S, then the name in the Save As dialog.
        look(page, 3)
        page.keyboard.press("Enter")
        look(page, 4)
        page.screenshot(path=str(SHOTS / "demo-browser-task-save-as.png"))
        page.keyboard.press("Enter")

        # 5: before the episode ends, the desktop holds the file and has no way out.
        look(page, 5)
        page.screenshot(path=str(SHOTS / "demo-browser-task-saved.png"))
        assert off_the_loop(desktop_file, episode_id, "~/title.txt") == TITLE.encode()
        code, output = off_the_loop(
            inside_the_desktop,
            episode_id,
            ["python3", "-c", "import socket; socket.create_connection(('93.184.215.14', 80), 5)"],
        )
        assert code != 0 and "Network is unreachable" in output, output
        code, output = off_the_loop(
            inside_the_desktop, episode_id, ["getent", "hosts", "example.com"]
        )
        assert code != 0, output
        page.keyboard.press("Enter")  # accept: finished
        expect(page.get_by_role("heading", name="Episode ended: finished")).to_be_visible()
        page.screenshot(path=str(SHOTS / "demo-browser-task-ended.png"))
        live.errors.assert_none()
        # The worker scores the episode on the desktop as it was left, then releases it.
        episode = eventually(
            lambda: Episode.objects.filter(
                pk=episode_id, evaluation_status=EvaluationStatus.SCORED
            ).first(),
            "the episode's evaluation",
            60,
        )

    assert episode.outcome == EpisodeOutcome.FINISHED
    assert episode.task_success == 1.0, episode.evaluation
    assert [s.decision for s in episode.steps.order_by("index")] == [
        "accepted", "corrected", "accepted", "accepted", "accepted",
    ]  # fmt: skip
    steps = list(episode.steps.select_related("observation").order_by("index"))
    with default_storage.open(steps[0].observation.file.name, "rb") as first:
        (SHOTS / "demo-browser-task-desktop.png").write_bytes(first.read())
    seen = {step.index: screen_text(step) for step in steps}
    assert "Opening Hours" in seen[1] and "Riverside Library" in seen[1], seen[1]
    for index, text in seen.items():
        assert not [w for w in ERROR_PAGE_WORDS if w in text], (index, text)
