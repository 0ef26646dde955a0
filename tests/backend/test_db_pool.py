"""The web tier's PostgreSQL connections are bounded by its pool, under a load four times wider.

A real uvicorn runs with a pool of 4 connections; 16 API clients on loopback send reads at once
(``tests.support.api_load``). Every request is answered (some wait for a connection), none with a
5xx, and the server never holds more than 4 connections meanwhile.
"""

import uuid

import pytest

from annotation.models import Task
from backend.accounts.roles import Role
from backend.accounts.tokens import issue_token
from tests.support.api_load import api_load
from tests.support.live import asgi
from tests.support.services import free_port

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

POOL = 4


def test_sixteen_clients_on_a_pool_of_four_all_get_answers_within_four_connections(
    make_user, project
):
    manager = make_user("mona", project, Role.MANAGER)
    Task.objects.bulk_create(
        Task(project=project, external_id=f"t{i}", instruction=f"Task {i}") for i in range(200)
    )
    _, token = issue_token(manager, "load", ["projects:read", "tasks:read", "episodes:read"], 1)
    name = f"tandem-load-{uuid.uuid4().hex[:8]}"
    port = free_port()
    with asgi("load", port, TANDEM_DB_POOL_MAX=str(POOL), TANDEM_DB_APPLICATION_NAME=name):
        result = api_load(
            f"http://127.0.0.1:{port}", token, project.pk, name, clients=4 * POOL, requests_each=15
        )

    assert result.errors == []
    assert dict(result.statuses) == {200: 4 * POOL * 15}
    # The pool grew to its bound under the load (its connections stay open once made), and
    # never past it: four times as many clients waited for those four.
    assert result.peak_connections == POOL, result.peak_connections
    print(
        f"\n{4 * POOL} clients, pool of {POOL}: peak {result.peak_connections} connections, "
        f"p50 {result.p50_ms:.0f} ms, p95 {result.p95_ms:.0f} ms"
    )
