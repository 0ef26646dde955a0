"""The export API: every endpoint × every role (design §8), token scopes, and bad input that
gets a clear 4xx and changes nothing.

Non-members get 404; members whose role lacks the capability get 403 (or 404 where the export
list they may see does not hold it); anonymous callers get 401. Engineers and admins create,
cancel and download; project managers read and download.
"""

import io
import tarfile

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from annotation.models import DatasetExport
from backend.accounts.roles import Role

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "outsider", "annotator", "reviewer", "manager", "engineer", "admin"]
MANIFEST = b'{"schema_version": 1}\n'


@pytest.fixture
def world(settings, tmp_path, make_user, project, other_project):
    settings.MEDIA_ROOT = tmp_path
    users = {
        "annotator": make_user("annotator", project, Role.ANNOTATOR),
        "reviewer": make_user("reviewer", project, Role.REVIEWER),
        "manager": make_user("manager", project, Role.MANAGER),
        "engineer": make_user("engineer", project, Role.ENGINEER),
        "outsider": make_user("outsider", other_project, Role.ENGINEER),
        "admin": make_user("admin", is_superuser=True, is_staff=True),
    }
    queued = DatasetExport.objects.create(project=project, kind="sft", created_by=users["engineer"])
    done = DatasetExport.objects.create(
        project=project,
        kind="dpo",
        created_by=users["engineer"],
        status="succeeded",
        progress=1.0,
        files=[{"name": "manifest.json", "size": len(MANIFEST), "sha256": "0" * 64}],
        finished_at=timezone.now(),
    )
    default_storage.save(f"exports/{done.pk}/manifest.json", ContentFile(MANIFEST))
    return users, queued, done


ENDPOINTS = [
    ("list", "get", "/api/exports/", None, {"anonymous": 401}, 200),
    (
        "create",
        "post",
        "/api/exports/",
        {"project": "{p}", "kind": "sft", "format": "trl"},
        {"anonymous": 401, "outsider": 404, "engineer": 201, "admin": 201},
        403,
    ),
    (
        "retrieve",
        "get",
        "/api/exports/{q}/",
        None,
        {"anonymous": 401, "manager": 200, "engineer": 200, "admin": 200},
        404,
    ),
    (
        "cancel",
        "post",
        "/api/exports/{q}/cancel/",
        None,
        {"anonymous": 401, "manager": 403, "engineer": 200, "admin": 200},
        404,
    ),
    (
        "download",
        "get",
        "/api/exports/{d}/download/?file=manifest.json",
        None,
        {"anonymous": 401, "manager": 200, "engineer": 200, "admin": 200},
        404,
    ),
]

CASES = [
    pytest.param(method, path, body, role, expected.get(role, default), id=f"{name}-{role}")
    for name, method, path, body, expected, default in ENDPOINTS
    for role in ROLES
]


@pytest.mark.parametrize(("method", "path", "body", "role", "expected"), CASES)
def test_endpoint_allows_or_denies_each_role(
    world, project, client_for, method, path, body, role, expected
):
    users, queued, done = world
    client = client_for(None if role == "anonymous" else users[role])
    url = path.format(q=queued.pk, d=done.pk)
    if body is not None:
        body = {**body, "project": project.pk}
    response = getattr(client, method)(url, body, format="json")
    assert response.status_code == expected, response.content
    if expected >= 400:
        assert response.json()["error"]["status"] == expected


def test_lists_hold_only_readable_projects(world, client_for, other_project, make_user):
    users, queued, done = world
    DatasetExport.objects.create(project=other_project, kind="ct", created_by=users["outsider"])

    def ids(role, query=""):
        response = client_for(users[role]).get(f"/api/exports/{query}")
        return sorted(e["id"] for e in response.json()["results"])

    assert ids("engineer") == ids("manager") == sorted([queued.pk, done.pk])
    assert ids("annotator") == ids("reviewer") == []
    assert len(ids("outsider")) == 1 and len(ids("admin")) == 3
    assert ids("admin", f"?project={other_project.pk}") == ids("outsider")


def test_lists_filter_by_kind_format_and_status(world, project, client_for):
    users, queued, done = world
    lf = DatasetExport.objects.create(
        project=project, kind="dpo", format="llama_factory", created_by=users["engineer"]
    )
    client = client_for(users["engineer"])

    def ids(query):
        response = client.get(f"/api/exports/?project={project.pk}&{query}")
        assert response.status_code == 200, response.content
        return sorted(e["id"] for e in response.json()["results"])

    assert ids("dataset_format=llama_factory") == [lf.pk]
    assert lf.pk not in ids("dataset_format=trl")
    assert ids(f"status={done.status}") == [done.pk]
    assert ids("kind=dpo&dataset_format=llama_factory") == [lf.pk]
    refused = client.get("/api/exports/?dataset_format=csv")
    assert refused.status_code == 400 and refused.json()["error"]["status"] == 400


def test_tokens_need_the_datasets_scopes(world, project, token_client_for):
    users, queued, done = world
    body = {"project": project.pk, "kind": "sft"}
    reader, _ = token_client_for(users["engineer"], ["datasets:read"])
    writer, _ = token_client_for(users["engineer"], ["datasets:write"])
    other, _ = token_client_for(users["engineer"], ["tasks:write", "episodes:read"])
    download = f"/api/exports/{done.pk}/download/?file=manifest.json"

    assert reader.get("/api/exports/").status_code == 200
    assert reader.get(download).status_code == 200
    assert reader.post("/api/exports/", body, format="json").status_code == 403
    assert reader.post(f"/api/exports/{queued.pk}/cancel/").status_code == 403
    assert other.get("/api/exports/").status_code == 403
    assert writer.post("/api/exports/", body, format="json").status_code == 201
    assert writer.post(f"/api/exports/{queued.pk}/cancel/").status_code == 200


def test_a_succeeded_export_lists_its_files_with_download_urls(world, client_for):
    users, _, done = world
    export = client_for(users["manager"]).get(f"/api/exports/{done.pk}/").json()
    (entry,) = export["files"]
    assert entry["name"] == "manifest.json" and entry["size"] == len(MANIFEST)
    assert entry["download_url"].endswith(f"/api/exports/{done.pk}/download/?file=manifest.json")
    response = client_for(users["manager"]).get(entry["download_url"])
    assert b"".join(response.streaming_content) == MANIFEST


BAD_CREATES = [
    ({"kind": "rlhf"}, "kind"),
    ({"format": "csv"}, "format"),
    ({"filters": {"date_from": "yesterday"}}, "filters"),
    ({"filters": {"date_to": "2026-02-30"}}, "filters"),
    ({"filters": {"review_status": "maybe"}}, "filters"),
    ({"filters": {"colour": "blue"}}, "filters"),
    ({"filters": {"include_accepted": "perhaps"}}, "filters"),
    ({"project": "x"}, "project"),
]


@pytest.mark.parametrize(("change", "field"), BAD_CREATES)
def test_bad_input_to_create_is_refused_with_its_field(world, project, client_for, change, field):
    users, _, _ = world
    before = DatasetExport.objects.count()
    body = {"project": project.pk, "kind": "sft", "format": "trl", **change}
    response = client_for(users["engineer"]).post("/api/exports/", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["details"]
    assert DatasetExport.objects.count() == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"filters": {"annotator": "nobody"}}, "No annotator named 'nobody'"),
        (
            {"filters": {"date_from": "2026-05-02", "date_to": "2026-05-01"}},
            "date_from must be before date_to",
        ),
        ({"kind": "ct", "format": "llama_factory"}, "LLaMA-Factory exports are SFT or DPO"),
    ],
)
def test_filters_that_cannot_be_met_are_refused(world, project, client_for, change, message):
    users, _, _ = world
    before = DatasetExport.objects.count()
    body = {"project": project.pk, "kind": "sft", "format": "trl", **change}
    response = client_for(users["engineer"]).post("/api/exports/", body, format="json")
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]
    assert DatasetExport.objects.count() == before


def test_an_unknown_project_is_not_found(world, client_for):
    users, _, _ = world
    body = {"project": 999_999, "kind": "sft"}
    response = client_for(users["engineer"]).post("/api/exports/", body, format="json")
    assert response.status_code == 404


def test_cancelling_a_finished_export_is_a_conflict(world, client_for):
    users, _, done = world
    response = client_for(users["engineer"]).post(f"/api/exports/{done.pk}/cancel/")
    assert response.status_code == 409
    assert "already succeeded" in response.json()["error"]["message"]
    done.refresh_from_db()
    assert done.status == "succeeded" and done.files


def test_downloads_of_unknown_files_and_unfinished_exports_are_refused(world, client_for):
    users, queued, done = world
    client = client_for(users["engineer"])
    unknown = client.get(f"/api/exports/{done.pk}/download/?file=../../secret.txt")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["details"] == {"files": ["manifest.json"]}
    unfinished = client.get(f"/api/exports/{queued.pk}/download/?file=manifest.json")
    assert unfinished.status_code == 409
    assert "queued" in unfinished.json()["error"]["message"]
    unnamed = client.get(f"/api/exports/{done.pk}/download/")
    assert unnamed.status_code == 400
    queued.refresh_from_db()
    assert queued.status == "queued"


def test_a_succeeded_export_downloads_whole_as_one_tar(world, client_for):
    users, queued, done = world
    image = b"\x89PNG fake image bytes" * 100
    default_storage.save(f"exports/{done.pk}/images/ab.png", ContentFile(image))
    done.files = [*done.files, {"name": "images/ab.png", "size": len(image), "sha256": "1" * 64}]
    done.save(update_fields=["files"])
    response = client_for(users["manager"]).get(f"/api/exports/{done.pk}/archive/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-tar"
    data = b"".join(response.streaming_content)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        folder = f"export-{done.pk}-dpo-{done.format}"
        assert archive.getnames() == [f"{folder}/manifest.json", f"{folder}/images/ab.png"]
        assert archive.extractfile(f"{folder}/manifest.json").read() == MANIFEST
        assert archive.extractfile(f"{folder}/images/ab.png").read() == image
    unfinished = client_for(users["manager"]).get(f"/api/exports/{queued.pk}/archive/")
    assert unfinished.status_code == 409
