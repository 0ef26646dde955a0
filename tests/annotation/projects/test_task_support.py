"""Tasks that cannot run here: imported with the reason, listed in the report, never claimed
nor assigned; unknown step types still refuse the file."""

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from annotation.models import Project, Task, TaskStatus
from annotation.projects import queue
from annotation.projects.support import cannot_run_reason
from backend.accounts.models import User
from backend.accounts.roles import Role

pytestmark = pytest.mark.django_db

DRIVE_REASON = "setup step 2 (googledrive) needs third-party accounts: a Google Drive account"


def osworld_task(task_id: str, *steps: dict[str, Any], **evaluator: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "snapshot": "libreoffice_calc",
        "instruction": f"Do task {task_id} in the spreadsheet.",
        "config": [
            {"type": "launch", "parameters": {"command": ["libreoffice", "--calc"]}},
            *steps,
        ],
        "evaluator": {"func": "compare_table", **evaluator},
    }


DRIVE_STEP = {"type": "googledrive", "parameters": {"settings_file": "settings.yml"}}
LOGIN_STEP = {"type": "login", "parameters": {"platform": "googledrive"}}


@pytest.fixture
def manager(make_user, project) -> User:
    return make_user("mira", project, Role.MANAGER)


@pytest.fixture
def annotator(make_user, project) -> User:
    return make_user("ann", project, Role.ANNOTATOR)


@pytest.fixture
def manager_client(client_for, manager) -> APIClient:
    client = client_for(manager)
    client.raise_request_exception = False
    return client


def import_file(client: APIClient, project: Project, rows: list[dict[str, Any]]):
    file = SimpleUploadedFile("tasks.json", json.dumps(rows).encode())
    return client.post(f"/api/projects/{project.pk}/import/", {"file": file}, format="multipart")


def projects(project: Project):
    return Project.objects.filter(pk=project.pk)


def test_task_with_a_googledrive_step_is_imported_with_the_reason(manager_client, project):
    response = import_file(
        manager_client,
        project,
        [osworld_task("drive", DRIVE_STEP, LOGIN_STEP), osworld_task("plain")],
    )

    assert response.status_code == 201, response.content[:1000]
    report = response.json()
    assert (report["created"], report["cannot_run"]) == (2, 1)
    reason = Task.objects.get(external_id="drive").cannot_run
    assert report["cannot_run_tasks"] == [{"id": "drive", "reason": reason}]
    assert reason == (
        f"{DRIVE_REASON}; setup step 3 (login) needs third-party accounts: a login to a web service"
    )
    assert Task.objects.get(external_id="plain").cannot_run == ""


def test_a_postconfig_step_or_a_drive_getter_makes_a_task_unrunnable(manager_client, project):
    rows = [
        osworld_task("post", postconfig=[{"type": "sleep", "parameters": {}}, LOGIN_STEP]),
        osworld_task("getter", result={"type": "googledrive_file", "path": ["a", "b.xlsx"]}),
    ]

    response = import_file(manager_client, project, rows)

    assert response.status_code == 201, response.content[:1000]
    reasons = dict(Task.objects.values_list("external_id", "cannot_run"))
    assert reasons["post"] == (
        "postconfig step 2 (login) needs third-party accounts: a login to a web service"
    )
    assert reasons["getter"] == (
        "evaluator getter result (googledrive_file) needs a Google Drive account"
    )
    assert response.json()["cannot_run"] == 2


def test_unknown_step_type_still_refuses_the_file_and_imports_nothing(manager_client, project):
    rows = [
        osworld_task("drive", DRIVE_STEP),
        osworld_task("odd", {"type": "teleport", "parameters": {}}),
        osworld_task("odd-post", postconfig=[{"type": "levitate", "parameters": {}}]),
    ]

    response = import_file(manager_client, project, rows)

    assert response.status_code == 400
    errors = response.json()["error"]["details"]["errors"]
    assert {(e["row"], e["field"]) for e in errors} == {
        (2, "config[1]"),
        (3, "evaluator.postconfig[0]"),
    }
    assert "'teleport' is not a setup step the desktops run" in errors[0]["message"]
    assert not Task.objects.exists()


def test_unrunnable_task_is_passed_over_for_a_lower_priority_one(project, annotator):
    Task.objects.create(
        project=project, external_id="drive", instruction="x", priority=9, cannot_run=DRIVE_REASON
    )
    runnable = Task.objects.create(project=project, external_id="ok", instruction="y", priority=1)

    claim = queue.claim_next_task(annotator, projects(project))

    assert claim.task.pk == runnable.pk


def test_with_only_unrunnable_tasks_queued_there_is_no_task(project, annotator):
    Task.objects.create(project=project, external_id="drive", instruction="x", cannot_run="r")

    with pytest.raises(queue.NoTaskAvailable):
        queue.claim_next_task(annotator, projects(project))


def test_an_unrunnable_task_assigned_before_is_not_handed_out(project, annotator):
    # Assigned while runnable; a later import found it needs an account.
    Task.objects.create(
        project=project,
        external_id="drive",
        instruction="x",
        status=TaskStatus.ASSIGNED,
        assignee=annotator,
        cannot_run=DRIVE_REASON,
    )

    with pytest.raises(queue.NoTaskAvailable):
        queue.claim_next_task(annotator, projects(project))


def test_assigning_a_selection_assigns_the_runnable_tasks_and_names_the_others(
    manager_client, project, annotator
):
    drive = Task.objects.create(
        project=project, external_id="drive", instruction="x", cannot_run=DRIVE_REASON
    )
    plain = Task.objects.create(project=project, external_id="plain", instruction="y")

    response = manager_client.post(
        f"/api/projects/{project.pk}/assign/",
        {"task_ids": [drive.pk, plain.pk], "assignee": annotator.username},
        format="json",
    )

    assert response.status_code == 200
    answer = response.json()
    assert answer["assigned"] == 1
    assert answer["cannot_run"] == [{"id": "drive", "reason": DRIVE_REASON}]
    assert "1 cannot run here" in answer["message"] and DRIVE_REASON in answer["message"]
    assert Task.objects.get(pk=drive.pk).status == TaskStatus.QUEUED
    assert Task.objects.get(pk=plain.pk).status == TaskStatus.ASSIGNED


def test_reimport_rederives_the_reason_and_reports_unchanged(manager_client, project, settings):
    row = osworld_task("drive", DRIVE_STEP)
    assert import_file(manager_client, project, [row]).status_code == 201
    # As if the desktops had learned to run the step since: the stored verdict is stale.
    Task.objects.update(cannot_run="")

    response = import_file(manager_client, project, [row])

    assert response.status_code == 201
    assert (response.json()["unchanged"], response.json()["cannot_run"]) == (1, 1)
    assert Task.objects.get().cannot_run == DRIVE_REASON


def test_changing_content_to_runnable_clears_the_reason(manager_client, project):
    assert import_file(manager_client, project, [osworld_task("t", DRIVE_STEP)]).status_code == 201

    response = import_file(manager_client, project, [osworld_task("t")])

    assert response.json()["updated"] == 1
    assert Task.objects.get().cannot_run == ""


def test_task_api_shows_why_a_task_cannot_run(manager_client, project):
    import_file(manager_client, project, [osworld_task("drive", DRIVE_STEP)])

    listed = manager_client.get(f"/api/tasks/?project={project.pk}").json()["results"]
    board = manager_client.get(f"/api/projects/{project.pk}/board/").json()

    assert listed[0]["cannot_run"] == DRIVE_REASON
    queued = next(c for c in board["columns"] if c["status"] == "queued")
    assert queued["tasks"][0]["cannot_run"] == DRIVE_REASON


def test_reasons_name_each_type_once_and_are_cut_to_the_field_length():
    kinds = ("googledrive", "login", "proxy", "google_sheet_from_template")
    steps = [{"type": kind, "parameters": {}} for kind in kinds]
    getters = [{"type": "googledrive_file"}] * 2

    reason = cannot_run_reason(steps * 3, {"result": getters, "postconfig": steps})

    assert len(reason) == 300 and reason.endswith("…")
    assert reason.startswith("setup step 1 (googledrive)")
    assert reason.count("(googledrive)") == 1
