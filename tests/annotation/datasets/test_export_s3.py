"""Exports on S3-compatible storage (django-storages + boto3 against moto's server): the job
reads screenshots from the bucket and publishes the dataset there; downloads are a redirect to
a presigned URL that serves the exact bytes."""

import hashlib
import urllib.request

import boto3
import pytest

from annotation.datasets import exports
from backend.accounts.roles import Role
from tests.support.export_data import expected, make_episodes
from tests.vm_pool.test_storage_s3 import CREDENTIALS, s3_endpoint, s3_storage  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def test_an_export_is_published_to_the_bucket_and_pulled_by_presigned_url(
    s3_storage,  # noqa: F811
    settings,
    tmp_path,
    project,
    make_user,
    client_for,
):
    settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    make_episodes(project, make_user("ann", project, Role.ANNOTATOR), episodes=3, steps=6)
    client = client_for(make_user("erin", project, Role.ENGINEER))
    body = {"project": project.pk, "kind": "dpo", "format": "trl"}
    export_id = client.post("/api/exports/", body, format="json").json()["id"]

    exports.build_export(export_id)

    export = client.get(f"/api/exports/{export_id}/").json()
    assert export["status"] == "succeeded", export["error"]
    assert export["counts"]["samples"] == 3 * expected(6).dpo
    s3 = boto3.client("s3", endpoint_url=s3_storage, region_name="us-east-1", **CREDENTIALS)
    listed = s3.list_objects_v2(Bucket="tandem", Prefix=f"exports/{export_id}/")["Contents"]
    keys = sorted(o["Key"] for o in listed)
    assert keys == [f"exports/{export_id}/{f['name']}" for f in export["files"]]
    assert list((tmp_path / "staging").iterdir()) == []

    for entry in export["files"]:
        response = client.get(entry["download_url"])
        assert response.status_code == 302
        url = response["Location"]
        assert url.startswith(s3_storage) and "Signature" in url
        assert "response-content-disposition=attachment" in url
        with urllib.request.urlopen(url) as pulled:  # noqa: S310  (the presigned URL)
            data = pulled.read()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert len(data) == entry["size"]
