"""Rollout throughput: eight autonomous rollouts at once on eight real sandboxed desktops of this
machine, with a zero-latency scripted model.

A batch of eight rollouts is dispatched the real way (``rollouts.dispatch`` leases the desktops
and makes the episodes); each rollout's run (``rollout_runs.run_rollout``, the job's body) then
runs in a thread of this process, as the host's worker runs it in one of its threads. Every
step is the whole environment step: the scripted model's answer over HTTP (the test server
answers at once, alternating clicks on two empty spots of the desktop, so the screen stays
still and no loop forms), the proposal stored, the action executed, the screen settled and
observed, the screenshot stored, the next request built. The stop rules allow ``STEPS`` steps.

``rollout_env_steps_per_s`` is every rollout's decided steps over the wall time from the first
step's observation to the last step's, all rollouts together; ``rollout_steps_per_desktop_per_s``
is that over the number of desktops. The anchor is OSWorld's environment, which sleeps a fixed
2 s after every action: at most 0.5 steps per second per environment, measured here as
``rollout_speedup_vs_fixed_2s``.

The run uses the default settings, so each step also waits until the screen has been still for
``TANDEM_ROLLOUT_QUIET_MS`` (300 ms) since its last drawing: on this still desktop, since the
action, which is the step's floor. The same batch is measured a second time with no quiet
period, the loop as action, settle, observe, store, next request only:
``rollout_env_steps_per_s_settle_only``.

What a step costs the worker, from the default run: ``step_cpu_ms``, this process's CPU time over
the run divided by the decided steps (the runs' threads, the notices' loop and the scripted
model's server, which answers at once: the worker's share and a little more), and
``grabs_per_step``, the full frames grabbed per step (``ScreenGrabber.grabbed``). Both are
printed with the throughput.
"""

import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

DESKTOPS = 8
STEPS = 40
DISPLAYS = (2440, 2479)  # no test, demo or other benchmark desktop uses these
OSWORLD_STEPS_PER_S = 0.5  # a fixed 2 s pause after every action

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
    figures = _measure(quiet_ms=None)
    settle_only = _measure(quiet_ms=0)["rollout_env_steps_per_s"]
    return {**figures, "rollout_env_steps_per_s_settle_only": settle_only}


def _measure(quiet_ms: int | None) -> dict[str, float]:
    """One batch of ``DESKTOPS`` rollouts; ``quiet_ms`` None: the default quiet period."""
    from tests.bench import fresh_database, setup_django

    setup_django()
    from django.db import connection
    from django.test import override_settings

    from annotation.models import Project, Rollout, RolloutStatus, Step, Task
    from annotation.rollouts import batches as rollouts
    from annotation.rollouts import runs as rollout_runs
    from backend.accounts.models import User
    from model_serving.models import ModelVersion
    from tests.bench.step import _bench_broker, _flush_bench_redis, _start_desktops
    from tests.support.fake_model_server import serving
    from vm_pool import pool
    from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate
    from vm_pool.screen.capture import ScreenGrabber

    host = f"bench-rollouts-{uuid.uuid4().hex[:6]}"
    desktop_root = Path(tempfile.mkdtemp(prefix="tandem-bench-rollout-desktops-"))
    media_root = Path(tempfile.mkdtemp(prefix="tandem-bench-rollout-media-"))
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
            rollouts.dispatch(batch.pk)
            running = list(
                Rollout.objects.filter(batch=batch, status=RolloutStatus.RUNNING).values_list(
                    "pk", "attempt"
                )
            )
            if len(running) != DESKTOPS:
                raise RuntimeError(f"{len(running)} of {DESKTOPS} rollouts started")
            errors: list[BaseException] = []

            def one(rollout_id: int, attempt: int) -> None:
                try:
                    rollout_runs.run_rollout(rollout_id, attempt)
                except BaseException as error:  # reported below
                    errors.append(error)
                finally:
                    connection.close()

            threads = [threading.Thread(target=one, args=pair) for pair in running]
            cpu_before, grabs_before = time.process_time(), ScreenGrabber.grabbed
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            cpu_s = time.process_time() - cpu_before
            grabs = ScreenGrabber.grabbed - grabs_before
            if errors:
                raise errors[0]
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
            print(f"rollouts (quiet_ms={quiet_ms}): {figures}", flush=True)
            return figures
    finally:
        _flush_bench_redis()
        shutil.rmtree(desktop_root, ignore_errors=True)
        shutil.rmtree(media_root, ignore_errors=True)
