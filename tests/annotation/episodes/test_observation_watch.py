"""Every stored observation is the screen the annotator decides on.

A desktop program opens or closes a dialog 300–1500 ms after each key press
(tests/support/slow_dialog.py): the settled screenshot taken after the key is too early to show it.
The loop's jobs run in this process on a real sandboxed desktop (as the host's worker runs
them), the screen watch included; the "annotator" looks for 2 s before deciding, and what the
screen shows then must be the step's stored observation, at every one of 50 steps.
"""

import io
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from PIL import Image

from annotation.episodes import loop as episodes
from annotation.episodes import observations
from annotation.episodes.leases import end_episode
from annotation.models import Decision, Episode, EpisodeOutcome, Project, Proposal, Step, Task
from backend.accounts.roles import Role
from tests.support.live import worker
from vm_pool import pool
from vm_pool.actions import Action
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate
from vm_pool.screen import watch as screen_watch
from vm_pool.screen.capture import Frame
from vm_pool.screen.compare import meaningful_change

SLOW_DIALOG = Path(__file__).resolve().parents[2] / "support" / "slow_dialog.py"
STEPS = 30
LOOK_S = 2.0  # how long the annotator looks at a step before deciding
KEY = {"type": "hotkey", "keys": ["space"]}

pytestmark = pytest.mark.django_db(transaction=True)  # the watch's thread reads committed rows


def rgb(png: bytes) -> bytes:
    return Image.open(io.BytesIO(png)).convert("RGB").tobytes()


def pixel(png: bytes, x: int, y: int) -> tuple[int, int, int]:
    return Image.open(io.BytesIO(png)).convert("RGB").getpixel((x, y))


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
    assert not meaningful_change(blank, Frame(40, 30, bytes(caret)))
    assert meaningful_change(blank, Frame(40, 30, bytes(window)))
    assert not meaningful_change(blank, blank)
    padding = bytearray(blank.pixels)
    padding[3::4] = b"\xff" * (40 * 30)  # a decoded PNG's padding bytes differ from the server's
    assert not meaningful_change(blank, Frame(40, 30, bytes(padding)))


BLINKER = Path(__file__).resolve().parents[2] / "support" / "blinker.py"
WATCHED_S = 8.0


def _blinking_step(project, ann, name: str, program: list[str]) -> Step:
    """An episode whose desktop shows ``program``, started through the host's worker; its first
    step once proposed for, after ``WATCHED_S`` more of being watched."""
    Task.objects.create(
        project=project, external_id=name, instruction="Insert a table", max_steps=5,
        priority=Task.objects.count(),  # before the tasks given back earlier
        setup=[
            {"type": "file", "parameters": {"path": "~/blinker.py",
                                            "content": BLINKER.read_text()}},
            {"type": "launch", "parameters": {"command": program}},
        ],
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not Desktop.objects.filter(status=DesktopStatus.READY).exists():  # reset after the last
        assert time.monotonic() < deadline, "no desktop came back from its reset"
        time.sleep(0.2)
    episode = episodes.start_episode(ann, Project.objects.filter(pk=project.pk))
    assert episode.task.external_id == name
    while not Proposal.objects.filter(step__episode=episode, step__index=1).exists():
        assert time.monotonic() < deadline, Episode.objects.get(pk=episode.pk).end_reason
        time.sleep(0.2)
    time.sleep(WATCHED_S)
    return Step.objects.get(episode=episode, index=1)


@pytest.mark.services
def test_a_blinking_border_a_spinner_and_a_blinking_cursor_are_reobserved_a_bounded_number_of_times(
    host, make_user, project
):
    """Through the host's worker, the baseline proposing: a border that blinks goes back to a
    picture already seen (no replacement after the first); a spinner and a blinking block cursor
    keep showing new pictures and are replaced at most ``MAX_REOBSERVED`` times, each replacement
    proposed for once, never two proposals in flight."""
    template = DesktopTemplate.objects.create(name="blinking", width=1024, height=768)
    Project.objects.filter(pk=project.pk).update(environment_template="blinking")
    pool.start_desktop(pool.create_desktop(template, host).pk)
    ann = make_user("ann", project, Role.ANNOTATOR)
    with worker(host, broker=settings.CELERY_BROKER_URL) as process:
        border = _blinking_step(project, ann, "border", ["python3", "blinker.py", "border"])
        end_episode(border.episode_id, EpisodeOutcome.ABANDONED, "next")
        spinner = _blinking_step(project, ann, "spinner", ["python3", "blinker.py", "spinner"])
        end_episode(spinner.episode_id, EpisodeOutcome.ABANDONED, "next")
        cursor = _blinking_step(
            project, ann, "cursor", ["xterm", "-bc", "-fs", "24", "-fa", "DejaVu Sans Mono"]
        )
        assert process.poll() is None
    for name, step in (("border", border), ("spinner", spinner), ("cursor", cursor)):
        batches = step.proposals.values("created_at").distinct().count()
        print(f"\n{name}: re-observed {step.reobserved} times, {batches} proposals")
        assert step.reobserved <= observations.MAX_REOBSERVED
        assert batches <= step.reobserved + 1
        assert step.proposals.filter(superseded=False).count() <= 1
    assert border.reobserved <= 1  # after its first toggle, only pictures seen already


def test_a_screen_that_goes_back_to_a_picture_seen_for_the_step_replaces_nothing():
    """Two pictures in turn (a blinking border): the first toggle is new and handed on, every
    later one is a picture seen already."""
    blank = Frame(40, 30, bytes(40 * 30 * 4))
    bordered = bytearray(blank.pixels)
    for row in range(5, 25):
        for column in (5, 6, 33, 34):
            bordered[(row * 40 + column) * 4] = 255
    pictures = [blank, Frame(40, 30, bytes(bordered))]
    shown = [0]

    def grab(wait_s: float) -> Frame:
        return pictures[shown[0] % 2]

    handed: list[bytes] = []
    watch = screen_watch.Watch("step", grab, blank, lambda png, ms: handed.append(png) or True,
                               lambda: True)  # fmt: skip
    watcher = screen_watch.ScreenWatcher()
    for _ in range(6):
        shown[0] += 1
        assert watcher._step(watch)
    assert len(handed) == 1


# A program answering each click: after ``sys.argv[2]`` seconds it paints its window the next
# colour, and with ``sys.argv[1]`` "strip" it first paints a strip of it grey, at once. With
# ``sys.argv[3]`` "busy" it computes meanwhile (a program slow under load), else it sleeps.
REACTION = """
import sys, time
from Xlib import X, display

strip, pause, busy = sys.argv[1] == "strip", float(sys.argv[2]), sys.argv[3] == "busy"
d = display.Display()
screen = d.screen()
window = screen.root.create_window(
    100, 100, 400, 300, 0, screen.root_depth, override_redirect=True,
    background_pixel=0xFFFFFF, event_mask=X.ButtonPressMask,
)
window.map()
d.sync()
colors = [0xCC3333, 0x3333CC]
clicks = 0
while True:
    if d.next_event().type == X.ButtonPress:
        clicks += 1
        if strip:
            window.change_attributes(background_pixel=0x808080)
            window.clear_area(0, 0, 400, 20)
            d.sync()
        until = time.monotonic() + pause
        while busy and time.monotonic() < until:
            pass
        time.sleep(max(0.0, until - time.monotonic()))
        window.change_attributes(background_pixel=colors[clicks % 2])
        window.clear_area()
        d.sync()
"""
CLICK = Action.from_json({"type": "click", "point": [450, 200]})


def launch_reaction(control, strip: bool, pause_s: float, busy: bool = False) -> None:
    """``REACTION`` on the desktop, once its white window shows."""
    shape, pause = "strip" if strip else "whole", "busy" if busy else "asleep"
    control.launch(["python3", "-c", REACTION, shape, str(pause_s), pause])
    deadline = time.monotonic() + 10
    while pixel(control.observe(settle=False).png, 200, 300) != (255, 255, 255):
        assert time.monotonic() < deadline, "the program's window did not appear"
        time.sleep(0.1)


def test_a_run_without_a_person_takes_the_screen_once_a_pausing_reaction_is_over(
    sandboxed_control,
):
    """A settle's short window ends in the pause of a reaction drawn in two parts (the watch
    replaces that observation where a person decides); a rollout's observation waits until the
    screen stayed still for the quiet period since its last drawing, and shows the whole."""
    control = sandboxed_control
    # Two drawings 200 ms apart: a settle's window (50 ms) ends well inside the pause, and the
    # quiet period (300 ms) well outside it, each with a margin a busy machine's late wake-up
    # does not cross.
    assert 4 * settings.TANDEM_SETTLE_WINDOW_MS <= 200 <= settings.TANDEM_ROLLOUT_QUIET_MS - 100
    launch_reaction(control, strip=True, pause_s=0.2)

    control.execute(CLICK)
    settled = control.observe(settle=True)
    time.sleep(0.5)
    over = control.observe(settle=False).png
    assert pixel(settled.png, 200, 300) == (255, 255, 255) != pixel(over, 200, 300)

    control.execute(CLICK)
    quiet = observations.settled_quietly(control, settings.TANDEM_ROLLOUT_QUIET_MS).observation
    time.sleep(0.5)
    assert rgb(quiet.png) == rgb(control.observe(settle=False).png)


def test_a_run_without_a_person_waits_for_a_reaction_slow_to_start(sandboxed_control):
    """Nothing is drawn for 400 ms after the click while the program computes, longer than the
    quiet period: a settle ends before the reaction, a rollout's observation waits for its
    first drawing (up to the reaction time: the program is at work) and shows it. On a desktop
    where nothing works, the wait ends because the desktop is idle."""
    assert settings.TANDEM_ROLLOUT_QUIET_MS < 400 < settings.TANDEM_ROLLOUT_REACTION_MS
    control = sandboxed_control
    assert control.activity() is not None  # the kernel accounts a local desktop's work
    launch_reaction(control, strip=False, pause_s=0.4, busy=True)  # nothing drawn for 400 ms

    control.execute(CLICK)
    settled = control.observe(settle=True)
    time.sleep(0.6)
    assert pixel(settled.png, 200, 300) == (255, 255, 255)
    first = pixel(control.observe(settle=False).png, 200, 300)
    assert first != (255, 255, 255)

    control.execute(CLICK)
    quieted = observations.after_an_unattended_action(control)
    assert quieted.ended == "quiet"  # the reaction was drawn, then the screen stayed still
    after = quieted.observation
    assert pixel(after.png, 200, 300) not in ((255, 255, 255), first)
    time.sleep(0.6)
    assert rgb(after.png) == rgb(control.observe(settle=False).png)

    # A click beside the window: nothing reacts, nothing works, no reaction is waited for.
    control.execute(Action.from_json({"type": "click", "point": [900, 700]}))
    quieted = observations.after_an_unattended_action(control)
    assert quieted.ended == "idle"  # not the reaction time's end: nothing was at work
    assert pixel(quieted.observation.png, 200, 300) == pixel(after.png, 200, 300)
