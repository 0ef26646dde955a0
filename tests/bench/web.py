"""The web tier under a bounded API load: PostgreSQL connections held, and request latency.

A real uvicorn serves the bench database with the default pool (``TANDEM_DB_POOL_MAX``, 8); four
times as many clients as the pool has connections send a manager's reads at once on loopback
(``tests.support.api_load``). ``db_connections_peak`` is the most connections the server held at any
sample (every 5 ms); it must stay at or under ``db_pool_max``.
"""

import uuid

POOL = 8  # the server's pool: TANDEM_DB_POOL_MAX's default
CLIENTS_PER_CONNECTION = 4
REQUESTS_EACH = 40

GOALS = {"db_connections_peak": "≤ db_pool_max", "api_server_errors": "0"}


def run() -> dict[str, float | int]:
    from tests.bench import fresh_database, setup_django

    setup_django()

    from annotation.models import Membership, Project, Task
    from backend.accounts.models import User
    from backend.accounts.roles import Role
    from backend.accounts.tokens import issue_token
    from tests.support.api_load import api_load
    from tests.support.services import BIN, child_env, free_port, port_open, running

    pool = POOL
    name = f"tandem-bench-{uuid.uuid4().hex[:8]}"
    with fresh_database():
        project = Project.objects.create(name="Web bench")
        manager = User.objects.create_user("bench-manager")
        Membership.objects.create(project=project, user=manager, role=Role.MANAGER)
        Task.objects.bulk_create(
            Task(project=project, external_id=f"t{i}", instruction=f"Task {i}") for i in range(2000)
        )
        scopes = ["projects:read", "tasks:read", "episodes:read"]
        _, token = issue_token(manager, "bench", scopes, 1)
        port = free_port()
        command = [str(BIN / "uvicorn"), "backend.asgi:application", "--port", str(port)]
        env = child_env(TANDEM_DB_APPLICATION_NAME=name, TANDEM_DB_POOL_MAX=str(POOL))
        with running(command, env, port_open(port)):
            result = api_load(
                f"http://127.0.0.1:{port}",
                token,
                project.pk,
                name,
                clients=CLIENTS_PER_CONNECTION * pool,
                requests_each=REQUESTS_EACH,
            )
    server_errors = sum(n for status, n in result.statuses.items() if status >= 500)
    return {
        "db_pool_max": pool,
        "db_connections_peak": result.peak_connections,
        "api_clients": CLIENTS_PER_CONNECTION * pool,
        "api_p50_ms": round(result.p50_ms, 1),
        "api_p95_ms": round(result.p95_ms, 1),
        "api_server_errors": server_errors + len(result.errors),
    }
