"""Archives of task files: checked whole, then stored by URL; and what a task still lacks."""

import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from annotation.models import Task
from backend import body_limits
from backend.accounts.models import User
from backend.accounts.roles import Role
from vm_pool.downloads import fetch_task_file, store_task_file
from vm_pool.models import TaskFile
from vm_pool.task_file_urls import EMPTY_CHROME_HISTORY_URL, missing_urls, task_file_urls

pytestmark = pytest.mark.django_db

HOST = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main"
SHEET_URL = f"{HOST}/libreoffice_calc/abc/Sales.xlsx"
GOLD_URL = f"{HOST}/libreoffice_calc/abc/Sales_gold.xlsx"
DOC_URL = f"{HOST}/multi_apps/def/Amazon%20Invoice%20%5B1%5D.eml"


@pytest.fixture(autouse=True)
def media(settings, tmp_path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def manager(make_user, project) -> User:
    return make_user("mira", project, Role.MANAGER)


@pytest.fixture
def manager_client(client_for, manager) -> APIClient:
    client = client_for(manager)
    client.raise_request_exception = False
    return client


def zip_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def tar_gz_of(files: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            archive.addfile(info)
    return buffer.getvalue()


def post_archive(client: APIClient, data: bytes, name: str = "files.zip"):
    return client.post(
        "/api/task-files/archive/",
        {"file": SimpleUploadedFile(name, data)},
        format="multipart",
    )


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_zip_with_an_index_stores_each_file_under_its_url(manager_client, manager):
    index = {SHEET_URL: "calc/Sales.xlsx", GOLD_URL: "calc/gold.xlsx"}
    archive = zip_of(
        {
            "index.json": json.dumps(index).encode(),
            "calc/Sales.xlsx": b"sheet",
            "calc/gold.xlsx": b"gold",
            "calc/notes.txt": b"not listed, so not stored",
        }
    )

    response = post_archive(manager_client, archive)

    assert response.status_code == 201, response.content[:2000]
    body = response.json()
    assert (body["stored"], body["replaced"], body["unchanged"]) == (2, 0, 0)
    assert {f["url"]: f["result"] for f in body["files"]} == {
        SHEET_URL: "stored",
        GOLD_URL: "stored",
    }
    assert fetch_task_file(SHEET_URL) == b"sheet"
    assert fetch_task_file(GOLD_URL) == b"gold"
    assert set(TaskFile.objects.values_list("source", "uploaded_by")) == {("uploaded", manager.pk)}


def test_a_tar_gz_of_url_named_files_counts_stored_replaced_and_unchanged(manager_client):
    store_task_file(SHEET_URL, b"old sheet", TaskFile.Source.FETCHED)
    store_task_file(GOLD_URL, b"gold", TaskFile.Source.FETCHED)
    archive = tar_gz_of(
        {
            f"cache/{quote(SHEET_URL, safe='')}": b"new sheet",
            quote(GOLD_URL, safe=""): b"gold",
            quote(DOC_URL, safe=""): b"an email",
        }
    )

    response = post_archive(manager_client, archive, "files.tar.gz")

    assert response.status_code == 201, response.content[:2000]
    body = response.json()
    assert (body["stored"], body["replaced"], body["unchanged"]) == (1, 1, 1)
    assert fetch_task_file(SHEET_URL) == b"new sheet"
    # The URL keeps its own percent-escapes: the file name was the URL encoded once more.
    assert fetch_task_file(DOC_URL) == b"an email"


def test_an_index_list_with_sha256_is_checked(manager_client):
    index = [{"url": SHEET_URL, "path": "a.xlsx", "sha256": sha(b"sheet").upper()}]
    archive = zip_of({"index.json": json.dumps(index).encode(), "a.xlsx": b"sheet"})

    response = post_archive(manager_client, archive)

    assert response.status_code == 201, response.content[:2000]
    assert response.json()["files"][0]["sha256"] == sha(b"sheet")


def test_a_bad_archive_stores_nothing_and_lists_every_problem(manager_client, media):
    store_task_file(GOLD_URL, b"gold", TaskFile.Source.FETCHED)
    before = list(TaskFile.objects.values_list("url", "sha256"))
    index = [
        {"url": SHEET_URL, "path": "good.xlsx"},
        {"url": "file:///etc/passwd", "path": "good.xlsx"},
        {"url": GOLD_URL, "path": "gold.xlsx", "sha256": sha(b"something else")},
        {"url": DOC_URL, "path": "../outside.eml"},
    ]
    archive = zip_of(
        {
            "index.json": json.dumps(index).encode(),
            "good.xlsx": b"sheet",
            "gold.xlsx": b"gold, but changed",
            "../escape.txt": b"x",
        }
    )

    response = post_archive(manager_client, archive)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "archive_refused"
    assert "nothing was stored" in error["message"]
    problems = error["details"]["problems"]
    messages = " | ".join(p["message"] for p in problems)
    assert "leads out of the archive" in messages
    assert "only http and https URLs" in messages
    assert f"its sha256 is {sha(b'gold, but changed')}, not {sha(b'something else')}" in messages
    assert error["details"]["problem_count"] == len(problems) == 4
    assert list(TaskFile.objects.values_list("url", "sha256")) == before
    assert fetch_task_file(GOLD_URL) == b"gold"


def test_links_and_unnamed_files_are_refused(manager_client):
    archive = tar_gz_of(
        {quote(SHEET_URL, safe=""): b"sheet", "readme.txt": b"hello"},
        links={quote(GOLD_URL, safe=""): "/etc/shadow"},
    )

    response = post_archive(manager_client, archive, "files.tgz")

    assert response.status_code == 400
    problems = response.json()["error"]["details"]["problems"]
    assert {p["entry"] for p in problems} == {quote(GOLD_URL, safe=""), "readme.txt"}
    assert "symbolic link" in " ".join(p["message"] for p in problems)
    assert not TaskFile.objects.exists()


def test_a_file_over_the_task_file_limit_is_refused(manager_client, settings):
    settings.TANDEM_DOWNLOAD_MAX_BYTES = 10
    archive = zip_of({quote(SHEET_URL, safe=""): b"x" * 11})

    response = post_archive(manager_client, archive)

    assert response.status_code == 400
    assert "download limit" in response.json()["error"]["details"]["problems"][0]["message"]
    assert not TaskFile.objects.exists()


def test_what_is_not_an_archive_is_refused(manager_client):
    response = post_archive(manager_client, b"just some bytes", "files.zip")

    assert response.status_code == 400
    assert (
        "not a readable .zip or .tar(.gz) archive"
        in response.json()["error"]["message"]
        + (response.json()["error"]["details"]["problems"][0]["message"])
    )


def test_an_annotator_may_not_upload_an_archive(client_for, make_user, project):
    annotator = make_user("ann", project, Role.ANNOTATOR)

    response = post_archive(client_for(annotator), zip_of({quote(SHEET_URL, safe=""): b"x"}))

    assert response.status_code == 403
    assert not TaskFile.objects.exists()


def test_the_archive_route_takes_a_larger_body_than_one_file(settings):
    archive_limit = body_limits.limit_for("/api/task-files/archive/")

    assert archive_limit == (
        settings.TANDEM_TASK_ARCHIVE_MAX_BYTES + body_limits.MULTIPART_OVERHEAD_BYTES
    )
    assert archive_limit > body_limits.limit_for("/api/task-files/")


# What a task takes from the cache, and what the cache lacks


def test_task_file_urls_come_from_downloads_getters_and_browse_history():
    setup = [
        {"type": "download", "parameters": {"files": [{"url": SHEET_URL, "path": "/h/a.xlsx"}]}},
        {"type": "update_browse_history", "parameters": {"history": []}},
    ]
    evaluator = {
        "postconfig": [
            {"type": "download", "parameters": {"files": [{"url": DOC_URL, "path": "/h/b"}]}}
        ],
        "result": [
            {"type": "vm_file", "path": "/h/a.xlsx"},
            {"type": "cache_file", "path": "wmctrl.out"},  # a path in OSWorld's cache: no URL
        ],
        "expected": [
            {"type": "cloud_file", "path": GOLD_URL},
            {"type": "cloud_file", "multi": True, "path": [SHEET_URL, f"{HOST}/x.csv"]},
        ],
    }

    assert task_file_urls(setup, evaluator) == [
        SHEET_URL,
        EMPTY_CHROME_HISTORY_URL,
        DOC_URL,
        GOLD_URL,
        f"{HOST}/x.csv",
    ]


def test_missing_urls_asks_the_database_once(django_assert_num_queries):
    store_task_file(SHEET_URL, b"sheet", TaskFile.Source.FETCHED)

    with django_assert_num_queries(1):
        assert missing_urls([SHEET_URL, GOLD_URL, DOC_URL]) == {GOLD_URL, DOC_URL}


def test_files_missing_on_the_task_api_drops_a_url_once_it_is_uploaded(manager_client, project):
    def add_tasks(count: int) -> None:
        for _ in range(count):
            Task.objects.create(
                project=project,
                external_id=f"t{Task.objects.count()}",
                instruction="Fill in the sheet.",
                setup=[
                    {
                        "type": "download",
                        "parameters": {"files": [{"url": SHEET_URL, "path": "/home/user/a.xlsx"}]},
                    }
                ],
                evaluator={
                    "func": "compare_table",
                    "expected": {"type": "cloud_file", "path": GOLD_URL},
                },
            )

    url = f"/api/tasks/?project={project.pk}"

    def queries_to_list() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert manager_client.get(url).status_code == 200
        return len(queries)

    add_tasks(1)
    for_one = queries_to_list()
    add_tasks(4)
    assert queries_to_list() == for_one  # one query for the page's files, not one per task
    listed = manager_client.get(url).json()["results"]
    assert [t["files_missing"] for t in listed] == [[SHEET_URL, GOLD_URL]] * 5

    post_archive(manager_client, zip_of({quote(GOLD_URL, safe=""): b"gold"}))

    listed = manager_client.get(url).json()["results"]
    assert [t["files_missing"] for t in listed] == [[SHEET_URL]] * 5
    board = manager_client.get(f"/api/projects/{project.pk}/board/").json()
    queued = next(c for c in board["columns"] if c["status"] == "queued")
    assert [t["files_missing"] for t in queued["tasks"]] == [[SHEET_URL]] * 5
    detail = manager_client.get(f"/api/tasks/{listed[0]['id']}/").json()
    assert detail["files_missing"] == [SHEET_URL]
