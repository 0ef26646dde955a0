"""Rollout throughput: eight autonomous rollouts at once on eight real sandboxed desktops of this
machine, with a zero-latency scripted model.

A batch of eight rollouts is dispatched the real way (``rollouts.dispatch`` leases the desktops,
makes the episodes and queues each ``run_rollout`` on the host's rollout queue); the host's
rollout workers run them as ``deploy/dev.sh`` starts them: Celery worker processes consuming
``rollouts.<host>``, one per core, each running its share in threads. Every step is the whole
environment step: the scripted model's answer over HTTP (the test server, in this process,
answers at once, alternating clicks on two empty spots of the desktop, so the screen stays still
and no loop forms), the proposal stored, the action executed, the screen settled and observed,
the screenshot stored, the next request built. The stop rules allow ``STEPS`` steps.

``rollout_env_steps_per_s`` is every rollout's decided steps over the wall time from the first
step's observation to the last step's, all rollouts together; ``rollout_steps_per_desktop_per_s``
is that over the number of desktops. The anchor is OSWorld's environment, which sleeps a fixed
2 s after every action: at most 0.5 steps per second per environment, measured here as
``rollout_speedup_vs_fixed_2s``.

The run uses the default settings, so each step also waits until the screen has been still for
``TANDEM_ROLLOUT_QUIET_MS`` (300 ms) since its last drawing; on this still desktop nothing is
ever drawn, so each step waits for a first drawing until the kernel finds the desktop's
programs idle (``vm_pool.sandbox.activity``: ``IDLE_MS``, 100 ms, with no work), at most
5 s from the action (``TANDEM_ROLLOUT_REACTION_MS``, 1 s, where the work is not seen): the
step's floor is the longer of the settle and the idle period, not the reaction time (a step
whose action draws waits 300 ms after its last drawing instead). The same batch is measured
with no quiet period, the loop as action, settle, observe, store, next request only:
``rollout_env_steps_per_s_settle_only``; and with the default settings run by one worker
process alone (all eight in its threads, under one interpreter lock):
``rollout_env_steps_per_s_one_process``.

What a step costs the workers, from the default run: ``step_cpu_ms``, the rollout workers' CPU
time over the run divided by the decided steps, and ``grabs_per_step``, the full frames they
grabbed per step (``ScreenGrabber.grabbed``, which each worker writes at its shutdown:
``tests.bench.worker_counts``).
"""

import functools
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

DESKTOPS = 8
STEPS = 40
DISPLAYS = (2440, 2479)  # no test, demo or other benchmark desktop uses these
OSWORLD_STEPS_PER_S = 0.5  # a fixed 2 s pause after every action
PROCESSES = os.cpu_count() or 1  # as deploy/dev.sh starts the host's rollout workers
RUN_TIMEOUT_S = 600

GOALS = {
    "rollout_env_steps_per_s": "≥ 30",
    "rollout_steps_per_desktop_per_s": "≥ 2.5",
    "step_cpu_ms": "report",
    "grabs_per_step": "≤ 1.5",
}


def _answer(body: dict[str, Any]) -> Any:
    from tests.support.fake_model_server import Reply

    step = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
    # Empty spots of the 1280×800 desktop, in UI-TARS-1.5's coordinates (1288×812).
    spot = "(1200,790)" if step % 2 else "(1250,760)"
    return Reply.text(f"Thought: Click the empty desktop.\nAction: click(start_box='{spot}')")


def run() -> dict[str, float | int]:
    figures = _measure(quiet_ms=None, processes=PROCESSES)
    settle_only = _measure(quiet_ms=0, processes=PROCESSES)["rollout_env_steps_per_s"]
    one_process = _measure(quiet_ms=None, processes=1)["rollout_env_steps_per_s"]
    return {
        **figures,
        "rollout_env_steps_per_s_settle_only": settle_only,
        "rollout_env_steps_per_s_one_process": one_process,
        "rollout_worker_processes": PROCESSES,
    }


def _cpu_s(pid: int) -> float:
    """A process's CPU time so far (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def _rollout_workers(
    host: str, processes: int, env: dict[str, str], counts: Path
) -> Iterator[list[int]]:
    """The host's rollout workers, ``processes`` of them sharing ``DESKTOPS`` threads; their pids.
    Each writes what it grabbed to ``counts`` at its shutdown, when the block ends."""
    from tests.bench.step import BENCH_REDIS
    from tests.support.services import (  # here: needs the settings
        celery_worker,
        running,
        worker_answers,
    )
    from vm_pool.models import rollout_queue  # here: after _measure has set Django up

    threads = -(-DESKTOPS // processes)
    with ExitStack() as stack:
        pids = []
        for n in range(processes):
            name = f"rollouts{n}@{host}"
            command = celery_worker(
                name, rollout_queue(host), "threads", threads, None,
                "--include", "tests.bench.worker_counts",
            )  # fmt: skip
            child = {
                **env,
                "TANDEM_DB_POOL_MAX": str(threads * 2),  # the runs and their heartbeats
                "TANDEM_BENCH_COUNTS": str(counts / f"{n}.json"),
            }
            answers = functools.partial(worker_answers, BENCH_REDIS, name)
            pids.append(stack.enter_context(running(command, child, answers, 60)).pid)
        yield pids


def _measure(quiet_ms: int | None, processes: int) -> dict[str, float]:
    """One batch of ``DESKTOPS`` rollouts; ``quiet_ms`` None: the default quiet period."""
    from tests.bench import fresh_database, setup_django

    setup_django()
    from django.conf import settings
    from django.test import override_settings

    from annotation.models import Project, Rollout, RolloutStatus, Step, Task
    from annotation.rollouts import batches as rollouts
    from backend.accounts.models import User
    from model_serving.models import ModelVersion
    from tests.bench.step import (
        _bench_broker,
        _flush_bench_redis,
        _start_desktops,
        bench_worker_env,
    )
    from tests.support.fake_model_server import serving
    from vm_pool import pool
    from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate

    host = f"bench-rollouts-{uuid.uuid4().hex[:6]}"
    desktop_root = Path(tempfile.mkdtemp(prefix="tandem-bench-rollout-desktops-"))
    media_root = Path(tempfile.mkdtemp(prefix="tandem-bench-rollout-media-"))
    counts = Path(tempfile.mkdtemp(prefix="tandem-bench-rollout-counts-"))
    quiet = {} if quiet_ms is None else {"TANDEM_ROLLOUT_QUIET_MS": quiet_ms}
    local = override_settings(
        TANDEM_DISPLAY_RANGE=DISPLAYS,
        TANDEM_DESKTOP_ROOT=desktop_root,
        TANDEM_HOST=host,
        MEDIA_ROOT=media_root,
        **quiet,
    )
    try:
        _flush_bench_redis()  # the jobs the run sends (resets, validation) go nowhere
        with fresh_database(), local, _bench_broker(), serving("bench-model") as model:
            model.responder = _answer
            env = bench_worker_env(
                host,
                DISPLAYS,
                media_root,
                TANDEM_ROLLOUT_QUIET_MS=str(settings.TANDEM_ROLLOUT_QUIET_MS),
            )
            user = User.objects.create_user("bench-engineer")
            template = DesktopTemplate.objects.create(
                name="bench-rollouts", width=1280, height=800, min_ready=0, max_desktops=DESKTOPS
            )
            project = Project.objects.create(
                name="bench rollouts", environment_template=template.name, created_by=user
            )
            tasks = [
                Task.objects.create(
                    project=project,
                    external_id=f"still-{n}",
                    instruction="Click the empty desktop again and again.",
                    max_steps=STEPS,
                )
                for n in range(DESKTOPS)
            ]
            version = ModelVersion.objects.create(
                name="bench-model",
                base_model="bench-model",
                base_url=model.base_url,
                serving_status=ModelVersion.Serving.SERVING,
            )
            _start_desktops(template, host, DESKTOPS)
            batch = rollouts.create_batch(
                project,
                user,
                rollouts.BatchRequest(
                    tasks=tasks,
                    samples_per_task=1,
                    model_version=version,
                    stop_rules={"same_action_repeats": STEPS, "unchanged_steps": STEPS},
                    max_concurrent=DESKTOPS,
                    desktop_share=1.0,
                ),
            )
            with _rollout_workers(host, processes, env, counts) as pids:
                cpu_before = sum(_cpu_s(pid) for pid in pids)
                rollouts.dispatch(batch.pk)
                running = Rollout.objects.filter(batch=batch, status=RolloutStatus.RUNNING)
                if running.count() != DESKTOPS:
                    raise RuntimeError(f"{running.count()} of {DESKTOPS} rollouts started")
                deadline = time.monotonic() + RUN_TIMEOUT_S
                while running.exists():
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{running.count()} rollouts still running")
                    time.sleep(0.2)
                cpu_s = sum(_cpu_s(pid) for pid in pids) - cpu_before
            # The workers have stopped and written their counts.
            grabs = sum(json.loads(f.read_text())["grabbed"] for f in counts.glob("*.json"))
            steps = Step.objects.filter(episode__rollout__batch=batch)
            decided = steps.filter(decided_at__isnull=False).count()
            first = steps.order_by("created_at").values_list("created_at", flat=True)[0]
            last = steps.order_by("-decided_at").values_list("decided_at", flat=True)[0]
            seconds = (last - first).total_seconds()
            reasons = set(Rollout.objects.filter(batch=batch).values_list("stop_reason", flat=True))
            if reasons != {"max_steps"}:
                raise RuntimeError(f"rollouts stopped for {reasons}, not the step limit")
            for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
                pool.stop_desktop(desktop.pk)
            per_s = decided / seconds
            figures = {
                "rollout_env_steps_per_s": per_s,
                "rollout_steps_per_desktop_per_s": per_s / DESKTOPS,
                "rollout_speedup_vs_fixed_2s": per_s / DESKTOPS / OSWORLD_STEPS_PER_S,
                "step_cpu_ms": cpu_s * 1000 / decided,
                "grabs_per_step": grabs / decided,
            }
            print(f"rollouts (quiet_ms={quiet_ms}, {processes} processes): {figures}", flush=True)
            return figures
    finally:
        _flush_bench_redis()
        for folder in (desktop_root, media_root, counts):
            shutil.rmtree(folder, ignore_errors=True)
