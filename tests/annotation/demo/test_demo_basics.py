"""The "Demo: desktop basics" tasks that ``make demo`` seeds, on real sandboxed desktops.

Each task imports as one the desktops can run, and its evaluator is one this platform scores;
seeding an older demo again brings its unstarted tasks up to date and keeps the started ones.
On a fresh local desktop, which has no network, each task's setup runs as it is, and the work it
asks for is done the way an annotator does it (typing, keys, GTK's Save As dialog): a task with
an evaluator scores 0 before and 1 after. The browser task shows its own page, written into the
desktop by the setup, never an error page. No window title and no name a window carries, read
from the host or listed by the desktop's window manager, holds a path of the host: HOME is
``/home/user`` inside the sandbox.
"""

import io
import time
from collections.abc import Callable, Iterator

import pytest
from django.core.management import call_command
from Xlib import X
from Xlib.display import Display
from Xlib.error import XError

from annotation.demo import basics as demo_basics
from annotation.episodes import loop, scoring
from annotation.management.commands.seed_demo import DEMO_TASKS
from annotation.models import Decision, EvaluationStatus, Project, Step, Task, TaskStatus
from backend.accounts.roles import Role
from tests.support.services import ROOT
from vm_pool import pool
from vm_pool.actions import Action
from vm_pool.desktop import DesktopControl
from vm_pool.evaluation.evaluator import check, evaluate
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate
from vm_pool.setup.base import until_drawn
from vm_pool.setup.runner import parse_setup, run_setup

TASKS = {task["id"]: task for task in DEMO_TASKS}
# Every name a window carries that a person, a model or an evaluator may read.
NAME_PROPERTIES = (
    "_NET_WM_NAME", "WM_NAME", "_NET_WM_VISIBLE_NAME", "WM_ICON_NAME", "_NET_WM_ICON_NAME",
    "_NET_WM_VISIBLE_ICON_NAME", "WM_COMMAND",
)  # fmt: skip
WAIT_S = 30.0


def no_fetch(url: str) -> bytes:
    raise AssertionError(f"the demo's tasks fetch nothing, not {url}")


@pytest.mark.django_db
def test_the_seeded_basics_tasks_can_run_and_their_evaluators_are_supported(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    project = Project.objects.get(name="Demo: desktop basics")
    tasks = {task.external_id: task for task in project.tasks.all()}
    assert set(tasks) == set(TASKS)
    for task in tasks.values():
        assert task.cannot_run == "", task.external_id
        parse_setup(task.setup)
        if task.evaluator:
            check(task.evaluator)
    assert {i for i, t in tasks.items() if t.evaluator} == {
        "demo-text-editor", "demo-browser", "demo-files",
    }  # fmt: skip
    # The browser task brings its page along: nothing in it or its setup is on a network.
    setup = tasks["demo-browser"].setup
    opened = [step["parameters"] for step in setup if step["type"] == "chrome_open_tabs"]
    assert opened == [{"urls_to_open": [demo_basics.LIBRARY_URL]}]
    assert demo_basics.LIBRARY_URL.startswith("file:///home/user/")
    page = demo_basics.LIBRARY_PAGE.read_text()
    assert f"<title>{demo_basics.LIBRARY_TITLE}</title>" in page
    assert "://" not in page and "http" not in page


OLD_BROWSER_TASK = {
    "instruction": "Open example.com in the browser and copy its title into a new text file.",
    "setup": [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["http://example.com"]}}],
    "evaluator": {},
}


@pytest.mark.django_db
def test_seeding_an_older_demo_again_updates_its_unstarted_tasks_and_keeps_started_ones(
    settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    project = Project.objects.get(name="Demo: desktop basics")
    project.tasks.filter(external_id="demo-browser").update(**OLD_BROWSER_TASK)
    project.tasks.filter(external_id="demo-text-editor").update(
        evaluator={}, status=TaskStatus.SUBMITTED
    )
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    assert "Demo: desktop basics': 0 new task(s), 4 in all." in out.getvalue()
    browser = project.tasks.get(external_id="demo-browser")
    assert "Riverside Library" in browser.instruction
    assert browser.setup == TASKS["demo-browser"]["config"] and browser.evaluator
    worked = project.tasks.get(external_id="demo-text-editor")  # as it was worked
    assert (worked.status, worked.evaluator) == (TaskStatus.SUBMITTED, {})


# --- on a real desktop --------------------------------------------------------------------------


def eventually(read: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not read():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def listed_titles(control: DesktopControl) -> str:
    """The window list as the desktop's window manager gives it (what ``wmctrl -l`` shows)."""
    return control.run(["wmctrl", "-l"], timeout=10).stdout


def active_title(control: DesktopControl) -> str:
    return control.run(["xdotool", "getactivewindow", "getwindowname"], timeout=10).stdout.strip()


def act(control: DesktopControl, **action: object) -> None:
    control.execute(Action.from_json(action))


def focused(control: DesktopControl, title: str) -> None:
    """Wait until the window whose title holds ``title`` has the keyboard and is drawn: keys
    typed before then are lost, as they would be for a person typing that fast."""
    eventually(lambda: title in active_title(control), f"{title!r} to have the focus")
    until_drawn(control)


def save_as(control: DesktopControl, name: str) -> None:
    """Ctrl+S in an unsaved document, then the file's name in GTK's Save As dialog."""
    act(control, type="hotkey", keys=["ctrl", "s"])
    focused(control, "Save As")
    act(control, type="type", content=f"{name}\n")
    eventually(lambda: control.read_file(f"~/{name}") is not None, f"~/{name}")
    eventually(lambda: f"{name} - Mousepad" in listed_titles(control), f"{name} in the title")


def write_hello(control: DesktopControl) -> None:
    focused(control, "Mousepad")
    act(control, type="type", content="Hello from Tandem")
    save_as(control, "hello.txt")


def list_by_size(control: DesktopControl) -> None:
    focused(control, "xterm")
    act(control, type="type", content="ls -S ~\n")
    time.sleep(0.5)


def copy_the_title(control: DesktopControl) -> None:
    tabs = control.devtools({"method": "GET", "path": "/json/list"})
    assert demo_basics.LIBRARY_TITLE in tabs["body"] and "chrome-error://" not in tabs["body"]
    assert demo_basics.LIBRARY_URL in tabs["body"]
    assert f"{demo_basics.LIBRARY_TITLE} - Chromium" in listed_titles(control)
    control.run(["wmctrl", "-a", "Mousepad"], timeout=10)  # the editor behind the browser
    focused(control, "Mousepad")
    act(control, type="type", content=demo_basics.LIBRARY_TITLE)
    save_as(control, "title.txt")


def file_the_notes(control: DesktopControl) -> None:
    control.run(["bash", "-c", "mkdir ~/reports && mv ~/notes.txt ~/reports/"], timeout=10)
    focused(control, "user")  # the file manager, in HOME
    act(control, type="hotkey", keys=["ctrl", "l"])  # its location bar
    until_drawn(control)
    act(control, type="type", content="/home/user/reports\n")
    eventually(lambda: "reports" in listed_titles(control), "the reports folder's window")


WORK: dict[str, Callable[[DesktopControl], None]] = {
    "demo-text-editor": write_hello,
    "demo-terminal": list_by_size,
    "demo-browser": copy_the_title,
    "demo-files": file_the_notes,
}
SHOWN = {  # a title each task's windows show once the work is done
    "demo-text-editor": "hello.txt - Mousepad",
    "demo-terminal": "xterm",
    "demo-browser": "title.txt - Mousepad",
    "demo-files": "reports",
}


def window_names(display: str) -> list[str]:
    """Every name of every window of the desktop's X server, read from the host."""
    x = Display(display)
    names = []
    try:
        pending = [x.screen().root]
        while pending:
            window = pending.pop()
            try:
                pending += window.query_tree().children
                for name in NAME_PROPERTIES:
                    value = window.get_full_property(x.intern_atom(name), X.AnyPropertyType)
                    if value is not None:
                        text = value.value
                        is_bytes = isinstance(text, bytes)
                        names.append(text.decode(errors="replace") if is_bytes else str(text))
            except XError:  # a window that closed meanwhile
                continue
    finally:
        x.close()
    return names


def host_paths(desktop_root: object) -> list[str]:
    """What a host path of a desktop's would hold: where its files are, the repository."""
    return [str(desktop_root), str(ROOT), "var/desktops", "tandem-test-desktops"]


@pytest.fixture
def demo_desktop(loop_settings) -> Iterator[Desktop]:
    """A fresh sandboxed desktop of the demo's size, with no network."""
    template = DesktopTemplate.objects.create(name="demo", width=1280, height=800, min_ready=0)
    assert template.internet is False
    desktop = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    yield desktop


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("task_id", list(TASKS))
def test_a_demo_task_runs_offline_and_no_window_title_shows_a_host_path(
    task_id, demo_desktop, settings, tmp_path
):
    assert set(WORK) == set(TASKS)  # a new demo task is checked here too
    task = TASKS[task_id]
    control = pool.control_for(demo_desktop)
    assert run_setup(control, task["config"]) == []
    evaluator = task.get("evaluator")
    if evaluator:
        assert evaluate(control, evaluator, False, no_fetch).value == 0.0

    WORK[task_id](control)

    if evaluator:
        score = evaluate(control, evaluator, False, no_fetch)
        assert score.value == 1.0, score.as_json()
    listed = listed_titles(control)
    names = window_names(f":{demo_desktop.display}")
    assert SHOWN[task_id] in listed and any(SHOWN[task_id] in n for n in names)
    for text in [listed, *names]:
        assert not [p for p in host_paths(settings.TANDEM_DESKTOP_ROOT) if p in text], text
    # The desktop has no way out: no name resolves, no address answers.
    probe = control.run(
        ["python3", "-c", "import socket; socket.create_connection(('93.184.215.14', 80), 5)"],
        timeout=20,
    )
    assert probe.returncode != 0 and "Network is unreachable" in probe.output
    assert control.run(["getent", "hosts", "example.com"], timeout=20).returncode != 0
    screen = tmp_path / f"{task_id}.png"
    screen.write_bytes(control.observe(settle=True).png)
    print(f"{task_id}: {screen}: {[n for n in names if n]}")


@pytest.mark.django_db(transaction=True)
def test_an_episode_ended_right_after_the_save_is_scored_on_the_file_the_save_wrote(
    demo_desktop, make_user
):
    """The annotator's last step types the name and Enter into GTK's Save As dialog and they
    answer "finished" at once. The dialog closes and the file is written about half a second
    after the Enter, later than the step's screen settled: the evaluator waits for a still
    screen before it reads the desktop, so it scores the saved file, not a missing one."""
    project = Project.objects.create(name="Editing", environment_template="demo")
    task = TASKS["demo-text-editor"]
    Task.objects.create(
        project=project,
        external_id=task["id"],
        instruction=task["instruction"],
        setup=task["config"],
        evaluator=task["evaluator"],
    )
    annotator = make_user("ann", project, Role.ANNOTATOR)
    episode = loop.start_episode(annotator, Project.objects.filter(pk=project.pk))
    loop.prepare_episode(episode.pk)
    control = pool.control_for(demo_desktop)
    focused(control, "Mousepad")
    steps = [
        {"type": "type", "content": "Hello from Tandem"},
        {"type": "hotkey", "keys": ["ctrl", "s"]},
        {"type": "type", "content": "hello.txt\n"},
    ]
    for index, action in enumerate(steps, start=1):
        loop.decide(
            episode.pk, annotator, index, Decision.CORRECTED, thought="Next.", action=action
        )
        loop.execute_step(Step.objects.get(episode=episode, index=index).pk)
        if index == 2:
            focused(control, "Save As")
    receipt = loop.decide(
        episode.pk, annotator, 4, Decision.CORRECTED, thought="Saved.", action={"type": "finished"}
    )
    assert receipt.ends_episode
    episode.refresh_from_db()
    assert episode.evaluation_status == EvaluationStatus.PENDING

    scoring.evaluate_episode(episode.pk)

    episode.refresh_from_db()
    assert episode.evaluation_status == EvaluationStatus.SCORED, episode.evaluation
    assert episode.task_success == 1.0, episode.evaluation
    assert control.read_file("~/hello.txt") == b"Hello from Tandem"
