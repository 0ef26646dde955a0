"""Step overhead of the live loop on real desktops, with a real Celery worker owning them.

What is timed, per step: ``episodes.decide()`` for the open step, a corrected click on an empty
part of the desktop (nothing there reacts: a static screen), until the next step's
``propose_step`` job lands on the ``model`` queue. In between, the decision is committed, the
worker takes ``execute_step`` from the host's queue, clicks, observes with settle, stores the
screenshot and commits the next step, which sends the proposal job: "decision received →
action executed → settled observation stored → next proposal requested". Nothing
consumes ``model`` but this benchmark, which pops each job the moment it arrives (a blocking
``BRPOP``) and stops the clock then: model time is left out, and the stop is the request itself,
after the next step's commit (the step's ``created_at`` is taken before its INSERT and commit,
so it would leave those out). Both clocks are this process's.

The worker is a ``celery worker`` subprocess consuming only the bench host's queue, with the
pool and concurrency of ``deploy/dev.sh`` (threads, ``-c 8``). Its broker, results and channel
groups are the bench's own Redis database, and so are this process's for the run.

Episodes start the real way (``episodes.start_episode`` leases a ready desktop, the worker runs
``prepare_episode``). One episode alone gives ``step_overhead_p50_ms``/``p95_ms``; then eight
threads each drive their own episode at once (``step_overhead_p95_ms_8_episodes``).

The worker's garbage collector: its full passes once it was ready, and the longest of them
(``worker_gc_full_passes``, ``worker_gc_full_pass_ms_max``, ``tests.bench.worker_counts``): a
full pass stops every step in that process.

Where the time goes: ``episodes.decide()`` alone, the web side's part (``step_decide_ms_p50``,
and with eight episodes at once); after the worker has stopped, the same click is run on one
desktop through ``X11Controller`` in this process, and its settle wait (``step_settle_ms_p50``)
and the PNG encoding of the settled frame (``step_encode_ms_p50``) are timed alone; the rest of
a step is the queue, PostgreSQL and storage.
"""

import base64
import gc
import json
import queue
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

# The bench's own Redis database: broker, results and channel groups. Flushed before and after.
BENCH_REDIS = "redis://127.0.0.1:6379/12"
# Display numbers whose X locks and VNC/control ports no test or demo desktop uses.
DISPLAYS = (2400, 2439)
EPISODES = 8
SOLO_WARMUP, SOLO_TIMED = 5, 60
MANY_WARMUP, MANY_TIMED = 3, 20
SPLIT_REPEATS = 20
WORKER_THREADS = 8  # as deploy/dev.sh runs the desktop host worker
CLICK = {"type": "click", "point": [1200, 760]}  # empty desktop, away from any window
STEP_TIMEOUT_S = 30.0

GOALS = {
    "step_overhead_p50_ms": "≤ 60",
    "step_overhead_p95_ms": "≤ 150",
    "step_overhead_p95_ms_8_episodes": "≤ 250",
}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _flush_bench_redis() -> None:
    import redis

    client = redis.Redis.from_url(BENCH_REDIS)
    try:
        client.flushdb()
    finally:
        client.close()


@contextmanager
def _bench_broker() -> Iterator[None]:
    """This process sends its jobs and notices through the bench's Redis database for a while.

    Django's settings may have been read already (``make bench`` runs every module in one
    process), so the Celery app is pointed at the broker here rather than through the env.
    """
    from django.test import override_settings

    from backend.celery import app

    def point_at(url: str) -> None:
        app.conf.broker_url = url
        app._pool = None  # the next send opens a connection (and producer pool) to ``url``
        app.amqp._producer_pool = None

    saved = app.conf.broker_url
    from tests.support.services import redis_layer

    layers = redis_layer(BENCH_REDIS)
    point_at(BENCH_REDIS)
    try:
        with override_settings(CHANNEL_LAYERS=layers):
            yield
    finally:
        point_at(saved)


def _worker_command(host: str, name: str) -> list[str]:
    from tests.support.services import celery_worker
    from vm_pool.models import host_queue

    return celery_worker(
        name, host_queue(host), "threads", WORKER_THREADS, None,
        "--include", "tests.bench.worker_counts",
    )  # fmt: skip


def bench_worker_env(
    host: str, displays: tuple[int, int], media_root: Path, **extra: str
) -> dict[str, str]:
    """The environment of a benchmark's worker: this process's database and desktops (their
    root, from the settings), its media, and the bench's own Redis database."""
    from django.conf import settings

    from tests.support.services import child_env

    return child_env(
        TANDEM_HOST=host,
        TANDEM_DESKTOP_ROOT=str(settings.TANDEM_DESKTOP_ROOT),
        TANDEM_DISPLAY_MIN=str(displays[0]),
        TANDEM_DISPLAY_MAX=str(displays[1]),
        TANDEM_MEDIA_ROOT=str(media_root),
        TANDEM_REDIS_URL=BENCH_REDIS,
        TANDEM_CELERY_BROKER_URL=BENCH_REDIS,
        TANDEM_CELERY_RESULT_BACKEND=BENCH_REDIS,
        **extra,
    )


@contextmanager
def _worker(host: str, media_root: Path, counts: Path) -> Iterator[None]:
    """The host's worker, which writes its counts (``tests.bench.worker_counts``) to ``counts``
    when it stops, at the block's end."""
    from tests.support.services import running, worker_answers

    name = f"{host}@bench"
    env = bench_worker_env(host, DISPLAYS, media_root, TANDEM_BENCH_COUNTS=str(counts))
    with running(_worker_command(host, name), env, lambda: worker_answers(BENCH_REDIS, name), 60):
        yield


class ProposalRequests:
    """Pops each ``propose_step`` job off the ``model`` queue as it lands, and timestamps it.

    One thread only pops and takes the time (so a job is never timed late because another one
    is being looked up); a second finds the job's episode and step index and hands the time to
    that episode's waiter.
    """

    def __init__(self, episode_ids: list[int]) -> None:
        import redis

        self._redis = redis.Redis.from_url(BENCH_REDIS)
        self._arrived: queue.Queue[tuple[float, int] | None] = queue.Queue()
        self._by_episode: dict[int, queue.Queue[tuple[int, float]]] = {
            pk: queue.Queue() for pk in episode_ids
        }
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._pop, daemon=True),
            threading.Thread(target=self._dispatch, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _pop(self) -> None:
        # kombu's Redis transport keeps one list per priority; priority 0 is the queue's name.
        from django.conf import settings

        queue = f"{settings.INSTANCE_KEY_PREFIX}model"  # the instance's own key of the queue
        keys = [queue, *(f"{queue}\x06\x16{p}" for p in (3, 6, 9))]
        while not self._stop.is_set():
            got = cast("list[bytes] | None", self._redis.brpop(keys, timeout=0.2))
            if got is None:
                continue
            arrived = time.perf_counter()
            message = json.loads(got[1])
            args = json.loads(base64.b64decode(message["body"]))[0]
            self._arrived.put((arrived, int(args[0])))
        self._arrived.put(None)

    def _dispatch(self) -> None:
        """Hand each arrival to its episode's waiter. The jobs that arrived meanwhile are looked
        up in one query: this process's queries compete with the deciding threads for its
        interpreter lock, and eight steps at once arrive together."""
        from django.db import connection

        from annotation.models import Step

        try:
            while (first := self._arrived.get()) is not None:
                arrivals = [first]
                while not self._arrived.empty() and arrivals[-1] is not None:
                    arrivals.append(self._arrived.get_nowait())
                taken = [item for item in arrivals if item is not None]
                ids = [step_id for _, step_id in taken]
                steps = Step.objects.filter(pk__in=ids).values_list("pk", "episode_id", "index")
                found = {pk: (episode_id, index) for pk, episode_id, index in steps}
                for arrived, step_id in taken:
                    episode_id, index = found[step_id]
                    if episode_id in self._by_episode:
                        self._by_episode[episode_id].put((index, arrived))
                if arrivals[-1] is None:
                    break
        finally:
            connection.close()

    def wait(self, episode_id: int, index: int) -> float:
        """When the proposal of step ``index`` of the episode was requested (perf_counter)."""
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while True:
            try:
                got, arrived = self._by_episode[episode_id].get(
                    timeout=max(0.0, deadline - time.monotonic())
                )
            except queue.Empty:
                raise RuntimeError(_why_no_step(episode_id, index)) from None
            if got == index:
                return arrived

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._redis.close()


def _why_no_step(episode_id: int, index: int) -> str:
    from annotation.models import Episode

    episode = Episode.objects.get(pk=episode_id)
    ended = (
        f"; the episode ended: {episode.outcome} ({episode.end_reason})" if episode.ended_at else ""
    )
    return f"episode {episode_id}: no proposal requested for step {index}{ended}"


def _drive(
    requests: ProposalRequests, episode_id: int, user: Any, warmup: int, timed: int
) -> tuple[list[float], list[float]]:
    """Decide ``warmup + timed`` steps of one episode, one after the other: the timed steps'
    ms, and the ms of their ``decide()`` calls alone (the web side's part)."""
    from annotation.episodes import loop as episodes
    from annotation.models import Step

    index = (
        Step.objects.filter(episode_id=episode_id)
        .order_by("-index")
        .values_list("index", flat=True)[0]
    )
    times, deciding = [], []
    for n in range(warmup + timed):
        started = time.perf_counter()
        episodes.decide(
            episode_id, user, index, "corrected", thought="Click the empty desktop.", action=CLICK
        )
        decided = time.perf_counter()
        requested = requests.wait(episode_id, index + 1)
        if n >= warmup:
            times.append((requested - started) * 1000)
            deciding.append((decided - started) * 1000)
        index += 1
    return times, deciding


def _drive_many(
    requests: ProposalRequests, episodes_of: list[tuple[int, Any]]
) -> tuple[list[float], list[float]]:
    from django.db import connection

    results: list[tuple[list[float], list[float]]] = [([], []) for _ in episodes_of]
    errors: list[BaseException] = []
    go = threading.Barrier(len(episodes_of))

    def one(slot: int, episode_id: int, user: Any) -> None:
        try:
            go.wait()
            results[slot] = _drive(requests, episode_id, user, MANY_WARMUP, MANY_TIMED)
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=one, args=(slot, episode_id, user))
        for slot, (episode_id, user) in enumerate(episodes_of)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [t for times, _ in results for t in times], [t for _, ds in results for t in ds]


def _as_a_started_server() -> None:
    """This process decides as the web server does: the setup's garbage (the database's
    migrations leave ~190,000 objects in cycles) collected, and what is left frozen as the
    server freezes its start-up objects (``backend.asgi``), so that no full collection of them
    stops the deciding threads while they are timed."""
    gc.collect()
    gc.freeze()


def _start_desktops(template: Any, host: str, count: int) -> list[Any]:
    from vm_pool import pool
    from vm_pool.models import DesktopStatus

    # One after the other: start_desktop locks the template's row too (FOR UPDATE over the
    # join), so concurrent starts of one template skip each other's desktops.
    started = [pool.start_desktop(pool.create_desktop(template, host).pk) for _ in range(count)]
    broken = [d for d in started if d.status != DesktopStatus.READY]
    if broken:
        raise RuntimeError(f"desktop {broken[0].pk} did not start: {broken[0].broken_reason}")
    return started


def _split(display: str) -> tuple[float, float]:
    """The settle wait (with the loop's settings) and the PNG encoding of the same click on a
    static screen, alone."""
    from django.conf import settings

    from vm_pool.actions import Action
    from vm_pool.x11.controller import X11Controller

    settle_ms, encode_ms = [], []
    with X11Controller(display) as control:
        click = Action.from_json(CLICK)
        for _ in range(SPLIT_REPEATS):
            control.execute(click)
            settled = control.settle(
                window_ms=settings.TANDEM_SETTLE_WINDOW_MS, min_ms=settings.TANDEM_SETTLE_MIN_MS
            )
            started = time.perf_counter()
            control.encode_png(settled.frame)
            encode_ms.append((time.perf_counter() - started) * 1000)
            settle_ms.append(settled.waited_ms)
    return statistics.median(settle_ms), statistics.median(encode_ms)


def run() -> dict[str, float | int]:
    from tests.bench import fresh_database, setup_django

    setup_django()
    from django.test import override_settings

    from annotation.episodes import loop as episodes
    from annotation.models import Membership, Project, Step, Task, TaskStatus
    from backend.accounts.models import User
    from backend.accounts.roles import Role
    from vm_pool import pool
    from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate

    host = f"bench-step-{uuid.uuid4().hex[:6]}"
    desktop_root = Path(tempfile.mkdtemp(prefix="tandem-bench-step-desktops-"))
    media_root = Path(tempfile.mkdtemp(prefix="tandem-bench-step-media-"))
    local = override_settings(TANDEM_DISPLAY_RANGE=DISPLAYS, TANDEM_DESKTOP_ROOT=desktop_root)
    results: dict[str, float | int] = {}
    _flush_bench_redis()
    try:
        with local, fresh_database(), _bench_broker():
            template = DesktopTemplate.objects.create(name="bench-step", width=1280, height=800)
            project = Project.objects.create(name="Step bench", environment_template=template.name)
            users = []
            for n in range(EPISODES):
                user = User.objects.create_user(f"bench-annotator-{n}")
                Membership.objects.create(project=project, user=user, role=Role.ANNOTATOR)
                Task.objects.create(
                    project=project,
                    external_id=f"step-{n}",
                    instruction="Click the empty desktop, again and again.",
                    max_steps=1000,
                    status=TaskStatus.ASSIGNED,
                    assignee=user,
                )
                users.append(user)
            try:
                desktops = _start_desktops(template, host, EPISODES)
                counts = media_root / "worker-counts.json"
                with _worker(host, media_root, counts):
                    projects = Project.objects.filter(pk=project.pk)
                    episode_ids = [episodes.start_episode(user, projects).pk for user in users]
                    requests = ProposalRequests(episode_ids)
                    try:
                        for episode_id in episode_ids:  # each episode's first observation
                            requests.wait(episode_id, 1)
                        _as_a_started_server()
                        solo, solo_decide = _drive(
                            requests, episode_ids[0], users[0], SOLO_WARMUP, SOLO_TIMED
                        )
                        many, many_decide = _drive_many(
                            requests, list(zip(episode_ids, users, strict=True))
                        )
                    finally:
                        gc.unfreeze()
                        requests.close()
                assert Step.objects.filter(episode_id__in=episode_ids).count() == (
                    EPISODES + SOLO_WARMUP + SOLO_TIMED + EPISODES * (MANY_WARMUP + MANY_TIMED)
                )
                results["step_overhead_p50_ms"] = round(statistics.median(solo), 1)
                results["step_overhead_p95_ms"] = round(_percentile(solo, 0.95), 1)
                results["step_overhead_p50_ms_8_episodes"] = round(statistics.median(many), 1)
                results["step_overhead_p95_ms_8_episodes"] = round(_percentile(many, 0.95), 1)
                results["step_decide_ms_p50"] = round(statistics.median(solo_decide), 1)
                results["step_decide_ms_p50_8_episodes"] = round(statistics.median(many_decide), 1)
                worker = json.loads(counts.read_text())
                results["worker_gc_full_passes"] = worker["gc_full_passes"]
                results["worker_gc_full_pass_ms_max"] = worker["gc_full_pass_ms_max"]
                settle_ms, encode_ms = _split(f":{desktops[0].display}")
                results["step_settle_ms_p50"] = round(settle_ms, 1)
                results["step_encode_ms_p50"] = round(encode_ms, 1)
            finally:
                for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
                    pool.stop_desktop(desktop.pk)
    finally:
        _flush_bench_redis()
        shutil.rmtree(desktop_root, ignore_errors=True)
        shutil.rmtree(media_root, ignore_errors=True)
    return results
