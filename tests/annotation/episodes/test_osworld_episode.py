"""An OSWorld Calc task, its JSON as published, run end to end in a container desktop.

The task (``annotation/osworld_tasks/51b11269-….json``: "sort the records according to the
amounts ascendingly", one of the OSWorld demo's) is imported unchanged. Its two files (the
workbook the setup downloads, the gold workbook the evaluator compares with) are made with
openpyxl and put in the task-file cache under the task's own URLs, as a manager does on a
machine without internet (``annotation.demo.osworld``). The setup
downloads and opens the workbook in LibreOffice Calc; the annotator's steps are executed on the
desktop; when the episode ends, the evaluator's postconfig saves the document (pyautogui's
ctrl+s, as published), ``vm_file`` reads it back, ``cloud_file`` takes the gold one from the
cache and ``compare_table`` scores them.

Solved (the annotator types the amounts in order over the old ones), it scores 1; left as it
was (the annotator says finished at once), it scores 0.
"""

import json
import time
from pathlib import Path

import pytest

from annotation.demo import osworld
from annotation.episodes import loop, scoring
from annotation.models import Decision, Episode, EvaluationStatus, Project, Step
from annotation.projects.importer import import_tasks
from backend.accounts.roles import Role
from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("container_desktops"),
]

TASK_FILE = osworld.TASKS / "51b11269-2ca8-4b2a-9163-f21758420e78.json"
AMOUNTS = osworld.AMOUNTS


@pytest.fixture
def calc_task(loop_settings, make_user, project):
    """The published task imported into a project of container desktops, its files cached."""
    template = DesktopTemplate.objects.create(
        name="office", provider="docker", width=1280, height=800, min_ready=0
    )
    Project.objects.filter(pk=project.pk).update(environment_template="office")
    manager = make_user("maria", project, Role.MANAGER)
    report = import_tasks(project, TASK_FILE.read_bytes(), TASK_FILE.name, manager)
    assert report.created == ["51b11269-2ca8-4b2a-9163-f21758420e78"]
    osworld.fill_cache(manager)
    desktop = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    return make_user("ann", project, Role.ANNOTATOR)


def correct(episode: Episode, index: int, thought: str, action: dict) -> bool:
    """The annotator's own step at ``index``, executed as the host's worker would; whether it
    ended the episode."""
    receipt = loop.decide(
        episode.pk, episode.annotator, index, Decision.CORRECTED, thought=thought, action=action
    )
    if receipt.ends_episode:
        return True
    loop.execute_step(Step.objects.get(episode=episode, index=index).pk)
    return False


def run(annotator, project, steps: list[tuple[str, dict]]) -> Episode:
    episode = loop.start_episode(annotator, Project.objects.filter(pk=project.pk))
    loop.prepare_episode(episode.pk)
    episode.refresh_from_db()
    assert episode.ended_at is None, episode.end_reason
    for index, (thought, action) in enumerate(steps, start=1):
        assert Step.objects.filter(episode=episode, index=index).exists()
        correct(episode, index, thought, action)
    episode.refresh_from_db()
    # The desktop is kept for the evaluator, whose job runs on the desktop's host.
    assert episode.evaluation_status == EvaluationStatus.PENDING
    assert Desktop.objects.get(pk=episode.desktop_id).status == DesktopStatus.LEASED
    scoring.evaluate_episode(episode.pk)
    episode.refresh_from_db()
    return episode


FINISHED = ("The amounts are in order.", {"type": "finished", "content": ""})


def test_the_published_calc_task_solved_by_the_annotator_scores_1(calc_task, project):
    steps = [("Go to the first amount.", {"type": "hotkey", "keys": ["down"]})]
    steps += [(f"Type {a}.", {"type": "type", "content": f"{a}\n"}) for a in sorted(AMOUNTS)]
    episode = run(calc_task, project, [*steps, FINISHED])

    assert episode.evaluation_status == EvaluationStatus.SCORED, episode.evaluation
    assert episode.task_success == 1.0, episode.evaluation
    (metric,) = episode.evaluation["metrics"]
    assert (metric["func"], metric["score"]) == ("compare_table", 1.0)
    # The desktop went back to the pool once it was read.
    assert Desktop.objects.get(pk=episode.desktop_id).status != DesktopStatus.LEASED


def test_the_same_task_left_unsolved_scores_0(calc_task, project):
    episode = run(calc_task, project, [FINISHED])

    assert episode.evaluation_status == EvaluationStatus.SCORED, episode.evaluation
    assert episode.task_success == 0.0
    (metric,) = episode.evaluation["metrics"]
    assert (metric["func"], metric["score"]) == ("compare_table", 0.0)


def test_the_published_os_task_sets_up_with_sudo_and_its_evaluator_reads_the_desktop(
    loop_settings,
):
    """OSWorld's setups use ``sudo -S`` with ``{CLIENT_PASSWORD}``: on a desktop, sudo runs the
    command as the desktop's user, so a folder in HOME is made; the published evaluator then
    reads the desktop with a command and scores 0 before the rename and 1 after."""
    from vm_pool.evaluation.evaluator import evaluate
    from vm_pool.setup.runner import run_setup

    task = json.loads((osworld.TASKS / "e0df059f-28a6-4169-924f-b9623e7184cc.json").read_text())
    template = DesktopTemplate.objects.create(
        name="os", provider="docker", width=1024, height=768, min_ready=0
    )
    desktop = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    control = pool.control_for(desktop)

    assert run_setup(control, task["config"]) == []  # nothing failed, sudo included
    listed = control.run(["ls", "/home/user/Desktop"], timeout=10).stdout.split()
    assert listed == ["todo_list_Jan_1"]
    no_fetch = lambda url: b""  # noqa: E731 - the task has no files
    assert evaluate(control, task["evaluator"], False, no_fetch).value == 0.0
    control.run(
        ["mv", "/home/user/Desktop/todo_list_Jan_1", "/home/user/Desktop/todo_list_Jan_2"],
        timeout=10,
    )
    score = evaluate(control, task["evaluator"], False, no_fetch)
    assert score.value == 1.0 and score.metrics[0]["result"] == "Directory exists.\n"
    # Given up (call_user), a feasible task scores 0 whatever the desktop shows.
    assert evaluate(control, task["evaluator"], True, no_fetch).value == 0.0


def test_a_save_still_under_way_after_the_postconfig_is_waited_for_before_the_desktop_is_read(
    loop_settings,
):
    """The published Calc task saves with ctrl+s and reads the file half a second later; on a
    loaded host the save comes later than that. A program still at work when the postconfig
    is over (here: working 1.5 s of CPU, then writing its file) is waited for, from the
    container's own cgroup, and the file is read once written."""
    from vm_pool.evaluation.evaluator import evaluate

    template = DesktopTemplate.objects.create(
        name="late", provider="docker", width=1024, height=768, min_ready=0
    )
    desktop = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    control = pool.control_for(desktop)
    writer = (
        "import pathlib, time\n"
        "end = time.process_time() + 1.5\n"
        "while time.process_time() < end: pass\n"
        "pathlib.Path.home().joinpath('late.txt').write_text('saved')\n"
    )
    evaluator = {
        "postconfig": [
            {
                "type": "launch",
                "parameters": {"command": ["python3", "-c", writer], "window_timeout": 0},
            },
            {"type": "sleep", "parameters": {"seconds": 0.5}},
        ],
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "cat ~/late.txt", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "saved"}},
    }
    no_fetch = lambda url: b""  # noqa: E731 - the task has no files
    score = evaluate(control, evaluator, False, no_fetch)
    assert (score.value, score.postconfig_log) == (1.0, []), score.as_json()


def test_the_published_chrome_task_restarts_the_browser_and_reads_its_settings(loop_settings):
    """OSWorld's Chrome task "make Bing the search engine": the setup starts google-chrome with
    its debugging port forwarded by socat; the evaluator's postconfig starts the browser again
    and the getter reads the profile's Preferences.

    The postconfig's ``pkill chrome`` does not end Chromium, whose processes are named
    ``chromium``: the choice is read as the browser last wrote it."""
    from vm_pool.evaluation.evaluator import evaluate
    from vm_pool.evaluation.getters import Reading
    from vm_pool.evaluation.getters.browser import open_tabs_info
    from vm_pool.setup.runner import run_setup

    published = osworld.TASKS / "bb5e4c0d-f964-439c-97b6-bdb9747de3f4.json"
    task = json.loads(published.read_text())
    template = DesktopTemplate.objects.create(
        name="chrome", provider="docker", width=1280, height=800, min_ready=0
    )
    desktop = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    control = pool.control_for(desktop)
    assert run_setup(control, task["config"]) == []
    no_fetch = lambda url: b""  # noqa: E731 - the task has no files
    # socat forwards the published port to the browser's: its tabs are listed there (the browser
    # registers its first tab a moment after drawing its window, later on a loaded machine).
    reading = Reading(control, Path("/nonexistent"), no_fetch)
    deadline = time.monotonic() + 20
    while not open_tabs_info(reading, {})["value"]:
        assert time.monotonic() < deadline, "no tab listed through socat's port in 20 s"
        time.sleep(0.5)

    assert evaluate(control, task["evaluator"], False, no_fetch).value == 0.0  # still Google

    # What saving the choice in the settings page leaves behind, written while the browser is
    # closed: the postconfig's start keeps it, and the getter reads it.
    assert control.run(["pkill", "-x", "chromium"], timeout=10).returncode == 0
    time.sleep(2)
    preferences = "~/.config/chromium/Default/Preferences"
    settings = json.loads(control.read_file(preferences) or b"{}")
    settings["default_search_provider_data"] = {"template_url_data": {"short_name": "Bing"}}
    control.put_file(preferences, json.dumps(settings).encode())
    score = evaluate(control, task["evaluator"], False, no_fetch)
    assert score.value == 1.0, score.as_json()
    assert control.run(["pgrep", "-x", "chromium"], timeout=10).returncode == 0  # started again
