"""Tandem's real processes: the ASGI server (HTTP and WebSockets over Redis) and Celery."""

import json
import socket
import uuid
from datetime import timedelta

import httpx
import pytest
from celery.exceptions import TimeoutError as CeleryTimeout
from django.test import Client
from django.utils import timezone
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from annotation.jobs import return_lapsed_leases
from annotation.models import Project, Task, TaskEvent, TaskStatus
from annotation.queue import claim_next_task
from backend.accounts.roles import Role
from backend.accounts.tokens import issue_token
from backend.celery import app as celery_app
from tests.services import BIN, child_env, free_port, port_open, running

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server():
    port = free_port()
    # Redis database 15 keeps the test's channel groups apart from a running demo's.
    env = child_env(TANDEM_REDIS_URL="redis://127.0.0.1:6379/15")
    command = [str(BIN / "uvicorn"), "backend.asgi:application", "--port", str(port)]
    with running(command, env, port_open(port)):
        yield f"127.0.0.1:{port}"


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def test_asgi_server_serves_http_health_and_the_sign_in_page(server):
    health = httpx.get(f"http://{server}/healthz")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "postgresql": "ok", "redis": "ok"}
    assert "Sign in" in httpx.get(f"http://{server}/accounts/login/").text


def test_assigned_annotator_hears_of_it_over_a_websocket(server, make_user, project):
    manager = make_user("mona", project, Role.MANAGER)
    ann = make_user("ann", project, Role.ANNOTATOR)
    tasks = Task.objects.bulk_create(
        Task(project=project, external_id=f"t{i}", instruction="Open the editor") for i in range(3)
    )
    _, token = issue_token(manager, "assigner", ["projects:write"], 1)
    headers = {"Cookie": session_cookie(ann)}

    with connect(
        f"ws://{server}/ws/notifications/", additional_headers=headers, origin=f"http://{server}"
    ) as ws:
        assert json.loads(ws.recv(timeout=10)) == {"event": "hello", "payload": {"username": "ann"}}
        response = httpx.post(
            f"http://{server}/api/projects/{project.pk}/assign/",
            json={"task_ids": [t.pk for t in tasks], "assignee": "ann"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.text
        notice = json.loads(ws.recv(timeout=10))

    assert notice["event"] == "tasks_assigned"
    assert notice["payload"]["count"] == 3 and notice["payload"]["by"] == "mona"
    assert sorted(notice["payload"]["task_ids"]) == sorted(t.pk for t in tasks)


def test_anonymous_websocket_is_refused_at_the_handshake(server):
    with pytest.raises(InvalidStatus) as refused:
        connect(f"ws://{server}/ws/notifications/", origin=f"http://{server}")
    assert refused.value.response.status_code == 403


def test_celery_worker_returns_lapsed_leases(make_user, project):
    ann = make_user("ann", project, Role.ANNOTATOR)
    Task.objects.create(project=project, external_id="t1", instruction="Open the editor")
    claim = claim_next_task(ann, Project.objects.filter(pk=project.pk))
    Task.objects.filter(pk=claim.task.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    # A queue of the test's own, so that no other worker on this machine takes the job.
    queue_name = f"test-{uuid.uuid4().hex[:8]}"
    command = [str(BIN / "celery"), "-A", "backend", "worker", "-Q", queue_name, "--pool", "solo"]
    worker_name = f"{queue_name}@{socket.gethostname()}"
    command += ["-n", worker_name, "--without-gossip", "--without-mingle"]

    def worker_ready() -> bool:
        return bool(celery_app.control.ping(destination=[worker_name], timeout=0.5))

    with running(command, child_env(), worker_ready, timeout=60):
        try:
            returned = return_lapsed_leases.apply_async(queue=queue_name).get(timeout=30)
        except CeleryTimeout as error:
            pytest.fail(f"the worker did not run the job: {error}")

    assert returned == 1
    task = Task.objects.get(pk=claim.task.pk)
    assert (task.status, task.assignee) == (TaskStatus.QUEUED, None)
    assert TaskEvent.objects.filter(task=task, kind=TaskEvent.Kind.LEASE_LAPSED).count() == 1


def test_beat_schedules_the_lease_reaper_on_the_default_queue():
    schedule = celery_app.conf.beat_schedule["return-lapsed-task-leases"]
    assert schedule["task"] == return_lapsed_leases.name
    assert schedule["schedule"] > 0
    assert celery_app.conf.task_routes["annotation.jobs.*"] == {"queue": "default"}
    assert {q.name for q in celery_app.conf.task_queues} == {
        "default",
        "exports",
        "desktops",
        "model",
        "train",
    }
