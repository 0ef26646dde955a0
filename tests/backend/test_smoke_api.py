"""The API answers, its schema builds, and errors share one body shape."""

import pytest

pytestmark = pytest.mark.django_db


def test_openapi_schema_builds_and_lists_the_queue_endpoints(client_for, make_user):
    client = client_for(make_user("ann"))
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/tasks/claim/" in paths
    assert "/api/projects/{id}/import/" in paths


def test_docs_page_is_served(client_for, make_user):
    response = client_for(make_user("ann")).get("/api/docs/")
    assert response.status_code == 200
    assert b"swagger" in response.content.lower()


def test_anonymous_request_gets_the_standard_error_body(client_for):
    response = client_for(None).get("/api/projects/")
    assert response.status_code in (401, 403)
    error = response.json()["error"]
    assert error["status"] == response.status_code
    assert error["code"] == "not_authenticated"
    assert error["message"]
