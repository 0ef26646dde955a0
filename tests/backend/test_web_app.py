"""The web app is served by Django: its index under /app/ for signed-in people, its built
assets under /static/app/, and a CSRF cookie the app sends back on every unsafe request."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def built_index() -> str:
    index = settings.FRONTEND_DIST / "index.html"
    assert index.is_file(), (
        f"The web app is not built ({index} is missing): run deploy/dev.sh install, "
        "or `npm ci && npm run build` in frontend/."
    )
    return index.read_text()


def test_signed_out_people_are_sent_to_sign_in(client: Client):
    response = client.get("/app/annotate/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/app/annotate/")


def test_signing_in_lands_in_the_app(client: Client, make_user):
    make_user("ann")
    page = client.get("/accounts/login/")
    token = page.cookies["csrftoken"].value
    client_csrf = Client(enforce_csrf_checks=True)
    client_csrf.cookies["csrftoken"] = token
    signed_in = client_csrf.post(
        "/accounts/login/",
        {"username": "ann", "password": PASSWORD, "csrfmiddlewaretoken": token},
    )
    assert signed_in.status_code == 302
    home = client_csrf.get(signed_in["Location"])
    assert home.status_code == 302 and home["Location"] == "/app/"


def test_every_app_route_serves_the_index_with_a_csrf_cookie(client: Client, make_user):
    client.force_login(make_user("ann"))
    index = built_index()
    for route in ("/app/", "/app/annotate/", "/app/annotate/episodes/12"):
        response = client.get(route)
        assert response.status_code == 200, route
        assert response.content.decode() == index
        assert response["Cache-Control"] == "no-cache"
    assert response.cookies["csrftoken"].value


def test_the_built_assets_are_served(client: Client):
    index = built_index()
    assets = re.findall(r'(?:src|href)="(/static/app/assets/[^"]+)"', index)
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200, asset
        assert b"".join(response.streaming_content)


def test_a_missing_build_is_an_explicit_error(client: Client, make_user, settings, tmp_path: Path):
    settings.FRONTEND_DIST = tmp_path / "dist"
    client.force_login(make_user("ann"))
    response = client.get("/app/")
    assert response.status_code == 503
    assert "not built" in response.content.decode()
