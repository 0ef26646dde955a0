"""Dataset exports end to end in this process: created over the API, built by the job's own
function (``annotation.datasets.exports.build_export``; the Celery worker runs exactly that, see
``test_export_worker``), read back over the API and by the consumers' loaders. Storage is local
files under a temporary MEDIA_ROOT.

Plain ``django_db``: the job is queued with ``transaction.on_commit``, so in these rolled-back
transactions nothing reaches a broker.
"""

import hashlib
import importlib
import json
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from django.apps import apps as django_apps
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test.utils import override_settings
from django.utils import timezone

from annotation.datasets import exports, pairs
from annotation.datasets.finals import SPLIT_TASK
from annotation.episodes.reviews import review_episode
from annotation.models import DatasetExport, Episode, Project, Task
from backend.accounts.roles import Role
from backend.attempts import AttemptAlive
from model_serving.evaluation import is_held_out
from model_serving.models import ModelVersion
from model_serving.training import data
from model_serving.training.data import DatasetUnusable
from model_serving.training.spec import DatasetRef
from model_serving.uitars import assistant_text
from tests.annotation.datasets.test_dataset_llama_factory import validate
from tests.support.export_data import MODEL_CLICK, expected, make_episodes
from vm_pool.actions import Action, ScreenSize
from vm_pool.models import Screenshot

pytestmark = pytest.mark.django_db

EPISODES, STEPS = 6, 9


@pytest.fixture
def storage_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    return tmp_path


@pytest.fixture
def engineer(make_user, project):
    return make_user("erin", project, Role.ENGINEER)


@pytest.fixture
def recorded(storage_root, project, make_user):
    annotator = make_user("ann", project, Role.ANNOTATOR)
    make_episodes(project, annotator, EPISODES, STEPS)
    return annotator


@pytest.fixture
def api(client_for, engineer):
    return client_for(engineer)


def create(api, project, kind="sft", fmt="trl", **filters):
    body = {"project": project.pk, "kind": kind, "format": fmt, "filters": filters}
    response = api.post("/api/exports/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def build(api, export_id):
    exports.build_export(export_id)
    return api.get(f"/api/exports/{export_id}/").json()


def download_all(api, export, to: Path) -> Path:
    for entry in export["files"]:
        response = api.get(entry["download_url"])
        assert response.status_code == 200
        assert response["Content-Disposition"].startswith("attachment")
        data = b"".join(response.streaming_content)
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["size"], entry["sha256"])
        (to / entry["name"]).parent.mkdir(parents=True, exist_ok=True)
        (to / entry["name"]).write_bytes(data)
    return to


def stored(export_id: int) -> list[str]:
    return sorted(exports._stored_names(exports.export_prefix(export_id)))


def test_trl_sft_and_dpo_exports_load_with_their_features(api, project, recorded, tmp_path):
    per_episode = expected(STEPS)
    for kind, rows in (("sft", per_episode.sft), ("dpo", per_episode.dpo)):
        export = build(api, create(api, project, kind)["id"])
        assert export["status"] == "succeeded", export["error"]
        assert export["progress"] == 1.0
        assert export["counts"]["samples"] == EPISODES * rows
        names = [f["name"] for f in export["files"]]
        assert names == ["data/train-00000.parquet", "manifest.json"]
        assert export["content_hash"] == export["files"][-1]["sha256"]
        assert stored(export["id"]) == [f"exports/{export['id']}/{n}" for n in names]

        out = download_all(api, export, tmp_path / kind)
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["schema_version"] == 1 and manifest["kind"] == kind
        assert manifest["filters"]["project"] == project.pk
        assert (
            manifest["files"]["data/train-00000.parquet"]["sha256"] == export["files"][0]["sha256"]
        )
        loaded = datasets.load_dataset(
            "parquet", data_files=str(out / "data" / "*.parquet"), split="train"
        )
        assert len(loaded) == EPISODES * rows
        assert loaded.features["images"] == datasets.List(datasets.Image())
        answers = ("completion",) if kind == "sft" else ("chosen", "rejected")
        for row in loaded:
            placeholders = 0
            for message in row["prompt"]:
                for part in message["content"]:
                    assert set(part) == {"type", "text"}
                    placeholders += part["type"] == "image"
                    assert (part["text"] is None) == (part["type"] == "image")
            assert placeholders == len(row["images"]) >= 1
            assert all(img.format == "PNG" for img in row["images"])
            assert row["prompt"][-1]["content"] == [{"type": "image", "text": None}]
            for answer in answers:
                assert [m["role"] for m in row[answer]] == ["assistant"]
        if kind == "dpo":
            kinds = sorted(set(loaded["sample_kind"]))
            assert kinds == ["error_correction", "post_reflection"]
            # The model's click at (640,400) of the 64x40 screen, in UI-TARS-1.5's convention.
            text = loaded[0]["rejected"][0]["content"][0]["text"]
            assert text.startswith("Thought: Click.\nAction: click(start_box='<|box_start|>(")


def test_ct_export_holds_whole_trajectories(api, project, recorded, make_user, tmp_path):
    reviewer = make_user("rita", project, Role.REVIEWER)
    episode = Episode.objects.filter(task__project=project).order_by("id").first()
    review_episode(episode, reviewer, "rejected", None, "wrong")
    export = build(api, create(api, project, "ct")["id"])
    assert export["counts"]["samples"] == 1
    out = download_all(api, export, tmp_path)
    (row,) = datasets.load_dataset("parquet", data_files=str(out / "data" / "*.parquet"))["train"]
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user"] + ["user", "assistant"] * STEPS
    assert len(row["images"]) == STEPS and row["episode_id"] == episode.pk


def test_the_same_data_and_filters_give_a_byte_identical_export(api, project, recorded):
    first = build(api, create(api, project, "dpo", review_status="unreviewed")["id"])
    second = build(api, create(api, project, "dpo", review_status="unreviewed")["id"])
    assert first["id"] != second["id"]
    assert first["content_hash"] == second["content_hash"]
    assert [(f["name"], f["sha256"]) for f in first["files"]] == [
        (f["name"], f["sha256"]) for f in second["files"]
    ]
    other = build(api, create(api, project, "dpo", model_version="ui-tars-2")["id"])
    assert other["counts"]["samples"] == 0 and other["content_hash"] != first["content_hash"]


def test_rows_are_written_in_the_convention_of_the_model_the_project_serves(
    api, project, recorded, tmp_path
):
    """The project's version A answers in 0-1000: its rows must too, though the project's own
    settings name no style; an export keeps the convention it was asked for in."""

    def rejected_text(export) -> tuple[str, str]:
        out = download_all(api, export, tmp_path / str(export["id"]))
        manifest = json.loads((out / "manifest.json").read_text())
        row = datasets.load_dataset("parquet", data_files=str(out / "data" / "*.parquet"))
        return manifest["coordinate_style"], row["train"][0]["rejected"][0]["content"][0]["text"]

    click = Action.from_json(MODEL_CLICK)
    before = build(api, create(api, project, "dpo")["id"])
    assert before["coordinate_style"] == "uitars15"
    project.model_version = ModelVersion.objects.create(
        name="ui-tars-1.0-ft", base_model="ui-tars-1.0-7b", coordinate_style="relative1000"
    )
    project.save(update_fields=["model_version"])
    assert "style" not in project.model_settings
    asked = create(api, project, "dpo")
    assert asked["coordinate_style"] == "relative1000"
    project.model_version = None  # the project moves on before the job runs
    project.save(update_fields=["model_version"])
    after = build(api, asked["id"])
    assert after["coordinate_style"] == "relative1000"
    screen = ScreenSize(64, 40)
    assert rejected_text(before) == (
        "uitars15",
        assistant_text("Click.", click, screen, "uitars15"),
    )
    assert rejected_text(after) == (
        "relative1000",
        assistant_text("Click.", click, screen, "relative1000"),
    )


def test_exports_made_before_the_convention_was_recorded_are_given_the_one_they_wrote(
    project, engineer
):
    """They wrote the project's own ``style`` setting (``uitars15`` without one)."""
    migration = importlib.import_module("annotation.migrations.0019_export_coordinate_style")
    plain = DatasetExport.objects.create(project=project, kind="sft", created_by=engineer)
    project.model_settings = {**project.model_settings, "style": "relative1000"}
    project.save(update_fields=["model_settings"])
    relative = DatasetExport.objects.create(project=project, kind="sft", created_by=engineer)
    other = Project.objects.create(name="Other")
    elsewhere = DatasetExport.objects.create(project=other, kind="sft", created_by=engineer)

    migration.style_written(django_apps, None)

    written = dict(DatasetExport.objects.values_list("pk", "coordinate_style"))
    assert written == {
        plain.pk: "relative1000",
        relative.pk: "relative1000",
        elsewhere.pk: "uitars15",
    }


def test_filters_reach_the_pair_builder(api, project, recorded, make_user):
    make_user("otto", project, Role.ANNOTATOR)
    now = timezone.now()
    cases = [
        ({"annotator": "ann"}, EPISODES),
        ({"annotator": "otto"}, 0),
        ({"date_from": (now - timezone.timedelta(hours=2)).isoformat()}, EPISODES),
        ({"date_to": (now - timezone.timedelta(hours=2)).date().isoformat()}, 0),
        ({"review_status": "accepted"}, 0),
        ({"include_accepted": True}, EPISODES),
    ]
    per_episode = expected(STEPS).sft
    for filters, episodes in cases:
        export = build(api, create(api, project, "sft", **filters)["id"])
        samples = export["counts"]["samples"]
        if filters.get("include_accepted"):
            assert samples > episodes * per_episode, filters
        else:
            assert samples == episodes * per_episode, filters
        if "annotator" in filters or "review_status" in filters:
            assert {k: export["filters"][k] for k in filters} == filters


def test_the_held_out_split_can_be_left_out(api, project, recorded):
    def split() -> tuple[int, int]:
        tasks = Episode.objects.filter(task__project=project).values_list("task_id", flat=True)
        held = sum(1 for task in tasks if is_held_out(task, share=0.5))
        return len(tasks) - held, held

    while 0 in split():  # ids differ from run to run: make sure both sides are present
        make_episodes(project, recorded, 1, STEPS)
    kept, _ = split()
    with override_settings(TANDEM_HELD_OUT_SHARE=0.5):
        export = build(api, create(api, project, "sft", exclude_held_out=True)["id"])
    assert export["filters"]["exclude_held_out"] is True
    assert export["counts"]["samples"] == kept * expected(STEPS).sft


def test_the_split_goes_by_task_and_a_branch_task_goes_with_its_rollouts(project, recorded):
    """Every episode of a task (overlapped annotators, retries, rollouts) and of its branch
    tasks is on one side: the same screens on both would let evaluation score trained states."""
    rollout = Episode.objects.filter(task__project=project).order_by("id").first()
    again = Episode.objects.create(task=rollout.task, annotator=recorded)
    branch = Task.objects.create(
        project=project, external_id="branch", instruction="Go on", branch_of=rollout
    )
    on_branch = Episode.objects.create(task=branch, annotator=recorded)
    split = dict(
        Episode.objects.filter(pk__in=[rollout.pk, again.pk, on_branch.pk])
        .annotate(split_task=SPLIT_TASK)
        .values_list("pk", "split_task")
    )
    assert split == {rollout.pk: rollout.task_id, again.pk: rollout.task_id,
                     on_branch.pk: rollout.task_id}  # fmt: skip


def test_an_export_built_before_its_rows_named_their_task_is_not_trained_on(
    api, project, recorded, tmp_path
):
    export = build(api, create(api, project, "sft", exclude_held_out=False)["id"])
    out = download_all(api, export, tmp_path / "export")
    (shard,) = (out / "data").glob("*.parquet")
    older = tmp_path / "older.parquet"
    pq.write_table(pq.read_table(shard).drop_columns(["split_task"]), older)
    ref = DatasetRef(export["id"], "sft", export["location"], ())
    with pytest.raises(DatasetUnusable, match=r"does not name its rows' tasks \(split_task\)"):
        data.load(ref, [older], lambda task: False, tmp_path / "cache")
    loaded = data.load(ref, [shard], lambda task: False, tmp_path / "cache")
    assert set(loaded["split_task"]) == set(
        Episode.objects.filter(task__project=project).values_list("task_id", flat=True)
    )


def test_llama_factory_export_carries_its_screenshots(api, project, recorded, tmp_path):
    export = build(api, create(api, project, "dpo", "llama_factory")["id"])
    assert export["status"] == "succeeded", export["error"]
    names = [f["name"] for f in export["files"]]
    assert names[:2] == ["data.json", "dataset_info.json"] and names[-1] == "manifest.json"
    images = [n for n in names if n.startswith("images/")]
    assert len(images) == Screenshot.objects.count() == 8
    out = download_all(api, export, tmp_path)
    samples = validate(out)
    assert len(samples) == EPISODES * expected(STEPS).dpo
    for sample in samples:
        for path in sample["images"]:
            sha = Path(path).stem
            assert hashlib.sha256((out / path).read_bytes()).hexdigest() == sha
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["files"]) == set(names) - {"manifest.json"}


def test_a_cancelled_export_is_never_built(api, project, recorded):
    export = create(api, project, "sft")
    response = api.post(f"/api/exports/{export['id']}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    after = build(api, export["id"])
    assert after["status"] == "cancelled" and after["files"] == []
    assert stored(export["id"]) == []


def test_a_live_attempt_is_waited_for_and_a_dead_one_taken_over(
    api, project, recorded, storage_root
):
    export_id = create(api, project, "sft")["id"]
    DatasetExport.objects.filter(pk=export_id).update(
        status="running", attempt=1, heartbeat_at=timezone.now()
    )
    with pytest.raises(AttemptAlive):
        exports.build_export(export_id)
    assert DatasetExport.objects.get(pk=export_id).attempt == 1

    # The first attempt's worker died half-way through publishing: its staging folder and a
    # file it published are left behind, and its heartbeat has gone stale.
    leftover = storage_root / "staging" / f"{export_id}-1"
    (leftover / "data").mkdir(parents=True)
    (leftover / "data" / "train-00000.parquet").write_bytes(b"half")
    default_storage.save(f"exports/{export_id}/data/train-00007.parquet", ContentFile(b"half"))
    DatasetExport.objects.filter(pk=export_id).update(
        heartbeat_at=timezone.now() - timezone.timedelta(minutes=10)
    )
    export = build(api, export_id)
    assert export["status"] == "succeeded"
    assert DatasetExport.objects.get(pk=export_id).attempt == 2
    names = [f["name"] for f in export["files"]]
    assert stored(export_id) == [f"exports/{export_id}/{n}" for n in names]
    assert list((storage_root / "staging").iterdir()) == []

    build(api, export_id)  # a late duplicate delivery changes nothing
    assert DatasetExport.objects.get(pk=export_id).attempt == 2


def test_a_failing_export_says_why_and_leaves_no_files(api, project, recorded, storage_root):
    missing = Screenshot.objects.order_by("sha256").first()
    default_storage.delete(missing.file.name)
    export = build(api, create(api, project, "sft")["id"])
    assert export["status"] == "failed"
    assert "FileNotFoundError" in export["error"]
    assert export["files"] == [] and stored(export["id"]) == []
    assert list((storage_root / "staging").iterdir()) == []


def test_the_job_checks_in_as_episodes_are_read_even_without_records(
    storage_root, project, make_user
):
    annotator = make_user("ann", project, Role.ANNOTATOR)
    ids = make_episodes(project, annotator, 3, 1)  # one accepted step each: no SFT sample
    seen: list[int] = []
    records = pairs.iter_samples(pairs.Filters(project.pk), "sft", on_episode=seen.append)
    assert list(records) == []
    assert seen == sorted(ids)


def test_exports_keep_only_episodes_their_evaluator_scored_high_enough(
    api, project, recorded, tmp_path
):
    ids = list(
        Episode.objects.filter(task__project=project).order_by("pk").values_list("pk", flat=True)
    )
    scores = {ids[0]: 1.0, ids[1]: 1.0, ids[2]: 0.5, ids[3]: 0.0}  # the others: not scored
    for pk, score in scores.items():
        Episode.objects.filter(pk=pk).update(task_success=score, evaluation_status="scored")
    per_episode = expected(STEPS).sft

    export = build(api, create(api, project, "sft", min_task_success=1.0)["id"])
    assert export["filters"]["min_task_success"] == 1.0
    assert export["counts"]["samples"] == 2 * per_episode
    out = download_all(api, export, tmp_path / "solved")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["filters"]["min_task_success"] == 1.0
    loaded = datasets.load_dataset("parquet", data_files=str(out / "data" / "*.parquet"))["train"]
    assert set(loaded["episode_id"]) == {ids[0], ids[1]} and set(loaded["task_success"]) == {1.0}

    half = build(api, create(api, project, "sft", min_task_success=0.5)["id"])
    assert half["counts"]["samples"] == 3 * per_episode
    # Without the filter every episode is read, and the unscored ones say so with a null.
    everything = download_all(api, build(api, create(api, project, "sft")["id"]), tmp_path / "all")
    rows = datasets.load_dataset("parquet", data_files=str(everything / "data" / "*.parquet"))
    by_episode = dict(zip(rows["train"]["episode_id"], rows["train"]["task_success"], strict=True))
    assert by_episode == {pk: scores.get(pk) for pk in ids}

    response = api.post(
        "/api/exports/",
        {"project": project.pk, "kind": "sft", "filters": {"min_task_success": 1.5}},
        format="json",
    )
    assert response.status_code == 400 and "min_task_success" in str(response.json()), (
        response.json()
    )
