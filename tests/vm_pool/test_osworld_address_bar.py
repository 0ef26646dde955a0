"""The active tab's URL as OSWorld reads it from Chrome's address bar (``getters._address_bar``):
the text an ``http(s)`` URL shows there has no scheme and gets ``goto_prefix``; a text with a
scheme is kept whole; a prefix ending in ``www.`` does not double the text's own. The cases are
the chrome tasks whose correct episodes scored 0 before (0d8b7de3, 59155008, f0b971a1,
a728a36e, b070486d, 93eabf48, 12086550 use ``goto_prefix`` ``https://www.`` or read a
``chrome://`` page)."""

import json
import time
from pathlib import Path

import pytest

from tests.support import recreation_site
from vm_pool import pool
from vm_pool.evaluation.evaluator import evaluate
from vm_pool.evaluation.getters import Reading
from vm_pool.evaluation.getters.browser import _address_bar, active_url_from_accessTree
from vm_pool.evaluation.getters.recreation import gotoRecreationPage_and_get_html_content
from vm_pool.evaluation.metrics.chrome import is_expected_active_tab
from vm_pool.models import DesktopTemplate
from vm_pool.setup.browser import page_tabs
from vm_pool.setup.runner import run_setup

CHROME = Path(__file__).resolve().parents[1] / "osworld_reference" / "tasks" / "chrome"
CASES = [
    ("https://www.nfl.com/standings/", {"goto_prefix": "https://www."},
     "https://www.nfl.com/standings/"),
    ("https://www.drugs.com/npc/", {"goto_prefix": "https://www."}, "https://www.drugs.com/npc/"),
    ("https://nfl.com/", {"goto_prefix": "https://www."}, "https://www.nfl.com/"),
    ("chrome://settings/appearance", {}, "chrome://settings/appearance"),
    ("chrome://settings/appearance", {"goto_prefix": "https://www."},
     "chrome://settings/appearance"),
    ("file:///home/user/page.html", {"goto_prefix": ""}, "file:///home/user/page.html"),
    ("https://www.google.com/search?q=tandem", {}, "https://www.google.com/search?q=tandem"),
    ("http://example.org/a", {"goto_prefix": None}, "example.org/a"),
]  # fmt: skip


@pytest.mark.parametrize(("url", "config", "read"), CASES)
def test_the_address_bar_reads_as_osworld_reads_it(url, config, read):
    assert _address_bar(url, config) == read


def test_a_correct_chrome_settings_episode_scores_1():
    read = _address_bar("chrome://settings/appearance", {})
    rule = {"type": "url", "url": "chrome://settings/appearance"}
    assert is_expected_active_tab(read, rule) == 1.0
    on_nfl = _address_bar("https://www.nfl.com/scores/", {"goto_prefix": "https://www."})
    assert is_expected_active_tab(on_nfl, {"type": "url", "url": "https://www.nfl.com/scores/"})


# The seven tasks, each with the URL a correct episode ends on (the one its evaluator expects).
TASKS = {
    "0d8b7de3-e8de-4d86-b9fd-dd2dce58a217": "https://www.drugs.com/npc/",
    "59155008-fe71-45ec-8a8f-dc35497b6aa8": "https://www.babycenter.com/baby-names/details/carl-853",
    "f0b971a1-6831-4b9b-a50e-22a6e47f45ba": "https://www.nfl.com/scores/2019/post4",
    "a728a36e-8bf1-4bb6-9a03-ef039a5233f0": (
        "https://www.dmv.virginia.gov/licenses-ids/license/applying/eligibility"
    ),
    "b070486d-e161-459b-aa2b-ef442d973b92": "https://www.drugs.com/tamiflu.html#side-effects",
    "93eabf48-6a27-4cb6-b963-7d5fe1e0d3a9": "chrome://settings/appearance",
    "12086550-11c0-466b-b367-1d9e75b3910e": "chrome://password-manager/passwords",
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("container_desktops")
def test_the_seven_chrome_tasks_read_the_address_bar_of_a_real_chromium_and_score_1(
    loop_settings, tmp_path
):
    """The first task's published setup starts the browser (as all seven do); the page a correct
    episode ends on is opened (the desktop has no internet: an http page shows its error page,
    and its URL in the address bar, as a loaded one does); the task's own evaluator, whose URL
    getters read the address bar, then scores 1 through the jail."""
    template = DesktopTemplate.objects.create(
        name="chrome", provider="docker", width=1280, height=800, min_ready=0
    )
    desktop = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    control = pool.control_for(desktop)
    for number, (task_id, url) in enumerate(TASKS.items()):
        task = json.loads((CHROME / f"{task_id}.json").read_text())
        if number == 0:  # the browser as the published setups start it, once
            run_setup(control, task["config"])
        opened = {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [url]}}
        run_setup(control, [opened])
        reading = Reading(control, tmp_path, fetch_url=lambda u: b"")
        results = task["evaluator"]["result"]
        for config in results if isinstance(results, list) else [results]:
            if config["type"] != "active_url_from_accessTree":
                continue
            shown = active_url_from_accessTree(reading, config)["value"]
            assert shown == url, (task_id, shown)
        score = evaluate(control, task["evaluator"], False, lambda u: b"")
        assert score.value == 1.0, (task_id, score.as_json())


RECREATION_TASK = "b4f95342-463e-4179-8c3f-193cd7241fb2"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("container_desktops")
def test_the_recreation_task_reads_its_expected_side_through_every_step_and_scores_1(
    loop_settings, tmp_path
):
    """Deliberate difference (DIFFERENCES.md): OSWorld's ``gotoRecreationPage_and_get_html_content``
    stops after the search (its later steps follow a ``raise``), so every attempt fails; Tandem's
    runs them. On a stand-in recreation.gov served on the desktop (``recreation_site``), the
    getter searches, opens the highlighted result's new tab, presses "next available" and reads
    the third column header as it is after the press; with the episode's end page active (the
    campground, "next available" pressed) the task's own evaluator scores 1, and 0 before the
    press. The getter's tabs are closed afterwards."""
    template = DesktopTemplate.objects.create(
        name="recreation", provider="docker", width=1280, height=800, min_ready=0
    )
    desktop = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    control = pool.control_for(desktop)
    for path, data in recreation_site.files().items():
        control.put_file(path, data)
    started = control.run(
        ["sh", "-c", f"setsid python3 {recreation_site.FOLDER}/serve.py >/dev/null 2>&1 &"], 10
    )
    assert started.returncode == 0, started
    task = json.loads((CHROME / f"{RECREATION_TASK}.json").read_text())
    task["config"][0]["parameters"]["command"] += recreation_site.BROWSER_FLAGS  # google-chrome
    run_setup(control, task["config"])
    reading = Reading(control, tmp_path, fetch_url=lambda u: b"")

    expected = gotoRecreationPage_and_get_html_content(reading, task["evaluator"]["expected"])

    header = "camp-sortable-column-header"
    assert expected["value"] == {"expected": {header: recreation_site.HEADERS_AFTER[2]}}
    # The getter's tabs are closed (Chromium closes a tab a moment after it is asked to):
    # the setup's page and the browser's first tab are left.
    setup_tabs = {"https://www.recreation.gov/", "chrome://new-tab-page-third-party/"}
    deadline = time.monotonic() + 10
    while {t["url"] for t in page_tabs(control)} != setup_tabs and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sorted(t["url"] for t in page_tabs(control)) == sorted(setup_tabs)
    # The episode's end: the campground's page, active; scored before and after the press.
    campground = "https://www.recreation.gov/camping/campgrounds/232091"
    run_setup(control, [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": [campground]}}])
    before = evaluate(control, task["evaluator"], False, lambda u: b"")
    target = next(t["id"] for t in page_tabs(control) if t["url"] == campground)
    control.devtools(
        {"target": target, "expression": "document.querySelector('.next-available').click()"}
    )
    after = evaluate(control, task["evaluator"], False, lambda u: b"")
    assert (before.value, after.value) == (0.0, 1.0), (before.as_json(), after.as_json())
