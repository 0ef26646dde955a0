"""Every stored observation is the screen the annotator decides on.

A desktop program opens or closes a dialog 300–1500 ms after each key press
(tests/slow_dialog.py): the settled screenshot taken after the key is too early to show it.
The loop's jobs run in this process on a real sandboxed desktop (as the host's worker runs
them), the screen watch included; the "annotator" looks for 2 s before deciding, and what the
screen shows then must be the step's stored observation, at every one of 50 steps.
"""

import io
import time
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from PIL import Image

from annotation import episodes
from annotation.models import Decision, Episode, Project, Step, Task
from backend.accounts.roles import Role
from vm_pool import pool, screen_watch
from vm_pool.models import DesktopStatus, DesktopTemplate
from vm_pool.x11_capture import Frame

SLOW_DIALOG = Path(__file__).resolve().parent / "slow_dialog.py"
STEPS = 50
LOOK_S = 2.0  # how long the annotator looks at a step before deciding
KEY = {"type": "hotkey", "keys": ["space"]}

pytestmark = pytest.mark.django_db(transaction=True)  # the watch's thread reads committed rows


def rgb(png: bytes) -> bytes:
    return Image.open(io.BytesIO(png)).convert("RGB").tobytes()


def stored(step: Step) -> bytes:
    step.refresh_from_db()
    with default_storage.open(step.observation.file.name, "rb") as file:
        return file.read()


def test_every_stored_observation_is_the_screen_the_annotator_decides_on(
    loop_settings, make_user, project
):
    template = DesktopTemplate.objects.create(name="watched", width=1024, height=768)
    Project.objects.filter(pk=project.pk).update(environment_template="watched")
    ann = make_user("ann", project, Role.ANNOTATOR)
    Task.objects.create(
        project=project,
        external_id="slow",
        instruction="Open and close the dialog",
        max_steps=STEPS + 5,
        setup=[
            {
                "type": "file",
                "parameters": {"path": "~/slow_dialog.py", "content": SLOW_DIALOG.read_text()},
            },
            {"type": "launch", "parameters": {"command": ["python3", "slow_dialog.py", "7"]}},
        ],
    )
    desktop = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    episode = episodes.start_episode(ann, Project.objects.filter(pk=project.pk))
    episodes.prepare_episode(episode.pk)
    episode.refresh_from_db()
    assert episode.ended_at is None, episode.end_reason
    control = pool.control_for(episode.desktop)

    stale, reobserved = [], 0
    for index in range(1, STEPS + 1):
        step = Step.objects.get(episode=episode, index=index)
        time.sleep(LOOK_S)
        seen = control.observe(settle=False).png  # what the annotator sees as they decide
        if rgb(stored(step)) != rgb(seen):
            stale.append(index)
        reobserved += step.reobserved > 0
        episodes.decide(
            episode.pk, ann, index, Decision.CORRECTED, thought="Toggle the dialog.", action=KEY,
            observation=step.observation_id,
        )  # fmt: skip
        episodes.execute_step(step.pk)

    assert stale == [], f"{len(stale)} of {STEPS} stored observations were stale: {stale}"
    # The dialog comes after the settled screenshot at (nearly) every step: the watch replaced
    # the first observation, which shows this test would catch a stale one.
    assert reobserved >= STEPS * 0.8, reobserved


def test_a_decision_on_a_replaced_observation_is_refused(loop_settings, make_user, project):
    """The watch replaced the step's observation after the annotator looked: their decision
    names the old one and is refused as stale; nothing is recorded."""
    template = DesktopTemplate.objects.create(name="watched", width=800, height=600)
    Project.objects.filter(pk=project.pk).update(environment_template="watched")
    ann = make_user("ann", project, Role.ANNOTATOR)
    Task.objects.create(project=project, external_id="t", instruction="Look", max_steps=5)
    desktop = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    episode = episodes.start_episode(ann, Project.objects.filter(pk=project.pk))
    episodes.prepare_episode(episode.pk)
    step = Step.objects.get(episode=episode, index=1)
    first = step.observation_id
    control = pool.control_for(Episode.objects.get(pk=episode.pk).desktop)
    control.launch(["xterm", "-title", "appears-later"], window_timeout=10)

    deadline = time.monotonic() + 10
    while Step.objects.get(pk=step.pk).observation_id == first:
        assert time.monotonic() < deadline, "the watch did not replace the observation"
        time.sleep(0.1)
    with pytest.raises(episodes.StaleDecision, match="changed before this decision"):
        episodes.decide(
            episode.pk, ann, 1, Decision.CORRECTED, thought="Wait.", action={"type": "wait"},
            observation=first,
        )  # fmt: skip
    step.refresh_from_db()
    assert step.decided_at is None and step.reobserved >= 1


def test_a_caret_blink_is_not_a_change_but_a_window_is():
    blank = Frame(40, 30, bytes(40 * 30 * 4))
    caret = bytearray(blank.pixels)
    for row in range(5, 20):  # a text caret: one pixel wide
        caret[(row * 40 + 10) * 4] = 255
    window = bytearray(blank.pixels)
    for row in range(5, 20):
        for column in range(5, 25):
            window[(row * 40 + column) * 4 + 1] = 200
    assert not screen_watch.meaningful_change(blank, Frame(40, 30, bytes(caret)))
    assert screen_watch.meaningful_change(blank, Frame(40, 30, bytes(window)))
    assert not screen_watch.meaningful_change(blank, blank)
    padding = bytearray(blank.pixels)
    padding[3::4] = b"\xff" * (40 * 30)  # a decoded PNG's padding bytes differ from the server's
    assert not screen_watch.meaningful_change(blank, Frame(40, 30, bytes(padding)))
