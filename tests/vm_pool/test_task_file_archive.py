"""Archives of task files: checked whole, then stored by URL; and what a task still lacks."""

import hashlib
import io
import json
import os
import struct
import tarfile
import time
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
from vm_pool import jobs
from vm_pool.models import TaskFile, TaskFileArchive
from vm_pool.task_files import archives as task_file_archives
from vm_pool.task_files.downloads import fetch_task_file, store_task_file
from vm_pool.task_files.urls import EMPTY_CHROME_HISTORY_URL, missing_urls, task_file_urls

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


# Bounded work: caps checked before and while reading, a tar read once, large uploads as a job


def problem_messages(response) -> list[str]:
    return [p["message"] for p in response.json()["error"]["details"]["problems"]]


def headers_only_tar(count: int, mode: str) -> bytes:
    """``count`` empty files named by URL: nothing but headers."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        for i in range(count):
            archive.addfile(tarfile.TarInfo(quote(f"https://files.example/{i}", safe="")))
    return buffer.getvalue()


@pytest.mark.parametrize(("mode", "name"), [("w", "files.tar"), ("w:gz", "files.tar.gz")])
def test_a_tar_of_headers_only_is_refused_at_the_member_count(manager_client, settings, mode, name):
    archive = headers_only_tar(13_000, mode)
    most = settings.TANDEM_TASK_ARCHIVE_MAX_MEMBERS

    started = time.monotonic()
    response = post_archive(manager_client, archive, name)
    elapsed = time.monotonic() - started

    print(f"{name}: {len(archive):,} bytes of 13,000 headers refused in {elapsed:.2f} s")
    assert response.status_code == 400
    assert problem_messages(response) == [
        f"the archive holds more than {most:,} entries; at most {most:,}"
    ]
    assert elapsed < 10
    assert not TaskFile.objects.exists()


class CountingReader(io.BytesIO):
    """An upload that counts the bytes read from it."""

    bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.bytes_read += len(data)
        return data


def test_a_tar_gz_with_its_index_last_is_read_once(manager):
    files = {f"files/{i:03d}.bin": os.urandom(4096) for i in range(200)}
    index = {f"{HOST}/files/{i:03d}.bin": path for i, path in reversed(list(enumerate(files)))}
    archive = tar_gz_of({**files, "index.json": json.dumps(index).encode()})
    upload = CountingReader(archive)

    started = time.monotonic()
    report = task_file_archives.store_archive(upload, manager, seconds=60)
    elapsed = time.monotonic() - started

    print(f"{len(archive):,} bytes, index last, stored in {elapsed:.2f} s")
    assert report.counts() == {"stored": 200, "replaced": 0, "unchanged": 0}
    # One pass, plus the look at its end that tells a zip from a tar.
    assert upload.bytes_read < len(archive) + 128 * 1024
    assert fetch_task_file(f"{HOST}/files/000.bin") == files["files/000.bin"]
    assert fetch_task_file(f"{HOST}/files/199.bin") == files["files/199.bin"]


def test_a_zip_bomb_is_refused_by_its_ratio_and_nothing_is_stored(manager_client, settings):
    archive = zip_of({quote(SHEET_URL, safe=""): bytes(50 * 1024 * 1024), "index.txt": b"x"})
    ratio = settings.TANDEM_TASK_ARCHIVE_MAX_RATIO

    response = post_archive(manager_client, archive)

    assert response.status_code == 400
    messages = problem_messages(response)
    assert any(
        m.startswith("it unpacks to 52,428,800 bytes from") and f"more than {ratio}×" in m
        for m in messages
    ), messages
    assert any(m.startswith("its files come to 52,428,800 bytes unpacked") for m in messages)
    assert not TaskFile.objects.exists()


def test_a_zip_entry_that_holds_more_than_it_declares_is_read_no_further(manager_client):
    archive = bytearray(zip_of({quote(SHEET_URL, safe=""): bytes(20 * 1024 * 1024)}))
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = archive.index(signature)
        struct.pack_into("<I", archive, at + offset, 1000)  # uncompressed size: 1,000 bytes

    response = post_archive(manager_client, bytes(archive))

    assert response.status_code == 400
    # Reading stops at the declared size, where the checksum of what was read is wrong.
    [message] = problem_messages(response)
    assert message.startswith("it cannot be read: Bad CRC-32"), message
    assert not TaskFile.objects.exists()


def test_a_zip_declaring_too_many_entries_is_refused_before_its_directory_is_read(
    manager_client, settings
):
    settings.TANDEM_TASK_ARCHIVE_MAX_MEMBERS = 10
    archive = zip_of({quote(f"{HOST}/{i}", safe=""): b"x" for i in range(11)})

    response = post_archive(manager_client, archive)

    assert response.status_code == 400
    assert problem_messages(response) == ["the archive holds 11 entries; at most 10"]


def test_a_tar_entry_with_huge_headers_is_refused(manager_client):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(quote(SHEET_URL, safe=""))
        info.pax_headers = {"comment": "x" * (4 * 1024 * 1024)}
        tar.addfile(info)

    response = post_archive(manager_client, buffer.getvalue(), "files.tar.gz")

    assert response.status_code == 400
    assert "headers (long names, pax records) are over" in problem_messages(response)[0]
    assert not TaskFile.objects.exists()


def test_an_archive_that_outlasts_its_time_is_refused(manager_client, settings):
    settings.TANDEM_TASK_ARCHIVE_REQUEST_SECONDS = 0

    response = post_archive(manager_client, zip_of({quote(SHEET_URL, safe=""): b"sheet"}))

    assert response.status_code == 400
    assert problem_messages(response) == ["it could not be read within 0 s"]
    assert not TaskFile.objects.exists()


def test_a_large_archive_is_stored_by_a_job_whose_progress_reaches_one(
    manager_client, manager, settings, media
):
    settings.TANDEM_TASK_ARCHIVE_BACKGROUND_BYTES = 1024
    sheet = os.urandom(300 * 1024)  # more than one read of the stream
    store_task_file(GOLD_URL, b"gold", TaskFile.Source.FETCHED)
    index = {GOLD_URL: "gold.xlsx", SHEET_URL: "calc/Sales.xlsx"}
    archive = tar_gz_of(
        {"calc/Sales.xlsx": sheet, "gold.xlsx": b"gold", "index.json": json.dumps(index).encode()}
    )

    response = post_archive(manager_client, archive, "files.tar.gz")

    assert response.status_code == 202, response.content[:2000]
    queued = response.json()
    assert response["Location"] == queued["url"]
    assert queued["url"].endswith(f"/api/task-files/archives/{queued['id']}/")
    assert (queued["status"], queued["progress"], queued["size_bytes"]) == (
        "queued",
        0.0,
        len(archive),
    )
    assert queued["uploaded_by"] == manager.username
    assert not TaskFile.objects.filter(url=SHEET_URL).exists()

    jobs.store_task_file_archive(queued["id"])  # what the worker runs, in this process

    done = manager_client.get(queued["url"]).json()
    assert (done["status"], done["progress"]) == ("done", 1.0)
    assert done["counts"] == {"stored": 1, "replaced": 0, "unchanged": 1}
    assert {f["url"]: f["result"] for f in done["files"]} == {
        SHEET_URL: "stored",
        GOLD_URL: "unchanged",
    }
    assert done["finished_at"] is not None and done["problems"] == []
    assert fetch_task_file(SHEET_URL) == sheet
    assert TaskFile.objects.get(url=SHEET_URL).uploaded_by == manager
    assert not any((media / "task-file-archives").iterdir())  # the upload is not kept

    jobs.store_task_file_archive(queued["id"])  # a second delivery changes nothing
    assert manager_client.get(queued["url"]).json() == done


def test_a_bad_large_archive_fails_with_every_problem_and_stores_nothing(
    manager_client, settings, media
):
    settings.TANDEM_TASK_ARCHIVE_BACKGROUND_BYTES = 1024
    settings.TANDEM_DOWNLOAD_MAX_BYTES = 4096
    archive = tar_gz_of(
        {
            quote(SHEET_URL, safe=""): os.urandom(2000),
            quote(GOLD_URL, safe=""): os.urandom(5000),
            "readme.txt": b"hello",
            quote("https://files.example:99999/a.txt", safe=""): b"x",
        },
        links={quote(DOC_URL, safe=""): "/etc/shadow"},
    )

    response = post_archive(manager_client, archive, "files.tar.gz")
    assert response.status_code == 202, response.content[:2000]
    jobs.store_task_file_archive(response.json()["id"])

    failed = manager_client.get(response.json()["url"]).json()
    assert failed["status"] == "failed"
    assert failed["error"] == "The archive has 4 problems; nothing was stored."
    assert failed["counts"] == {"problems": 4}
    messages = " | ".join(p["message"] for p in failed["problems"])
    assert "larger than the 4096 bytes download limit" in messages
    assert "symbolic link" in messages
    assert "each file is named by its URL" in messages
    assert "port is not a number" in messages
    assert not TaskFile.objects.exists()
    assert not any((media / "task-file-archives").iterdir())


def test_an_annotator_may_not_follow_an_archive_job(client_for, make_user, project, manager):
    job = TaskFileArchive.objects.create(name="files.zip", size_bytes=1, uploaded_by=manager)
    annotator = make_user("ann", project, Role.ANNOTATOR)

    response = client_for(annotator).get(f"/api/task-files/archives/{job.pk}/")

    assert response.status_code == 403


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
