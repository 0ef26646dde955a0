"""Demonstrations on a real desktop: the annotator drives it through a control stream (the
deployment's websockify with the recording gate), and the recorded input becomes the steps.

The loop's jobs run in this process (``loop_settings``); the person is a plain RFB client, so
each input is exactly the one the test means. Frames the test grabs itself just before each
action are compared with the stored observations.
"""

import base64
import time
from collections.abc import Iterator

import pytest

from annotation.datasets.pairs import iter_samples
from annotation.datasets.records import Filters
from annotation.episodes import demonstrations, loop, proposals, replay_check, scoring, thoughts
from annotation.management.commands.seed_demo import DEMO_TASKS
from annotation.models import (
    Decision,
    Demonstration,
    EpisodeOutcome,
    EvaluationStatus,
    Project,
    Step,
    Task,
)
from backend.accounts.roles import Role
from model_serving.proposers.base import Candidate, ProposalResult
from tests.support import live
from tests.support.rfb_client import BACKSPACE, CTRL, RETURN, SHIFT, RfbClient
from tests.support.services import free_port
from vm_pool import pool
from vm_pool.actions import Action
from vm_pool.desktop import DesktopControl
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate, RecordedInput
from vm_pool.screen.compare import same_screen
from vm_pool.screen.screenshots import screenshot_png

TASK = next(task for task in DEMO_TASKS if task["id"] == "demo-text-editor")
KEY_S = ord("s")
WAIT_S = 30.0

demo = pytest.mark.django_db(transaction=True)  # the gate's process must see committed rows


@pytest.fixture
def desktop(loop_settings) -> Iterator[Desktop]:
    template = DesktopTemplate.objects.create(name="demo", width=1280, height=800, min_ready=0)
    started = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    assert started.status == DesktopStatus.READY, started.broken_reason
    yield started


@pytest.fixture
def proxy(loop_settings) -> Iterator[str]:
    """The deployment's websockify, storing frames in this test's media folder."""
    port = free_port()
    with live.websockify(port, TANDEM_MEDIA_ROOT=str(loop_settings.MEDIA_ROOT)):
        yield f"ws://127.0.0.1:{port}"


def eventually(read, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not read():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def focused(control: DesktopControl, title: str) -> None:
    def active() -> str:
        return control.run(["xdotool", "getactivewindow", "getwindowname"], timeout=10).stdout

    eventually(lambda: title in active(), f"{title!r} to have the focus")
    time.sleep(0.5)  # drawn, and its caret blinking as it will


def fresh(desktop: Desktop) -> Desktop:
    """Another ready desktop of the same template on this host, for a replay check."""
    started = pool.start_desktop(pool.create_desktop(desktop.template, desktop.host).pk)
    assert started.status == DesktopStatus.READY, started.broken_reason
    return started


def project_with_the_editor_task(demonstrate: bool) -> Project:
    project = Project.objects.create(
        name="Editing", environment_template="demo", demonstrate=demonstrate
    )
    Task.objects.create(
        project=project,
        external_id=TASK["id"],
        instruction=TASK["instruction"],
        setup=TASK["config"],
        evaluator=TASK["evaluator"],
    )
    return project


def drive(proxy: str, episode_id: int, user) -> RfbClient:
    stream = demonstrations.control_stream(episode_id, user)
    return RfbClient(f"{proxy}/websockify?token={stream['token']}")


def written(episode_id: int, **last: object) -> None:
    """Wait until the latest input the gate wrote for the episode's open demonstration is the
    one with these fields (moves in a burst are folded, so inputs are not counted)."""
    recording = Demonstration.objects.get(episode_id=episode_id, ended_at__isnull=True).recording

    def done() -> bool:
        row = RecordedInput.objects.filter(recording=recording).order_by("-index").first()
        return row is not None and all(getattr(row, k) == v for k, v in last.items())

    eventually(done, f"the input {last} written")


KEY_UP = {"kind": "key", "down": False}


def name_the_file(person: RfbClient, episode_id: int, control: DesktopControl) -> None:
    """The name, then Enter after a person's pause: GTK's chooser completes names as they are
    typed, and an Enter at once goes to its completion, not to the dialog. The pause lasts
    until the name's last key has gone through and the dialog has stopped changing (its
    completion drawn), however busy the machine is, and a moment more."""
    person.type_text("hello.txt")
    written(episode_id, keysym=ord("t"), **KEY_UP)
    control.observe(settle=True)
    time.sleep(0.3)
    person.key(RETURN)


def screen(control: DesktopControl) -> bytes:
    return control.observe(settle=False).png


def steps_of(episode) -> list[tuple[str, dict]]:
    return [(s.decision, s.final_action) for s in Step.objects.filter(episode=episode)]


@demo
def test_a_demonstration_is_recorded_as_its_actions_on_the_screens_before_them(
    desktop, proxy, make_user
):
    project = project_with_the_editor_task(demonstrate=True)
    ann = make_user("ann", project, Role.ANNOTATOR)
    episode = loop.start_episode(ann, Project.objects.filter(pk=project.pk))
    assert episode.demonstration
    loop.prepare_episode(episode.pk)
    first = Step.objects.get(episode=episode, index=1)
    assert not first.proposals.exists()  # no model proposes in a demonstration
    with pytest.raises(loop.EpisodeError, match="driving"):
        loop.decide(episode.pk, ann, 1, Decision.CORRECTED, thought="t", action={"type": "wait"})

    control = pool.control_for(desktop)
    focused(control, "Mousepad")
    person = drive(proxy, episode.pk, ann)
    before: list[bytes] = []

    def act(send, **last: object) -> None:
        before.append(screen(control))
        send()
        written(episode.pk, **last)
        time.sleep(0.3)

    # A click in the text, then typing with a typo taken back, then Ctrl+S and the file's name.
    for x in range(600, 648, 8):
        person.send(pointer(x, 400, 0))
    written(episode.pk, x=640, y=400, buttons=0)
    act(lambda: (person.send(pointer(640, 400, 1)), person.send(pointer(640, 400, 0))),
        x=640, buttons=0)  # fmt: skip
    act(lambda: (person.type_text("Hello from Tandme"), person.key(BACKSPACE),
                 person.key(BACKSPACE), person.type_text("em")),
        keysym=ord("m"), **KEY_UP)  # fmt: skip
    act(lambda: person.chord(CTRL, KEY_S), keysym=CTRL, **KEY_UP)
    focused(control, "Save As")
    act(lambda: name_the_file(person, episode.pk, control), keysym=RETURN, **KEY_UP)
    eventually(lambda: control.read_file("~/hello.txt") is not None, "hello.txt saved")
    person.close()

    ended = demonstrations.end(episode.pk, ann, finish=True)
    demonstrations.demonstration_ended(ended.pk, True)  # the host's job, here
    episode.refresh_from_db()
    assert episode.outcome == EpisodeOutcome.FINISHED
    assert steps_of(episode) == [
        (Decision.DEMONSTRATED, {"type": "click", "point": [640, 400]}),
        (Decision.DEMONSTRATED, {"type": "type", "content": "Hello from Tandem"}),
        (Decision.DEMONSTRATED, {"type": "hotkey", "keys": ["ctrl", "s"]}),
        (Decision.DEMONSTRATED, {"type": "type", "content": "hello.txt\n"}),
        (Decision.DEMONSTRATED, {"type": "finished", "content": ""}),
    ]
    steps = list(Step.objects.filter(episode=episode).select_related("observation"))
    for step, grabbed in zip(steps, before, strict=False):
        assert same_screen(screenshot_png(step.observation), grabbed), step.index

    # Scored as any episode.
    assert episode.evaluation_status == EvaluationStatus.PENDING
    scoring.evaluate_episode(episode.pk)
    episode.refresh_from_db()
    assert episode.task_success == 1.0, episode.evaluation

    # The replay check: the steps run again on a fresh desktop with the same setup.
    fresh(desktop)
    check = replay_check.check(episode.pk)
    assert check["status"] == "replays", check
    assert [s["step"] for s in check["steps"]] == [1, 2, 3, 4, 5]
    # The same demonstration, when the task's setup opens another file first: flagged at the
    # first step whose screen differs (the one after the setup).
    text = base64.b64encode(b"A line of another file.\n" * 30).decode()
    other = [
        {"type": "file", "parameters": {"path": "~/other.txt", "content_b64": text}},
        {"type": "launch", "parameters": {"command": ["mousepad", "/home/user/other.txt"]}},
    ]
    Task.objects.filter(pk=episode.task_id).update(setup=other)
    fresh(desktop)
    check = replay_check.check(episode.pk)
    assert (check["status"], check["first_divergent_step"]) == ("diverges", 1), check
    Task.objects.filter(pk=episode.task_id).update(setup=TASK["config"])

    # Thoughts after the recording; then the steps are SFT samples.
    for step in steps:
        thoughts.write(episode.pk, ann, step.index, f"Why step {step.index}.")
    samples = list(iter_samples(Filters(project_id=project.pk), "sft"))
    assert [(s.step_index, s.kind, s.completion.thought) for s in samples] == [
        (i, "demonstrated", f"Why step {i}.") for i in range(1, 6)
    ]
    assert samples[1].completion.action_json == {"type": "type", "content": "Hello from Tandem"}


def pointer(x: int, y: int, buttons: int) -> bytes:
    from vm_pool.recording import rfb

    return rfb.pointer_event(x, y, buttons)


def answer(step: Step, *texts: str) -> None:
    """The model's proposals for ``step``, as the proposal job records them."""
    candidates = []
    for text in texts:
        thought, action = text.split("\nAction: ")
        parsed = Action.from_text(action)
        candidates.append(Candidate(text, thought.removeprefix("Thought: "), parsed))
    proposals.record_proposals(step.pk, ProposalResult(tuple(candidates), "scripted", "v1"))


@demo
def test_a_take_over_over_a_proposal_makes_one_pair_and_the_model_goes_on_after(
    desktop, proxy, make_user
):
    project = project_with_the_editor_task(demonstrate=False)
    ann = make_user("ann", project, Role.ANNOTATOR)
    episode = loop.start_episode(ann, Project.objects.filter(pk=project.pk))
    loop.prepare_episode(episode.pk)
    control = pool.control_for(desktop)
    focused(control, "Mousepad")

    def accept(index: int, text: str) -> None:
        step = Step.objects.get(episode=episode, index=index)
        answer(step, text)
        loop.decide(episode.pk, ann, index, Decision.ACCEPTED, proposal_rank=0)
        loop.execute_step(step.pk)

    accept(1, "Thought: Write the greeting.\nAction: type(content='Hello from Tandem')")
    accept(2, "Thought: Save it.\nAction: hotkey(key='ctrl s')")
    focused(control, "Save As")
    third = Step.objects.get(episode=episode, index=3)
    answer(third, "Thought: Name it.\nAction: type(content='wrong.txt\\n')")

    taken = demonstrations.take_over(episode.pk, ann)
    assert taken.over_proposal is not None and taken.from_step == 3
    person = drive(proxy, episode.pk, ann)
    name_the_file(person, episode.pk, control)
    written(episode.pk, keysym=RETURN, **KEY_UP)
    eventually(lambda: control.read_file("~/hello.txt") is not None, "hello.txt saved")
    focused(control, "hello.txt")
    person.send(pointer(700, 450, 0))
    person.send(pointer(700, 450, 1))
    person.send(pointer(700, 450, 0))
    person.type_text("!")
    written(episode.pk, keysym=SHIFT, **KEY_UP)
    person.close()
    demonstrations.demonstration_ended(demonstrations.end(episode.pk, ann, finish=False).pk, False)

    sixth = Step.objects.get(episode=episode, index=6)  # opened for the model on the screen left
    assert sixth.decided_at is None
    accept(6, "Thought: Done.\nAction: finished(content='saved')")
    episode.refresh_from_db()
    assert episode.outcome == EpisodeOutcome.FINISHED
    assert steps_of(episode) == [
        (Decision.ACCEPTED, {"type": "type", "content": "Hello from Tandem"}),
        (Decision.ACCEPTED, {"type": "hotkey", "keys": ["ctrl", "s"]}),
        (Decision.DEMONSTRATED, {"type": "type", "content": "hello.txt\n"}),
        (Decision.DEMONSTRATED, {"type": "click", "point": [700, 450]}),
        (Decision.DEMONSTRATED, {"type": "type", "content": "!"}),
        (Decision.ACCEPTED, {"type": "finished", "content": "saved"}),
    ]
    for index in (3, 4, 5):
        thoughts.write(episode.pk, ann, index, f"Why step {index}.")
    pairs = list(iter_samples(Filters(project_id=project.pk), "dpo"))
    assert [(p.step_index, p.chosen.action_json, p.rejected.action_json) for p in pairs] == [
        (3, {"type": "type", "content": "hello.txt\n"}, {"type": "type", "content": "wrong.txt\n"})
    ]
