"""The annotator's workspace in headless Chromium against real services: uvicorn serving the
built web app, a Celery worker owning a real desktop, websockify streaming it to noVNC, and the
UI-TARS proposer pointed at the scripted fake model server, so every proposal is known.

The annotator signs in on the sign-in page, starts a task, sees the live desktop (real frames
in the noVNC canvas), approves a proposal with Enter, watches the next one stream in and
corrects it by clicking on the desktop, corrects another as a drag at a second window size (each
stored point is the screen pixel under its click, within 1 px, at both sizes), keeps an error while
the web server is down (the decision is sent when the socket is back), writes the reflection,
writes a step the model could not propose, then finishes. The manager's and reviewer's pages then
take the recorded episode over (``manager_flow``). In a second episode the desktop dies: the
workspace says so, and the annotator abandons the episode, which gives the task back.
Screenshots go to var/e2e-screenshots/.
No console error or uncaught page error is allowed at any point, nor any serious accessibility
problem axe-core finds in the workspace.
"""

import math
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connections
from playwright.sync_api import Browser, Page, expect

from annotation.models import Decision, Episode, EpisodeOutcome, Project, Step, Task, TaskStatus
from backend.accounts.models import User
from backend.accounts.roles import Role
from tests.conftest import PASSWORD
from tests.desktops import sandbox_xvfb
from tests.e2e.browser import BrowserErrors, accessibility_problems, chromium
from tests.e2e.manager_flow import check_manager_and_reviewer
from tests.fake_model_server import FakeModelServer, Reply, serving
from tests.live import TERMINAL, asgi, websockify, worker
from tests.services import free_port
from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate

# Redis databases of this suite alone, so that it can run beside the other live suites.
BROKER, CHANNELS = "redis://127.0.0.1:6379/10", "redis://127.0.0.1:6379/11"
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "var" / "e2e-screenshots"
SCREEN = (1280, 800)
ROOT_COLOUR = "#2a6f97"
MODEL = "ui-tars-1.5-7b"
# The model's answers, one per step. UI-TARS-1.5 speaks in the smart-resized screenshot's
# pixels: 1280×800 becomes 1288×812. Step 2 streams slowly, so that its text is seen arriving;
# at step 6 the model server fails, and the annotator writes the step.
SCRIPT = [
    Reply.text("Thought: Click into the terminal.\nAction: click(start_box='(644,406)')"),
    Reply.text(
        "Thought: Click the word Archive.\nAction: click(start_box='(200,150)')",
        chunk_chars=3,
        chunk_delay_s=0.12,
    ),
    Reply.text("Thought: Now the word Reports.\nAction: click(start_box='(400,150)')"),
    Reply.text("Thought: Scroll down.\nAction: scroll(start_box='(644,406)', direction='down')"),
    Reply.text("Thought: Type the command.\nAction: type(content='ls\\n')"),
    Reply.error(503, "the model server is overloaded"),
    Reply.text("Thought: The task is done.\nAction: finished(content='')"),
]
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
T = TypeVar("T")


@pytest.fixture
def host(settings):
    settings.TANDEM_HOST = f"e2e-{uuid.uuid4().hex[:8]}"
    yield settings.TANDEM_HOST
    for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
        pool.stop_desktop(desktop.pk)


def eventually(read: Callable[[], T | None], what: str, seconds: float = 30) -> T:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = read()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def decided(episode_id: int, index: int) -> Step:
    return eventually(
        lambda: (
            Step.objects.filter(episode_id=episode_id, index=index).exclude(decision="").first()
        ),
        f"step {index} to be decided",
    )


def annotator_who_can_sign_in(project: Project) -> User:
    """An annotator whose password the web server's own hashers can check (the tests' fast
    hasher is only configured in the test process)."""
    user = User.objects.create(username="annie", first_name="Annie")
    hasher = PBKDF2PasswordHasher()
    user.password = hasher.encode(PASSWORD, hasher.salt(), iterations=1000)
    user.save(update_fields=["password"])
    project.memberships.create(user=user, role=Role.ANNOTATOR)
    return user


def canvas_colours(page: Page) -> dict[str, int]:
    """How many sampled pixels of the noVNC canvas are lit, and how many colours there are."""
    return page.locator("[data-testid=desktop-vnc] canvas").evaluate(
        """(canvas) => {
            const context = canvas.getContext('2d');
            const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
            const colours = new Set();
            let lit = 0;
            for (let i = 0; i < data.length; i += 4 * 101) {
                if (data[i] + data[i + 1] + data[i + 2] > 60) lit++;
                colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
            }
            return {lit, colours: colours.size, width: canvas.width, height: canvas.height};
        }"""
    )


def wait_for_proposal(page: Page, step: int) -> None:
    expect(page.get_by_test_id(f"trajectory-step-{step}")).to_be_attached(timeout=30_000)
    expect(page.get_by_test_id("phase")).to_have_text("Your decision", timeout=30_000)


def click_desktop(page: Page, fx: float, fy: float) -> tuple[int, int]:
    """Click the live desktop at a fraction of its drawn box; the screen pixel expected there."""
    box = page.locator("[data-testid=desktop-vnc] canvas").bounding_box()
    assert box is not None
    x, y = round(box["x"] + fx * box["width"]), round(box["y"] + fy * box["height"])
    page.mouse.click(x, y)
    return (
        math.floor((x - box["x"]) * SCREEN[0] / box["width"]),
        math.floor((y - box["y"]) * SCREEN[1] / box["height"]),
    )


def assert_within_a_pixel(stored: Any, expected: tuple[int, int]) -> None:
    assert abs(stored[0] - expected[0]) <= 1 and abs(stored[1] - expected[1]) <= 1, (
        stored,
        expected,
    )


@dataclass
class Live:
    """The running services of a test, and the annotator's browser page."""

    base: str
    model: FakeModelServer
    browser: Browser
    page: Page
    errors: BrowserErrors
    restart_web: Callable[[Callable[[], None]], None]


@contextmanager
def live_workspace(host: str, project: Project, monkeypatch, script: list[Reply]) -> Iterator[Live]:
    """A ready desktop, the model scripted with ``script``, websockify, a worker, the web
    server and a browser page with the annotator signed in on the sign-in page."""
    DesktopTemplate.objects.create(
        name="e2e",
        width=SCREEN[0],
        height=SCREEN[1],
        min_ready=0,
        autostart=[["xsetroot", "-solid", ROOT_COLOUR]],
    )
    annie = annotator_who_can_sign_in(project)
    desktop = pool.start_desktop(pool.create_desktop(DesktopTemplate.objects.get(), host).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    SHOTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the browser run: {SHOTS}")
    port, stream_port = free_port(), free_port()
    stream_url = f"ws://127.0.0.1:{stream_port}"

    with ExitStack() as services:
        model = services.enter_context(serving(MODEL))
        model.script(*script)
        model.default = Reply.text("Thought: Wait for the screen.\nAction: wait()")
        Project.objects.filter(pk=project.pk).update(
            environment_template="e2e",
            model_settings={"base_url": model.base_url, "model": MODEL, "retries": 0},
        )
        services.enter_context(websockify(stream_port))
        services.enter_context(worker(host, BROKER, CHANNELS))

        def web_server():
            return services.enter_context(
                asgi(host, port, BROKER, CHANNELS, TANDEM_WEBSOCKIFY_PUBLIC_URL=stream_url)
            )

        web = [web_server()]

        def restart_web(while_down: Callable[[], None]) -> None:
            """SIGKILL the web server, run ``while_down``, start a new one on the same port."""
            os.killpg(web[0].pid, signal.SIGKILL)
            web[0].wait()
            while_down()
            web[0] = web_server()

        browser = services.enter_context(chromium(monkeypatch))
        base = f"http://127.0.0.1:{port}"
        context = browser.new_context(viewport={"width": 1366, "height": 768}, base_url=base)
        errors = BrowserErrors(context)
        page = context.new_page()
        page.goto("/")
        page.get_by_label("Username").fill(annie.username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Welcome, Annie")).to_be_visible()
        page.screenshot(path=str(SHOTS / "home.png"))
        yield Live(base, model, browser, page, errors, restart_web)
        context.close()


def start_task(page: Page) -> int:
    """From the app's home: the annotator's queue, then the next task; the episode's id."""
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Annotate").click()
    expect(page.get_by_role("heading", name="Your queue")).to_be_visible()
    page.screenshot(path=str(SHOTS / "annotator-queue.png"))
    page.get_by_role("button", name="Start next task").click()
    page.wait_for_url("**/app/annotate/episodes/*", timeout=30_000)
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def terminal_task(project: Project) -> Task:
    return Task.objects.create(
        project=project,
        external_id=f"e2e-{uuid.uuid4().hex[:6]}",
        instruction="Open the Archive folder, then the Reports folder",
        setup=[{"type": "launch", "parameters": {"command": TERMINAL}}],
        max_steps=10,
    )


def test_an_annotator_approves_corrects_reflects_and_finishes_in_the_browser(
    host, project, make_user, monkeypatch
):
    make_user("mona", project, Role.MANAGER)
    make_user("rex", project, Role.REVIEWER)
    task = terminal_task(project)
    with live_workspace(host, project, monkeypatch, SCRIPT) as live:
        page, errors, base = live.page, live.errors, live.base
        # Sign-in landed in the app; start the task.
        episode_id = start_task(page)
        expect(page.get_by_text(task.instruction)).to_be_visible()

        # The live desktop shows real frames.
        expect(page.get_by_test_id("stream-state")).to_have_text("stream: live", timeout=30_000)
        frame = eventually(
            lambda: (c := canvas_colours(page))["lit"] > 0 and c["colours"] > 2 and c,
            "the desktop's frames in the noVNC canvas",
        )
        assert (frame["width"], frame["height"]) == SCREEN

        # 1: approve the proposal, drawn on the desktop, with Enter.
        wait_for_proposal(page, 1)
        expect(page.get_by_test_id("proposal-action")).to_have_text("click at (640, 400)")
        expect(page.get_by_test_id("overlay-proposal")).to_be_visible()
        page.screenshot(path=str(SHOTS / "workspace-proposal.png"))
        assert accessibility_problems(page) == []
        page.keyboard.press("Enter")
        first = decided(episode_id, 1)
        assert (first.decision, first.final_action) == (
            Decision.ACCEPTED,
            {"type": "click", "point": [640, 400]},
        )

        # 2: the proposal streams in while the model thinks; correct it by clicking on the
        # desktop, at 1366×768.
        expect(page.get_by_test_id("phase")).to_have_text("Model thinking", timeout=30_000)
        expect(page.get_by_test_id("streamed")).to_contain_text("Thought: Click", timeout=30_000)
        page.screenshot(path=str(SHOTS / "workspace-model-thinking.png"))
        wait_for_proposal(page, 2)
        expected = click_desktop(page, 0.3, 0.6)
        page.get_by_label("Thought").fill("The Archive word is lower down; click it there.")
        page.screenshot(path=str(SHOTS / "workspace-correction-1366.png"))
        assert accessibility_problems(page) == []
        page.keyboard.press("Control+Enter")
        second = decided(episode_id, 2)
        assert second.decision == Decision.CORRECTED and second.final_action["type"] == "click"
        assert_within_a_pixel(second.final_action["point"], expected)
        assert second.final_thought == "The Archive word is lower down; click it there."

        # 3: at 1920×1080, through the Correct button, as a drag: two clicks on the desktop.
        page.set_viewport_size({"width": 1920, "height": 1080})
        wait_for_proposal(page, 3)
        page.get_by_role("button", name="Correct").click()
        correction = page.get_by_role("form", name="Your correction")
        correction.get_by_label("Action").select_option("drag")
        start = click_desktop(page, 0.71, 0.27)
        end = click_desktop(page, 0.52, 0.83)
        expect(page.get_by_test_id("overlay-draft")).to_be_visible()
        page.screenshot(path=str(SHOTS / "workspace-correction-1920.png"))
        correction.get_by_label("Thought").fill("Drag the word Reports down instead.")
        page.get_by_role("button", name="Submit step").click()
        third = decided(episode_id, 3)
        assert third.decision == Decision.CORRECTED and third.final_action["type"] == "drag"
        assert_within_a_pixel(third.final_action["point"], start)
        assert_within_a_pixel(third.final_action["end"], end)
        assert third.final_thought == "Drag the word Reports down instead."  # never the model's

        # 4: keep the model's wrong scroll on purpose (K) while the web server is down: the
        # decision waits, the socket comes back to a new server and sends it then.
        page.set_viewport_size({"width": 1366, "height": 768})
        wait_for_proposal(page, 4)

        def keep_the_error_while_down() -> None:
            expect(page.get_by_text("connection lost: reconnecting…")).to_be_visible()
            page.keyboard.press("k")
            expect(page.get_by_text("Sending your decision for step 4…")).to_be_visible()

        down_from = len(errors.messages)
        live.restart_web(keep_the_error_while_down)
        fourth = decided(episode_id, 4)
        assert fourth.decision == Decision.ERROR_KEPT
        assert fourth.final_action["type"] == "scroll"
        expect(page.get_by_text("connection lost: reconnecting…")).to_have_count(0)
        # While the server was down the browser logged only the refused reconnections.
        socket = base.replace("http://", "ws://") + f"/ws/episodes/{episode_id}/"
        refused = f"WebSocket connection to '{socket}'"
        while len(errors.messages) > down_from:
            message = errors.messages.pop(down_from)
            assert refused in message, message

        # 5: the reflection on the kept error.
        wait_for_proposal(page, 5)
        expect(page.get_by_text("Reflection step.")).to_be_visible()
        editor = page.get_by_role("form", name="Your reflective step")
        editor.get_by_label("Action").select_option("hotkey")
        editor.get_by_label("Keys").fill("ctrl l")
        editor.get_by_label("Thought").fill("Scrolling was wrong: nothing moved. Clear the screen.")
        page.screenshot(path=str(SHOTS / "workspace-reflection.png"))
        page.keyboard.press("Control+Enter")
        fifth = decided(episode_id, 5)
        assert fifth.decision == Decision.CORRECTED
        assert fifth.final_action == {"type": "hotkey", "keys": ["ctrl", "l"]}

        # 6: the model is unavailable: the annotator writes the step.
        expect(page.get_by_test_id("phase")).to_have_text(
            "Model unavailable — write the step yourself", timeout=30_000
        )
        editor = page.get_by_role("form", name="Your step")
        editor.get_by_label("Action").select_option("type")
        editor.get_by_label("Text to type").fill("echo done\n")
        editor.get_by_label("Thought").fill("Show that the folders are open.")
        page.screenshot(path=str(SHOTS / "workspace-model-unavailable.png"))
        page.keyboard.press("Control+Enter")
        sixth = decided(episode_id, 6)
        assert sixth.decision == Decision.CORRECTED
        assert sixth.final_action == {"type": "type", "content": "echo done\n"}
        assert sixth.chosen_proposal_id is None  # it replaces no model output

        # 7: finish (F), with the answer empty.
        wait_for_proposal(page, 7)
        page.keyboard.press("f")
        page.get_by_label("Thought").fill("Both folders were opened.")
        page.get_by_role("button", name="Submit step").click()
        expect(page.get_by_test_id("phase")).to_have_text("Episode ended", timeout=30_000)
        expect(page.get_by_role("heading", name="Episode ended: finished")).to_be_visible()
        page.screenshot(path=str(SHOTS / "workspace-ended.png"))
        episode = Episode.objects.get(pk=episode_id)
        assert episode.outcome == EpisodeOutcome.FINISHED
        assert Task.objects.get(pk=task.pk).status == TaskStatus.SUBMITTED
        assert [s.decision for s in episode.steps.order_by("index")] == [
            "accepted",
            "corrected",
            "corrected",
            "error_kept",
            "corrected",
            "corrected",
            "corrected",
        ]
        # Back in the queue there is nothing left: the server's message is shown.
        page.get_by_role("link", name="Back to your queue").click()
        page.get_by_role("button", name="Start next task").click()
        expect(page.get_by_role("alert")).to_contain_text("No task is available for you right now.")
        expect(page.get_by_role("alert")).to_contain_text("no_task_available")
        errors.assert_none(expected=(f"404 (Not Found) ({base}/api/episodes/start/)",))

        check_manager_and_reviewer(live.browser, base, episode_id, project.pk, SHOTS, "mona", "rex")


def test_a_failed_desktop_is_shown_and_the_episode_abandoned(host, project, monkeypatch, settings):
    # The health check runs here and tells the annotator's socket through the test's layer.
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [CHANNELS]},
        }
    }
    task = terminal_task(project)
    with live_workspace(host, project, monkeypatch, SCRIPT[:1]) as live:
        page = live.page
        episode_id = start_task(page)
        expect(page.get_by_test_id("stream-state")).to_have_text("stream: live", timeout=30_000)
        wait_for_proposal(page, 1)

        desktop = Episode.objects.select_related("desktop").get(pk=episode_id).desktop
        assert desktop is not None
        assert desktop.display is not None
        for pid in sandbox_xvfb(desktop.display):
            os.kill(pid, signal.SIGKILL)
        eventually(lambda: off_the_loop(pool.check_health, host) == [desktop.pk], "the failure")

        expect(page.get_by_test_id("phase")).to_have_text("Desktop failed", timeout=30_000)
        expect(page.get_by_role("alert")).to_contain_text("The desktop failed")
        page.screenshot(path=str(SHOTS / "workspace-desktop-failed.png"))
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Abandon episode").click()
        expect(page.get_by_role("heading", name="Episode ended: abandoned")).to_be_visible()

        episode = Episode.objects.get(pk=episode_id)
        assert episode.outcome == EpisodeOutcome.ABANDONED
        task.refresh_from_db()
        assert task.status == TaskStatus.QUEUED and task.assignee_id is None
        live.errors.assert_none()


def off_the_loop(function: Callable[..., T], *args: Any) -> T:
    """Run ``function`` in a thread of its own: Playwright's event loop runs in this one, and
    the channel layer's synchronous calls refuse to run beside it."""

    def call() -> T:
        try:
            return function(*args)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(call).result()
