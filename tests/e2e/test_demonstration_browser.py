"""A demonstration in the browser: the annotator drives the demo's text-editor task through the
workspace's noVNC with Playwright's mouse and keyboard, against real services (uvicorn, a Celery
worker owning real desktops, the deployment's websockify with the recording gate).

Moves along a curve and a click, typing with a typo taken back with Backspace, a double click, a
drag, a scroll, a hotkey and a name typed in GTK's Save As dialog. The stored steps are exactly
those actions (points within 3 px of where the test aimed), each step's observation is the
desktop's screen just before it (compared with frames the test grabs itself), the annotator
writes the thoughts on the timeline, the task's evaluator scores 1, the replay check on a fresh
desktop passes, and the SFT export holds the steps and loads through the Hugging Face loader.
"""

import math
import time
import uuid

import datasets
import pytest
from playwright.sync_api import Page, expect

from annotation.datasets import exports
from annotation.management.commands.seed_demo import DEMO_TASKS
from annotation.models import Decision, Episode, Project, Step, Task
from tests.e2e.workspace import SCREEN, SHOTS, eventually, live_workspace, start_task
from vm_pool import pool
from vm_pool.models import Desktop, RecordedInput
from vm_pool.screen.compare import same_screen
from vm_pool.screen.screenshots import screenshot_png

TASK = next(task for task in DEMO_TASKS if task["id"] == "demo-text-editor")
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


class Person:
    """The annotator's mouse and keyboard on the live desktop, in the desktop's pixels."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def at(self, x: float, y: float) -> tuple[float, float]:
        box = self.page.locator("[data-testid=desktop-vnc] canvas").bounding_box()
        assert box is not None
        return box["x"] + (x + 0.5) * box["width"] / SCREEN[0], box["y"] + (y + 0.5) * box[
            "height"
        ] / SCREEN[1]

    def move_along(self, start: tuple[int, int], end: tuple[int, int], points: int = 12) -> None:
        """A curved path, as a hand moves: a bow off the straight line, with jitter."""
        for n in range(points + 1):
            t = n / points
            bow = math.sin(math.pi * t) * 60
            x = start[0] + (end[0] - start[0]) * t + bow
            y = start[1] + (end[1] - start[1]) * t - bow / 2
            self.page.mouse.move(*self.at(x, y))
            time.sleep(0.015)
        self.page.mouse.move(*self.at(*end))


def test_an_annotator_demonstrates_the_text_editor_task_in_the_browser(host, project, monkeypatch):
    Project.objects.filter(pk=project.pk).update(demonstrate=True)
    Task.objects.create(
        project=project,
        external_id=f"demo-text-editor-{uuid.uuid4().hex[:6]}",
        instruction=TASK["instruction"],
        setup=TASK["config"],
        evaluator=TASK["evaluator"],
    )
    with live_workspace(host, project, monkeypatch, script=[], desktops=2) as live:
        page = live.page
        episode_id = start_task(page)
        expect(page.get_by_test_id("phase")).to_have_text(
            "You are driving the desktop (recorded)", timeout=60_000
        )
        page.wait_for_timeout(1000)
        page.screenshot(path=str(SHOTS / "demonstration-start.png"))
        # The control stream (the view-only one before it is replaced once the person drives).
        expect(page.locator("[data-testid=desktop-vnc] canvas")).to_be_visible(timeout=30_000)
        expect(page.get_by_test_id("stream-state")).to_have_text("stream: live", timeout=30_000)
        episode = Episode.objects.select_related("desktop").get(pk=episode_id)
        assert episode.demonstration
        desktop = Desktop.objects.get(pk=episode.desktop_id)
        control = pool.control_for(desktop)

        def active() -> str:
            return control.run(["xdotool", "getactivewindow", "getwindowname"], timeout=10).stdout

        eventually(lambda: "Mousepad" in active(), "Mousepad to have the focus")
        geometry = control.run(
            ["xdotool", "getactivewindow", "getwindowgeometry", "--shell"], timeout=10
        ).stdout
        g = dict(line.split("=", 1) for line in geometry.split())
        centre = (int(g["X"]) + int(g["WIDTH"]) // 2, int(g["Y"]) + int(g["HEIGHT"]) // 2)
        recording = episode.demonstrations.get().recording
        person = Person(page)
        frames: list[bytes] = []

        def written(**last: object) -> None:
            def done() -> bool:
                row = RecordedInput.objects.filter(recording=recording).order_by("-index").first()
                return row is not None and all(getattr(row, k) == v for k, v in last.items())

            eventually(done, f"the input {last} written")
            time.sleep(0.4)

        def before_next_action() -> None:
            frames.append(control.observe(settle=False).png)

        time.sleep(1.0)
        # 1. Along a curve into the text, and a click.
        before_next_action()
        person.move_along((200, 650), centre)
        page.mouse.click(*person.at(*centre))
        written(kind="pointer", buttons=0)
        # 2. Typing, with a typo taken back with Backspace.
        before_next_action()
        page.keyboard.type("Hello from Tandme", delay=30)
        page.keyboard.press("Backspace")
        page.keyboard.press("Backspace")
        page.keyboard.type("em", delay=30)
        written(kind="key", keysym=ord("m"), down=False)
        # 3. A double click.
        before_next_action()
        page.mouse.dblclick(*person.at(*centre))
        written(kind="pointer", buttons=0)
        # 4. A drag.
        drag_end = (centre[0] + 120, centre[1] + 40)
        before_next_action()
        page.mouse.move(*person.at(*centre))
        page.mouse.down()
        person.move_along(centre, drag_end, points=8)
        page.mouse.up()
        written(kind="pointer", buttons=0)
        # 5. A scroll: three wheel notches at one spot.
        before_next_action()
        page.mouse.move(*person.at(*centre))
        for _ in range(3):
            page.mouse.wheel(0, 120)
            time.sleep(0.1)
        written(kind="pointer", buttons=0)
        # 6. A hotkey, then 7. the file's name in the dialog it opens.
        before_next_action()
        page.keyboard.press("Control+s")
        written(kind="key", keysym=0xFFE3, down=False)
        eventually(lambda: "Save As" in active(), "the Save As dialog")
        time.sleep(0.5)
        before_next_action()
        page.keyboard.type("hello.txt", delay=30)
        # GTK's chooser completes names as they are typed: Enter only once the name's last key
        # has gone through and the dialog has stopped changing, however busy the machine.
        written(kind="key", keysym=ord("t"), down=False)
        control.observe(settle=True)
        page.keyboard.press("Enter")
        eventually(lambda: control.read_file("~/hello.txt") is not None, "hello.txt saved")
        page.screenshot(path=str(SHOTS / "demonstration-driving.png"))

        page.get_by_test_id("finish-demonstration").click()
        expect(page.get_by_test_id("phase")).to_have_text("Episode ended", timeout=60_000)

        steps = list(Step.objects.filter(episode_id=episode_id).select_related("observation"))
        actions = [s.final_action for s in steps]
        assert {s.decision for s in steps} == {Decision.DEMONSTRATED}
        assert [a["type"] for a in actions] == [
            "click", "type", "left_double", "drag", "scroll", "hotkey", "type", "finished",
        ]  # fmt: skip
        for action, aimed in [(actions[0], centre), (actions[2], centre), (actions[4], centre)]:
            assert max(abs(a - b) for a, b in zip(action["point"], aimed, strict=True)) <= 3
        assert max(abs(a - b) for a, b in zip(actions[3]["point"], centre, strict=True)) <= 3
        assert max(abs(a - b) for a, b in zip(actions[3]["end"], drag_end, strict=True)) <= 3
        assert actions[1]["content"] == "Hello from Tandem"
        assert (actions[4]["direction"], actions[4]["amount"]) == ("down", 3)
        assert actions[5]["keys"] == ["ctrl", "s"]
        assert actions[6]["content"] == "hello.txt\n"
        for step, frame in zip(steps, frames, strict=False):
            assert same_screen(screenshot_png(step.observation), frame), step.index

        # The timeline: each step's screen with its action, and a thought to write.
        expect(page.get_by_test_id("demonstrated-thoughts")).to_be_visible(timeout=30_000)
        for step in steps:
            page.get_by_test_id(f"thought-{step.index}").fill(
                f"Step {step.index}: why it was taken."
            )
            page.get_by_test_id(f"save-thought-{step.index}").click()
            expect(page.get_by_test_id(f"save-thought-{step.index}")).to_be_disabled()
        expect(page.get_by_test_id("thoughts-left")).to_have_text("Every step has your thought.")
        page.screenshot(path=str(SHOTS / "demonstration-thoughts.png"))

        # Scored 1 by the task's evaluator, and replayed on the other desktop.
        eventually(
            lambda: Episode.objects.filter(pk=episode_id, task_success=1.0).exists(),
            "the evaluator's score",
            seconds=90,
        )
        checked = eventually(
            lambda: (
                (Episode.objects.get(pk=episode_id).replay_check or {}).get("status")
                not in (None, "pending")
                and Episode.objects.get(pk=episode_id).replay_check
            ),
            "the replay check",
            seconds=120,
        )
        assert checked["status"] == "replays", checked
        live.errors.assert_none()

    # The SFT export, with approved thoughts and the replay required, loads as TRL's data.
    filters = exports.ExportFilters(require_approved_thoughts=True, require_replay=True)
    annotator = Episode.objects.get(pk=episode_id).annotator
    export = exports.create_export(project, annotator, "sft", "trl", filters)
    exports.build_export(export.pk)
    export.refresh_from_db()
    assert export.status == "succeeded", export.error
    parquet = [e["name"] for e in export.files if e["name"].endswith(".parquet")]
    paths = [exports.local_path(export, name) for name in parquet]
    rows = datasets.load_dataset("parquet", data_files=paths, split="train")
    assert len(rows) == len(steps) == 8
