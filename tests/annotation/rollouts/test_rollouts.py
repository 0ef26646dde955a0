"""Autonomous rollout batches end to end on real sandboxed desktops: a real Celery worker (with
its beat) owning the test host's desktops and the default queue, the demo's tasks as
``seed_demo`` imports them, and the OpenAI-compatible test server answering as the model, by
script, and as the judge.

The model, per task: the text editor's rollouts do the task and finish; the terminal's click
the same empty spot until the loop rule stops them; the browser's answer without an action
until the invalid-output rule stops them; the files' click where nothing changes (twice: the
first click may focus what it lands on), then claim to have finished. The judge likes only the
text editor's.
"""

import json
import os
import signal
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import datasets
import pytest
from django.core.management import call_command

from annotation.datasets import exports
from annotation.management.commands.seed_demo import DEMO_TASKS
from annotation.models import (
    BatchStatus,
    DatasetExport,
    Decision,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    EvaluationStatus,
    Project,
    Rollout,
    RolloutBatch,
    RolloutStatus,
    Task,
)
from annotation.rollouts.batches import BatchRequest, create_batch, set_status
from backend.accounts.models import User
from model_serving.judge import JUDGE_PROMPT_VERSION
from model_serving.models import ModelVersion
from model_serving.uitars import to_model
from tests.e2e.workspace import eventually
from tests.support.fake_model_server import Reply, serving
from tests.support.live import service_env
from tests.support.services import celery_worker, running, worker_answers
from vm_pool import pool
from vm_pool.actions import Point, ScreenSize
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate, host_queue, rollout_queue

REDIS = "redis://127.0.0.1:6379/12"
SCREEN = ScreenSize(1280, 800)
MODEL = "ui-tars-demo"
STALE_S = 6
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def model_point(x: int, y: int) -> str:
    point = to_model(Point(x, y), SCREEN, "uitars15")
    return f"({point.x},{point.y})"


# A spot no window covers on the demo's desktop: clicking it changes nothing.
EMPTY = model_point(1270, 790)
SCRIPTS = {
    "demo-text-editor": [
        "Thought: Write the greeting.\nAction: type(content='Hello from Tandem')",
        "Thought: Save it.\nAction: hotkey(key='ctrl s')",
        "Thought: Name the file.\nAction: type(content='hello.txt\\n')",
        "Thought: Saved.\nAction: finished(content='hello.txt holds the greeting')",
    ],
    "demo-terminal": [f"Thought: Click the terminal.\nAction: click(start_box='{EMPTY}')"] * 9,
    "demo-browser": ["Thought: I will copy the title."] * 9,  # no Action: an invalid output
    # The first click may focus what it lands on; the second changes nothing.
    "demo-files": [
        f"Thought: Click the folder.\nAction: click(start_box='{EMPTY}')",
        f"Thought: Click it again.\nAction: click(start_box='{EMPTY}')",
        "Thought: Done.\nAction: finished(content='moved')",
    ],
}
JUDGE = {
    "demo-text-editor": '{"score": 0.9, "reason": "The greeting was typed and saved."}',
    "demo-terminal": (
        'Looking at it:\n```\n{"score": 0.1, "reason": "It clicked the same spot."}\n```'
    ),
    "demo-browser": '```json\n{"score": 0.0, "reason": "Nothing was done."}\n```',
    "demo-files": '{"score": 0.2, "reason": "No folder was made."}',
}


def task_of(body: dict[str, Any]) -> str:
    text = json.dumps(body.get("messages", []))
    for row in DEMO_TASKS:
        if row["instruction"][:40] in text:
            return str(row["id"])
    raise AssertionError(f"no demo task in {text[:300]}")


def answer(body: dict[str, Any]) -> Reply:
    task = task_of(body)
    if not body.get("stream"):  # the judge asks without streaming
        return Reply.text(JUDGE[task])
    step = sum(1 for m in body["messages"] if m["role"] == "assistant")
    script = SCRIPTS[task]
    return Reply.text(script[min(step, len(script) - 1)])


@contextmanager
def rollout_worker(host: str, beat: Path, **env: str):
    """The host's worker, its rollouts' and batches' too, as ``deploy/dev.sh`` runs it: eight
    threads, and a pool for their jobs and the rollouts' heartbeats."""
    name = f"{host}@rollouts"
    command = celery_worker(
        name, [host_queue(host), rollout_queue(host), "default"], "threads", 8, beat
    )
    env = {**service_env(host, REDIS, REDIS), "TANDEM_DB_POOL_MAX": "16", **env}
    with running(command, env, lambda: worker_answers(REDIS, name), 60) as process:
        yield process


# A rollouts worker as compose runs it: no engine socket (its URL leads nowhere) and not the
# privilege the evaluation jail needs (CAP_SYS_ADMIN is out of its bounding set, so the celery
# it execs holds it in no set).
UNPRIVILEGED = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", "--"]
NO_ENGINE = "unix:///nonexistent/engine.sock"
SYS_ADMIN = 1 << 21  # the bit of CAP_SYS_ADMIN in /proc/<pid>/status's capability masks


@contextmanager
def workers_apart(host: str, beat: Path, **env: str):
    """Compose's split: the desktop worker (its desktops, evaluations and batches) and a worker
    of the host's rollouts alone, unprivileged (``UNPRIVILEGED``). Yields the latter."""
    desktops, rollouts = f"{host}@desktops", f"{host}@rollouts"
    env = {**service_env(host, REDIS, REDIS), "TANDEM_DB_POOL_MAX": "16", **env}
    apart = {**env, "TANDEM_DOCKER_URL": NO_ENGINE}
    with (
        running(
            celery_worker(desktops, [host_queue(host), "default"], "threads", 8, beat),
            env,
            lambda: worker_answers(REDIS, desktops),
            60,
        ),
        running(
            UNPRIVILEGED + celery_worker(rollouts, [rollout_queue(host)], "threads", 8),
            apart,
            lambda: worker_answers(REDIS, rollouts),
            60,
        ) as process,
    ):
        yield process


def capabilities(pid: int) -> int:
    """The process's effective, permitted and bounding capability sets, together."""
    masks = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("CapEff:", "CapPrm:", "CapBnd:")):
            masks |= int(line.split()[1], 16)
    return masks


@pytest.fixture
def demo(host, settings, tmp_path):
    """The demo's tasks in their project, a served version on the test server, four ready
    desktops, the engineer who starts batches, and the services."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    settings.TANDEM_ROLLOUT_STALE_SECONDS = STALE_S
    settings.TANDEM_EVALUATION_STALE_SECONDS = STALE_S
    settings.TANDEM_DEMO_MODEL_DIR = tmp_path / "no-demo-model"  # not needed here
    call_command("seed_demo")
    project = Project.objects.get(name="Demo: desktop basics")
    template = DesktopTemplate.objects.get(name=project.environment_template)
    DesktopTemplate.objects.filter(pk=template.pk).update(min_ready=4, max_desktops=4)
    for _ in range(4):
        desktop = pool.start_desktop(pool.create_desktop(template, host).pk)
        assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    with ExitStack() as stack:
        model = stack.enter_context(serving(MODEL))
        model.responder = answer
        version = ModelVersion.objects.create(
            name=MODEL,
            base_model=MODEL,
            base_url=model.base_url,
            serving_status=ModelVersion.Serving.SERVING,
        )
        Project.objects.filter(pk=project.pk).update(
            validation_settings={
                "judge": {"base_url": model.base_url, "model": MODEL, "threshold": 0.5}
            },
            model_settings={"retries": 0},
        )
        env = {
            "TANDEM_MEDIA_ROOT": str(settings.MEDIA_ROOT),
            "TANDEM_ROLLOUT_STALE_SECONDS": str(STALE_S),
            "TANDEM_EVALUATION_STALE_SECONDS": str(STALE_S),
        }
        yield project, version, model, env, tmp_path / "beat"


def batch_of(project: Project, version: ModelVersion, samples: int, only: str = "", **options: Any):
    engineer = User.objects.get(username="engineer")
    tasks = list(Task.objects.filter(project=project).order_by("external_id"))
    tasks = [t for t in tasks if t.external_id == only] if only else tasks
    request = BatchRequest(
        tasks=tasks,
        samples_per_task=samples,
        model_version=version,
        sampling={"temperature": 0.7},
        stop_rules={"invalid_in_row": 3, "same_action_repeats": 3},
        max_concurrent=4,
        desktop_share=1.0,
        **options,
    )
    return create_batch(project, engineer, request)


def finished(batch: RolloutBatch, seconds: float = 300) -> RolloutBatch:
    return eventually(
        lambda: (
            RolloutBatch.objects.filter(
                pk=batch.pk, status__in=(BatchStatus.SUCCEEDED, BatchStatus.CANCELLED)
            )
            .exclude(rollouts__status__in=(RolloutStatus.RUNNING, RolloutStatus.ENDED))
            .first()
        ),
        f"batch {batch.pk} to end",
        seconds,
    )


def by_task(batch: RolloutBatch) -> dict[str, list[Rollout]]:
    rows: dict[str, list[Rollout]] = {}
    for rollout in batch.rollouts.select_related("task", "episode").order_by("task", "sample"):
        rows.setdefault(rollout.task.external_id, []).append(rollout)
    return rows


def parts(rollout: Rollout) -> dict[str, bool | None]:
    return {p["name"]: p["passed"] for p in rollout.validation["parts"]}


def checks(rollout: Rollout) -> dict[str, bool]:
    rules = next(p for p in rollout.validation["parts"] if p["name"] == "rules")
    return {c["name"]: c["passed"] for c in rules["details"]["checks"]}


def built(project: Project, kind: str) -> DatasetExport:
    export = DatasetExport.objects.create(
        project=project,
        kind=kind,
        format="trl",
        filters=exports.ExportFilters(source="rollout").as_json(),
        created_by=User.objects.get(username="engineer"),
    )
    exports.build_export(export.pk)
    export.refresh_from_db()
    assert export.status == DatasetExport.Status.SUCCEEDED, export.error
    return export


def load(export: DatasetExport) -> datasets.Dataset:
    root = exports.local_path(export, export.files[0]["name"])
    assert root is not None
    return datasets.load_dataset(
        "parquet", data_files=str(Path(root).parent / "*.parquet"), split="train"
    )


def test_a_batch_of_twenty_rollouts_stops_judges_and_routes_each_as_its_trajectory_deserves(
    demo, host
):
    """With compose's split of workers: the rollouts run in a worker that holds neither the
    engine's socket nor the evaluation jail's privilege; their evaluations, the desktops' resets
    and the batch's dispatch run on the desktop worker."""
    project, version, model, env, beat = demo
    with workers_apart(host, beat, **env) as rollouts:
        assert not capabilities(rollouts.pid) & SYS_ADMIN
        batch = finished(batch_of(project, version, samples=5))

    assert batch.status == BatchStatus.SUCCEEDED and batch.progress == 1.0
    rows = by_task(batch)
    assert {task: len(r) for task, r in rows.items()} == {t["id"]: 5 for t in DEMO_TASKS}
    assert all(r.status == RolloutStatus.VALIDATED for task in rows.values() for r in task)
    assert all(r.episode.mode == EpisodeMode.AUTONOMOUS for task in rows.values() for r in task)

    expected = {
        # task: (stop reason, outcome, V, failed rule checks)
        "demo-text-editor": ("finished", EpisodeOutcome.FINISHED, True, set()),
        "demo-terminal": (
            "loop",
            EpisodeOutcome.STOPPED,
            False,
            {"no_op_actions", "loops", "stopped_by_rule"},
        ),
        "demo-browser": (
            "invalid_outputs",
            EpisodeOutcome.STOPPED,
            False,
            {"invalid_outputs", "stopped_by_rule"},
        ),
        "demo-files": ("finished", EpisodeOutcome.FINISHED, False, {"no_op_actions"}),
    }
    for task, (stop, outcome, verdict, failed) in expected.items():
        for rollout in rows[task]:
            # A failure says why the rollout was judged as it was.
            why = (
                task,
                [(p["name"], p["passed"], p["reason"]) for p in rollout.validation["parts"]],
                rollout.episode.evaluation,
                next(p for p in rollout.validation["parts"] if p["name"] == "rules")["details"],
            )
            assert (rollout.stop_reason, rollout.episode.outcome, rollout.verdict) == (
                stop,
                outcome,
                verdict,
            ), why
            assert {name for name, ok in checks(rollout).items() if not ok} == failed, why
            judged = next(p for p in rollout.validation["parts"] if p["name"] == "judge")
            version = judged["details"].get("prompt_version", JUDGE_PROMPT_VERSION)
            assert version == JUDGE_PROMPT_VERSION
            assert rollout.validation["routed"] == ("sft" if verdict else "ct")
    for rollout in rows["demo-text-editor"]:
        assert parts(rollout) == {"rules": True, "evaluator": True, "judge": True}
        steps = rollout.episode.steps.order_by("index")
        assert [s.decision for s in steps] == [Decision.AUTO] * 4
        assert rollout.episode.task_success == 1.0
    for rollout in rows["demo-files"]:
        # The task's own evaluator agrees: nothing was moved.
        assert parts(rollout)["evaluator"] is False and rollout.episode.task_success == 0.0
    for rollout in rows["demo-browser"]:
        step = rollout.episode.steps.get()
        assert step.decided_at is None and step.proposals.count() == 3
        assert all(p.invalid_reason for p in step.proposals.all())
    # The judge answered from the script, and said why.
    terminal = next(p for p in rows["demo-terminal"][0].validation["parts"] if p["name"] == "judge")
    assert terminal["passed"] is False and "clicked the same spot" in terminal["reason"]
    assert batch.counts["passed"] == 5 and batch.counts["failed"] == 15

    # Every desktop went back to the pool; no rollout holds a task.
    assert not Desktop.objects.filter(status=DesktopStatus.LEASED).exists()
    assert set(Task.objects.filter(project=project).values_list("status", flat=True)) == {"queued"}

    sft, ct = built(project, "sft"), built(project, "ct")
    assert sft.counts["samples"] == 20
    # The browser's rollouts took no step: a trajectory of nothing is no CT sample.
    assert ct.counts["samples"] == 10
    sft_rows, ct_rows = load(sft), load(ct)
    editor = {r.episode_id for r in rows["demo-text-editor"]}
    assert {r["episode_id"] for r in sft_rows} == editor
    assert {r["sample_kind"] for r in sft_rows} == {"rollout"}
    assert sft_rows[0]["completion"][0]["content"][0]["text"].startswith("Thought: Write")
    assert {r["episode_id"] for r in ct_rows} == {
        r.episode_id for task in ("demo-terminal", "demo-files") for r in rows[task]
    }
    # People's exports never read a rollout.
    people = exports.ExportFilters().as_json()
    assert "source" not in people
    assert (
        not Episode.objects.filter(mode=EpisodeMode.AUTONOMOUS, steps__isnull=True)
        .filter(rollout__isnull=True)
        .exists()
    )


def test_a_worker_killed_mid_batch_loses_no_finished_rollout_and_cancel_stops_the_rest(demo, host):
    project, version, model, env, beat = demo
    with rollout_worker(host, beat, **env) as worker:
        batch = batch_of(project, version, samples=3)
        eventually(
            lambda: batch.rollouts.filter(status=RolloutStatus.VALIDATED).count() >= 2 or None,
            "two validated rollouts",
            300,
        )
        # A rollout mid-run: its attempt taken by this worker (its heartbeat set).
        mid_run = batch.rollouts.filter(status=RolloutStatus.RUNNING, heartbeat_at__isnull=False)
        eventually(lambda: mid_run.exists() or None, "a rollout mid-run", 60)
        done_before = {
            r.pk: (r.episode_id, r.verdict)
            for r in batch.rollouts.filter(status=RolloutStatus.VALIDATED)
        }
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    lost = list(mid_run.values_list("pk", flat=True))
    assert lost
    # Started but not yet taken: a job still in the queue runs on the next worker as its first
    # attempt; one the dead worker had fetched ahead is lost with it, and the rollout runs again.
    waiting = list(batch.rollouts.filter(status=RolloutStatus.RUNNING, heartbeat_at=None))

    with rollout_worker(host, beat, **env):
        batch = finished(batch)
    assert batch.status == BatchStatus.SUCCEEDED
    for pk, (episode_id, verdict) in done_before.items():
        again = Rollout.objects.get(pk=pk)
        assert (again.episode_id, again.verdict, again.attempt) == (episode_id, verdict, 1)
    for rollout in waiting:
        again = Rollout.objects.get(pk=rollout.pk)
        assert again.status == RolloutStatus.VALIDATED and again.attempt in (1, 2)
    for pk in lost:
        again = Rollout.objects.get(pk=pk)
        assert again.status == RolloutStatus.VALIDATED and again.attempt == 2
        # The attempt the dead worker left is kept, ended as such.
        left = Episode.objects.filter(task=again.task, mode=EpisodeMode.AUTONOMOUS).exclude(
            pk=again.episode_id
        )
        assert left.filter(outcome=EpisodeOutcome.ENV_FAILED, end_reason__contains="lost")
    assert batch.rollouts.filter(status=RolloutStatus.VALIDATED).count() == 12

    # A second batch cancelled while it runs: nothing new starts, running ones stop.
    with rollout_worker(host, beat, **env):
        second = batch_of(project, version, samples=3)
        eventually(
            lambda: second.rollouts.filter(status=RolloutStatus.RUNNING).count() >= 2 or None,
            "running rollouts",
            120,
        )
        set_status(second, BatchStatus.CANCELLED)
        started = set(second.rollouts.exclude(status=RolloutStatus.QUEUED).values_list("pk"))
        second = finished(second, 120)
        time.sleep(1)
    assert second.status == BatchStatus.CANCELLED
    assert set(second.rollouts.exclude(status=RolloutStatus.CANCELLED).values_list("pk")) <= (
        started
    )
    assert not second.rollouts.filter(status__in=(RolloutStatus.RUNNING, RolloutStatus.QUEUED))
    assert not Desktop.objects.filter(status=DesktopStatus.LEASED).exists()
    # Those running when it was cancelled stopped at their next step (others may have ended).
    stopped = Episode.objects.filter(rollout__batch=second, rollout__status=RolloutStatus.CANCELLED)
    assert stopped.exists()
    assert set(stopped.values_list("outcome", "end_reason")) == {
        (EpisodeOutcome.STOPPED, "the batch was cancelled")
    }


def test_a_worker_killed_while_it_scores_a_rollout_leaves_it_to_be_scored_again(demo, host):
    """The evaluation's job dies with its worker (the broker would give it back in an hour):
    the next worker's periodic check sends it again, and the rollout is scored and validated
    as if nothing had happened. The evaluator only reads a file, so it may read it again."""
    project, version, model, env, beat = demo
    # A long wait for a still screen: the worker is killed while it is surely scoring.
    with rollout_worker(host, beat, **env, TANDEM_EVALUATION_QUIET_MS="4000") as worker:
        batch = batch_of(project, version, samples=1, only="demo-text-editor")
        scoring = eventually(
            lambda: Episode.objects.filter(
                rollout__batch=batch,
                evaluation_status=EvaluationStatus.PENDING,
                evaluation__has_key="started_at",
            ).first(),
            "the evaluation to start",
            120,
        )
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    assert Rollout.objects.get(batch=batch).status == RolloutStatus.ENDED

    # The reaper that takes lost evaluations up runs every 5 s here, not every 30 s.
    with rollout_worker(host, beat, **env, TANDEM_REAP_INTERVAL_SECONDS="5"):
        batch = finished(batch, 120)
    rollout = Rollout.objects.select_related("episode").get(batch=batch)
    assert (rollout.status, rollout.verdict, rollout.attempt) == (RolloutStatus.VALIDATED, True, 1)
    assert rollout.episode_id == scoring.pk
    assert parts(rollout) == {"rules": True, "evaluator": True, "judge": True}
    episode = rollout.episode
    assert (episode.evaluation_status, episode.task_success) == (EvaluationStatus.SCORED, 1.0)
    assert episode.evaluation_attempt == 2
    assert not Desktop.objects.filter(status=DesktopStatus.LEASED).exists()
