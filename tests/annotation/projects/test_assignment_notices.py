"""A manager's assignment reaches the annotator's open pages at once: the assign endpoint
sends a ``tasks_assigned`` notice to the annotator's ``/ws/notifications/`` socket (the queue
page reloads their tasks on it), and to nobody else's."""

from typing import Any

import pytest
from channels.db import database_sync_to_async

from annotation.models import Task
from backend.accounts.roles import Role
from tests.support.sockets import IN_MEMORY_LAYER, run, socket_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def people(make_user, project, settings):
    settings.CHANNEL_LAYERS = IN_MEMORY_LAYER
    return (
        make_user("mona", project, Role.MANAGER),
        make_user("ann", project, Role.ANNOTATOR),
        make_user("otto", project, Role.ANNOTATOR),
    )


def test_assigning_tasks_notifies_the_assignee_live_and_nobody_else(people, project, client_for):
    manager, ann, otto = people
    tasks = [
        Task.objects.create(project=project, external_id=f"t{i}", instruction="Save")
        for i in range(3)
    ]
    client = client_for(manager)

    def assign() -> Any:
        body = {"task_ids": [t.pk for t in tasks[:2]], "assignee": "ann"}
        return client.post(f"/api/projects/{project.pk}/assign/", body, format="json")

    async def exchange() -> tuple[Any, dict[str, Any], bool]:
        mine = await socket_of(ann, "/ws/notifications/")
        other = await socket_of(otto, "/ws/notifications/")
        assert (await mine.receive_json_from())["event"] == "hello"
        assert (await other.receive_json_from())["event"] == "hello"
        response = await database_sync_to_async(assign)()
        notice = await mine.receive_json_from()
        others_silent = await other.app.receive_nothing(0.3)
        await mine.disconnect()
        await other.disconnect()
        return response, notice, others_silent

    response, notice, others_silent = run(exchange)
    assert response.status_code == 200, response.content
    assert notice == {
        "event": "tasks_assigned",
        "payload": {"count": 2, "task_ids": [tasks[0].pk, tasks[1].pk], "by": "mona"},
    }
    assert others_silent


def test_a_refused_assignment_sends_no_notice(people, project, client_for):
    manager, ann, _ = people
    busy = Task.objects.create(
        project=project, external_id="busy", instruction="Save", status="submitted"
    )
    client = client_for(manager)

    def assign() -> Any:
        body = {"task_ids": [busy.pk], "assignee": "ann"}
        return client.post(f"/api/projects/{project.pk}/assign/", body, format="json")

    async def exchange() -> tuple[Any, bool]:
        mine = await socket_of(ann, "/ws/notifications/")
        await mine.receive_json_from()
        response = await database_sync_to_async(assign)()
        silent = await mine.app.receive_nothing(0.3)
        await mine.disconnect()
        return response, silent

    response, silent = run(exchange)
    assert response.status_code == 409
    assert silent
