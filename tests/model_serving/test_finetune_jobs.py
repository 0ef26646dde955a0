"""Fine-tuning jobs through the API and the job's own function, on the CPU with a tiny
Qwen2.5-VL built locally: SFT then DPO on exports of episodes recorded through the live loop,
the registered version and its lineage, and jobs that must fail cleanly.

The job's body (``model_serving.finetune.run_job``) is what the ``train`` worker runs; here it is
called in this process, inside the test's transaction (so nothing reaches a broker).
``test_finetune_worker`` runs it on a real Celery worker. Storage is local files, and S3 (moto's
server) in one test."""

import json
from datetime import timedelta

import boto3
import datasets
import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.utils import timezone
from safetensors import safe_open

from annotation.models import DatasetExport, Episode
from backend.accounts.roles import Role
from backend.attempts import AttemptAlive
from model_serving import finetune
from model_serving.evaluation import is_held_out
from model_serving.models import FineTuneJob, ModelVersion
from model_serving.serving import serve_version
from tests.annotation.datasets.test_datasets_pairs import recorded  # noqa: F401  (a fixture)
from tests.support.export_data import make_episodes
from tests.support.fake_model_server import serving
from tests.support.finetune_data import LORA, STEPS, built_export
from tests.vm_pool.test_storage_s3 import CREDENTIALS, s3_endpoint, s3_storage  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    settings.TANDEM_HELD_OUT_SHARE = 0.0
    return settings


@pytest.fixture
def engineer(make_user, project, token_client_for):
    user = make_user("erin", project, Role.ENGINEER)
    client, _ = token_client_for(user, ["models:write", "datasets:read"])
    return user, client


def job_body(exports, base_model, name="ui-tars-ft-1", **extra):
    return {
        "exports": [e.pk for e in exports],
        "base_model": str(base_model),
        "version_name": name,
        "base_url": "http://vllm.internal:8000/v1",
        "lora": LORA,
        "hyperparameters": STEPS,
        **extra,
    }


def test_sft_then_dpo_on_recorded_episodes_registers_a_version_with_its_lineage(
    media,
    loop_settings,
    recorded,  # noqa: F811
    project,
    engineer,
    base_model,
):
    user, client = engineer
    sft = built_export(project, user, "sft")
    dpo = built_export(project, user, "dpo")

    created = client.post("/api/finetune-jobs/", job_body([sft, dpo], base_model), format="json")
    assert created.status_code == 201, created.json()
    job = created.json()
    # The request only recorded and queued the job.
    assert (job["status"], job["progress"], job["model_version"]) == ("queued", 0.0, None)
    assert [s["kind"] for s in job["stages"]] == ["sft", "dpo"]
    assert job["stages"][0]["dataset"]["files"] == sft.files

    assert finetune.run_job(job["id"]) == "succeeded"

    job = client.get(f"/api/finetune-jobs/{job['id']}/").json()
    assert (job["status"], job["progress"], job["error"]) == ("succeeded", 1.0, "")
    assert [(p["stage"], p["kind"], p["step"]) for p in job["loss_curve"]] == [
        (1, "sft", 1),
        (1, "sft", 2),
        (2, "dpo", 1),
        (2, "dpo", 2),
    ]
    assert all(p["loss"] > 0 for p in job["loss_curve"])
    assert "registered model version ui-tars-ft-1" in job["logs"]
    version = ModelVersion.objects.get(name="ui-tars-ft-1")
    assert job["model_version"] == {"id": version.pk, "name": "ui-tars-ft-1"}
    assert version.job_id == job["id"] and version.base_model == str(base_model)
    assert version.base_url == "http://vllm.internal:8000/v1"
    assert [d["export_id"] for d in version.lineage["datasets"]] == [sft.pk, dpo.pk]
    assert version.lineage["datasets"][1]["files"] == dpo.files
    assert version.lineage["datasets"][1]["content_hash"] == dpo.content_hash
    assert [s["kind"] for s in version.lineage["stages"]] == ["sft", "dpo"]
    assert version.lineage["libraries"]["trl"].startswith("1.")

    # The adapter, the training record and the run record are in storage.
    folders, files = default_storage.listdir(version.adapter_location)
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(files)
    weights = default_storage.path(f"{version.adapter_location}/adapter_model.safetensors")
    with safe_open(weights, "pt") as adapter:
        tensors = list(adapter.keys())
    # The language model's q and v projections, both layers, A and B; nothing of the vision
    # tower (vLLM would refuse it), nothing of DPO's frozen reference copy.
    assert len(tensors) == 2 * 2 * 2
    assert all(".language_model.layers." in name and ".ref." not in name for name in tensors)
    with default_storage.open(f"{version.adapter_location}/tandem_training.json") as f:
        training = json.load(f)
    assert training["stages"][1]["arguments"]["beta"] == 0.1
    assert training["stages"][0]["arguments"]["max_length"] is None
    with default_storage.open(version.lineage["run"]) as f:
        run = json.load(f)
    assert run["datasets"] == [s["dataset"] for s in job["stages"]]
    assert set(run["libraries"]) >= {"torch", "transformers", "trl", "peft"}


@pytest.fixture
def synthetic(media, project, make_user):
    annotator = make_user("ann", project, Role.ANNOTATOR)
    make_episodes(project, annotator, episodes=2, steps=4)
    return project


def test_a_dataset_damaged_after_export_fails_the_job_and_registers_nothing(
    synthetic, engineer, base_model
):
    user, client = engineer
    sft = built_export(synthetic, user, "sft")
    job = client.post("/api/finetune-jobs/", job_body([sft], base_model), format="json").json()
    shard = next(f["name"] for f in sft.files if f["name"].endswith(".parquet"))
    default_storage.delete(f"{sft.location}{shard}")
    default_storage.save(f"{sft.location}{shard}", ContentFile(b"not parquet"))

    assert finetune.run_job(job["id"]) == "failed"

    job = FineTuneJob.objects.get(pk=job["id"])
    assert job.status == "failed"
    assert f"export {sft.pk}: {shard} has sha256" in job.error
    assert not ModelVersion.objects.exists()


def test_an_empty_dataset_fails_the_job_with_the_reason(synthetic, engineer, base_model):
    user, client = engineer
    empty = built_export(synthetic, user, "dpo", model_version="no-such-version")
    assert empty.counts["samples"] == 0
    job = client.post("/api/finetune-jobs/", job_body([empty], base_model), format="json").json()

    assert finetune.run_job(job["id"]) == "failed"

    job = FineTuneJob.objects.get(pk=job["id"])
    assert job.error == f"export {empty.pk} (dpo) has no rows to train on"
    assert not ModelVersion.objects.exists()


def test_a_dataset_with_held_out_episodes_is_never_trained_on(
    synthetic, engineer, base_model, settings
):
    user, client = engineer
    sft = built_export(synthetic, user, "sft")
    job = client.post("/api/finetune-jobs/", job_body([sft], base_model), format="json").json()
    settings.TANDEM_HELD_OUT_SHARE = 1.0  # every episode is held out

    assert finetune.run_job(job["id"]) == "failed"

    job = FineTuneJob.objects.get(pk=job["id"])
    assert f"export {sft.pk} holds episodes of held-out tasks" in job.error
    assert not ModelVersion.objects.exists()


def test_a_base_model_that_does_not_load_fails_the_job(synthetic, engineer, tmp_path):
    user, client = engineer
    sft = built_export(synthetic, user, "sft")
    body = job_body([sft], tmp_path / "nothing-here")
    job = client.post("/api/finetune-jobs/", body, format="json").json()

    assert finetune.run_job(job["id"]) == "failed"

    assert "cannot load the base model" in FineTuneJob.objects.get(pk=job["id"]).error
    assert not ModelVersion.objects.exists()


def test_a_queued_job_is_cancelled_at_once_and_never_runs(synthetic, engineer, base_model):
    user, client = engineer
    sft = built_export(synthetic, user, "sft")
    job = client.post("/api/finetune-jobs/", job_body([sft], base_model), format="json").json()

    cancelled = client.post(f"/api/finetune-jobs/{job['id']}/cancel/")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    assert finetune.run_job(job["id"]) == "skipped"
    again = client.post(f"/api/finetune-jobs/{job['id']}/cancel/")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "finetune_conflict"


# --- what the API refuses, with nothing written ---------------------------------------------


def refused(client, body, status, code):
    response = client.post("/api/finetune-jobs/", body, format="json")
    assert response.status_code == status, response.json()
    assert response.json()["error"]["code"] == code
    assert not FineTuneJob.objects.exists()
    return response.json()["error"]["message"]


def test_exports_that_cannot_be_trained_on_are_refused(synthetic, engineer, base_model):
    user, client = engineer
    queued = DatasetExport.objects.create(project=synthetic, kind="sft", created_by=user)
    ct = built_export(synthetic, user, "ct")
    factory = built_export(synthetic, user, "sft", fmt="llama_factory")
    message = refused(client, job_body([queued], base_model), 400, "dataset_not_usable")
    assert message == (
        f"dataset export {queued.pk} cannot be trained on: it is queued, not succeeded"
    )
    message = refused(client, job_body([ct], base_model), 400, "dataset_not_usable")
    assert "it is a ct dataset" in message
    message = refused(client, job_body([factory], base_model), 400, "dataset_not_usable")
    assert "llama_factory format" in message
    with_held_out = built_export(synthetic, user, "sft", exclude_held_out=False)
    message = refused(client, job_body([with_held_out], base_model), 400, "dataset_not_usable")
    assert "may hold held-out episodes" in message and "exclude_held_out" in message
    body = job_body([], base_model)
    assert client.post("/api/finetune-jobs/", body, format="json").status_code == 400


def test_unknown_base_models_taken_names_and_bad_settings_are_refused(
    synthetic, engineer, base_model, settings
):
    user, client = engineer
    settings.TANDEM_BASE_MODELS = {"ui-tars-1.5-7b": "/models/UI-TARS-1.5-7B"}
    sft = built_export(synthetic, user, "sft")
    message = refused(client, job_body([sft], "ui-tars-2"), 400, "finetune_rejected")
    assert "unknown base model 'ui-tars-2'" in message and "ui-tars-1.5-7b" in message
    message = refused(
        client, job_body([sft], base_model, lora={"rank": 8}), 400, "finetune_rejected"
    )
    assert "unknown LoRA settings: rank" in message
    bad = job_body([sft], base_model, hyperparameters={"learning_rate": 0})
    assert "learning_rate" in refused(client, bad, 400, "finetune_rejected")
    for settings_of, message in [
        ({"hyperparameters": {"learning_rate": "1e-4"}}, "learning_rate must be a finite number"),
        ({"hyperparameters": {"epochs": None}}, "epochs must be a finite number, not None"),
        ({"hyperparameters": {"max_steps": True}}, "max_steps must be a whole number, not True"),
        ({"lora": {"r": "16"}}, "LoRA setting r must be a whole number, not '16'"),
        ({"lora": {"target_modules": 5}}, "target_modules must be a list of names, not 5"),
    ]:
        wrong = job_body([sft], base_model, **settings_of)
        assert message in refused(client, wrong, 400, "finetune_rejected")
        if "hyperparameters" in settings_of:  # what the estimate reads
            estimate = client.post("/api/finetune-jobs/estimate/", wrong, format="json")
            assert estimate.status_code == 400 and message in estimate.json()["error"]["message"]
    ModelVersion.objects.create(name="ui-tars-ft-1", base_model="b", base_url="http://x/v1")
    refused(client, job_body([sft], base_model), 409, "finetune_conflict")
    # Two live jobs for one version cannot both be stored, whatever raced past the check; a
    # failed or cancelled one leaves the name free.
    live = {"base_model": "b", "base_model_path": "/b", "stages": [], "version_name": "v-2"}
    FineTuneJob.objects.create(**live, status="failed")
    FineTuneJob.objects.create(**live)
    with pytest.raises(IntegrityError), transaction.atomic():
        FineTuneJob.objects.create(**live, status="running")
    FineTuneJob.objects.filter(version_name="v-2").delete()

    body = job_body([sft], "ui-tars-1.5-7b", name="ft-2")
    named = client.post("/api/finetune-jobs/", body, format="json")
    assert FineTuneJob.objects.get(pk=named.json()["id"]).base_model_path == (
        "/models/UI-TARS-1.5-7B"
    )


def test_a_version_answers_in_the_coordinate_convention_its_datasets_were_written_in(
    synthetic, engineer, base_model
):
    user, client = engineer
    absolute = built_export(synthetic, user, "sft")
    synthetic.model_version = ModelVersion.objects.create(
        name="ui-tars-1.0-ft", base_model=str(base_model), coordinate_style="relative1000"
    )
    synthetic.save(update_fields=["model_version"])
    relative = built_export(synthetic, user, "sft")
    assert (absolute.coordinate_style, relative.coordinate_style) == ("uitars15", "relative1000")

    message = refused(client, job_body([absolute, relative], base_model), 400, "finetune_rejected")
    assert message == (
        "the datasets write coordinates in different conventions "
        f"(export {absolute.pk} in uitars15, export {relative.pk} in relative1000); "
        "one model answers in one"
    )
    on_parent = job_body([absolute], base_model, parent_version="ui-tars-1.0-ft")
    message = refused(client, on_parent, 400, "finetune_rejected")
    assert message.startswith("the datasets write coordinates in uitars15, but ui-tars-1.0-ft")

    created = client.post("/api/finetune-jobs/", job_body([relative], base_model), format="json")
    assert created.status_code == 201, created.json()
    assert finetune.run_job(created.json()["id"]) == "succeeded"
    assert ModelVersion.objects.get(name="ui-tars-ft-1").coordinate_style == "relative1000"


def test_the_deployments_base_models_and_the_default_settings_are_listed_by_name(
    project, engineer, make_user, client_for, token_client_for, settings
):
    user, _ = engineer
    settings.TANDEM_BASE_MODELS = {"ui-tars-1.5-7b": "/models/7B", "tiny": "/models/tiny"}
    # A base already served (its version without an adapter) offers its endpoint for new
    # versions; one only registered does not.
    ModelVersion.objects.create(
        name="tiny", base_model="tiny", base_url="http://demo:8100/v1", serving_status="serving"
    )
    ModelVersion.objects.create(name="7b", base_model="ui-tars-1.5-7b", base_url="http://x/v1")
    reader, _ = token_client_for(user, ["models:read"])
    listed = reader.get("/api/finetune-jobs/base-models/")

    assert listed.status_code == 200
    body = listed.json()
    assert body["base_models"] == [
        {"name": "tiny", "endpoint": "http://demo:8100/v1"},
        {"name": "ui-tars-1.5-7b", "endpoint": ""},
    ]
    assert "/models/7B" not in json.dumps(body)  # where the GPU hosts keep them is not shown
    assert body["defaults"]["lora"]["r"] == 16
    assert body["defaults"]["lora"]["target_modules"][:2] == ["q_proj", "k_proj"]
    assert body["defaults"]["hyperparameters"]["learning_rate"] == 1e-4
    assert body["defaults"]["hyperparameters"]["max_steps"] == -1
    manager = client_for(make_user("mia", project, Role.MANAGER))
    assert manager.get("/api/finetune-jobs/base-models/").status_code == 200
    annotator = client_for(make_user("ann2", project, Role.ANNOTATOR))
    assert annotator.get("/api/finetune-jobs/base-models/").status_code == 403
    wrong_scope, _ = token_client_for(user, ["datasets:read"])
    assert wrong_scope.get("/api/finetune-jobs/base-models/").status_code == 403


def test_who_may_create_read_and_cancel_jobs(
    synthetic, engineer, base_model, make_user, client_for, token_client_for, other_project
):
    user, client = engineer
    sft = built_export(synthetic, user, "sft")
    annotator = client_for(make_user("ann2", synthetic, Role.ANNOTATOR))
    outsider = client_for(make_user("otto", other_project, Role.ENGINEER))
    manager = client_for(make_user("mia", synthetic, Role.MANAGER))
    reader, _ = token_client_for(user, ["models:read"])
    wrong_scope, _ = token_client_for(user, ["datasets:write"])
    body = job_body([sft], base_model)

    assert annotator.post("/api/finetune-jobs/", body, format="json").status_code == 403
    assert outsider.post("/api/finetune-jobs/", body, format="json").status_code == 404
    assert manager.post("/api/finetune-jobs/", body, format="json").status_code == 403
    assert reader.post("/api/finetune-jobs/", body, format="json").status_code == 403
    assert wrong_scope.post("/api/finetune-jobs/", body, format="json").status_code == 403
    assert not FineTuneJob.objects.exists()

    job = client.post("/api/finetune-jobs/", body, format="json").json()
    assert [j["id"] for j in manager.get("/api/finetune-jobs/").json()["results"]] == [job["id"]]
    assert reader.get(f"/api/finetune-jobs/{job['id']}/").status_code == 200
    assert outsider.get("/api/finetune-jobs/").json()["results"] == []
    assert outsider.get(f"/api/finetune-jobs/{job['id']}/").status_code == 404
    assert annotator.get("/api/finetune-jobs/").json()["results"] == []
    assert manager.post(f"/api/finetune-jobs/{job['id']}/cancel/").status_code == 403
    assert FineTuneJob.objects.get(pk=job["id"]).status == "queued"


# --- attempts, parents ----------------------------------------------------------------------


def test_a_redelivered_job_waits_for_a_live_attempt_and_takes_over_a_dead_one(
    synthetic, engineer, base_model, settings
):
    user, client = engineer
    sft = built_export(synthetic, user, "sft")
    job = client.post("/api/finetune-jobs/", job_body([sft], base_model), format="json").json()
    # A worker started the job, and is still beating.
    FineTuneJob.objects.filter(pk=job["id"]).update(
        status="running", attempt=1, heartbeat_at=timezone.now()
    )
    with pytest.raises(AttemptAlive):
        finetune.run_job(job["id"])
    assert FineTuneJob.objects.get(pk=job["id"]).attempt == 1

    # Its worker died: the heartbeat is older than the stale limit.
    stale = timezone.now() - timedelta(seconds=settings.TANDEM_FINETUNE_STALE_SECONDS + 1)
    FineTuneJob.objects.filter(pk=job["id"]).update(heartbeat_at=stale)
    assert finetune.run_job(job["id"]) == "succeeded"

    row = FineTuneJob.objects.get(pk=job["id"])
    assert (row.attempt, row.artifacts_location) == (2, f"finetune/job-{row.pk}/attempt-2")
    assert ModelVersion.objects.get().adapter_location.startswith(row.artifacts_location)


def test_an_attempt_that_was_taken_over_stops_reporting():
    job = FineTuneJob.objects.create(
        base_model="b", base_model_path="/b", stages=[], version_name="v", status="running"
    )
    job.attempt = 1
    FineTuneJob.objects.filter(pk=job.pk).update(attempt=1)
    reporter = finetune._JobReporter(job)
    reporter.progress(0.5)
    assert not reporter.cancelled()
    FineTuneJob.objects.filter(pk=job.pk).update(attempt=2, progress=0.1)
    reporter.progress(0.9)
    reporter.finish("failed", "late")
    assert reporter.cancelled()
    row = FineTuneJob.objects.get(pk=job.pk)
    assert (row.progress, row.status, row.error) == (0.1, "running", "")


def test_a_job_can_continue_a_parent_versions_adapter(synthetic, engineer, base_model):
    user, client = engineer
    sft = built_export(synthetic, user, "sft")
    dpo = built_export(synthetic, user, "dpo")
    first = client.post("/api/finetune-jobs/", job_body([sft], base_model), format="json")
    assert finetune.run_job(first.json()["id"]) == "succeeded"
    parent = ModelVersion.objects.get(name="ui-tars-ft-1")

    body = {
        "exports": [dpo.pk],
        "parent_version": "ui-tars-ft-1",
        "version_name": "ui-tars-ft-2",
        "hyperparameters": STEPS,
    }
    second = client.post("/api/finetune-jobs/", body, format="json").json()
    assert second["base_model_path"] == str(base_model)
    assert finetune.run_job(second["id"]) == "succeeded"

    child = ModelVersion.objects.get(name="ui-tars-ft-2")
    assert child.parent == parent and child.base_url == parent.base_url
    assert child.lineage["parent"] == "ui-tars-ft-1"
    assert "continuing the adapter of ui-tars-ft-1" in FineTuneJob.objects.get(pk=second["id"]).logs
    with default_storage.open(f"{child.adapter_location}/adapter_config.json") as f:
        assert json.load(f)["r"] == LORA["r"]  # the parent's adapter, trained further


def test_version_names_that_cannot_name_an_adapter_folder_are_refused(
    synthetic, engineer, base_model
):
    user, client = engineer
    sft = built_export(synthetic, user, "sft")
    for name in ("../escape", "a/b", "a..b"):
        response = client.post(
            "/api/finetune-jobs/", job_body([sft], base_model, name=name), format="json"
        )
        assert response.status_code == 400, name
    assert not FineTuneJob.objects.exists()


def test_a_job_cancelled_while_its_worker_was_gone_is_not_restarted(
    synthetic, engineer, base_model, settings
):
    user, client = engineer
    sft = built_export(synthetic, user, "sft")
    job = client.post("/api/finetune-jobs/", job_body([sft], base_model), format="json").json()
    stale = timezone.now() - timedelta(seconds=settings.TANDEM_FINETUNE_STALE_SECONDS + 1)
    FineTuneJob.objects.filter(pk=job["id"]).update(status="running", attempt=1, heartbeat_at=stale)
    assert client.post(f"/api/finetune-jobs/{job['id']}/cancel/").status_code == 200

    assert finetune.run_job(job["id"]) == "skipped"

    row = FineTuneJob.objects.get(pk=job["id"])
    assert (row.status, row.attempt) == ("cancelled", 1)
    assert row.error == "cancelled while no worker was running it"


@pytest.mark.services
def test_on_s3_storage_a_trained_adapter_is_stored_in_the_bucket_and_served_from_it(
    s3_storage,  # noqa: F811
    synthetic,
    engineer,
    base_model,
    settings,
    tmp_path,
):
    user, client = engineer
    settings.TANDEM_ADAPTER_DIR = settings.TANDEM_VLLM_ADAPTER_DIR = str(tmp_path / "adapters")
    sft = built_export(synthetic, user, "sft")
    with serving(model="ui-tars-1.5-7b") as server:
        body = job_body([sft], base_model, base_url=server.base_url)
        job = client.post("/api/finetune-jobs/", body, format="json").json()
        assert finetune.run_job(job["id"]) == "succeeded"
        version = serve_version(ModelVersion.objects.get(name="ui-tars-ft-1"))

    bucket = boto3.client("s3", endpoint_url=s3_storage, region_name="us-east-1", **CREDENTIALS)
    keys = {o["Key"] for o in bucket.list_objects_v2(Bucket="tandem")["Contents"]}
    prefix = f"finetune/job-{job['id']}/attempt-1"
    assert {f"{prefix}/adapter/adapter_model.safetensors", f"{prefix}/run.json"} <= keys
    assert version.serving_status == "serving"
    assert server.adapters == {"ui-tars-ft-1": str(tmp_path / "adapters" / "ui-tars-ft-1")}
    stored = bucket.get_object(Bucket="tandem", Key=f"{prefix}/adapter/adapter_model.safetensors")
    loaded = tmp_path / "adapters" / "ui-tars-ft-1" / "adapter_model.safetensors"
    assert loaded.read_bytes() == stored["Body"].read()


def task_of(episode_ids: list[int]) -> dict[int, int]:
    return dict(Episode.objects.filter(pk__in=episode_ids).values_list("pk", "task_id"))


def test_an_export_without_the_held_out_split_trains_on_the_other_episodes_only(
    media, project, make_user, engineer, base_model, settings
):
    user, client = engineer
    settings.TANDEM_HELD_OUT_SHARE = 0.5
    annotator = make_user("ann", project, Role.ANNOTATOR)
    ids: list[int] = []
    # Task ids come from the database; more are recorded until both sides of the split hold
    # some (16 at one half almost always do).
    while len(ids) < 160 and len({is_held_out(t) for t in task_of(ids).values()}) < 2:
        ids += make_episodes(project, annotator, episodes=16, steps=2)
    kept = {i for i, task in task_of(ids).items() if not is_held_out(task)}
    assert kept and kept != set(ids)
    sft = built_export(project, user, "sft")

    rows = datasets.load_dataset(
        "parquet", data_files=default_storage.path(f"{sft.location}data/*.parquet"), split="train"
    )
    assert set(rows["episode_id"]) == kept
    job = client.post("/api/finetune-jobs/", job_body([sft], base_model), format="json").json()
    assert finetune.run_job(job["id"]) == "succeeded"
