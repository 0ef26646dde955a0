"""Property-based fuzzing of the whole API over its OpenAPI schema, against a real uvicorn.

schemathesis generates requests for every operation the schema lists, ``EXAMPLES`` of them per
operation, as a manager and as an annotator (each with a token of every scope: what the role
may not do must be refused, never crash the server). Half the examples of an operation with an
identifier in its path name a row that exists (a project, task, episode, membership,
screenshot of the seeded data), so operations are exercised beyond 404; destructive operations
run last. Every response must be free of server errors (no 5xx) and conform to the schema of
its status (``response_schema_conformance``). Failures are collected over all operations and
reported together, one per operation, with the request that caused them.
"""

import uuid
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import response_schema_conformance

from annotation.models import Episode, Membership, Project, Task
from backend.accounts.roles import Role
from backend.accounts.tokens import SCOPES, issue_token
from tests.support.export_data import make_episodes
from tests.support.live import asgi
from tests.support.services import free_port

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

EXAMPLES = 25
CHECKS = [not_a_server_error, response_schema_conformance]


def existing_ids(project: Project) -> dict[str, str]:
    """Per resource (the path's second segment), an identifier that exists."""
    episode = Episode.objects.filter(task__project=project).first()
    assert episode is not None
    step = episode.steps.select_related("observation").first()
    assert step is not None
    return {
        "projects": str(project.pk),
        "tasks": str(Task.objects.filter(project=project).values_list("pk", flat=True)[0]),
        "episodes": str(episode.pk),
        "memberships": str(Membership.objects.filter(project=project).first().pk),  # type: ignore[union-attr]
        "screenshots": step.observation.sha256,
    }


def fuzz_operation(operation, base: str, headers: dict[str, str], ids: dict[str, str]):
    """``EXAMPLES`` requests of one operation: how many were sent, and the first failure."""
    label = f"{operation.method.upper()} {operation.path}"
    resource = operation.path.split("/")[2]
    sent: list[int] = []
    failed: list[str] = []

    cases = st.one_of(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
    )

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases, existing=st.booleans())
    def call(case, existing: bool) -> None:
        if failed:
            return  # one failure per operation is reported; no shrinking
        if existing and resource in ids:
            for name in case.path_parameters or {}:
                case.path_parameters[name] = ids[resource]
        response = case.call(base_url=base, headers=headers)
        sent.append(response.status_code)
        try:
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as error:  # every check that failed
            request = response.request
            failed.append(f"{label}: {request.method} {request.url}\n{error}")

    call()
    return label, len(sent), failed[0] if failed else None


def fuzz(base: str, token: str, ids: dict[str, str]) -> tuple[list[str], Counter, list[str]]:
    """Every operation of the schema, ``EXAMPLES`` times: the operations, the calls made to
    each and the failures."""
    schema = schemathesis.openapi.from_url(f"{base}/api/schema/?format=json")
    operations = [result.ok() for result in schema.get_all_operations()]
    operations.sort(key=lambda operation: operation.method.upper() == "DELETE")
    headers = {"Authorization": f"Bearer {token}"}
    labels, calls, failures = [], Counter(), []
    for operation in operations:
        label, sent, failure = fuzz_operation(operation, base, headers, ids)
        labels.append(label)
        calls[label] += sent
        if failure is not None:
            failures.append(failure)
    return labels, calls, failures


@pytest.mark.parametrize("role", [Role.MANAGER, Role.ANNOTATOR])
def test_every_operation_answers_without_server_errors_and_as_documented(
    role, make_user, project, settings
):
    user = make_user(f"fuzz-{role}", project, role)
    make_user("other-annotator", project, Role.ANNOTATOR)
    annotator = Membership.objects.filter(project=project, role=Role.ANNOTATOR).first()
    assert annotator is not None
    make_episodes(project, annotator.user, episodes=3, steps=4)
    ids = existing_ids(project)
    _, token = issue_token(user, "fuzz", list(SCOPES), 1)
    port = free_port()
    media = {"TANDEM_MEDIA_ROOT": str(settings.MEDIA_ROOT)}
    with asgi(f"fuzz-{uuid.uuid4().hex[:6]}", port, **media):
        operations, calls, failures = fuzz(f"http://127.0.0.1:{port}", token, ids)

    print(f"\n{role}: {sum(calls.values())} requests over {len(operations)} operations")
    assert failures == [], f"{len(failures)} operations failed:\n\n" + "\n\n".join(failures)
    assert sorted(calls) == sorted(operations)  # every operation was exercised
