"""The pool through a real Celery worker that owns a host: resets off the path, and a worker
killed in the middle of a reset never lets a half-reset desktop be leased."""

import os
import signal
import time

import pytest
from django.conf import settings

from backend.celery import app as celery_app
from tests.support.desktops import sandbox_xvfb
from tests.support.services import celery_worker, child_env, running
from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate, host_queue
from vm_pool.providers.local import desktop_dir

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def worker(host: str):
    low, high = settings.TANDEM_DISPLAY_RANGE
    env = child_env(
        TANDEM_HOST=host,
        TANDEM_DESKTOP_ROOT=str(settings.TANDEM_DESKTOP_ROOT),
        TANDEM_DISPLAY_MIN=str(low),
        TANDEM_DISPLAY_MAX=str(high),
    )
    name = f"{host}@tandem"
    command = celery_worker(name, host_queue(host))

    def ready() -> bool:
        return bool(celery_app.control.ping(destination=[name], timeout=0.5))

    return running(command, env, ready, timeout=60)


def wait_for(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def status(desktop_id: int) -> str:
    return Desktop.objects.values_list("status", flat=True).get(pk=desktop_id)


def xvfb_count(display: int) -> int:
    return len(sandbox_xvfb(display))


def test_release_is_reset_by_the_hosts_worker(host, make_user):
    template = DesktopTemplate.objects.create(name="office", min_ready=1)
    desktop = pool.start_desktop(pool.create_desktop(template, host).pk)
    pool.lease_desktop(template, make_user("ann"), "task:1", 60)
    with worker(host):
        pool.release_desktop(desktop.pk)
        wait_for(lambda: status(desktop.pk) == DesktopStatus.READY)
    assert Desktop.objects.get(pk=desktop.pk).generation == 1


def test_worker_killed_mid_reset_leaves_the_desktop_unleasable_until_redone(host, make_user):
    template = DesktopTemplate.objects.create(name="office", min_ready=1)
    desktop = pool.start_desktop(pool.create_desktop(template, host).pk)
    pool.lease_desktop(template, make_user("ann"), "task:1", 60)
    pidfile = desktop_dir(desktop.pk) / "agent.pid"
    first_agent = pidfile.read_text()

    with worker(host) as process:
        pool.release_desktop(desktop.pk)
        # The reset has started a new desktop and is waiting for it: kill the worker now.
        wait_for(lambda: pidfile.exists() and pidfile.read_text() not in ("", first_agent), 30)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    assert status(desktop.pk) == DesktopStatus.RESETTING
    with pytest.raises(pool.NoDesktopAvailable):
        pool.lease_desktop(template, make_user("otto"), "task:2", 60)

    with worker(host):  # a new worker on this host redoes the unfinished reset at start
        wait_for(lambda: status(desktop.pk) == DesktopStatus.READY, 30)
    desktop.refresh_from_db()
    assert xvfb_count(desktop.display) == 1  # the half-started desktop did not leak
    assert pool.lease_desktop(template, make_user("olga"), "task:3", 60).pk == desktop.pk
