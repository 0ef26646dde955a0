"""The OSWorld demo project that ``make demo`` seeds: published tasks that run with no internet.

Every task imports as published and can run here (no task is marked as needing accounts), every
file its setup downloads or its evaluator compares with is in the task-file cache, every setup
step and evaluator is one this platform runs, and the files made for the documents' tasks score
as OSWorld's metrics define it: the start document against the gold one 0, the gold one 1.
"""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.demo import osworld
from annotation.management.commands.seed_demo import OSWORLD_PROJECT
from annotation.models import Project
from vm_pool.evaluation.evaluator import check
from vm_pool.evaluation.metrics import METRICS
from vm_pool.models import DesktopTemplate
from vm_pool.setup.runner import parse_setup
from vm_pool.task_files.urls import missing_urls, task_file_urls

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded(settings, tmp_path) -> Project:
    settings.MEDIA_ROOT = tmp_path
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    assert "Demo: OSWorld tasks': 6 new task(s), 6 in all, 7 task files kept" in out.getvalue()
    return Project.objects.get(name=OSWORLD_PROJECT)


def test_the_demo_holds_six_published_tasks_that_can_run_offline(seeded):
    tasks = list(seeded.tasks.order_by("external_id"))
    domains = {json.loads(p.read_text())["snapshot"] for p in osworld.TASKS.glob("*.json")}
    assert len(tasks) == 6 and domains == {
        "libreoffice_calc", "libreoffice_writer", "libreoffice_impress", "gimp", "chrome", "os",
    }  # fmt: skip
    for task in tasks:
        assert task.cannot_run == "", task.external_id
        assert missing_urls(task_file_urls(task.setup, task.evaluator)) == set()
        parse_setup(task.setup)
        parse_setup(task.evaluator.get("postconfig", []))
        check(task.evaluator)
    template = DesktopTemplate.objects.get(name=seeded.environment_template)
    assert (template.provider, template.width, template.height) == ("docker", 1920, 1080)
    # Seeding again adds nothing.
    call_command("seed_demo", stdout=io.StringIO())
    assert seeded.tasks.count() == 6


def made(url_ending: str, folder: Path) -> str:
    (url,) = [u for u in osworld.FILES if u.endswith(url_ending)]
    path = folder / url_ending
    path.write_bytes(osworld.FILES[url]())
    return str(path)


@pytest.mark.parametrize(
    ("metric", "start", "gold", "options"),
    [
        (
            "compare_table",
            "Arrang_Value_min_to_max.xlsx",
            "Arrang_Value_min_to_max_gold.xlsx",
            {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]},
        ),
        (
            "compare_docx_files",
            "Geography_And_Magical_Realism.docx",
            "Geography_And_Magical_Realism_Gold.docx",
            {},
        ),
        ("compare_pptx_files", "41_3.pptx", "41_3_Gold.pptx", {}),
    ],
)
def test_the_demo_documents_score_as_their_metric_defines(metric, start, gold, options, tmp_path):
    start_path, gold_path = made(start, tmp_path), made(gold, tmp_path)
    assert METRICS[metric](start_path, gold_path, **options) == 0.0
    assert METRICS[metric](gold_path, gold_path, **options) == 1.0
