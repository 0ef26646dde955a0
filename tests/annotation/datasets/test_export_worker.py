"""Exports through real Celery workers (``celery worker`` subprocesses on a queue of the test's
own): a worker SIGKILLed in the middle of an export leaves nothing visible, and a new worker
completes the export exactly once; a running export is cancelled between chunks; the
``export_dataset`` command follows an export to its end and downloads it.

"The middle" is made reliable by ``TANDEM_EXPORT_RECORD_DELAY_MS`` in the workers' environment
(each record waits a little). The broker re-delivers an unacknowledged job after
``TANDEM_CELERY_VISIBILITY_TIMEOUT`` seconds (short here), and an attempt whose heartbeat is
older than ``TANDEM_EXPORT_STALE_SECONDS`` is taken over.
"""

import hashlib
import io
import os
import signal
import time
import uuid

import pytest
from django.core.management import CommandError, call_command

from annotation.datasets import exports
from annotation.models import DatasetExport
from backend.accounts.roles import Role
from backend.celery import app as celery_app
from tests.support.export_data import expected, make_episodes
from tests.support.services import celery_worker, child_env, running

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

EPISODES, STEPS = 30, 8


@pytest.fixture
def export_settings(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    settings.TANDEM_EXPORT_QUEUE = f"exports-test-{uuid.uuid4().hex[:8]}"
    return settings


def worker(settings, name: str):
    env = child_env(
        TANDEM_MEDIA_ROOT=str(settings.MEDIA_ROOT),
        TANDEM_EXPORT_STAGING_ROOT=str(settings.TANDEM_EXPORT_STAGING_ROOT),
        TANDEM_EXPORT_RECORD_DELAY_MS="40",
        TANDEM_EXPORT_STALE_SECONDS="2",
        TANDEM_CELERY_VISIBILITY_TIMEOUT="3",
    )
    node = f"{name}-{settings.TANDEM_EXPORT_QUEUE}@tandem"
    command = celery_worker(node, settings.TANDEM_EXPORT_QUEUE)

    def ready() -> bool:
        return bool(celery_app.control.ping(destination=[node], timeout=0.5))

    return running(command, env, ready, timeout=60)


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def row(export_id: int) -> DatasetExport:
    return DatasetExport.objects.get(pk=export_id)


def stored(export_id: int) -> list[str]:
    return sorted(exports._stored_names(exports.export_prefix(export_id)))


@pytest.fixture
def engineer_api(export_settings, project, make_user, client_for):
    make_episodes(project, make_user("ann", project, Role.ANNOTATOR), EPISODES, STEPS)
    return client_for(make_user("erin", project, Role.ENGINEER))


def test_a_worker_killed_mid_export_leaves_nothing_and_the_retry_finishes_once(
    engineer_api, export_settings, project
):
    body = {"project": project.pk, "kind": "sft", "format": "trl"}
    with worker(export_settings, "first") as process:
        export_id = engineer_api.post("/api/exports/", body, format="json").json()["id"]
        wait_for(lambda: row(export_id).progress >= 0.2)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    killed = row(export_id)
    assert (killed.status, killed.attempt, killed.files) == ("running", 1, [])
    assert 0.2 <= killed.progress < 0.9
    assert stored(export_id) == []
    staging = export_settings.TANDEM_EXPORT_STAGING_ROOT
    assert [p.name for p in staging.iterdir()] == [f"{export_id}-1"]  # the dead attempt's
    refused = engineer_api.get(f"/api/exports/{export_id}/download/?file=manifest.json")
    assert refused.status_code == 409

    with worker(export_settings, "second"):
        wait_for(lambda: row(export_id).status == "succeeded")
        time.sleep(4)  # past the visibility timeout: no further delivery builds it again
    done = row(export_id)
    assert done.attempt == 2
    assert done.counts["samples"] == EPISODES * expected(STEPS).sft
    names = [f["name"] for f in done.files]
    assert stored(export_id) == [f"exports/{export_id}/{n}" for n in names]
    assert list(staging.iterdir()) == []

    # Exactly the dataset an undisturbed run gives.
    again = engineer_api.post("/api/exports/", body, format="json").json()["id"]
    exports.build_export(again)
    assert row(again).content_hash == done.content_hash


def test_a_running_export_is_cancelled_between_chunks(engineer_api, export_settings, project):
    body = {"project": project.pk, "kind": "dpo", "format": "llama_factory"}
    with worker(export_settings, "only"):
        export_id = engineer_api.post("/api/exports/", body, format="json").json()["id"]
        wait_for(lambda: row(export_id).progress > 0)
        response = engineer_api.post(f"/api/exports/{export_id}/cancel/")
        assert response.status_code == 200 and response.json()["status"] == "cancelled"
        staging = export_settings.TANDEM_EXPORT_STAGING_ROOT
        wait_for(lambda: list(staging.iterdir()) == [], timeout=10)
    cancelled = row(export_id)
    assert cancelled.status == "cancelled" and cancelled.files == []
    assert cancelled.progress < 0.9
    assert stored(export_id) == []


def test_the_export_dataset_command_follows_the_job_and_downloads_its_files(
    engineer_api, export_settings, project, tmp_path
):
    out = io.StringIO()
    with worker(export_settings, "cli"):
        call_command(
            "export_dataset",
            user="erin",
            project=project.pk,
            kind="dpo",
            format="trl",
            review_status="unreviewed",
            out=str(tmp_path / "pulled"),
            poll=0.2,
            stdout=out,
        )
    export = DatasetExport.objects.get()
    assert export.status == "succeeded"
    printed = out.getvalue()
    assert f"export {export.pk} queued" in printed
    assert "[##############################] 100% succeeded" in printed
    assert "\r[" in printed and " running" in printed  # the bar moved while it ran
    for entry in export.files:
        data = (tmp_path / "pulled" / entry["name"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert f"{export.counts['samples']} samples in 2 files" in printed


def test_the_export_dataset_command_refuses_bad_requests(engineer_api, project, tmp_path):
    base = {"user": "erin", "project": project.pk, "out": str(tmp_path), "stdout": io.StringIO()}
    with pytest.raises(CommandError, match="Unknown kind 'rlhf'"):
        call_command("export_dataset", kind="rlhf", **base)
    with pytest.raises(CommandError, match="bad filters.*date_from"):
        call_command("export_dataset", kind="sft", date_from="soon", **base)
    with pytest.raises(CommandError, match="No annotator named 'nobody'"):
        call_command("export_dataset", kind="sft", annotator="nobody", **base)
    with pytest.raises(CommandError, match="may not do this"):
        call_command("export_dataset", kind="sft", **{**base, "user": "ann"})
    assert DatasetExport.objects.count() == 0
