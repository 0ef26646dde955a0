"""The evaluation jail: what a desktop left is parsed only there, and a hostile file ends its
evaluation "not scored" with the limit it broke, never a hang, never a score, never a file
written outside, while the host's worker keeps serving and its other desktops keep stepping.

Real processes throughout: bubblewrap, the jail's own user, a Celery worker owning a test host,
sandboxed desktops whose task files plant each file (``tests.support.hostile_files``).
"""

import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import openpyxl
import pytest
from django.conf import settings
from PIL import Image

from annotation.episodes.leases import end_episode
from annotation.models import Episode, EpisodeOutcome, EvaluationStatus, Task
from backend.celery import app as celery_app
from tests.annotation.episodes.test_chaos_episodes import ready, stepping
from tests.support.hostile_files import ESCAPES, Hostile, hostile, same, zip_of
from tests.support.services import celery_worker, child_env, running
from vm_pool import pool
from vm_pool.evaluation import jail, scoring
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate, TaskFile, host_queue
from vm_pool.setup.runner import run_setup
from vm_pool.task_files.downloads import store_task_file

LIMITS = jail.JailLimits(
    uid=settings.TANDEM_EVALUATION_UID,
    memory_mb=2048,
    cpu_s=60,
    wall_s=90,
    tmp_mb=64,
    file_mb=256,
    processes=64,
)
VERDICT_WITHIN_S = 120
WORKER_RSS_MB = 1536

PROBE = r"""
import json, os, socket
seen = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "env": sorted(os.environ)}
def refused(action):
    try:
        action()
    except OSError as error:
        return type(error).__name__
    return None
def connect(port):
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
seen["postgres"] = refused(lambda: connect(5432))
seen["redis"] = refused(lambda: connect(6379))
seen["write_input"] = refused(lambda: open("/evaluation/in/new", "w"))
seen["write_code"] = refused(lambda: open("/opt/tandem/vm_pool/new.py", "w"))
seen["write_root"] = refused(lambda: open("/new", "w"))
def fill():
    with open("/tmp/fill", "wb") as f:
        for _ in range(1000):
            f.write(b"x" * 1024 * 1024)
seen["fill_tmp"] = refused(fill)
seen["read_input"] = open("/evaluation/in/given.txt").read()
seen["docker_sock"] = os.path.exists("/var/run/docker.sock")
seen["root"] = sorted(os.listdir("/"))
seen["repository"] = os.path.exists("REPOSITORY/manage.py")
print(json.dumps(seen))
"""


def test_the_jail_is_its_own_user_with_no_secret_no_network_and_only_tmp_to_write(tmp_path):
    (tmp_path / "given.txt").write_text("gathered")
    argv = jail.command(tmp_path, LIMITS)
    jail._open_to(tmp_path, LIMITS)
    python = argv.index(sys.executable)
    argv = [*argv[: python + 1], "-P", "-c", PROBE.replace("REPOSITORY", str(settings.BASE_DIR))]
    secret_env = {**os.environ, "TANDEM_SECRET_KEY": "s3cret", "AWS_SECRET_ACCESS_KEY": "k"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=secret_env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["uid"] == seen["gid"] == settings.TANDEM_EVALUATION_UID
    assert seen["uid"] not in (0, os.getuid()) and seen["uid"] < settings.TANDEM_SANDBOX_UID_BASE
    assert seen["env"] == sorted(
        ["PATH", "HOME", "LANG", "PWD", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
         "MALLOC_ARENA_MAX", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"]
    )  # fmt: skip
    assert seen["postgres"] and seen["redis"]  # no network at all
    assert seen["write_input"] and seen["write_code"] and seen["write_root"]
    assert seen["fill_tmp"] == "OSError"  # 64 MB of tmp, then "no space left"
    assert seen["read_input"] == "gathered"
    assert not seen["docker_sock"]
    assert "home" not in seen["root"] and "var" not in seen["root"]
    assert not seen["repository"]  # its code is vm_pool alone, read-only


@pytest.mark.parametrize("case", list(hostile()))
def test_a_hostile_file_is_not_scored_with_the_limit_it_broke(case, tmp_path):
    """Each file as the getters gather it, scored by the jail directly."""
    file = hostile()[case]
    request = {"conjunction": "single", "metrics": [_gathered(file, tmp_path)]}
    started = time.monotonic()
    verdict = jail.run(request, tmp_path, LIMITS)
    assert verdict["scored"] is False, verdict
    assert verdict["limit"] == file.limit, verdict
    assert time.monotonic() - started < VERDICT_WITHIN_S
    assert not any(os.path.lexists(path) for path in ESCAPES)


def _gathered(file: Hostile, folder: Path) -> dict:
    """The request entry the getters would have written for ``file``, with the file in place."""
    evaluator = file.evaluator
    name = Path(file.path).name
    (folder / name).write_bytes(file.data)
    readers = {"history": "chrome_history", "bookmarks": "chrome_bookmarks"}

    def gathered(config: dict) -> dict:
        if config["type"] == "vm_file":
            (folder / config["dest"]).write_bytes(file.data)
            return {"kind": "files", "files": [config["dest"]], "single": True}
        if config["type"] == "rule":
            return {"kind": "value", "value": config["rules"]}
        reader = readers[config["type"]]
        return {"kind": "read", "reader": reader, "file": name, "text": None, "config": {}}

    return {
        "func": evaluator["func"],
        "options": evaluator.get("options", {}),
        "result": gathered(evaluator["result"]),
        "expected": gathered(evaluator["expected"]),
    }


@pytest.fixture(scope="module")
def noise_pair() -> Iterator[Path]:
    """Two noisy 16-megapixel images (within the pixel bound): comparing them takes seconds."""
    with tempfile.TemporaryDirectory() as folder:
        for index, name in enumerate(("a.png", "b.png")):
            pixels = np.random.default_rng(index).integers(0, 255, (4096, 4000), dtype=np.uint8)
            Image.fromarray(pixels).save(Path(folder) / name, compress_level=1)
        yield Path(folder)


@pytest.mark.parametrize(
    ("limits", "limit"),
    [({"cpu_s": 1}, "cpu"), ({"wall_s": 1.0}, "time"), ({"memory_mb": 400}, "memory")],
)
def test_the_jail_bounds_cpu_time_and_memory_whatever_the_metric_does(
    noise_pair, tmp_path, limits, limit
):
    for name in ("a.png", "b.png"):
        (tmp_path / name).write_bytes((noise_pair / name).read_bytes())
    files = [{"kind": "files", "files": [name], "single": True} for name in ("a.png", "b.png")]
    entry = {"func": "compare_images", "result": files[0], "expected": files[1]}
    bounded = jail.JailLimits(**{**LIMITS.__dict__, **limits})
    started = time.monotonic()
    verdict = jail.run({"conjunction": "single", "metrics": [entry]}, tmp_path, bounded)
    assert (verdict["scored"], verdict["limit"]) == (False, limit), verdict
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "answer",
    [
        [],
        {"scored": "yes"},
        {"scored": True, "value": float("nan"), "reason": "", "conjunction": "and", "metrics": []},
        {"scored": True, "value": 1, "reason": "", "conjunction": "xor", "metrics": []},
        {"scored": True, "value": 1, "reason": "x" * 5000, "conjunction": "and", "metrics": []},
        {"scored": True, "value": 1, "reason": "", "conjunction": "and", "metrics": [{}, {}]},
        {"scored": False, "limit": 3, "reason": "r"},
    ],
)
def test_a_verdict_of_the_wrong_shape_is_refused(answer):
    with pytest.raises(ValueError):
        jail.check_verdict(answer, metrics=1)


# --- through the host's worker, on real desktops ----------------------------------------------


@contextmanager
def host_worker(host: str) -> Iterator[subprocess.Popen]:
    """The host's Celery worker as production runs it (threads), its peak RSS sampled."""
    low, high = settings.TANDEM_DISPLAY_RANGE
    env = child_env(
        TANDEM_HOST=host,
        TANDEM_DESKTOP_ROOT=str(settings.TANDEM_DESKTOP_ROOT),
        TANDEM_DISPLAY_MIN=str(low),
        TANDEM_DISPLAY_MAX=str(high),
        TANDEM_EVALUATION_QUIET_MS="100",
    )
    name = f"{host}@jail"
    command = celery_worker(name, host_queue(host), "threads", 8)

    def ready() -> bool:
        return bool(celery_app.control.ping(destination=[name], timeout=0.5))

    with running(command, env, ready, timeout=60) as process:
        yield process


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextmanager
def peak_rss(pid: int) -> Iterator[list[float]]:
    peak = [rss_mb(pid)]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            peak[0] = max(peak[0], rss_mb(pid))

    thread = threading.Thread(target=sample)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()


def evaluated(desktop: Desktop, annotator, project, name: str, file: Hostile) -> Episode:
    """An episode of a task whose setup plants ``file`` on ``desktop``, ended, its evaluation
    done by the host's worker."""
    wait_for(lambda: Desktop.objects.get(pk=desktop.pk).status == DesktopStatus.READY, 60)
    url = f"https://files.example.com/{name.replace(' ', '-')}"
    store_task_file(url, file.data, TaskFile.Source.UPLOADED)
    config = [{"type": "download", "parameters": {"files": [{"url": url, "path": file.path}]}}]
    leased = pool.lease_desktop(desktop.template, annotator, name, 120)
    assert run_setup(pool.control_for(leased), config) == []
    task = Task.objects.create(
        project=project, external_id=name, instruction=name, setup=config, evaluator=file.evaluator
    )
    episode = Episode.objects.create(
        task=task, annotator=annotator, desktop=leased, desktop_generation=leased.generation
    )
    end_episode(episode.pk, EpisodeOutcome.FINISHED, EpisodeOutcome.FINISHED)
    started = time.monotonic()
    wait_for(
        lambda: Episode.objects.get(pk=episode.pk).evaluation_status != EvaluationStatus.PENDING,
        VERDICT_WITHIN_S,
    )
    print(f"  {name}: {time.monotonic() - started:.1f} s")
    return Episode.objects.get(pk=episode.pk)


def wait_for(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.django_db(transaction=True)
def test_hostile_task_files_end_not_scored_while_the_host_keeps_working(
    host, make_user, project, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path  # the task files' cache, read by the setup here
    template = DesktopTemplate.objects.create(name="hostile", width=800, height=600, min_ready=0)
    elsewhere = DesktopTemplate.objects.create(name="other", width=800, height=600, min_ready=0)
    desktop, other = ready(template, host), ready(elsewhere, host)
    annotator = make_user("ann")
    cases = hostile()
    ordinary = Hostile(
        b"an ordinary document\n", "~/plain.txt",
        {"func": "compare_text_file", "result": {"type": "vm_file", "path": "~/plain.txt",
         "dest": "plain.txt"}, "expected": {"type": "vm_file", "path": "~/plain.txt",
         "dest": "e.txt"}},
        "",
    )  # fmt: skip
    began = time.time()
    with host_worker(host) as worker, peak_rss(worker.pid) as peak, stepping(other) as steps:
        for name, file in cases.items():
            episode = evaluated(desktop, annotator, project, name, file)
            assert episode.evaluation_status == EvaluationStatus.FAILED, (name, episode.evaluation)
            assert episode.task_success is None
            assert episode.evaluation.get("limit") == file.limit, (name, episode.evaluation)
            assert file.limit in episode.evaluation["error"]
        # The worker still scores, and scores right.
        episode = evaluated(desktop, annotator, project, "ordinary", ordinary)
        assert (episode.evaluation_status, episode.task_success) == (EvaluationStatus.SCORED, 1.0)
        assert worker.poll() is None
    print(
        f"\nworker peak RSS {peak[0]:.0f} MB; the other desktop's {len(steps)} steps: median "
        f"{statistics.median(steps) * 1000:.0f} ms, max {max(steps) * 1000:.0f} ms"
    )
    assert peak[0] < WORKER_RSS_MB
    assert not any(os.path.lexists(path) for path in ESCAPES)
    owned = subprocess.run(
        [
            "find",
            "/tmp",
            "-xdev",
            "-uid",
            str(settings.TANDEM_EVALUATION_UID),
            "-newermt",
            f"@{began:.0f}",
            "-not",
            "-path",
            "/tmp/pytest-of-*",
        ],  # fmt: skip
        capture_output=True,
        text=True,
    )
    assert owned.stdout == ""  # the jail left no file of its own on the host


def _ordinary() -> dict[str, Hostile]:
    """Ordinary files of the same kinds, each scoring 1 against itself."""
    members = {"data/a.txt": b"first\n", "data/b.txt": b"second\n"}
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    book = openpyxl.Workbook()
    book.active.append(["name", "count"])
    book.active.append(["apples", 3])
    sheet = io.BytesIO()
    book.save(sheet)
    options = {"file_path": "data", "file_type": "text"}
    table = {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}
    return {
        "zip": Hostile(
            zip_of(members), "~/a.zip", same("compare_archive", "~/a.zip", **options), ""
        ),
        "tar.gz": Hostile(
            tar.getvalue(), "~/a.tar.gz", same("compare_archive", "~/a.tar.gz", **options), ""
        ),
        "xlsx": Hostile(
            sheet.getvalue(), "~/b.xlsx", same("compare_table", "~/b.xlsx", **table), ""
        ),
    }


@pytest.mark.parametrize("case", list(_ordinary()))
def test_an_ordinary_file_of_the_same_kind_scores_in_the_jail(case, tmp_path):
    file = _ordinary()[case]
    request = {"conjunction": "single", "metrics": [_gathered(file, tmp_path)]}
    verdict = jail.run(request, tmp_path, LIMITS)
    assert (verdict["scored"], verdict["value"]) == (True, 1.0), verdict


def test_what_a_metric_saw_reads_as_json_not_as_python(tmp_path):
    rules = {"expected": ["a", "b"], "case": True}
    entry = {
        "func": "exact_match",
        "result": {"kind": "value", "value": "a"},
        "expected": {"kind": "value", "value": rules},
    }
    verdict = scoring.score({"conjunction": "single", "metrics": [entry]}, tmp_path)
    assert verdict["metrics"][0]["expected"] == '{"expected": ["a", "b"], "case": true}'
