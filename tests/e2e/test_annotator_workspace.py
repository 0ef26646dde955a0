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

import os
import signal
import uuid

import pytest
from playwright.sync_api import expect

from annotation.models import Decision, Episode, EpisodeOutcome, Project, Task, TaskStatus
from backend.accounts.roles import Role
from tests.e2e.browser import accessibility_problems
from tests.e2e.manager_flow import check_manager_and_reviewer
from tests.e2e.workspace import (
    CHANNELS,
    SCREEN,
    SHOTS,
    assert_within_a_pixel,
    canvas_colours,
    click_desktop,
    decided,
    eventually,
    live_workspace,
    off_the_loop,
    start_task,
    wait_for_proposal,
)
from tests.support.desktops import sandbox_xvfb
from tests.support.fake_model_server import Reply
from tests.support.live import TERMINAL
from tests.support.services import redis_layer
from vm_pool import pool

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


def terminal_task(project: Project) -> Task:
    return Task.objects.create(
        project=project,
        external_id=f"e2e-{uuid.uuid4().hex[:6]}",
        instruction="Open the Archive folder, then the Reports folder",
        setup=[{"type": "launch", "parameters": {"command": TERMINAL}}],
        max_steps=10,
    )


@pytest.mark.parametrize("provider", ["local", "docker"])
def test_an_annotator_approves_corrects_reflects_and_finishes_in_the_browser(
    provider, host, project, make_user, monkeypatch, request
):
    """On a sandboxed local desktop, then on a container desktop: the same assertions."""
    if provider == "docker":
        request.getfixturevalue("container_desktops")
    make_user("mona", project, Role.MANAGER)
    make_user("rex", project, Role.REVIEWER)
    task = terminal_task(project)
    with live_workspace(host, project, monkeypatch, SCRIPT, provider=provider) as live:
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

        # 3: through the Correct button, as a drag: two clicks on the desktop. At 1600×900 the
        # whole form, Cancel included, is inside the window and inside its panel; then at 1920.
        page.set_viewport_size({"width": 1600, "height": 900})
        wait_for_proposal(page, 3)
        page.get_by_role("button", name="Correct").click()
        correction = page.get_by_role("form", name="Your correction")
        cancel = correction.get_by_role("button", name="Cancel")
        expect(cancel).to_be_in_viewport(ratio=1)
        form, button = correction.bounding_box(), cancel.bounding_box()
        assert form is not None and button is not None
        assert (
            form["x"] <= button["x"] and button["x"] + button["width"] <= form["x"] + form["width"]
        )
        page.screenshot(path=str(SHOTS / "workspace-correction-1600.png"))
        page.set_viewport_size({"width": 1920, "height": 1080})
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
        # While the server was down the browser logged only the refused reconnections, and a
        # screenshot cut off by the kill or asked for while the server was down, which is
        # loaded again: no picture is left broken.
        socket = base.replace("http://", "ws://") + f"/ws/episodes/{episode_id}/"
        refused = f"WebSocket connection to '{socket}'"
        screenshot = f"({base}/api/screenshots/"
        lost = ("net::ERR_CONNECTION_RESET ", "net::ERR_CONNECTION_REFUSED ")
        while len(errors.messages) > down_from:
            message = errors.messages.pop(down_from)
            cut_off = any(f"{kind}{screenshot}" in message for kind in lost)
            assert refused in message or cut_off, message
        page.wait_for_function(
            "[...document.querySelectorAll('img.desktop-still')]"
            ".every(i => i.complete && i.naturalWidth > 0)",
            timeout=15_000,
        )

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

        if provider == "local":  # the pages do not depend on the desktop's kind
            check_manager_and_reviewer(
                live.browser, base, episode_id, project.pk, SHOTS, "mona", "rex"
            )


def test_a_failed_desktop_is_shown_and_the_episode_abandoned(host, project, monkeypatch, settings):
    # The health check runs here and tells the annotator's socket through the test's layer.
    settings.CHANNEL_LAYERS = redis_layer(CHANNELS)
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
