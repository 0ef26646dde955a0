"""The OSWorld coverage report: per-domain counts of what Tandem runs and scores, and the gaps."""

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from annotation.projects.coverage import Registries, coverage, render

LAUNCH = {"type": "launch", "parameters": {"command": ["gedit"]}}
DRIVE = {"type": "googledrive", "parameters": {"settings_file": "settings.yml"}}
REGISTRIES = Registries(
    runners={"launch", "execute", "open", "download", "sleep"},
    getters={"vm_file", "rule"},
    metrics={"compare_table", "exact_match"},
    not_runnable={"googledrive": "needs third-party accounts: a Google Drive account"},
)


def task(
    task_id: str,
    setup: list[dict[str, Any]] | None = None,
    func: Any = "exact_match",
    **evaluator: Any,
) -> dict[str, Any]:
    return {
        "id": task_id,
        "instruction": f"Do {task_id}.",
        "config": [LAUNCH] if setup is None else setup,
        "evaluator": {"func": func, **evaluator},
    }


def write(folder: Path, domain: str, *tasks: dict[str, Any]) -> None:
    (folder / domain).mkdir(parents=True, exist_ok=True)
    for item in tasks:
        (folder / domain / f"{item['id']}.json").write_text(json.dumps(item))


@pytest.fixture
def task_folder(tmp_path) -> Path:
    """Two domains: four calc tasks (one fully supported), two browser tasks."""
    write(
        tmp_path,
        "calc",
        task("ok", result={"type": "vm_file"}, expected={"type": "rule"}),
        task("drive", [LAUNCH, DRIVE], result={"type": "googledrive_file"}),
        task("odd-metric", func=["exact_match", "compare_sparklines"], conj="and"),
        task("odd-post", postconfig=[{"type": "sleep"}, {"type": "activate_window"}]),
    )
    write(
        tmp_path,
        "browser",
        task("infeasible", func="infeasible"),
        task("tabs", [{"type": "chrome_open_tabs"}], result=[{"type": "open_tabs_info"}]),
    )
    (tmp_path / "notes.json").write_text('["not", "a", "task"]')
    return tmp_path


def test_each_domain_counts_what_runs_and_what_scores(task_folder):
    report = coverage(task_folder, registries=REGISTRIES)

    rows = {row.domain: row for row in report.domains}
    calc, browser = rows["calc"], rows["browser"]
    assert (calc.tasks, calc.setup_runs, calc.getters_supported, calc.metrics_supported) == (
        4,
        2,
        3,
        3,
    )
    assert (calc.cannot_run, calc.fully_supported) == (1, 1)
    assert (browser.tasks, browser.setup_runs, browser.metrics_supported) == (2, 1, 2)
    assert browser.fully_supported == 1  # "infeasible" needs no metric
    assert (report.total.tasks, report.total.fully_supported) == (6, 2)
    assert report.skipped == [f"{task_folder / 'notes.json'}: not a task file"]


def test_gaps_are_listed_most_blocking_first_with_why(task_folder):
    write(task_folder, "calc", task("drive-2", [DRIVE]))

    report = coverage(task_folder, registries=REGISTRIES)

    assert [(gap.kind, gap.name, gap.tasks) for gap in report.gaps] == [
        ("setup", "googledrive", 2),
        ("getter", "googledrive_file", 1),
        ("getter", "open_tabs_info", 1),
        ("metric", "compare_sparklines", 1),
        ("setup", "activate_window", 1),
        ("setup", "chrome_open_tabs", 1),
    ]
    assert report.gaps[0].note == (
        "never runs here: needs third-party accounts: a Google Drive account"
    )
    assert report.gaps[2].note == "not implemented yet"


def test_evaluation_examples_takes_the_published_set_unless_all(tmp_path):
    examples = tmp_path / "examples"
    write(examples, "calc", task("published"), task("unpublished"))
    index = {"calc": ["published", "gone"]}
    (tmp_path / "test_all.json").write_text(json.dumps(index))

    published = coverage(tmp_path, registries=REGISTRIES)
    every = coverage(tmp_path, every_file=True, registries=REGISTRIES)

    assert published.total.tasks == 1
    assert published.skipped == ["calc/gone: listed in test_all.json, no file"]
    assert every.total.tasks == 2


def test_markdown_and_json_carry_the_same_figures(task_folder):
    report = coverage(task_folder, registries=REGISTRIES)

    markdown = render(report, "markdown")
    data = json.loads(render(report, "json"))

    assert "| calc | 4 | 2 (50%) | 3 (75%) | 3 (75%) | 1 (25%) | 1 (25%) |" in markdown
    assert "| **total** | **6** |" in markdown
    assert data["total"]["fully_supported"] == 2
    assert {
        "kind": "getter",
        "name": "googledrive_file",
        "tasks_blocked": 1,
        "note": "never runs here: needs a Google Drive account",
    } in data["gaps"]


def test_the_command_reads_the_installed_registries(tmp_path):
    write(
        tmp_path,
        "os",
        task("infeasible", [LAUNCH, {"type": "sleep"}], func="infeasible"),
        task("unknown", [{"type": "teleport"}], func="no_such_metric"),
    )
    out = StringIO()

    call_command("osworld_coverage", str(tmp_path), "--format", "json", stdout=out)

    data = json.loads(out.getvalue())
    assert data["domains"] == [
        {
            "domain": "os",
            "tasks": 2,
            "setup_runs": 1,
            "getters_supported": 2,
            "metrics_supported": 1,
            "cannot_run": 0,
            "fully_supported": 1,
        }
    ]
    assert {(g["kind"], g["name"]) for g in data["gaps"]} == {
        ("setup", "teleport"),
        ("metric", "no_such_metric"),
    }


def test_the_command_prints_a_table(task_folder):
    out = StringIO()

    call_command("osworld_coverage", str(task_folder), stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0].startswith("OSWorld coverage: 6 tasks from")
    assert any(line.startswith("total") for line in lines)
    assert "What blocks the most tasks first:" in lines


def test_a_folder_without_task_files_is_an_error(tmp_path):
    with pytest.raises(CommandError, match="no task files"):
        call_command("osworld_coverage", str(tmp_path))


def test_a_compare_table_rule_it_does_not_check_is_a_gap(tmp_path):
    registries = Registries(
        runners={"launch"},
        getters={"vm_file"},
        metrics={"compare_table"},
        table_rules={"sheet_data"},
    )
    rules = {"rules": [{"type": "sheet_data"}, {"type": "pivot_table"}]}
    write(
        tmp_path,
        "calc",
        task("data", func="compare_table", options={"rules": [{"type": "sheet_data"}]}),
        task("pivot", func="compare_table", options=rules),
        task("listed", func=["compare_table"], options=[rules]),
    )
    report = coverage(tmp_path, registries=registries)
    (row,) = [r for r in report.domains if r.domain == "calc"]
    assert (row.tasks, row.fully_supported) == (3, 1)
    assert [(g.name, g.tasks) for g in report.gaps] == [("compare_table rule pivot_table", 2)]
