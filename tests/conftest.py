"""Shared fixtures: users with roles, projects, API clients signed in by session or by token."""

import os
from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from annotation.models import Membership, Project
from backend.accounts.models import User
from backend.accounts.tokens import SCOPES, issue_token

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Tests create many users; the production hasher is slow on purpose."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def desktop_settings(settings, tmp_path_factory):
    """Test desktops use their own displays (apart from a running demo's) and files."""
    base = 400 + (os.getpid() % 40) * 25
    settings.TANDEM_DISPLAY_RANGE = (base, base + 24)
    settings.TANDEM_DESKTOP_ROOT = tmp_path_factory.getbasetemp() / "desktops"


@pytest.fixture
def make_user(db) -> Callable[..., User]:
    def make(
        username: str, project: Project | None = None, role: str | None = None, **extra
    ) -> User:
        user = User.objects.create_user(username=username, password=PASSWORD, **extra)
        if project is not None and role is not None:
            Membership.objects.create(project=project, user=user, role=role)
        return user

    return make


@pytest.fixture
def project(db) -> Project:
    return Project.objects.create(name="Office tasks")


@pytest.fixture
def other_project(db) -> Project:
    return Project.objects.create(name="Web tasks")


@pytest.fixture
def client_for() -> Callable[[User | None], APIClient]:
    """An API client signed in with a session (CSRF is checked in its own test)."""

    def make(user: User | None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_login(user)
        return client

    return make


@pytest.fixture
def token_client_for() -> Callable[..., tuple[APIClient, str]]:
    """An API client that authenticates with a fresh personal access token."""

    def make(user: User, scopes: list[str] | None = None, days: int = 30) -> tuple[APIClient, str]:
        _, clear = issue_token(user, "test token", scopes or list(SCOPES), days)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {clear}")
        return client, clear

    return make
