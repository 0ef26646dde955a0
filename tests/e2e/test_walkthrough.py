"""Two annotators work as new annotators do, in Chromium against real services (a worker owning
two sandboxed desktops, websockify, the web server, the scripted model server), and every step
they record is true.

Annie saves a document from mousepad: she accepts typing, accepts ``ctrl+shift+s`` (GTK's Save
As dialog takes its time to draw: the next step's observation must show it), corrects the
model's file name with her own ``osworld.txt\\n`` (the trailing newline presses Save: the file is
on the desktop), and accepts the model's ``finished``. In a second task a program opens a dialog
300–1500 ms after a key: she accepts the key, keeps the model's wrong scroll, and then closes
the tab, the reflection still open. She is away for three minutes. Bob meanwhile corrects a click
on the other desktop and accepts the model's ``call_user()``. The lease reaper pauses Annie's
episode, keeping its task and desktop; her queue page offers *Resume*; she writes the reflection
where she left it and accepts ``finished``.

At every decision the annotator first looks at the screen for two seconds, as people do; the
step's stored observation must then be what the desktop shows (a blinking caret aside), and
every start must reach its first proposal. The model answers by task and step (the number of
earlier steps in its conversation), so a proposal asked again for a newer screen is the same.
"""

import time
import uuid
from typing import Any

import pytest
from django.core.files.storage import default_storage
from playwright.sync_api import Page, expect

from annotation import jobs
from annotation.models import Episode, EpisodeOutcome, Project, Step, Task, TaskStatus
from backend.accounts.roles import Role
from tests.annotation.episodes.test_observation_watch import SLOW_DIALOG
from tests.e2e.browser import sign_in
from tests.e2e.workspace import (
    CHANNELS,
    SHOTS,
    click_desktop,
    decided,
    eventually,
    live_workspace,
    off_the_loop,
    start_task,
    wait_for_proposal,
)
from tests.support.fake_model_server import Reply
from tests.support.live import TERMINAL
from tests.support.services import redis_layer
from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus
from vm_pool.screen.capture import frame_of_png
from vm_pool.screen.compare import meaningful_change

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

LOOK_S = 2.0  # how long an annotator looks at the screen before deciding
LEASE_S = 60  # a task's lease, renewed by the workspace's heartbeat every 30 s
AWAY_S = 75.0  # Annie's absence: longer than a task lease, shorter than the grace period
SAVE = "Write hello and save the document as osworld.txt"
DIALOG = "Open the dialog, then close it again"
TERMINAL_TASK = "Sign in to the terminal"
# The model's answer for each task, by the number of steps before it.
ANSWERS = {
    SAVE: [
        "Thought: Type the greeting.\nAction: type(content='hello')",
        "Thought: Open the Save As dialog.\nAction: hotkey(key='ctrl shift s')",
        "Thought: Name the file.\nAction: type(content='osworld.txt')",
        "Thought: The document is saved.\nAction: finished(content='')",
    ],
    DIALOG: [
        "Thought: Press space to open the dialog.\nAction: hotkey(key='space')",
        "Thought: Scroll the dialog.\nAction: scroll(start_box='(644,406)', direction='down')",
        "Thought: Scroll again.\nAction: scroll(start_box='(644,406)', direction='down')",
        "Thought: The dialog is closed.\nAction: finished(content='')",
    ],
    TERMINAL_TASK: [
        "Thought: Click into the terminal.\nAction: click(start_box='(644,406)')",
        "Thought: It asks for a password I do not have.\nAction: call_user()",
    ],
}


def answer(body: Any) -> Reply | None:
    """The scripted answer for the task and step a chat request is about."""
    if not isinstance(body, dict):
        return None
    messages = body.get("messages") or []
    texts = " ".join(
        part.get("text", "")
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )
    earlier = sum(message.get("role") == "assistant" for message in messages)
    for instruction, replies in ANSWERS.items():
        if instruction in texts:
            return Reply.text(replies[min(earlier, len(replies) - 1)])
    return None


def task(project: Project, instruction: str, setup: list[dict[str, Any]]) -> Task:
    return Task.objects.create(
        project=project,
        external_id=f"walk-{uuid.uuid4().hex[:6]}",
        instruction=instruction,
        setup=setup,
        max_steps=10,
    )


def launch(*command: str) -> dict[str, Any]:
    return {"type": "launch", "parameters": {"command": list(command)}}


def look_then_check(page: Page, episode_id: int, index: int, stale: list[str]) -> None:
    """Look at the open step for ``LOOK_S``, then compare its stored observation with the
    desktop's screen: they must be the same screen (a blinking caret aside)."""
    wait_for_proposal(page, index)
    time.sleep(LOOK_S)
    wait_for_proposal(page, index)  # a newer screen brings a newer proposal: decide on that
    step = Step.objects.select_related("observation", "episode__desktop").get(
        episode_id=episode_id, index=index
    )
    desktop = step.episode.desktop
    assert desktop is not None
    now = frame_of_png(pool.control_for(desktop).observe(settle=False).png)
    with default_storage.open(step.observation.file.name, "rb") as stored:
        if meaningful_change(frame_of_png(stored.read()), now):
            stale.append(f"episode {episode_id} step {index}")


def desktop_file(episode_id: int, path: str) -> str:
    desktop = Episode.objects.select_related("desktop").get(pk=episode_id).desktop
    assert desktop is not None
    return pool.control_for(desktop).run(["cat", path], timeout=10).output


def test_two_annotators_walk_through_every_decision_and_a_pause(
    host, project, make_user, monkeypatch, settings
):
    # The reaper runs here, as beat would run it, and tells the sockets through the test's layer.
    settings.CHANNEL_LAYERS = redis_layer(CHANNELS)
    # Leases half the default's length, here and in the servers, so that Annie's absence is short.
    settings.TANDEM_LEASE_SECONDS = LEASE_S
    monkeypatch.setenv("TANDEM_LEASE_SECONDS", str(LEASE_S))
    make_user("bob", project, Role.ANNOTATOR)
    saving = task(project, SAVE, [launch("mousepad")])
    dialog = task(
        project,
        DIALOG,
        [
            {
                "type": "file",
                "parameters": {"path": "~/slow_dialog.py", "content": SLOW_DIALOG.read_text()},
            },
            launch("python3", "slow_dialog.py", "11"),
        ],
    )
    terminal = task(project, TERMINAL_TASK, [launch(*TERMINAL)])
    stale: list[str] = []

    with live_workspace(host, project, monkeypatch, [], desktops=2) as live:
        live.model.responder = answer
        page = live.page

        # Annie, task 1: save a document through GTK's Save As dialog.
        first = start_task(page)
        expect(page.get_by_text(SAVE)).to_be_visible()
        look_then_check(page, first, 1, stale)
        page.keyboard.press("Enter")  # accept: type hello
        look_then_check(page, first, 2, stale)
        page.keyboard.press("Enter")  # accept: ctrl+shift+s
        look_then_check(page, first, 3, stale)
        page.screenshot(path=str(SHOTS / "walkthrough-save-as.png"))
        page.get_by_role("button", name="Correct").click()
        correction = page.get_by_role("form", name="Your correction")
        correction.get_by_label("Action").select_option("type")
        correction.get_by_label("Text to type").fill("osworld.txt\n")
        correction.get_by_label("Thought").fill("Name the file and press Enter to save it.")
        page.get_by_role("button", name="Submit step").click()
        look_then_check(page, first, 4, stale)
        page.keyboard.press("Enter")  # accept: finished
        expect(page.get_by_role("heading", name="Episode ended: finished")).to_be_visible()
        assert off_the_loop(desktop_file, first, "/home/user/osworld.txt") == "hello"

        # Annie, task 2: a dialog that opens late; she keeps an error, then leaves.
        page.get_by_role("link", name="Back to your queue").click()
        second = start_task(page)
        expect(page.get_by_text(DIALOG)).to_be_visible()
        look_then_check(page, second, 1, stale)
        page.keyboard.press("Enter")  # accept: space
        look_then_check(page, second, 2, stale)
        page.keyboard.press("k")  # keep the wrong scroll
        wait_for_proposal(page, 3)
        expect(page.get_by_text("Reflection step.")).to_be_visible()
        page.context.close()
        away_since = time.monotonic()

        # Bob, meanwhile, on the other desktop: a corrected click, then the model's call_user.
        context, bob, bob_errors = sign_in(live.browser, live.base, "bob", "/app/")
        third = start_task(bob)
        expect(bob.get_by_text(TERMINAL_TASK)).to_be_visible()
        look_then_check(bob, third, 1, stale)
        click_desktop(bob, 0.3, 0.6)
        bob.get_by_label("Thought").fill("Click the prompt line instead.")
        bob.keyboard.press("Control+Enter")
        look_then_check(bob, third, 2, stale)
        bob.keyboard.press("Enter")  # accept: call_user()
        expect(bob.get_by_role("heading", name="Episode ended: call user")).to_be_visible()
        bob_errors.assert_none()
        context.close()

        # Past a lease after Annie left, the reaper finds her lease lapsed: paused, not lost.
        time.sleep(max(0.0, AWAY_S - (time.monotonic() - away_since)))
        off_the_loop(jobs.return_lapsed_leases)
        paused = Episode.objects.select_related("task", "desktop").get(pk=second)
        assert paused.paused_at is not None and paused.ended_at is None
        assert (paused.task.status, paused.task.assignee_id) == (
            TaskStatus.IN_PROGRESS,
            paused.annotator_id,
        )
        assert paused.desktop is not None
        assert (paused.desktop.status, paused.desktop.generation) == (
            DesktopStatus.LEASED,
            paused.desktop_generation,
        )

        # Annie is back: her queue page says so and offers Resume; she goes on at step 3.
        context, page, errors = sign_in(live.browser, live.base, "annie", "/app/annotate")
        expect(page.get_by_test_id("paused-episode")).to_contain_text("Your episode is paused")
        page.screenshot(path=str(SHOTS / "walkthrough-paused.png"))
        page.get_by_role("button", name="Resume").click()
        look_then_check(page, second, 3, stale)
        # Her workspace's socket resumed it when it connected, not a heartbeat later.
        eventually(
            lambda: Episode.objects.get(pk=second).paused_at is None, "the episode to resume", 5
        )
        editor = page.get_by_role("form", name="Your reflective step")
        editor.get_by_label("Action").select_option("hotkey")
        editor.get_by_label("Keys").fill("space")
        editor.get_by_label("Thought").fill("Scrolling did nothing here; press space to close it.")
        page.keyboard.press("Control+Enter")
        look_then_check(page, second, 4, stale)
        page.keyboard.press("Enter")  # accept: finished
        expect(page.get_by_role("heading", name="Episode ended: finished")).to_be_visible()
        errors.assert_none()
        context.close()

    assert stale == [], f"stale observations: {stale}"
    recorded = {
        episode.pk: (episode.outcome, [s.decision for s in episode.steps.order_by("index")])
        for episode in Episode.objects.filter(pk__in=[first, second, third])
    }
    assert recorded == {
        first: (EpisodeOutcome.FINISHED, ["accepted", "accepted", "corrected", "accepted"]),
        second: (EpisodeOutcome.FINISHED, ["accepted", "error_kept", "corrected", "accepted"]),
        third: (EpisodeOutcome.CALL_USER, ["corrected", "accepted"]),
    }
    assert decided(first, 3).final_action == {"type": "type", "content": "osworld.txt\n"}
    assert decided(second, 3).final_thought.startswith("Scrolling did nothing")
    assert {t.status for t in Task.objects.filter(pk__in=[saving.pk, dialog.pk])} == {
        TaskStatus.SUBMITTED
    }
    assert Desktop.objects.filter(status=DesktopStatus.LEASED).count() == 0
    assert terminal.pk == Episode.objects.get(pk=third).task_id
