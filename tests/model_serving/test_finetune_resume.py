"""A fine-tuning job whose worker is killed resumes from its last checkpoint and ends with the
adapter an uninterrupted run ends with.

A real Celery worker (the ``train`` queue's, on a queue of this module's own) runs an SFT then
DPO job that stores a checkpoint every step; the test kills the worker's process (SIGKILL,
as a lost GPU host would die) once the DPO stage has a checkpoint. The redelivered job then
runs as the broker would run it again, once the dead attempt's heartbeat is stale: a new
attempt, which resumes. The same job run without interruption gives the reference adapter."""

import os
import signal
import socket
import time
import uuid

import pytest
import torch
from django.core.files.storage import default_storage
from safetensors.torch import load

from annotation.flywheel.model_versions import training_stages
from backend.accounts.roles import Role
from backend.celery import app as celery_app
from model_serving import finetune
from model_serving.demo_model import save_demo_base
from model_serving.models import FineTuneJob, ModelVersion
from tests.support.export_data import make_episodes
from tests.support.finetune_data import LORA, built_export
from tests.support.services import celery_worker, child_env, running

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

QUEUE = f"train-resume-{uuid.uuid4().hex[:8]}"
STEPS = {"max_steps": 6, "batch_size": 1, "gradient_accumulation_steps": 1, "checkpoint_steps": 1}


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    settings.TANDEM_HELD_OUT_SHARE = 0.0
    settings.TANDEM_TRAIN_QUEUE = QUEUE
    return settings.MEDIA_ROOT


@pytest.fixture
def job_body(media, project, make_user, tmp_path):
    engineer = make_user("erin", project, Role.ENGINEER)
    make_episodes(project, make_user("ann", project, Role.ANNOTATOR), episodes=2, steps=4)
    sft = built_export(project, engineer, "sft")
    dpo = built_export(project, engineer, "dpo")
    base = save_demo_base(tmp_path / "base")

    def body(name: str) -> dict:
        stages, projects = training_stages(engineer, [sft.pk, dpo.pk])
        return {
            "stages": stages,
            "base_model": str(base),
            "version_name": name,
            "project_ids": projects,
            "created_by": engineer,
            "lora": LORA,
            "hyperparameters": STEPS,
        }

    return body


def adapter_of(version_name: str) -> dict[str, torch.Tensor]:
    location = ModelVersion.objects.get(name=version_name).adapter_location
    with default_storage.open(f"{location}/adapter_model.safetensors", "rb") as f:
        return load(f.read())


def test_a_job_whose_worker_is_killed_resumes_and_ends_with_the_uninterrupted_adapter(
    job_body, media, settings
):
    name = f"{QUEUE}@{socket.gethostname()}"
    command = celery_worker(name, QUEUE)
    env = child_env(TANDEM_MEDIA_ROOT=str(media), TANDEM_HELD_OUT_SHARE="0")

    def ready() -> bool:
        return bool(celery_app.control.ping(destination=[name], timeout=0.5))

    with running(command, env, ready, timeout=90) as worker:
        job = finetune.create_job(**job_body("resumed"))
        pointer = f"finetune/job-{job.pk}/checkpoints/stage-2/step.json"
        deadline = time.monotonic() + 180
        while not default_storage.exists(pointer):
            assert time.monotonic() < deadline, FineTuneJob.objects.get(pk=job.pk).logs
            time.sleep(0.02)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)

    # Killed in the DPO stage: running, with a heartbeat, nothing registered.
    killed = FineTuneJob.objects.get(pk=job.pk)
    assert (killed.status, killed.attempt) == ("running", 1)
    assert not ModelVersion.objects.exists()
    curve_before = [(p["stage"], p["step"]) for p in killed.loss_curve]
    assert (1, 6) in curve_before and (2, 6) not in curve_before

    settings.TANDEM_FINETUNE_STALE_SECONDS = 0  # the dead attempt's heartbeat is stale now
    assert finetune.run_job(job.pk) == "succeeded"

    resumed = FineTuneJob.objects.get(pk=job.pk)
    assert resumed.attempt == 2
    assert "resuming after 1 finished stages from step-" in resumed.logs
    steps = [(p["stage"], p["step"]) for p in resumed.loss_curve]
    assert steps == [(1, s) for s in range(1, 7)] + [(2, s) for s in range(1, 7)]
    assert not default_storage.exists(f"finetune/job-{job.pk}/checkpoints/stage-2/step.json")

    reference = finetune.create_job(**job_body("uninterrupted"))
    assert finetune.run_job(reference.pk) == "succeeded"
    ran, once = adapter_of("resumed"), adapter_of("uninterrupted")
    assert ran.keys() == once.keys() and ran
    for key in ran:
        torch.testing.assert_close(ran[key], once[key], rtol=1e-4, atol=1e-6)
    # …and training changed the adapter: the comparison is not of two untouched inits.
    assert any(t.abs().sum() > 0 for k, t in once.items() if "lora_B" in k)
