"""The flywheel chart's figures (``annotation.flywheel.chart``) on known rows: per model version, in
the order the versions were made, its rollouts' success rate, people's acceptance of its
proposals, its latest offline step success rate and the exports it was trained on; and who may
read them (managers and engineers of the project)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import (
    DatasetExport,
    Decision,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    Rollout,
    RolloutBatch,
    RolloutStatus,
    Task,
)
from backend.accounts.roles import Role
from model_serving.models import EvaluationRun, FineTuneJob, JobStatus, ModelVersion
from tests.annotation.flywheel.test_manager_stats import record

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def version(name: str, days_ago: int, **fields) -> ModelVersion:
    return ModelVersion.objects.create(
        name=name, base_model="ui-tars-1.5-7b", created_at=NOW - timedelta(days=days_ago), **fields
    )


def export(project, user, kind: str, samples: int, days_ago: int, **fields) -> DatasetExport:
    return DatasetExport.objects.create(
        project=project,
        kind=kind,
        created_by=user,
        status=fields.pop("status", DatasetExport.Status.SUCCEEDED),
        counts={"samples": samples, "by_record_type": {}, "images": samples},
        created_at=NOW - timedelta(days=days_ago),
        **fields,
    )


def stage(export: DatasetExport) -> dict:
    return {
        "kind": export.kind,
        "dataset": {"export_id": export.pk, "kind": export.kind, "location": "x", "files": []},
    }


def rollouts(project, user, served: ModelVersion, samples: list) -> RolloutBatch:
    """A batch of ``served`` over one task: one rollout per (status, verdict, task success)."""
    task = Task.objects.create(
        project=project, external_id=f"r-{served.name}", instruction="Open the Archive"
    )
    batch = RolloutBatch.objects.create(
        project=project, model_version=served, task_ids=[task.pk], created_by=user
    )
    for sample, (status, verdict, success) in enumerate(samples):
        running = status == RolloutStatus.RUNNING
        episode = Episode.objects.create(
            task=task,
            mode=EpisodeMode.AUTONOMOUS,
            annotator=user,
            served_version=served,
            model_version=served.name,
            ended_at=None if running else NOW,
            outcome="" if running else EpisodeOutcome.FINISHED,
            task_success=success,
        )
        Rollout.objects.create(
            batch=batch, task=task, sample=sample, episode=episode, status=status, verdict=verdict
        )
    return batch


@pytest.fixture
def flywheel_world(settings, tmp_path, make_user, project, other_project):
    """v1 (a base model) then v2 (fine-tuned from v1 on this project's SFT export and another
    project's DPO export) then v3 (only a queued batch so far)."""
    settings.MEDIA_ROOT = tmp_path
    manager = make_user("manager", project, Role.MANAGER)
    ann = make_user("ann", project, Role.ANNOTATOR)
    sft = export(project, manager, "sft", 120, days_ago=9)
    foreign = export(other_project, manager, "dpo", 55, days_ago=9)
    job = FineTuneJob.objects.create(
        base_model="ui-tars-1.5-7b",
        base_model_path="/models/ui-tars",
        stages=[stage(sft), stage(foreign)],
        project_ids=[project.pk, other_project.pk],
        version_name="v2",
        status=JobStatus.SUCCEEDED,
    )
    v3 = version("v3", days_ago=1)
    v2 = version("v2", days_ago=5, job=job)
    v1 = version("v1", days_ago=10)
    ModelVersion.objects.filter(pk=v2.pk).update(parent=v1)
    project.model_version = v2
    project.save(update_fields=["model_version"])

    ended, validated, running = RolloutStatus.ENDED, RolloutStatus.VALIDATED, RolloutStatus.RUNNING
    rollouts(project, manager, v1, [
        (validated, True, 1.0), (validated, False, 0.0), (ended, None, None), (running, None, None),
    ])  # fmt: skip
    rollouts(project, manager, v2, [
        (validated, True, 1.0), (validated, True, 0.5), (validated, False, None),
    ])  # fmt: skip
    v3_batch = RolloutBatch.objects.create(
        project=project, model_version=v3, task_ids=[], created_by=manager
    )
    Rollout.objects.create(
        batch=v3_batch, task=Task.objects.get(external_id="r-v1"), sample=0,
        status=RolloutStatus.CANCELLED,
    )  # fmt: skip

    start = NOW - timedelta(hours=3)
    for name, served, decisions in [
        ("a", v1, [Decision.ACCEPTED, Decision.ACCEPTED, Decision.CORRECTED]),
        ("b", v2, [Decision.ACCEPTED, Decision.ERROR_KEPT, Decision.CORRECTED, Decision.ACCEPTED]),
    ]:
        task = Task.objects.create(project=project, external_id=name, instruction="Greet")
        steps = [
            (start + timedelta(minutes=i), decision, served.name, 1000)
            for i, decision in enumerate(decisions)
        ]
        episode = record(task, ann, served.name, steps, NOW, EpisodeOutcome.FINISHED)
        Episode.objects.filter(pk=episode.pk).update(served_version=served)

    def evaluation(served, project_id, status, rate, days_ago):
        EvaluationRun.objects.create(
            model_version=served, project_id=project_id, status=status, tolerance=0.04,
            total=20, succeeded=round(20 * (rate or 0)), invalid=1, success_rate=rate,
            created_at=NOW - timedelta(days=days_ago), finished_at=NOW,
        )  # fmt: skip

    evaluation(v1, project.pk, JobStatus.SUCCEEDED, 0.4, days_ago=8)
    evaluation(v1, project.pk, JobStatus.SUCCEEDED, 0.45, days_ago=6)
    evaluation(v2, project.pk, JobStatus.SUCCEEDED, 0.6, days_ago=4)
    evaluation(v2, project.pk, JobStatus.FAILED, None, days_ago=2)
    evaluation(v2, other_project.pk, JobStatus.SUCCEEDED, 0.9, days_ago=2)

    export(project, manager, "dpo", 30, days_ago=8)
    newer_dpo = export(project, manager, "dpo", 40, days_ago=3)
    rollout_sft = export(project, manager, "sft", 15, days_ago=2, filters={"source": "rollout"})
    export(project, manager, "sft", 999, days_ago=1, status=DatasetExport.Status.FAILED)
    return manager, {"sft": sft, "dpo": newer_dpo, "rollout_sft": rollout_sft}


def read(client, project) -> dict:
    response = client.get(f"/api/projects/{project.pk}/flywheel/")
    assert response.status_code == 200, response.content
    return response.json()


def test_versions_come_in_the_order_they_were_made_with_their_lineage(
    flywheel_world, client_for, project
):
    manager, _ = flywheel_world
    body = read(client_for(manager), project)
    assert [(v["name"], v["parent"], v["proposes"]) for v in body["versions"]] == [
        ("v1", None, None),
        ("v2", "v1", "A"),
        ("v3", None, None),
    ]
    assert body["acceptance_window_days"] == 365


def test_rollout_success_is_the_share_of_validated_rollouts_with_v_1(
    flywheel_world, client_for, project
):
    manager, _ = flywheel_world
    v1, v2, v3 = read(client_for(manager), project)["versions"]
    # v1: 4 started, the running one has not ended, the ended one is not validated yet.
    assert v1["rollouts"] == {
        "started": 4, "ended": 3, "validated": 2, "passed": 1, "success_rate": 0.5,
        "scored": 2, "task_success": 0.5,
    }  # fmt: skip
    assert v2["rollouts"] == {
        "started": 3, "ended": 3, "validated": 3, "passed": 2, "success_rate": 0.6667,
        "scored": 2, "task_success": 0.75,
    }  # fmt: skip
    # v3's batch has only a cancelled rollout that never ran: nothing to count.
    assert v3["rollouts"]["started"] == 0
    assert v3["rollouts"]["success_rate"] is None


def test_live_acceptance_counts_peoples_decisions_on_the_versions_proposals(
    flywheel_world, client_for, project
):
    manager, _ = flywheel_world
    v1, v2, v3 = read(client_for(manager), project)["versions"]
    counts = ("accepted", "corrected", "error_kept", "steps", "rate")
    assert tuple(v1["live"][k] for k in counts) == (2, 1, 0, 3, 0.6667)
    assert tuple(v2["live"][k] for k in counts) == (2, 1, 1, 4, 0.5)
    assert v3["live"] is None


def test_offline_step_success_is_the_latest_succeeded_evaluation_on_this_project(
    flywheel_world, client_for, project
):
    manager, _ = flywheel_world
    v1, v2, v3 = read(client_for(manager), project)["versions"]
    assert (v1["offline"]["step_success_rate"], v1["offline"]["steps"]) == (0.45, 20)
    assert v2["offline"]["step_success_rate"] == 0.6
    assert v3["offline"] is None


def test_dataset_sizes_of_the_training_exports_and_of_the_project_now(
    flywheel_world, client_for, project
):
    manager, exports = flywheel_world
    body = read(client_for(manager), project)
    v1, v2, _ = body["versions"]
    assert v1["trained_on"] == [] and v1["job"] is None
    # The other project's DPO export is counted, not shown.
    assert [(d["export"], d["kind"], d["samples"]) for d in v2["trained_on"]] == [
        (exports["sft"].pk, "sft", 120)
    ]
    assert v2["other_exports"] == 1
    assert [(d["kind"], d["source"], d["export"], d["samples"]) for d in body["datasets"]] == [
        ("dpo", "interactive", exports["dpo"].pk, 40),
        ("sft", "interactive", exports["sft"].pk, 120),
        ("sft", "rollout", exports["rollout_sft"].pk, 15),
    ]


def test_a_project_without_versions_has_an_empty_flywheel(make_user, client_for, project):
    engineer = make_user("eng", project, Role.ENGINEER)
    assert read(client_for(engineer), project) == {
        "project": project.pk,
        "acceptance_window_days": 365,
        "versions": [],
        "datasets": [],
    }


@pytest.mark.parametrize(
    ("role", "status"),
    [(Role.ENGINEER, 200), (Role.MANAGER, 200), (Role.REVIEWER, 403), (Role.ANNOTATOR, 403)],
)
def test_managers_and_engineers_read_it_others_are_refused(
    make_user, client_for, project, role, status
):
    response = client_for(make_user("someone", project, role)).get(
        f"/api/projects/{project.pk}/flywheel/"
    )
    assert response.status_code == status
    if status == 403:
        assert response.json()["error"]["code"] == "permission_denied"


def test_an_unknown_project_and_one_not_joined_are_not_found(
    make_user, client_for, project, other_project
):
    client = client_for(make_user("eng", project, Role.ENGINEER))
    for pk in (other_project.pk, other_project.pk + 1000):
        response = client.get(f"/api/projects/{pk}/flywheel/")
        assert response.status_code == 404
        assert response.json()["error"]["message"] == "No such project."
