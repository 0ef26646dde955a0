"""Screenshots through S3-compatible storage (django-storages + boto3 against moto's server)."""

import boto3
import pytest
from django.core.files.storage import default_storage

from tests.support.pngs import solid_png
from tests.support.services import BIN, free_port, port_open, running
from vm_pool.screen.screenshots import screenshot_path, store_screenshot

pytestmark = pytest.mark.services

CREDENTIALS = {"aws_access_key_id": "tandem", "aws_secret_access_key": "tandem-secret"}


@pytest.fixture
def s3_endpoint():
    port = free_port()
    command = [str(BIN / "moto_server"), "-p", str(port)]
    with running(command, {"PATH": str(BIN)}, port_open(port)):
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1", **CREDENTIALS
        ).create_bucket(Bucket="tandem")
        yield endpoint


@pytest.fixture
def s3_storage(settings, s3_endpoint):
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": "tandem",
                "endpoint_url": s3_endpoint,
                "region_name": "us-east-1",
                "access_key": CREDENTIALS["aws_access_key_id"],
                "secret_key": CREDENTIALS["aws_secret_access_key"],
                "file_overwrite": False,
            },
        },
    }
    return s3_endpoint


@pytest.mark.django_db
def test_screenshot_is_stored_once_in_the_bucket_under_its_hash(s3_storage):
    data = solid_png(1920, 1080)
    first = store_screenshot(data)
    second = store_screenshot(data)

    client = boto3.client("s3", endpoint_url=s3_storage, region_name="us-east-1", **CREDENTIALS)
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="tandem").get("Contents", [])]
    assert keys == [screenshot_path(first.sha256)]
    assert client.get_object(Bucket="tandem", Key=keys[0])["Body"].read() == data
    assert first.pk == second.pk and (first.width, first.height) == (1920, 1080)
    assert default_storage.url(first.file.name).startswith(s3_storage)
