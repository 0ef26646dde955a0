"""An assignment shows up on the annotator's open queue page without a reload: the manager
assigns in one browser, the annotator's page (another browser context, on a real ASGI server
with its own Redis channel layer) hears the ``tasks_assigned`` notice, says so and lists the
tasks."""

import uuid

import pytest
from playwright.sync_api import expect

from annotation.models import Task, TaskStatus
from backend.accounts.roles import Role
from tests.e2e.browser import accessibility_problems, chromium, sign_in
from tests.support.live import asgi
from tests.support.services import free_port

# Redis databases of this suite alone, so that it can run beside the other live suites.
BROKER, CHANNELS = "redis://127.0.0.1:6379/4", "redis://127.0.0.1:6379/5"
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_the_queue_page_shows_an_assignment_live(make_user, project, monkeypatch):
    make_user("ann", project, Role.ANNOTATOR)
    make_user("mona", project, Role.MANAGER)
    for i in (1, 2, 3):
        Task.objects.create(project=project, external_id=f"n{i}", instruction=f"Open document {i}")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    with (
        asgi(f"notices-{uuid.uuid4().hex[:8]}", port, BROKER, CHANNELS),
        chromium(monkeypatch) as browser,
    ):
        ann_context, queue, ann_errors = sign_in(browser, base_url, "ann", "/app/annotate")
        assigned = queue.get_by_role("region", name="Assigned to you")
        expect(assigned).to_contain_text("No task is assigned to you now")
        expect(assigned).to_have_attribute("data-live", "true")  # its notices socket is open

        mona_context, tasks, mona_errors = sign_in(
            browser, base_url, "mona", f"/app/manage/projects/{project.pk}/tasks"
        )
        tasks.get_by_label("Select task n1").check()
        tasks.get_by_label("Select task n3").check()
        tasks.get_by_label("Annotator").select_option("ann")
        tasks.get_by_role("button", name="Assign 2 selected").click()
        expect(tasks.get_by_test_id("assign-result")).to_contain_text("2 tasks assigned to ann.")

        # No reload: the annotator's page heard it.
        expect(queue.get_by_test_id("assignment-notice")).to_have_text(
            "mona assigned 2 tasks to you.", timeout=10_000
        )
        expect(assigned.get_by_role("heading")).to_have_text("Assigned to you (2)")
        expect(assigned.get_by_role("cell", name="n1", exact=True)).to_be_visible()
        expect(assigned.get_by_role("cell", name="n3", exact=True)).to_be_visible()
        assert {t.external_id for t in Task.objects.filter(status=TaskStatus.ASSIGNED)} == {
            "n1",
            "n3",
        }
        assert accessibility_problems(queue) == []
        ann_errors.assert_none()
        mona_errors.assert_none()
        ann_context.close()
        mona_context.close()
