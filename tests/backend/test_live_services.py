"""Tandem's real processes: the ASGI server (HTTP and WebSockets over Redis) and Celery."""

import asyncio
import json
import socket
import time
import uuid
from datetime import timedelta

import httpx
import pytest
import redis
from asgiref.sync import async_to_sync
from channels_redis.core import RedisChannelLayer
from django.test import Client
from django.utils import timezone
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from annotation.jobs import return_lapsed_leases
from annotation.models import Project, Task, TaskEvent, TaskStatus
from annotation.projects.queue import claim_next_task
from backend.accounts.roles import Role
from backend.accounts.tokens import issue_token
from backend.celery import app as celery_app
from tests.e2e.workspace import eventually
from tests.support.services import (
    BIN,
    celery_worker,
    child_env,
    free_port,
    port_open,
    redis_layer,
    running,
    worker_answers,
)

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


def returned_to_queue(task: Task) -> Task:
    """The task, once a worker has returned its lapsed lease (jobs store no result: their
    effect is read)."""
    return eventually(
        lambda: Task.objects.filter(pk=task.pk, status=TaskStatus.QUEUED).first(),
        "the worker to return the lapsed lease",
        30,
    )


def test_celery_worker_returns_lapsed_leases(make_user, project):
    ann = make_user("ann", project, Role.ANNOTATOR)
    Task.objects.create(project=project, external_id="t1", instruction="Open the editor")
    claim = claim_next_task(ann, Project.objects.filter(pk=project.pk))
    Task.objects.filter(pk=claim.task.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    # A queue of the test's own, so that no other worker on this machine takes the job.
    queue_name = f"test-{uuid.uuid4().hex[:8]}"
    worker_name = f"{queue_name}@{socket.gethostname()}"
    command = celery_worker(worker_name, queue_name)

    def worker_ready() -> bool:
        return bool(celery_app.control.ping(destination=[worker_name], timeout=0.5))

    with running(command, child_env(), worker_ready, timeout=60):
        return_lapsed_leases.apply_async(queue=queue_name)
        task = returned_to_queue(claim.task)
    assert (task.status, task.assignee) == (TaskStatus.QUEUED, None)
    assert TaskEvent.objects.filter(task=task, kind=TaskEvent.Kind.LEASE_LAPSED).count() == 1


def test_a_worker_of_another_instance_on_the_same_redis_never_takes_this_instances_jobs(
    make_user, project, settings
):
    """Two instances share one Redis (two checkouts on one machine): the other's worker, on a
    queue of the same name, leaves this instance's job alone; this instance's worker runs it."""
    ann = make_user("ann", project, Role.ANNOTATOR)
    Task.objects.create(project=project, external_id="t1", instruction="Open the editor")
    claim = claim_next_task(ann, Project.objects.filter(pk=project.pk))
    Task.objects.filter(pk=claim.task.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    queue_name, other = f"test-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    name = f"{queue_name}@{socket.gethostname()}"
    command = celery_worker(name, queue_name)
    broker = settings.CELERY_BROKER_URL
    waiting = f"{settings.INSTANCE_KEY_PREFIX}{queue_name}"

    def other_ready() -> bool:
        return worker_answers(broker, name, instance=other)

    with running(command, child_env(TANDEM_INSTANCE=other), other_ready, timeout=60):
        return_lapsed_leases.apply_async(queue=queue_name)
        time.sleep(3)  # the other instance's worker is listening on a queue of the same name
        assert redis.Redis.from_url(broker).llen(waiting) == 1
        assert Task.objects.get(pk=claim.task.pk).status == TaskStatus.IN_PROGRESS
        assert not worker_answers(broker, name)  # nor does it answer this instance's pings

    with running(command, child_env(), lambda: worker_answers(broker, name), timeout=60):
        returned_to_queue(claim.task)
    assert redis.Redis.from_url(broker).llen(waiting) == 0  # taken: the job that was sent
    assert TaskEvent.objects.filter(task=claim.task, kind=TaskEvent.Kind.LEASE_LAPSED).count() == 1


def test_socket_groups_of_two_instances_on_one_redis_are_apart(settings):
    """A message told to a group reaches that instance's members only."""
    config = redis_layer("redis://127.0.0.1:6379/15")["default"]["CONFIG"]
    ours = RedisChannelLayer(**config)
    theirs = RedisChannelLayer(**{**config, "prefix": "other:asgi"})
    group = f"episode-{uuid.uuid4().hex[:8]}"

    async def tell_and_listen() -> tuple[dict, bool]:
        mine, other = await ours.new_channel(), await theirs.new_channel()
        await ours.group_add(group, mine)
        await theirs.group_add(group, other)
        await ours.group_send(group, {"type": "step.ready", "index": 1})
        heard = await asyncio.wait_for(ours.receive(mine), timeout=5)
        try:
            await asyncio.wait_for(theirs.receive(other), timeout=1)
        except TimeoutError:
            return heard, False
        return heard, True

    heard, overheard = async_to_sync(tell_and_listen)()
    assert heard == {"type": "step.ready", "index": 1}
    assert not overheard
    assert config["prefix"] == f"{settings.TANDEM_INSTANCE}:asgi"


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
