"""Task import through the API: JSON, JSONL and OSWorld files, imported whole or not at all.

Every request here goes through a client that turns a crash into a 500 response instead of an
exception, and every response is checked not to be a 500: bad input is the caller's error.
A refused import is checked to have left every stored task as it was.
"""

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import HttpResponse
from rest_framework.test import APIClient

from annotation.models import Task, TaskEvent, TaskStatus
from annotation.projects import importer
from annotation.projects import rows as task_rows
from annotation.projects.importer import CONTENT_FIELDS, MAX_DEPTH
from backend.accounts.models import User
from tests.conftest import PASSWORD
from tests.support.at_once import at_once
from vm_pool.setup.runner import RUNNERS

pytestmark = pytest.mark.django_db

OSWORLD_TASK_ID = "6c4c23a1-42a4-43cc-9db1-2f86ff3738cc"
OSWORLD_TASK: dict[str, Any] = {
    "id": OSWORLD_TASK_ID,
    "snapshot": "chrome",
    "instruction": "Can you make Bing the main search engine when I look stuff up on the internet?",
    "source": "https://support.google.com/chrome/answer/95426",
    "config": [
        {
            "type": "launch",
            "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]},
        },
        {
            "type": "launch",
            "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]},
        },
        {
            "type": "chrome_open_tabs",
            "parameters": {"urls_to_open": ["https://www.bing.com/", "https://www.google.com/"]},
        },
        {
            "type": "execute",
            "parameters": {
                "command": ["python", "-c", "import pyautogui; pyautogui.press('f11')"],
                "shell": False,
            },
        },
    ],
    "trajectory": "trajectories/",
    "related_apps": ["chrome"],
    "evaluator": {
        "postconfig": [
            {"type": "launch", "parameters": {"command": ["pkill", "chrome"]}},
            {"type": "sleep", "parameters": {"seconds": 3}},
        ],
        "func": "match_in_list",
        "result": {"type": "default_search_engine"},
        "expected": {"type": "rule", "rules": {"expected": ["Microsoft Bing", "Bing"]}},
    },
}


def rows(count: int, prefix: str = "task") -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}-{n}", "instruction": f"Open the file number {n} in the editor."}
        for n in range(1, count + 1)
    ]


def jsonl(values: list[Any]) -> bytes:
    return "".join(json.dumps(value) + "\n" for value in values).encode()


Stored = tuple[list[tuple[Any, ...]], int]


def written() -> Stored:
    """What an import writes: every task's content and state, and the number of task events."""
    tasks = Task.objects.order_by("pk").values_list(
        "pk", "external_id", *CONTENT_FIELDS, "source", "status", "updated_at"
    )
    return list(tasks), TaskEvent.objects.count()


def nested(depth: int) -> str:
    """JSON text of an object nested ``depth`` levels deep."""
    return '{"a": ' * (depth - 1) + "{}" + "}" * (depth - 1)


def not_a_crash(response: HttpResponse) -> HttpResponse:
    assert response.status_code != 500, response.content[:1000]
    return response


@pytest.fixture
def api_client_for(client_for) -> Callable[[User], APIClient]:
    def make(user: User) -> APIClient:
        client = client_for(user)
        client.raise_request_exception = False
        return client

    return make


@pytest.fixture
def manager(make_user, project) -> User:
    return make_user("mira", project, "manager")


@pytest.fixture
def manager_client(api_client_for, manager) -> APIClient:
    return api_client_for(manager)


@pytest.fixture
def upload(manager_client, project) -> Callable[..., HttpResponse]:
    """POST a multipart upload with the task file in the `file` field."""

    def post(content: bytes, filename: str = "tasks.json", client: APIClient | None = None):
        file = SimpleUploadedFile(filename, content, content_type="application/octet-stream")
        response = (client or manager_client).post(
            f"/api/projects/{project.pk}/import/", {"file": file}, format="multipart"
        )
        return not_a_crash(response)

    return post


@pytest.fixture
def browser_client(manager) -> APIClient:
    """A client that signs in as the web app does: a session cookie and the CSRF header."""
    client = APIClient(enforce_csrf_checks=True)
    client.raise_request_exception = False
    assert client.login(username=manager.username, password=PASSWORD)
    client.get("/accounts/login/")
    client.credentials(HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    return client


@pytest.fixture
def token_client(token_client_for, manager) -> APIClient:
    client, _ = token_client_for(manager)
    client.raise_request_exception = False
    return client


@pytest.fixture
def client_by(browser_client, token_client) -> Callable[[str], APIClient]:
    """The manager's client that signs in by "session" (as a browser) or by "token"."""
    return {"session": browser_client, "token": token_client}.__getitem__


@pytest.fixture
def stored(upload) -> None:
    """Two queued tasks already imported, task-1 and task-2, for refused imports to leave be."""
    assert upload(jsonl(rows(2)), filename="tasks.jsonl").status_code == 201


@pytest.fixture
def post_body(manager_client, project) -> Callable[..., HttpResponse]:
    """POST the task file as the raw request body."""

    def post(content: bytes, content_type: str = "application/json"):
        response = manager_client.post(
            f"/api/projects/{project.pk}/import/", content, content_type=content_type
        )
        return not_a_crash(response)

    return post


def rejected_errors(response: HttpResponse, before: Stored) -> list[dict[str, Any]]:
    """Check the response is a clear 400 that wrote nothing; return its per-row errors."""
    assert response.status_code == 400, response.content[:1000]
    error = response.json()["error"]
    assert error["status"] == 400
    assert error["code"] == "import_rejected"
    assert "Nothing was imported" in error["message"]
    assert written() == before
    errors = error["details"]["errors"]
    assert error["details"]["error_count"] == len(errors) > 0
    assert error["details"]["bad_row_count"] == len({e["row"] for e in errors if e["row"] > 0})
    assert all(e["message"] for e in errors)
    return errors


def rows_and_fields(errors: list[dict[str, Any]]) -> set[tuple[int, str]]:
    return {(e["row"], e["field"]) for e in errors}


# Accepted shapes


def test_json_array_creates_one_task_per_row(manager_client, project, manager):
    response = not_a_crash(
        manager_client.post(f"/api/projects/{project.pk}/import/", rows(3), format="json")
    )

    assert response.status_code == 201
    report = response.json()
    assert report["rows"] == 3
    assert report["created"] == 3
    assert sorted(report["task_ids"]["created"]) == ["task-1", "task-2", "task-3"]
    task = Task.objects.get(project=project, external_id="task-2")
    assert task.instruction == "Open the file number 2 in the editor."
    assert task.status == TaskStatus.QUEUED
    assert task.max_steps == project.default_max_steps
    events = TaskEvent.objects.filter(task__project=project)
    assert events.count() == 3
    assert {(e.kind, e.actor_id) for e in events} == {(TaskEvent.Kind.IMPORTED, manager.pk)}


def test_jsonl_file_upload_creates_one_task_per_line(upload, project):
    content = jsonl(rows(2)) + b"\n" + jsonl(rows(1, prefix="more"))

    response = upload(content, filename="tasks.jsonl")

    assert response.status_code == 201
    assert response.json()["created"] == 3
    assert set(project.tasks.values_list("external_id", flat=True)) == {
        "task-1",
        "task-2",
        "more-1",
    }


def test_ndjson_body_creates_one_task_per_line(post_body, project):
    response = post_body(jsonl(rows(4)), content_type="application/x-ndjson")

    assert response.status_code == 201
    assert response.json()["created"] == 4
    assert project.tasks.count() == 4


def test_osworld_task_file_is_imported_as_it_is(upload, project):
    content = json.dumps(OSWORLD_TASK, indent=2).encode()

    response = upload(content, filename=f"{OSWORLD_TASK_ID}.json")

    assert response.status_code == 201
    assert response.json()["task_ids"]["created"] == [OSWORLD_TASK_ID]
    task = Task.objects.get(project=project)
    assert task.external_id == OSWORLD_TASK_ID
    assert task.instruction == OSWORLD_TASK["instruction"]
    assert task.setup == OSWORLD_TASK["config"]
    assert [step["type"] for step in task.setup] == [
        "launch",
        "launch",
        "chrome_open_tabs",
        "execute",
    ]
    assert task.evaluator == OSWORLD_TASK["evaluator"]
    assert task.related_apps == ["chrome"]
    assert task.source == OSWORLD_TASK


def test_imported_task_shows_its_source_row_in_the_api(upload, manager_client):
    upload(json.dumps(OSWORLD_TASK).encode(), filename="task.json")
    task = Task.objects.get(external_id=OSWORLD_TASK_ID)

    detail = not_a_crash(manager_client.get(f"/api/tasks/{task.pk}/")).json()

    assert detail["setup"] == OSWORLD_TASK["config"]
    assert detail["source"]["snapshot"] == "chrome"
    assert detail["source"]["trajectory"] == "trajectories/"


# Malformed files: a clear 400 that lists the bad rows, and nothing written


def test_json_array_with_a_syntax_error_names_the_row_it_is_in(post_body):
    before = written()
    content = b'[\n  {"instruction": "Open the editor."},\n  {"instruction": "Save",}\n]'

    errors = rejected_errors(post_body(content), before)

    assert rows_and_fields(errors) == {(2, "")}
    assert "not valid JSON" in errors[0]["message"]
    assert "line 3" in errors[0]["message"]


@pytest.mark.parametrize("transport", ["jsonl upload", "ndjson body"])
def test_broken_jsonl_line_is_reported_by_its_line_number(transport, upload, post_body):
    before = written()
    content = (
        jsonl(rows(2))
        + b'{"id": "task-3", "instruction": "Close the \n'
        + jsonl(rows(1, prefix="more"))
    )

    if transport == "jsonl upload":
        response = upload(content, filename="tasks.jsonl")
    else:
        response = post_body(content, content_type="application/x-ndjson")

    errors = rejected_errors(response, before)
    assert [e["row"] for e in errors] == [3]
    assert "not valid JSON" in errors[0]["message"]


def test_missing_instruction_is_reported_with_row_and_field(post_body):
    before = written()
    content = [*rows(2), {"id": "no-instruction", "related_apps": ["gimp"]}]

    errors = rejected_errors(post_body(json.dumps(content).encode()), before)

    assert rows_and_fields(errors) == {(3, "instruction")}
    assert errors[0]["message"] == "is required"


@pytest.mark.parametrize(
    "field, value",
    [
        ("instruction", 42),
        ("config", {"type": "launch"}),
        ("max_steps", "ten"),
        ("priority", True),
        ("related_apps", ["chrome", 7]),
    ],
)
def test_wrong_type_is_reported_with_row_and_field(field, value, post_body):
    before = written()
    bad = {"id": "bad", "instruction": "Open the settings.", field: value}

    errors = rejected_errors(post_body(json.dumps([*rows(1), bad]).encode()), before)

    assert rows_and_fields(errors) == {(2, field)}


def test_every_bad_row_is_listed_in_one_response(post_body):
    before = written()
    content = [
        {"id": "a", "instruction": 42},
        {"id": "b", "instruction": "Fine."},
        {"id": "c", "instruction": "Open it.", "config": "open chrome"},
        {"id": "d", "instruction": "Open it.", "max_steps": "ten", "priority": False},
        {"id": "e", "instruction": "Open it.", "related_apps": [1]},
    ]

    errors = rejected_errors(post_body(json.dumps(content).encode()), before)

    assert rows_and_fields(errors) == {
        (1, "instruction"),
        (3, "config"),
        (4, "max_steps"),
        (4, "priority"),
        (5, "related_apps"),
    }


def test_a_getter_whose_type_is_not_a_name_is_reported_not_crashed_on(upload, project):
    """Scored or infeasible, a getter ``type`` that is a list is no getter this platform has:
    the tasks are imported with that said, as any evaluator that cannot score here."""
    odd = {"type": ["vm_file"], "path": "/home/user/x"}
    rows = [
        {"id": "listed", "instruction": "x", "evaluator": {"func": "exact_match", "result": odd,
                                                           "expected": {"type": "rule"}}},
        {"id": "infeasible", "instruction": "x", "evaluator": {"func": "infeasible",
                                                               "result": odd}},
    ]  # fmt: skip
    response = upload(json.dumps(rows).encode())
    assert response.status_code == 201, response.json()
    reasons = {t["id"]: t["reason"] for t in response.json()["not_scored_tasks"]}
    assert reasons == {
        "listed": "getter ['vm_file'] is not supported here",
        "infeasible": "getter ['vm_file'] is not supported here",
    }
    assert set(project.tasks.values_list("external_id", flat=True)) == {"listed", "infeasible"}


def test_non_object_row_is_rejected(post_body):
    before = written()
    content = [*rows(1), "Open the editor.", 3, None]

    errors = rejected_errors(post_body(json.dumps(content).encode()), before)

    assert rows_and_fields(errors) == {(2, ""), (3, ""), (4, "")}
    assert "JSON object" in errors[0]["message"]


def test_duplicate_id_in_one_file_names_the_first_row(post_body):
    before = written()
    content = [*rows(2), {"id": "task-1", "instruction": "Something else entirely."}]

    errors = rejected_errors(post_body(json.dumps(content).encode()), before)

    assert rows_and_fields(errors) == {(3, "id")}
    assert "task-1" in errors[0]["message"]
    assert "row 1" in errors[0]["message"]


def test_bad_row_among_good_rows_imports_nothing(upload):
    before = written()
    good = rows(6)
    good[3] = {"id": "task-4", "instruction": "Open it.", "max_steps": 0}

    errors = rejected_errors(upload(jsonl(good), filename="tasks.jsonl"), before)

    assert rows_and_fields(errors) == {(4, "max_steps")}
    assert not Task.objects.filter(external_id="task-1").exists()


@pytest.mark.parametrize("content", [b"", b"  \n\n\t\n"], ids=["no bytes", "blank lines"])
def test_empty_file_is_rejected(content, upload):
    before = written()

    errors = rejected_errors(upload(content, filename="tasks.jsonl"), before)

    assert errors[0]["message"] == "no tasks in the file"


def test_empty_body_is_rejected(post_body):
    before = written()

    errors = rejected_errors(post_body(b""), before)

    assert errors[0]["message"] == "no tasks in the file"


def test_non_utf8_bytes_are_rejected(upload):
    before = written()
    content = '[{"instruction": "Open the café menu."}]'.encode("latin-1")

    response = upload(content)

    rejected_errors(response, before)
    assert "not UTF-8" in response.json()["error"]["message"]


def test_multipart_upload_without_the_file_field_is_a_clear_error(manager_client, project):
    before = written()
    file = SimpleUploadedFile("tasks.json", json.dumps(rows(1)).encode())

    response = not_a_crash(
        manager_client.post(
            f"/api/projects/{project.pk}/import/", {"upload": file}, format="multipart"
        )
    )

    assert response.status_code == 400
    assert response.json()["error"]["message"]
    assert written() == before


def test_deeply_nested_json_is_rejected_not_a_crash(post_body):
    before = written()
    depth = 100_000

    errors = rejected_errors(post_body(b"[" * depth + b"]" * depth), before)

    assert [e["row"] for e in errors] == [1]
    assert f"nested deeper than {MAX_DEPTH} levels" in errors[0]["message"]


def test_nul_character_is_rejected_not_a_crash(post_body):
    before = written()
    content = jsonl(rows(1)) + b'{"instruction": "Type a\\u0000b into the search box."}\n'

    errors = rejected_errors(post_body(content, content_type="application/x-ndjson"), before)

    assert rows_and_fields(errors) == {(2, "instruction")}


# Values jsonb cannot store, and nesting deeper than MAX_DEPTH: refused per row and field

# A row with its value in each kind of field, and the levels above the value (the row is 1).
DEEP_ROWS = {
    "evaluator": ('{{"id": "deep", "instruction": "Open it.", "evaluator": {value}}}', 1),
    "config": (
        '{{"id": "deep", "instruction": "Open it.", '
        '"config": [{{"type": "launch", "parameters": {value}}}]}}',
        3,
    ),
    "snapshot": ('{{"id": "deep", "instruction": "Open it.", "snapshot": {value}}}', 1),
}
CHANGED_TASK_1 = '{"id": "task-1", "instruction": "Do something else with file 1."}'


@pytest.mark.parametrize("field", DEEP_ROWS)
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 330, 5000])
def test_row_nested_deeper_than_the_limit_is_refused_naming_its_row(
    field, depth, stored, post_body
):
    before = written()
    template, above = DEEP_ROWS[field]
    deep = template.format(value=nested(depth - above))
    content = f"[{CHANGED_TASK_1},\n{deep}]".encode()

    errors = rejected_errors(post_body(content), before)

    assert [e["row"] for e in errors] == [2]
    assert f"nested deeper than {MAX_DEPTH} levels" in errors[0]["message"]
    if depth < 500:  # deeper still, the row is refused before its fields are told apart
        assert errors[0]["field"] == field


@pytest.mark.parametrize("field", DEEP_ROWS)
def test_row_nested_as_deep_as_the_limit_is_imported(field, post_body, project):
    template, above = DEEP_ROWS[field]
    content = template.format(value=nested(MAX_DEPTH - above)).encode()

    response = post_body(content)

    assert response.status_code == 201, response.content[:1000]
    assert project.tasks.get().external_id == "deep"


@pytest.mark.parametrize(
    "row, field",
    [
        (r'{"id": "s", "instruction": "Open the caf\ud800 menu."}', "instruction"),
        (r'{"id": "s", "instruction": "Open it.", "evaluator": {"expected": ["\udfff"]}}',
         "evaluator"),
        (r'{"id": "s", "instruction": "Open it.", "config": [{"type": "\ud800"}]}', "config"),
        (r'{"id": "s", "instruction": "Open it.", "note\udc00": 1}', r"note\udc00"),
    ],
    ids=["instruction", "evaluator", "setup", "field name"],
)  # fmt: skip
def test_lone_surrogate_is_refused_naming_row_and_field(row, field, stored, post_body):
    before = written()
    content = f"[{CHANGED_TASK_1},\n{row}]".encode()

    errors = rejected_errors(post_body(content), before)

    assert (2, field) in rows_and_fields(errors)
    assert {e["row"] for e in errors} == {2}
    assert any("lone surrogate" in e["message"] for e in errors)


def test_surrogate_pair_is_one_character_and_is_imported(post_body, project):
    content = rb'[{"id": "emoji", "instruction": "Send \ud83d\ude00 to the team chat."}]'

    response = post_body(content)

    assert response.status_code == 201, response.content[:1000]
    assert project.tasks.get().instruction == "Send \U0001f600 to the team chat."


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
def test_number_that_is_not_finite_is_refused_naming_row_and_field(number, stored, post_body):
    before = written()
    row = '{"id": "n", "instruction": "Open it.", "evaluator": {"expected": [' + number + "]}}"
    content = f"[{CHANGED_TASK_1},\n{row}]".encode()

    errors = rejected_errors(post_body(content), before)

    assert rows_and_fields(errors) == {(2, "evaluator")}
    assert "a number that is not finite" in errors[0]["message"]
    assert "evaluator.expected[0]" in errors[0]["message"]


def test_integer_too_long_to_read_is_refused_naming_its_row(post_body):
    before = written()
    row = '{"instruction": "Open it.", "evaluator": {"expected": ' + "9" * 5000 + "}}"
    content = f"[{json.dumps(rows(1)[0])},\n{row}]".encode()

    errors = rejected_errors(post_body(content), before)

    assert rows_and_fields(errors) == {(2, "")}
    assert "too long to read" in errors[0]["message"]


# One parse for every body, whoever signs in how


@pytest.mark.parametrize("auth", ["session", "token"])
@pytest.mark.parametrize(
    "content_type",
    [
        "application/x-ndjson",
        "application/jsonl",
        "application/json",
        "text/plain",
        "application/x-www-form-urlencoded",  # what `curl -d @tasks.jsonl` sends
    ],
)
def test_jsonl_body_is_imported_alike_with_a_session_and_with_a_token(
    auth, content_type, client_by, project
):
    response = not_a_crash(
        client_by(auth).post(
            f"/api/projects/{project.pk}/import/", jsonl(rows(3)), content_type=content_type
        )
    )

    assert response.status_code == 201, response.content[:1000]
    assert response.json()["created"] == 3
    assert project.tasks.count() == 3


@pytest.mark.parametrize("auth", ["session", "token"])
@pytest.mark.parametrize("transport", ["json array body", "multipart upload"])
def test_json_file_is_imported_alike_with_a_session_and_with_a_token(
    auth, transport, client_by, project
):
    client, url = client_by(auth), f"/api/projects/{project.pk}/import/"
    content = json.dumps(rows(2)).encode()

    if transport == "multipart upload":
        file = SimpleUploadedFile("tasks.json", content)
        response = client.post(url, {"file": file}, format="multipart")
    else:
        response = client.post(url, content, content_type="application/json")

    assert not_a_crash(response).status_code == 201, response.content[:1000]
    assert project.tasks.count() == 2


@pytest.mark.parametrize("auth", ["session", "token"])
def test_jsonl_body_with_deep_surrogate_and_infinite_rows_names_each_row(
    auth, client_by, stored, project
):
    before = written()
    content = "\n".join(
        [
            CHANGED_TASK_1,
            DEEP_ROWS["evaluator"][0].format(value=nested(330)),
            r'{"id": "surrogate", "instruction": "Type \ud800 into the box."}',
            '{"id": "huge", "instruction": "Open it.", "evaluator": {"expected": 1e400}}',
            '{"id": "fine", "instruction": "Open the file manager."}',
        ]
    ).encode()

    response = not_a_crash(
        client_by(auth).post(
            f"/api/projects/{project.pk}/import/", content, content_type="application/x-ndjson"
        )
    )

    errors = rejected_errors(response, before)
    assert rows_and_fields(errors) == {(2, "evaluator"), (3, "instruction"), (4, "evaluator")}
    assert response.json()["error"]["message"].startswith("3 of 5 rows are invalid.")


def test_body_without_a_content_type_is_imported(manager_client, project):
    response = not_a_crash(
        manager_client.generic(
            "POST", f"/api/projects/{project.pk}/import/", jsonl(rows(2)), content_type=""
        )
    )

    assert response.status_code == 201, response.content[:1000]
    assert project.tasks.count() == 2


def test_unreadable_content_length_is_a_clear_error(manager_client, project):
    before = written()

    response = not_a_crash(
        manager_client.post(
            f"/api/projects/{project.pk}/import/",
            jsonl(rows(1)),
            content_type="application/x-ndjson",
            CONTENT_LENGTH="ten",
        )
    )

    assert response.status_code == 400
    assert written() == before


# Every bad row in one pass, with a true count


def test_every_bad_row_is_reported_in_one_pass_broken_json_and_invalid_fields_together(
    upload, stored
):
    before = written()
    content = "\n".join(
        [
            '{"id": "ok-1", "instruction": "Open the editor."}',
            '{"id": "broken", "instruction": "Close the',
            '{"id": "no-instruction", "max_steps": 0}',
            '{"id": "ok-2", "instruction": "Open the browser."}',
            '{"id": "drive", "instruction": "Sync it.", "config": [{"type": "teleport"}]}',
            CHANGED_TASK_1,
        ]
    ).encode()

    response = upload(content, filename="tasks.jsonl")

    errors = rejected_errors(response, before)
    assert rows_and_fields(errors) == {
        (2, ""),
        (3, "instruction"),
        (3, "max_steps"),
        (5, "config[0]"),
    }
    details = response.json()["error"]["details"]
    assert (details["bad_row_count"], details["error_count"]) == (3, 4)
    assert response.json()["error"]["message"].startswith("3 of 6 rows are invalid.")
    assert [e["row"] for e in errors] == sorted(e["row"] for e in errors)


def test_json_array_reports_each_broken_element_with_the_invalid_rows(post_body, stored):
    before = written()
    content = "\n".join(
        [
            "[",
            '  {"id": "a", "instruction": "Open it.",},',
            '  {"id": "b", "instruction": 42},',
            '  {"id": "c", "instruction": "Open it." "max_steps": 3},',
            f"  {CHANGED_TASK_1},",
            '  {"id": "e", "instruction": "Open it.", "evaluator": {"x": [1, 2,]}}',
            "]",
        ]
    ).encode()

    response = post_body(content)

    errors = rejected_errors(response, before)
    assert rows_and_fields(errors) == {(1, ""), (2, "instruction"), (3, ""), (5, "")}
    by_row = {e["row"]: e["message"] for e in errors}
    assert "line 2" in by_row[1]
    assert "line 4" in by_row[3]
    assert "line 6" in by_row[5]
    assert response.json()["error"]["message"].startswith("4 of 5 rows are invalid.")


@pytest.mark.parametrize(
    ("content", "summary"),
    [
        ('{"id": "a"}', "1 of 1 row is invalid."),
        ('{"id": "a"}\n{"id": "b", "instruction": "Open it."}', "1 of 2 rows is invalid."),
        ('{"id": "a"}\n{"id": "b"}', "2 of 2 rows are invalid."),
    ],
)
def test_the_refusal_counts_rows_in_the_singular_and_the_plural(upload, content, summary):
    before = written()
    response = upload(content.encode(), filename="tasks.jsonl")
    rejected_errors(response, before)
    assert response.json()["error"]["message"].startswith(summary)


def test_json_array_stops_at_a_string_left_open_and_says_so(post_body):
    before = written()
    content = "\n".join(
        [
            "[",
            '  {"id": "a", "instruction": 42},',
            '  {"id": "b", "instruction": "Open the},',
            '  {"id": "c", "instruction": "Open it."}',
            "]",
        ]
    ).encode()

    errors = rejected_errors(post_body(content), before)

    assert rows_and_fields(errors) == {(1, "instruction"), (2, "")}
    assert "the rows after it cannot be read" in errors[1]["message"]


@pytest.mark.parametrize(
    "content, problem",
    [
        (b'[{"instruction": "Open it."},\n {"instruction": "Save it."},\n]', "a comma after"),
        (b'[{"instruction": "Open it."}\n {"instruction": "Save it."}]', "expected ','"),
        (b'[{"instruction": "Open it."}] {"instruction": "Save it."}', "text after the array"),
        (b'[{"instruction": "Open it."},\n {"instruction": "Save it."}\n', "expected ','"),
    ],
    ids=["comma after the last row", "missing comma", "text after the array", "array not closed"],
)
def test_broken_json_between_rows_is_a_file_error_not_a_bad_row(content, problem, post_body):
    before = written()

    response = post_body(content)

    errors = rejected_errors(response, before)
    assert rows_and_fields(errors) == {(0, "")}
    assert problem in errors[0]["message"]
    assert response.json()["error"]["details"]["bad_row_count"] == 0


def test_tasks_object_reports_its_broken_rows(post_body):
    before = written()
    content = b'{"tasks": [\n {"instruction": "Open it."},\n {"instruction": "Save",},\n {}\n]}'

    errors = rejected_errors(post_body(content), before)

    assert rows_and_fields(errors) == {(2, ""), (3, "instruction")}


# Setup steps: only those the desktops run


def test_unknown_setup_step_type_is_refused_naming_row_and_step(post_body, stored):
    before = written()
    task = {
        "id": "drive",
        "instruction": "Open the shared sheet.",
        "config": [
            {"type": "launch", "parameters": {"command": ["libreoffice", "--calc"]}},
            {"type": "teleport", "parameters": {"settings_file": "settings.yml"}},
            {"type": "levitate", "parameters": {}},
        ],
    }
    changed = {"id": "task-1", "instruction": "Do something else with file 1."}

    errors = rejected_errors(post_body(json.dumps([changed, task]).encode()), before)

    assert rows_and_fields(errors) == {(2, "config[1]"), (2, "config[2]")}
    assert "'teleport' is not a setup step the desktops run" in errors[0]["message"]
    assert "launch" in errors[0]["message"]


def test_every_setup_step_type_the_desktops_run_is_imported(post_body, project):
    steps = [{"type": kind, "parameters": {}} for kind in sorted(RUNNERS)]
    task = {"id": "all-steps", "instruction": "Prepare everything.", "setup": steps}

    response = post_body(json.dumps([task]).encode())

    assert response.status_code == 201, response.content[:1000]
    assert [step["type"] for step in project.tasks.get().setup] == sorted(RUNNERS)


@pytest.mark.parametrize("shape", ["json array", "jsonl", "tasks object"])
def test_file_with_more_rows_than_allowed_is_refused(shape, monkeypatch, upload):
    monkeypatch.setattr(task_rows, "MAX_ROWS", 3)
    before = written()
    content = {
        "json array": json.dumps(rows(4)).encode(),
        "jsonl": jsonl(rows(4)),
        "tasks object": json.dumps({"tasks": rows(4)}).encode(),
    }[shape]

    response = upload(content, filename="tasks.jsonl" if shape == "jsonl" else "tasks.json")

    rejected_errors(response, before)
    assert "more than 3 tasks" in response.json()["error"]["message"]


# Size limit


@pytest.mark.parametrize("transport", ["multipart upload", "raw body"])
def test_50_mb_upload_is_refused_as_too_large(transport, upload, post_body):
    before = written()
    padding = b"a" * (50 * 1024 * 1024)
    content = b'[{"instruction": "' + padding + b'"}]'

    if transport == "multipart upload":
        response = upload(content, filename="huge.json")
    else:
        response = post_body(content)

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert written() == before


def test_raw_body_just_over_the_limit_is_refused_as_too_large(settings, post_body):
    # The request allowance is the limit plus 64 KB for multipart framing; a raw body has no
    # framing, so a body between the two is still over the limit.
    settings.TANDEM_IMPORT_MAX_BYTES = 4096
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096 + 64 * 1024
    before = written()
    content = json.dumps([{"instruction": "Open it. " + "a" * 8192}]).encode()

    response = post_body(content)

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert written() == before


def test_upload_just_over_the_limit_is_refused_as_too_large(settings, upload):
    settings.TANDEM_IMPORT_MAX_BYTES = 4096
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096 + 64 * 1024
    before = written()
    content = json.dumps([{"instruction": "Open it. " + "a" * 8192}]).encode()

    response = upload(content)

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert written() == before


# Re-import


def test_reimporting_the_same_file_reports_unchanged(upload, project):
    content = jsonl([*rows(2), OSWORLD_TASK])
    assert upload(content, filename="tasks.jsonl").json()["created"] == 3
    before = written()

    response = upload(content, filename="tasks.jsonl")

    assert response.status_code == 201
    report = response.json()
    assert (report["created"], report["updated"], report["unchanged"]) == (0, 0, 3)
    assert sorted(report["task_ids"]["unchanged"]) == sorted(["task-1", "task-2", OSWORLD_TASK_ID])
    assert written() == before


def test_reimport_with_changed_instruction_updates_a_queued_task(upload, project, manager):
    upload(jsonl(rows(2)), filename="tasks.jsonl")
    changed = rows(2)
    changed[1]["instruction"] = "Open the file number 2 and print it."

    response = upload(jsonl(changed), filename="tasks.jsonl")

    assert response.status_code == 201
    report = response.json()
    assert report["task_ids"]["updated"] == ["task-2"]
    assert report["task_ids"]["unchanged"] == ["task-1"]
    task = Task.objects.get(project=project, external_id="task-2")
    assert task.instruction == "Open the file number 2 and print it."
    assert task.source["instruction"] == "Open the file number 2 and print it."
    assert project.tasks.count() == 2
    update = task.events.get(kind=TaskEvent.Kind.UPDATED)
    assert update.actor == manager


def test_changed_row_for_a_task_in_progress_is_rejected(upload, project, make_user, api_client_for):
    upload(jsonl(rows(1)), filename="tasks.jsonl")
    annotator = make_user("ana", project, "annotator")
    claim = api_client_for(annotator).post("/api/tasks/claim/", {"project": project.pk})
    assert claim.status_code == 200
    assert claim.json()["task"]["external_id"] == "task-1"
    before = written()
    changed = rows(1)
    changed[0]["instruction"] = "Do something else."

    errors = rejected_errors(
        upload(jsonl([*changed, *rows(1, prefix="new")]), filename="tasks.jsonl"), before
    )

    assert rows_and_fields(errors) == {(1, "id")}
    assert "in_progress" in errors[0]["message"]
    task = Task.objects.get(project=project, external_id="task-1")
    assert task.instruction == "Open the file number 1 in the editor."
    assert task.status == TaskStatus.IN_PROGRESS
    assert task.assignee == annotator


def test_rows_without_id_imported_twice_are_one_task(upload, project):
    content = jsonl([{"instruction": "Rename the slide deck to final.pptx."}])

    first = upload(content, filename="tasks.jsonl")
    second = upload(content, filename="tasks.jsonl")

    assert first.json()["created"] == 1
    assert (second.json()["created"], second.json()["unchanged"]) == (0, 1)
    assert project.tasks.count() == 1
    assert project.tasks.get().external_id.startswith("sha256-")


# Who may import


@pytest.mark.parametrize("role", ["annotator", "reviewer"])
def test_project_member_who_is_not_a_manager_gets_403(
    role, make_user, project, api_client_for, upload
):
    client = api_client_for(make_user("member", project, role))
    before = written()

    response = upload(jsonl(rows(1)), filename="tasks.jsonl", client=client)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert written() == before


def test_non_member_gets_404(make_user, other_project, api_client_for, upload):
    client = api_client_for(make_user("outsider", other_project, "manager"))
    before = written()

    response = upload(jsonl(rows(1)), filename="tasks.jsonl", client=client)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert written() == before


@pytest.mark.django_db(transaction=True)
def test_two_imports_of_the_same_new_tasks_at_once_make_them_once(project, manager):
    """A double click on Import: the second import finds the first one's tasks."""
    data = jsonl(rows(50, "twice"))
    reports = at_once(lambda: importer.import_tasks(project, data, "tasks.jsonl", manager), 2)
    assert sorted(len(r.created) for r in reports) == [0, 50]
    assert sorted(len(r.unchanged) for r in reports) == [0, 50]
    assert Task.objects.filter(project=project).count() == 50
