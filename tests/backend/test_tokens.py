"""Personal access tokens: created by a session, stored as a hash, scoped, expiring, revocable."""

import hashlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.http import HttpResponse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import Task
from backend.accounts.models import AccessToken, User
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def annotator(make_user, project) -> User:
    user = make_user("ana", project, "annotator")
    Task.objects.create(project=project, external_id="t-1", instruction="Open the editor.")
    return user


@pytest.fixture
def create_token(client_for) -> Callable[..., HttpResponse]:
    def create(user: User, **body: Any) -> HttpResponse:
        body = {"name": "laptop", "scopes": ["tasks:read"], "days": 30, **body}
        return client_for(user).post("/api/tokens/", body, format="json")

    return create


def bearer(clear: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {clear}")
    return client


def assert_error(response: HttpResponse, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content[:500]
    error = response.json()["error"]
    assert error["status"] == status
    assert error["code"] == code
    assert error["message"]
    return error


def test_created_token_is_shown_once_and_never_listed(create_token, client_for, annotator):
    response = create_token(annotator, scopes=["tasks:read", "episodes:read"])

    assert response.status_code == 201
    created = response.json()
    clear = created["token"]
    assert clear.startswith(f"{created['prefix']}_")
    assert created["scopes"] == ["episodes:read", "tasks:read"]
    listing = client_for(annotator).get("/api/tokens/")
    assert listing.status_code == 200
    assert [t["id"] for t in listing.json()["results"]] == [created["id"]]
    assert "token" not in listing.json()["results"][0]
    assert clear.encode() not in listing.content
    assert clear.split("_", 2)[2].encode() not in listing.content


def test_database_holds_only_the_sha256_of_the_secret(create_token, annotator):
    clear = create_token(annotator).json()["token"]
    _, prefix, secret = clear.split("_", 2)

    token = AccessToken.objects.get(user=annotator)

    assert token.prefix == prefix
    assert token.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    stored = [str(getattr(token, f.attname)) for f in AccessToken._meta.concrete_fields]
    assert not any(secret in value or clear in value for value in stored)


def test_token_authenticates_a_bearer_request(create_token, annotator):
    clear = create_token(annotator).json()["token"]

    response = bearer(clear).get("/api/tasks/")

    assert response.status_code == 200
    assert "results" in response.json()


def test_wrong_secret_is_refused_with_the_error_body(create_token, annotator):
    clear = create_token(annotator).json()["token"]
    wrong = clear[:-4] + ("AAAA" if not clear.endswith("AAAA") else "BBBB")

    response = bearer(wrong).get("/api/tasks/")

    assert_error(response, 401, "authentication_failed")
    assert response["WWW-Authenticate"] == "Bearer"


def test_malformed_token_is_refused(annotator):
    assert_error(bearer("not-a-token").get("/api/tasks/"), 401, "authentication_failed")


def test_token_of_a_deactivated_user_is_refused(create_token, annotator):
    clear = create_token(annotator).json()["token"]
    User.objects.filter(pk=annotator.pk).update(is_active=False)

    assert_error(bearer(clear).get("/api/tasks/"), 401, "authentication_failed")


def test_expired_token_is_refused_as_expired(create_token, annotator):
    clear = create_token(annotator).json()["token"]
    AccessToken.objects.filter(user=annotator).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    error = assert_error(bearer(clear).get("/api/tasks/"), 401, "authentication_failed")

    assert "expired" in error["message"]


def test_revoked_token_is_refused(create_token, client_for, annotator):
    created = create_token(annotator).json()
    assert bearer(created["token"]).get("/api/tasks/").status_code == 200

    revoke = client_for(annotator).delete(f"/api/tokens/{created['id']}/")

    assert revoke.status_code == 200
    assert revoke.json()["revoked_at"] is not None
    assert revoke.json()["is_active"] is False
    error = assert_error(bearer(created["token"]).get("/api/tasks/"), 401, "authentication_failed")
    assert "revoked" in error["message"]


def test_read_scope_can_list_tasks_but_not_claim(create_token, annotator):
    client = bearer(create_token(annotator, scopes=["tasks:read"]).json()["token"])

    assert client.get("/api/tasks/").status_code == 200
    claim = client.post("/api/tasks/claim/", {}, format="json")

    assert_error(claim, 403, "permission_denied")
    assert not Task.objects.filter(assignee=annotator).exists()


def test_write_scope_can_claim(create_token, annotator):
    client = bearer(create_token(annotator, scopes=["tasks:write"]).json()["token"])

    claim = client.post("/api/tasks/claim/", {}, format="json")

    assert claim.status_code == 200
    assert claim.json()["task"]["external_id"] == "t-1"


def test_token_without_a_projects_scope_cannot_read_projects(create_token, annotator):
    client = bearer(
        create_token(annotator, scopes=["tasks:write", "episodes:read"]).json()["token"]
    )

    assert_error(client.get("/api/projects/"), 403, "permission_denied")


def test_projects_scope_can_read_projects(create_token, annotator, project):
    client = bearer(create_token(annotator, scopes=["projects:read"]).json()["token"])

    response = client.get("/api/projects/")

    assert response.status_code == 200
    assert [p["id"] for p in response.json()["results"]] == [project.pk]


def test_tokens_cannot_list_create_or_revoke_tokens(token_client_for, annotator):
    client, _ = token_client_for(annotator)
    own = AccessToken.objects.get(user=annotator)

    assert_error(client.get("/api/tokens/"), 403, "permission_denied")
    create = client.post("/api/tokens/", {"name": "x", "scopes": ["tasks:read"]}, format="json")
    assert_error(create, 403, "permission_denied")
    assert_error(client.delete(f"/api/tokens/{own.pk}/"), 403, "permission_denied")
    assert AccessToken.objects.filter(user=annotator).count() == 1
    own.refresh_from_db()
    assert own.revoked_at is None


def test_last_used_at_is_set_when_the_token_is_used(create_token, annotator):
    clear = create_token(annotator).json()["token"]
    token = AccessToken.objects.get(user=annotator)
    assert token.last_used_at is None

    before = timezone.now()
    bearer(clear).get("/api/tasks/")

    token.refresh_from_db()
    assert token.last_used_at is not None
    assert before <= token.last_used_at <= timezone.now()


def test_unknown_scope_is_refused_at_creation(create_token, annotator):
    response = create_token(annotator, scopes=["tasks:read", "tasks:admin"])

    error = assert_error(response, 400, "invalid")
    assert "scopes" in error["details"]
    assert not AccessToken.objects.exists()


def test_lifetime_beyond_the_maximum_is_refused_at_creation(create_token, annotator, settings):
    response = create_token(annotator, days=settings.TANDEM_TOKEN_MAX_DAYS + 1)

    error = assert_error(response, 400, "invalid")
    assert str(settings.TANDEM_TOKEN_MAX_DAYS) in error["message"]
    assert not AccessToken.objects.exists()


def test_token_expires_after_the_days_asked_for(create_token, annotator):
    before = timezone.now()

    create_token(annotator, days=7)

    token = AccessToken.objects.get(user=annotator)
    assert before + timedelta(days=7) <= token.expires_at <= timezone.now() + timedelta(days=7)


def test_user_cannot_revoke_another_users_token(create_token, client_for, annotator, make_user):
    created = create_token(annotator).json()
    other = make_user("otto")

    response = client_for(other).delete(f"/api/tokens/{created['id']}/")

    assert_error(response, 404, "not_found")
    assert AccessToken.objects.get(pk=created["id"]).revoked_at is None
    assert bearer(created["token"]).get("/api/tasks/").status_code == 200


def test_user_lists_only_their_own_tokens(create_token, client_for, annotator, make_user):
    create_token(annotator)
    other = make_user("otto")

    assert client_for(other).get("/api/tokens/").json()["results"] == []


def test_session_post_without_csrf_token_is_refused(annotator):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="ana", password=PASSWORD)

    response = client.post("/api/tokens/", {"name": "x", "scopes": ["tasks:read"]}, format="json")

    error = assert_error(response, 403, "permission_denied")
    assert "CSRF" in error["message"]
    assert not AccessToken.objects.exists()


def test_session_post_with_csrf_token_is_accepted(annotator):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="ana", password=PASSWORD)
    client.get("/accounts/login/")
    csrf = client.cookies["csrftoken"].value

    response = client.post(
        "/api/tokens/",
        {"name": "x", "scopes": ["tasks:read"]},
        format="json",
        HTTP_X_CSRFTOKEN=csrf,
    )

    assert response.status_code == 201
    assert AccessToken.objects.filter(user=annotator).count() == 1
