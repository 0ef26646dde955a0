"""Fine-tuning jobs on a real Celery worker that consumes only the ``train`` queue, as the GPU
worker of docker-compose does: the API queues the job and returns; the worker moves it through
its states and registers the version; a cancel stops a running job between two steps.

Rows are committed (``transaction=True``), so the API's message really goes to the broker. The
jobs go to a queue of this module's own (``TANDEM_TRAIN_QUEUE``; ``train`` in a deployment, as
the last test checks), so that no other worker on this machine takes them."""

import io
import json
import socket
import time
import uuid

import pytest
import redis
from django.core.management import call_command

from backend.accounts.roles import Role
from backend.celery import app as celery_app
from model_serving.demo_model import save_demo_base
from model_serving.models import FineTuneJob, ModelVersion
from tests.support.export_data import make_episodes
from tests.support.finetune_data import LORA, STEPS, built_export
from tests.support.services import celery_worker, child_env, running

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

QUEUE = f"train-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def shared_media(tmp_path_factory):
    return tmp_path_factory.mktemp("train-media")


@pytest.fixture
def storage(settings, tmp_path, shared_media):
    settings.MEDIA_ROOT = shared_media  # the worker's storage too
    settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    settings.TANDEM_HELD_OUT_SHARE = 0.0
    settings.TANDEM_TRAIN_QUEUE = QUEUE
    return settings


@pytest.fixture(scope="module")
def train_worker(django_db_setup, shared_media):
    """One worker for the module, as a GPU host runs it: the `train` queue only, one job at a
    time, on the test database."""
    name = f"{QUEUE}@{socket.gethostname()}"
    command = celery_worker(name, QUEUE)
    env = child_env(TANDEM_MEDIA_ROOT=str(shared_media), TANDEM_HELD_OUT_SHARE="0")

    def ready() -> bool:
        return bool(celery_app.control.ping(destination=[name], timeout=0.5))

    with running(command, env, ready, timeout=90):
        yield name


@pytest.fixture
def datasets_and_client(storage, project, make_user, token_client_for, tmp_path):
    engineer = make_user("erin", project, Role.ENGINEER)
    make_episodes(project, make_user("ann", project, Role.ANNOTATOR), episodes=2, steps=4)
    sft = built_export(project, engineer, "sft")
    dpo = built_export(project, engineer, "dpo")
    client, _ = token_client_for(engineer, ["models:write"])
    return sft, dpo, client, save_demo_base(tmp_path / "base")


def wait_for(job_id: int, statuses: set[str], timeout: float = 120) -> tuple[FineTuneJob, list]:
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = FineTuneJob.objects.get(pk=job_id)
        if not seen or seen[-1] != job.status:
            seen.append(job.status)
        if job.status in statuses:
            return job, seen
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} stayed {seen[-1]}: {FineTuneJob.objects.get(pk=job_id)}")


def test_the_api_only_queues_the_job_for_a_train_worker(datasets_and_client, settings):
    sft, dpo, client, base = datasets_and_client
    settings.TANDEM_TRAIN_QUEUE = idle = f"{QUEUE}-idle"  # no worker consumes it
    body = {"exports": [sft.pk], "base_model": str(base), "version_name": "queued-only"}
    job = client.post("/api/finetune-jobs/", body, format="json").json()

    # The web process wrote the row and sent one message to the train queue; nothing ran.
    row = FineTuneJob.objects.get(pk=job["id"])
    assert (row.status, row.progress, row.attempt, row.started_at) == ("queued", 0.0, 0, None)
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    key = settings.INSTANCE_KEY_PREFIX  # the instance's queues are kept under its prefix
    messages = [json.loads(m) for m in broker.lrange(key + idle, 0, -1)]
    ours = [
        m
        for m in messages
        if m["headers"]["task"] == "model_serving.jobs.run_finetune_job"
        and m["headers"]["argsrepr"] == f"[{job['id']}]"
    ]
    assert len(ours) == 1
    broker.delete(key + idle)
    assert not any(
        m["headers"]["task"] == "model_serving.jobs.run_finetune_job"
        for queue in ("default", "exports", "model", "desktops")
        for m in map(json.loads, broker.lrange(key + queue, 0, -1))
    )


def test_a_worker_on_the_train_queue_runs_the_job_through_its_states(
    datasets_and_client, train_worker
):
    sft, dpo, client, base = datasets_and_client
    body = {
        "exports": [sft.pk, dpo.pk],
        "base_model": str(base),
        "version_name": "ui-tars-ft-worker",
        "lora": LORA,
        "hyperparameters": STEPS,
    }
    created = client.post("/api/finetune-jobs/", body, format="json").json()
    assert created["status"] == "queued"

    job, seen = wait_for(created["id"], {"succeeded", "failed", "cancelled"})

    assert job.status == "succeeded", job.error
    assert seen[-2:] == ["running", "succeeded"]
    assert len(job.loss_curve) == 4 and job.progress == 1.0 and job.attempt == 1
    version = ModelVersion.objects.get(name="ui-tars-ft-worker")
    assert version.job_id == job.pk
    assert [d["export_id"] for d in version.lineage["datasets"]] == [sft.pk, dpo.pk]


def test_cancel_stops_a_running_job_between_steps_and_registers_nothing(
    datasets_and_client, train_worker
):
    sft, dpo, client, base = datasets_and_client
    body = {
        "exports": [sft.pk],
        "base_model": str(base),
        "version_name": "never-registered",
        "lora": LORA,
        "hyperparameters": {**STEPS, "max_steps": 100_000},
    }
    created = client.post("/api/finetune-jobs/", body, format="json").json()
    deadline = time.monotonic() + 120
    while not FineTuneJob.objects.get(pk=created["id"]).loss_curve:
        assert time.monotonic() < deadline, "the job never trained a step"
        time.sleep(0.05)

    cancelled = client.post(f"/api/finetune-jobs/{created['id']}/cancel/")
    assert cancelled.status_code == 200
    assert cancelled.json()["cancel_requested"] is True

    job, _ = wait_for(created["id"], {"succeeded", "failed", "cancelled"}, timeout=60)
    assert job.status == "cancelled"
    assert job.error == "cancelled during stage 1"
    assert 0 < len(job.loss_curve) < 100_000 and job.progress < 1
    assert not ModelVersion.objects.exists()


def test_the_finetune_command_queues_a_job_and_follows_it_to_its_version(
    datasets_and_client, train_worker
):
    sft, dpo, _, base = datasets_and_client
    out = io.StringIO()
    call_command(
        "finetune",
        "--user",
        "erin",
        "--exports",
        str(sft.pk),
        str(dpo.pk),
        "--base-model",
        str(base),
        "--version-name",
        "ui-tars-ft-cli",
        "--lora",
        json.dumps(LORA),
        "--hyperparameters",
        json.dumps(STEPS),
        "--poll",
        "0.1",
        stdout=out,
    )
    printed = out.getvalue()
    job = FineTuneJob.objects.get()
    assert printed.startswith(f"fine-tuning job {job.pk} queued on the train queue")
    assert f"[{'#' * 30}] 100% succeeded loss " in printed
    assert printed.rstrip().endswith("registered model version ui-tars-ft-cli")
    assert ModelVersion.objects.get(name="ui-tars-ft-cli").job == job


def test_only_training_is_routed_to_the_train_queue_and_its_exchange():
    router = celery_app.amqp.router
    train = router.route({}, "model_serving.jobs.run_finetune_job", args=[1])["queue"]
    assert (train.name, train.exchange.name, train.routing_key) == ("train", "train", "train")
    for job, queue in {
        "model_serving.jobs.serve_model_version": "default",
        "annotation.jobs.evaluate_model_version": "exports",
        "annotation.jobs.build_export": "exports",
        "annotation.jobs.propose_step": "model",
        "vm_pool.jobs.check_all_hosts": "desktops",
    }.items():
        assert router.route({}, job, args=[1])["queue"].name == queue, job
