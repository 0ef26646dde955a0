"""Shared fixtures: users with roles, projects, API clients signed in by session or by token."""

import functools
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from annotation.models import Membership, Project
from backend.accounts.models import User
from backend.accounts.tokens import SCOPES, issue_token
from tests.support.services import SHARED, clear_redis_keys, parallel_process

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="session", autouse=True)
def no_keys_left_from_an_earlier_run() -> None:
    """Jobs an earlier run queued and nobody took (a step proposal, say) would go to this run's
    workers and name rows of this run's new database: the keys under this process's prefix
    (``tests/settings.py``) are cleared as the run starts."""
    clear_redis_keys(settings.INSTANCE_KEY_PREFIX)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Tests create many users; the production hasher is slow on purpose."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


DISPLAY_BLOCKS, DISPLAY_BLOCK = 40, 25


def display_in_use(display: int) -> bool:
    """An X server or a sandboxed desktop (its X socket is linked there) holds it."""
    return os.path.lexists(f"/tmp/.X{display}-lock") or os.path.lexists(
        f"/tmp/.X11-unix/X{display}"
    )


@functools.cache
def free_display_block() -> tuple[int, int]:
    """A block of 25 displays (from 400 up, apart from a running demo's) that no X server holds.

    Test runs started side by side take different blocks (chosen from the pid of the run), the
    processes of one parallel run blocks of their own (every ``count``-th one from the run's
    start, offset by the process's number), and a block where a desktop left by a killed run
    still holds a display is passed over.
    """
    number, count = parallel_process()
    start = (os.getppid() if count > 1 else os.getpid()) % DISPLAY_BLOCKS
    for offset in range(number, DISPLAY_BLOCKS, count):
        base = 400 + ((start + offset) % DISPLAY_BLOCKS) * DISPLAY_BLOCK
        block = range(base, base + DISPLAY_BLOCK)
        if not any(display_in_use(display) for display in block):
            return base, base + DISPLAY_BLOCK - 1
    raise RuntimeError("every test display block is held by a running X server")


# What a process of a parallel run cannot have its own of: the suites started by ``services``
# tests (their Redis databases and Celery brokers are fixed per file, some shared by two) and the
# container engine (one service for the machine, started by the first test that needs it). A
# test that asks for the engine only as it runs is marked ``SHARED`` itself.
SHARED_FIXTURES = {"engine_url"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups from the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In a parallel run (``pytest -n 2 --dist loadgroup``), the tests that use what the
    machine has one of run in one process, one after another; the rest share both."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("services") or fixtures & SHARED_FIXTURES:
            item.add_marker(SHARED)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test whose group did not reach its id would run beside the shared services' other
    tests in a parallel run: it fails, saying why, rather than racing them."""
    grouped = item.get_closest_marker("xdist_group") and item.config.getoption("loadgroup", False)
    if grouped and "@" not in item.nodeid.rsplit("]", 1)[-1]:
        pytest.fail(
            "pytest-xdist did not put this test in its group: this pytest and pytest-xdist do "
            "not work together (see pyproject.toml)",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def desktop_root() -> Iterator[Path]:
    """Where this run's desktops keep their files: under /tmp, whose parents every desktop's
    user can search (pytest's own temporary directory is root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="tandem-test-desktops-"))
    root.chmod(0o711)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def desktop_settings(settings, desktop_root):
    """Test desktops use their own displays and files."""
    settings.TANDEM_DISPLAY_RANGE = free_display_block()
    settings.TANDEM_DESKTOP_ROOT = desktop_root


@pytest.fixture
def loop_settings(db, settings, tmp_path):
    """For running the live loop's jobs in this process on real desktops: files of its own, a
    host name of its own, channel groups in memory; its desktops and screen watches end after."""
    from vm_pool import pool
    from vm_pool.models import Desktop, DesktopStatus
    from vm_pool.screen import watch

    settings.MEDIA_ROOT = tmp_path
    settings.TANDEM_HOST = f"loop-{uuid.uuid4().hex[:8]}"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    yield settings
    for key in watch.watcher.watching():
        watch.watcher.stop(key)
    for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
        pool.stop_desktop(desktop.pk)


@pytest.fixture
def sandboxed_control(loop_settings):
    """The control of one ready sandboxed desktop (1024×768) of the test's own host."""
    from vm_pool import pool
    from vm_pool.models import DesktopStatus, DesktopTemplate

    template = DesktopTemplate.objects.create(name="sandboxed", width=1024, height=768, min_ready=0)
    desktop = pool.start_desktop(pool.create_desktop(template, loop_settings.TANDEM_HOST).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    return pool.control_for(desktop)


@pytest.fixture
def make_user(db) -> Callable[..., User]:
    def make(
        username: str, project: Project | None = None, role: str | None = None, **extra
    ) -> User:
        user = User.objects.create_user(username=username, password=PASSWORD, **extra)
        if project is not None and role is not None:
            Membership.objects.create(project=project, user=user, role=role)
        return user

    return make


@pytest.fixture
def project(db) -> Project:
    return Project.objects.create(name="Office tasks")


@pytest.fixture
def other_project(db) -> Project:
    return Project.objects.create(name="Web tasks")


@pytest.fixture
def client_for() -> Callable[[User | None], APIClient]:
    """An API client signed in with a session (CSRF is checked in its own test)."""

    def make(user: User | None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_login(user)
        return client

    return make


@pytest.fixture
def token_client_for() -> Callable[..., tuple[APIClient, str]]:
    """An API client that authenticates with a fresh personal access token."""

    def make(user: User, scopes: list[str] | None = None, days: int = 30) -> tuple[APIClient, str]:
        _, clear = issue_token(user, "test token", scopes or list(SCOPES), days)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {clear}")
        return client, clear

    return make


MODEL_CLICK = {"type": "click", "point": [100, 200]}


@pytest.fixture
def open_episode(make_user, project, settings, tmp_path):
    """An annotator's running episode, on a desktop row leased for it on host "elsewhere" (no
    desktop runs, no job is taken), with step 1 open and the model's click proposed (rank 0):
    ``(episode, step, annotator)``."""
    from annotation.models import Episode, Proposal, Step, Task
    from annotation.projects.queue import claim_next_task
    from backend.accounts.roles import Role
    from tests.support.pngs import solid_png
    from vm_pool import pool
    from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate
    from vm_pool.screen.screenshots import store_screenshot

    settings.MEDIA_ROOT = tmp_path
    ann = make_user("ann", project, Role.ANNOTATOR)
    Task.objects.create(project=project, external_id="t1", instruction="Open the Archive folder")
    task = claim_next_task(ann, Project.objects.filter(pk=project.pk)).task
    template = DesktopTemplate.objects.create(name="default", min_ready=0)
    Desktop.objects.create(
        template=template, host="elsewhere", provider="local", width=1280, height=800,
        status=DesktopStatus.READY,
    )  # fmt: skip
    desktop = pool.lease_desktop(template, ann, f"task:{task.pk}", 60)
    episode = Episode.objects.create(
        task=task, annotator=ann, desktop=desktop, desktop_generation=desktop.generation
    )
    step = Step.objects.create(
        episode=episode, index=1, observation=store_screenshot(solid_png(1280, 800))
    )
    Proposal.objects.create(step=step, rank=0, raw_text="…", thought="Open it.", action=MODEL_CLICK)
    return episode, step, ann


@pytest.fixture(scope="session")
def engine_url() -> Iterator[str]:
    """The container engine's API (podman's, started when needed) with the desktop image."""
    from tests.support.engine import container_engine

    with container_engine() as url:
        yield url


@pytest.fixture
def container_desktops(engine_url, settings) -> Iterator[None]:
    """Container desktops on the real engine; every one the test started is stopped after."""
    from vm_pool import pool
    from vm_pool.models import Desktop, DesktopStatus

    settings.TANDEM_DOCKER_URL = engine_url
    yield
    for desktop in Desktop.objects.filter(provider="docker").exclude(status=DesktopStatus.STOPPED):
        pool.forget_control(desktop.pk)
        pool.stop_desktop(desktop.pk)


@pytest.fixture
def host(settings) -> Iterator[str]:
    """A desktop host of the test's own, so that only the test's worker takes its jobs; every
    desktop it started is stopped afterwards."""
    from vm_pool import pool
    from vm_pool.models import Desktop, DesktopStatus

    settings.TANDEM_HOST = f"test-{uuid.uuid4().hex[:8]}"
    yield settings.TANDEM_HOST
    for desktop in Desktop.objects.exclude(status=DesktopStatus.STOPPED):
        pool.stop_desktop(desktop.pk)
