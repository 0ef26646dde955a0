"""The evaluator self-check (``annotation.projects.evaluator_checks``) on real desktops: each
imported task's setup, then its evaluator, on a desktop nobody touched.

A task whose evaluator compares a file its setup already puts in place is flagged "passes without
work" and kept out of V(s) until a manager clears it; one whose evaluator cannot run is flagged
with the reason; the demo's tasks (the desktop basics on sandboxed desktops, the six OSWorld ones
in container desktops) all pass."""

import base64
import json
import time
from typing import Any

import pytest

from annotation.demo import osworld
from annotation.episodes import evaluator_self_check
from annotation.management.commands.seed_demo import DEMO_TASKS
from annotation.models import EvaluatorCheck, EvaluatorCheckStatus, Project, Task
from annotation.projects import evaluator_checks
from annotation.projects.importer import import_tasks
from backend.accounts.roles import Role
from backend.celery import app as celery_app
from tests.support import live
from tests.support.services import celery_worker, running
from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate, host_queue

pytestmark = pytest.mark.django_db(transaction=True)

NOTE = base64.b64encode(b"the report is done\n").decode()
PUT_IN_PLACE = {
    "id": "already-done",
    "instruction": "Write 'the report is done' into ~/report.txt.",
    "config": [{"type": "file", "parameters": {"path": "~/report.txt", "content_b64": NOTE}}],
    "evaluator": {
        "func": "file_contains",
        "result": {"type": "vm_file", "path": "/home/user/report.txt", "dest": "report.txt"},
        "expected": {"type": "rule", "rules": {"expected": ["the report is done"]}},
    },
}
UNSUPPORTED = {
    "id": "needs-ocr",
    "instruction": "Make the picture say hello.",
    "config": [],
    "evaluator": {"func": "compare_image_text", "result": {"type": "vm_file", "path": "/x"}},
}
MISSING_FILE = {
    "id": "gold-not-cached",
    "instruction": "Fill the sheet.",
    "config": [],
    "evaluator": {
        "func": "compare_table",
        "result": {"type": "vm_file", "path": "/home/user/sheet.xlsx", "dest": "sheet.xlsx"},
        "expected": {
            "type": "cloud_file",
            "path": "https://files.example.org/never-uploaded.xlsx",
            "dest": "gold.xlsx",
        },
    },
}


def jsonl(*rows: dict[str, Any]) -> bytes:
    return "\n".join(json.dumps(row) for row in rows).encode()


def run_pending(project: Project, template: DesktopTemplate, host: str) -> dict[str, str]:
    """Run every pending check of the project as its host's worker would, each on a fresh
    desktop (the one before is reset, as the host does after a release)."""
    verdicts = {}
    for check in EvaluatorCheck.objects.filter(
        task__project=project, status=EvaluatorCheckStatus.PENDING
    ).select_related("task"):
        for old in Desktop.objects.filter(template=template, status=DesktopStatus.RESETTING):
            pool.reset_desktop(old.pk)
        if not Desktop.objects.filter(template=template, status=DesktopStatus.READY).exists():
            started = pool.start_desktop(pool.create_desktop(template, host).pk)
            assert started.status == DesktopStatus.READY, started.broken_reason
        verdicts[check.task.external_id] = evaluator_self_check.run(check.pk, check.content_sha)
    return verdicts


def test_a_task_that_passes_untouched_is_flagged_and_kept_out_of_v_until_cleared(
    loop_settings, project, make_user, client_for
):
    template = DesktopTemplate.objects.create(name="basics", width=1024, height=768, min_ready=0)
    Project.objects.filter(pk=project.pk).update(environment_template="basics")
    manager = make_user("maria", project, Role.MANAGER)
    annotator = make_user("ann", project, Role.ANNOTATOR)
    rows = [t for t in DEMO_TASKS if t.get("evaluator")]
    report = import_tasks(
        project, jsonl(*rows, PUT_IN_PLACE, UNSUPPORTED, MISSING_FILE), "", manager
    )

    # Known at once, no desktop needed: a metric this platform does not run.
    assert report.evaluator_checks == {"pending": len(rows) + 2, "cannot_evaluate": 1}
    unsupported = EvaluatorCheck.objects.get(task__external_id="needs-ocr")
    assert "compare_image_text is not supported here" in unsupported.reason

    verdicts = run_pending(project, template, loop_settings.TANDEM_HOST)
    # The demo's desktop tasks with evaluators all pass: nothing done, nothing scored.
    assert {t["id"]: verdicts[t["id"]] for t in rows if t["evaluator"]["func"]} == {
        t["id"]: "trusted" for t in rows if t["evaluator"]["func"]
    }, {c.task.external_id: c.reason for c in EvaluatorCheck.objects.select_related("task")}
    assert verdicts["already-done"] == "passes_without_work"
    assert verdicts["gold-not-cached"] == "cannot_evaluate"
    flagged = EvaluatorCheck.objects.get(task__external_id="already-done")
    assert flagged.score == 1.0 and "scores 1 on the untouched desktop" in flagged.reason
    missing = EvaluatorCheck.objects.get(task__external_id="gold-not-cached")
    assert "never-uploaded.xlsx" in missing.reason, missing.reason

    # Kept out of V(s): the evaluator's part is not known until a manager clears it.
    task = Task.objects.get(project=project, external_id="already-done")
    assert "scores 1 with no work done" in evaluator_checks.blocks_validation(task)

    # The board shows the flag to managers, and nothing of it to annotators.
    api_client = client_for(manager)
    board = api_client.get("/api/tasks/", {"project": project.pk, "page_size": 50}).json()
    shown = {t["external_id"]: t["evaluator_check"] for t in board["results"]}
    assert shown["already-done"]["status"] == "passes_without_work"
    assert shown["already-done"]["flagged"] is True
    assert shown["needs-ocr"]["flagged"] is True
    assert shown["demo-text-editor"]["flagged"] is False
    listed = api_client.get(f"/api/projects/{project.pk}/evaluator-checks/").json()
    assert listed["counts"] == {
        "trusted": len(rows),
        "passes_without_work": 1,
        "cannot_evaluate": 2,
    }
    Task.objects.filter(pk=task.pk).update(status="assigned", assignee=annotator)
    api_client = client_for(annotator)
    seen = api_client.get("/api/tasks/", {"project": project.pk}).json()["results"]
    assert [(t["external_id"], t["evaluator_check"]) for t in seen] == [("already-done", None)]
    assert api_client.get(f"/api/projects/{project.pk}/evaluator-checks/").status_code == 404
    assert api_client.post(f"/api/tasks/{task.pk}/evaluator-check/clear/").status_code == 403
    Task.objects.filter(pk=task.pk).update(status="queued", assignee=None)

    # Only a task that passes without work can be cleared; a refusal changes nothing.
    api_client = client_for(manager)
    trusted = Task.objects.get(project=project, external_id="demo-text-editor")
    refused = api_client.post(f"/api/tasks/{trusted.pk}/evaluator-check/clear/")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "evaluator_check_not_clearable"
    assert EvaluatorCheck.objects.get(task=trusted).cleared_at is None
    cleared = api_client.post(f"/api/tasks/{task.pk}/evaluator-check/clear/").json()
    assert cleared["cleared_by"] == "maria" and cleared["flagged"] is False
    assert evaluator_checks.blocks_validation(task) == ""

    # Changed content is checked again at its next import, and the clearing no longer holds.
    changed = {**PUT_IN_PLACE, "instruction": "Write the note into ~/report.txt."}
    changed["evaluator"] = {**PUT_IN_PLACE["evaluator"], "options": {}}
    again = import_tasks(project, jsonl(changed), "", manager)
    assert again.updated == ["already-done"] and again.evaluator_checks == {"pending": 1}
    assert EvaluatorCheck.objects.get(task=task).cleared_at is None
    # Requests with bad task ids are refused, and nothing is queued.
    bad = api_client.post(
        f"/api/projects/{project.pk}/evaluator-checks/", {"task_ids": ["x"]}, format="json"
    )
    assert bad.status_code == 400 and "task ids" in bad.json()["error"]["message"]
    assert EvaluatorCheck.objects.filter(status=EvaluatorCheckStatus.PENDING).count() == 1
    no_such_day = api_client.get(
        f"/api/projects/{project.pk}/evaluator-checks/", {"requested_from": "2024-02-30T00:00:00"}
    )
    assert no_such_day.status_code == 400
    assert "requested_from" in no_such_day.json()["error"]["message"]


@pytest.mark.usefixtures("container_desktops")
def test_the_osworld_demo_tasks_pass_their_self_check(loop_settings, project, make_user):
    template = DesktopTemplate.objects.create(
        name="office", provider="docker", width=1280, height=800, min_ready=0
    )
    Project.objects.filter(pk=project.pk).update(environment_template="office")
    manager = make_user("maria", project, Role.MANAGER)
    osworld.fill_cache(manager)
    rows = osworld.task_rows()
    report = import_tasks(project, jsonl(*rows), "osworld-demo.jsonl", manager)
    assert report.evaluator_checks == {"pending": len(rows)}
    verdicts = run_pending(project, template, loop_settings.TANDEM_HOST)
    reasons = {c.task.external_id: c.reason for c in EvaluatorCheck.objects.select_related("task")}
    assert verdicts == {row["id"]: "trusted" for row in rows}, reasons


def test_an_imported_tasks_check_is_run_by_its_hosts_worker(host, project, make_user, settings):
    """The import queues the check on the host's queue (after its transaction commits); the
    host's real Celery worker runs it on the host's ready desktop and records the verdict."""
    template = DesktopTemplate.objects.create(name="checked", width=1024, height=768, min_ready=0)
    Project.objects.filter(pk=project.pk).update(environment_template="checked")
    desktop = pool.start_desktop(pool.create_desktop(template, host).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    name = f"{host}@checks"
    command = celery_worker(name, host_queue(host))
    environment = live.service_env(host, broker=settings.CELERY_BROKER_URL)

    with running(command, environment, lambda: bool(celery_app.control.ping([name], 0.5)), 60):
        manager = make_user("maria", project, Role.MANAGER)
        report = import_tasks(project, jsonl(PUT_IN_PLACE), "", manager)
        assert report.evaluator_checks == {"pending": 1}
        check = EvaluatorCheck.objects.get(task__external_id="already-done")
        deadline = time.monotonic() + 120
        while check.status == EvaluatorCheckStatus.PENDING and time.monotonic() < deadline:
            time.sleep(0.5)
            check.refresh_from_db()

    assert check.status == EvaluatorCheckStatus.PASSES_WITHOUT_WORK, (check.status, check.reason)
    assert check.score == 1.0 and check.checked_at is not None
