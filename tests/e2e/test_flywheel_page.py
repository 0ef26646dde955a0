"""The flywheel chart in headless Chromium against uvicorn serving the built app, on the rows of
``tests.annotation.flywheel.test_flywheel`` (three versions: rollouts, people's decisions, offline
evaluations and the exports v2 was trained on; no desktop, no worker). A manager opens it from the
project's tabs, an engineer from the model versions page with a project select, where a new project
says why its flywheel is empty; a reviewer has no such tab and an annotator is told
whom the page is for. Screenshots go to var/e2e-screenshots/flywheel-*.png.
"""

import re
from contextlib import ExitStack
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from annotation.models import Membership, Project
from backend.accounts.roles import Role
from tests.annotation.flywheel.test_flywheel import flywheel_world  # noqa: F401  (a fixture)
from tests.e2e.browser import accessibility_problems, chromium, sign_in
from tests.support.live import asgi
from tests.support.services import free_port

CHANNELS = "redis://127.0.0.1:6379/1"
SHOTS = Path(__file__).resolve().parents[2] / "var" / "e2e-screenshots"
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"flywheel-{name}.png"), full_page=True)
    assert accessibility_problems(page) == []


def generations(page: Page) -> list[str]:
    rows = page.get_by_test_id("flywheel").locator("table tbody tr")
    return [row.inner_text() for row in rows.all()]


def check_manager_tab(browser, base_url: str, project, exports) -> None:
    context, page, errors = sign_in(
        browser, base_url, "manager", f"/app/manage/projects/{project.pk}/board"
    )
    page.get_by_role("navigation", name="Project sections").get_by_role(
        "link", name="Flywheel"
    ).click()
    expect(page).to_have_url(re.compile(rf"/app/manage/projects/{project.pk}/flywheel$"))
    expect(page.get_by_test_id("flywheel-chart")).to_be_visible()
    expect(page.get_by_test_id("flywheel").locator("table tbody tr")).to_have_count(3)
    v1, v2, v3 = generations(page)
    assert "50%: 1 of 2 validated passed (3 of 4 rollouts ended)" in v1
    assert "67%: 2 of 3 steps accepted" in v1
    assert "45% of 20 held-out steps" in v1
    assert "not fine-tuned here" in v1
    assert "67%: 2 of 3 validated passed" in v2 and "50%: 2 of 4 steps accepted" in v2
    sft = exports["sft"].pk
    assert f"SFT (interactive) #{sft}: 120 samples; 1 export of other projects" in v2
    assert "no rollouts of this version yet" in v3
    assert "not used by people in the last 365 days" in v3
    assert "not evaluated on this project yet" in v3
    expect(page.get_by_test_id("flywheel-datasets").locator("li")).to_have_count(3)
    shot(page, "manager")
    errors.assert_none()
    context.close()


def check_engineer_page(browser, base_url: str, project, empty) -> None:
    context, page, errors = sign_in(
        browser, base_url, "eve", f"/app/engineer/models?project={project.pk}"
    )
    expect(page.get_by_test_id("flywheel").locator("table tbody tr")).to_have_count(3)
    page.get_by_role("combobox").select_option(str(empty.pk))  # the project select
    expect(page.get_by_test_id("flywheel")).to_contain_text(
        "No model version has served, been evaluated or been fine-tuned in this project yet"
    )
    shot(page, "engineer-empty")
    errors.assert_none()
    context.close()


def check_others_have_no_flywheel(browser, base_url: str, project) -> None:
    context, page, errors = sign_in(
        browser, base_url, "rita", f"/app/manage/projects/{project.pk}/board"
    )
    tabs = page.get_by_role("navigation", name="Project sections")
    expect(tabs.get_by_role("link", name="Progress")).to_be_visible()
    expect(tabs.get_by_role("link", name="Flywheel")).to_have_count(0)
    context.close()
    context, page, errors = sign_in(
        browser, base_url, "ann", f"/app/manage/projects/{project.pk}/flywheel"
    )
    expect(page.get_by_test_id("not-for-role")).to_be_visible()
    expect(page.get_by_test_id("flywheel")).to_have_count(0)
    errors.assert_none()  # no request the server would refuse was made
    context.close()


def test_the_flywheel_is_read_by_managers_and_engineers_in_the_browser(
    flywheel_world,  # noqa: F811
    make_user,
    project,
    settings,
    monkeypatch,
):
    _, exports = flywheel_world
    eve = make_user("eve", project, Role.ENGINEER)
    make_user("rita", project, Role.REVIEWER)
    empty = Project.objects.create(name="New tasks")
    Membership.objects.create(project=empty, user=eve, role=Role.ENGINEER)
    SHOTS.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    with ExitStack() as stack:
        # No job runs (an in-memory broker); the pages open no WebSocket.
        stack.enter_context(
            asgi(
                "flywheel-e2e",
                port,
                broker="memory://",
                channels=CHANNELS,
                TANDEM_MEDIA_ROOT=str(settings.MEDIA_ROOT),
                TANDEM_CELERY_RESULT_BACKEND="cache+memory://",
            )
        )
        browser = stack.enter_context(chromium(monkeypatch))
        check_manager_tab(browser, base_url, project, exports)
        check_engineer_page(browser, base_url, project, empty)
        check_others_have_no_flywheel(browser, base_url, project)
