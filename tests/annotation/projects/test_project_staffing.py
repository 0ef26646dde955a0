"""A project set up and staffed over the API, as the web app's manager pages do: members added
by username or e-mail, the desktop its tasks run on chosen from the templates there are, and
tasks that need what that desktop lacks flagged at import and on the board."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from annotation.models import Episode, Membership, Project, Step, Task
from backend.accounts.roles import Role
from tests.support.pngs import solid_png
from vm_pool.models import DesktopTemplate
from vm_pool.screen.screenshots import store_screenshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def manager_client(client_for, make_user, project):
    return client_for(make_user("mira", project, Role.MANAGER))


def test_a_member_is_added_by_username_or_by_email_and_removed(manager_client, make_user, project):
    make_user("ann", email="ann@example.org")
    make_user("rex")
    by_email = manager_client.post(
        "/api/memberships/",
        {"project": project.pk, "username": "Ann@Example.org", "role": "annotator"},
    )
    assert by_email.status_code == 201, by_email.content
    assert by_email.json()["username"] == "ann"
    by_name = manager_client.post(
        "/api/memberships/", {"project": project.pk, "username": "rex", "role": "reviewer"}
    )
    assert by_name.status_code == 201
    listed = manager_client.get(f"/api/memberships/?project={project.pk}").json()["results"]
    assert {(m["username"], m["role"]) for m in listed} >= {
        ("ann", "annotator"),
        ("rex", "reviewer"),
    }
    assert manager_client.delete(f"/api/memberships/{by_name.json()['id']}/").status_code == 204
    assert not Membership.objects.filter(project=project, user__username="rex").exists()


def test_an_unknown_or_ambiguous_member_or_a_second_role_is_refused_in_words(
    manager_client, make_user, project
):
    make_user("ann", project, Role.ANNOTATOR, email="same@example.org")
    make_user("ann2", email="same@example.org")
    before = list(Membership.objects.values_list("user__username", "role"))
    cases = [
        ("nobody@example.org", "No user has the username or e-mail"),
        ("same@example.org", "More than one user has the e-mail"),
        ("ann", "ann is a member of this project already"),
    ]
    for who, message in cases:
        answer = manager_client.post(
            "/api/memberships/", {"project": project.pk, "username": who, "role": "reviewer"}
        )
        assert answer.status_code == 400
        assert message in json.dumps(answer.json()), answer.json()
    assert list(Membership.objects.values_list("user__username", "role")) == before


def test_the_desktop_is_chosen_from_the_templates_there_are(manager_client, project):
    DesktopTemplate.objects.create(name="osworld", provider="docker", image="tandem-desktop:latest")
    DesktopTemplate.objects.create(name="default")
    names = [t["name"] for t in manager_client.get("/api/desktop-templates/").json()]
    assert names == ["default", "osworld"]
    moved = manager_client.patch(
        f"/api/projects/{project.pk}/", {"environment_template": "osworld"}
    )
    assert moved.status_code == 200 and moved.json()["environment_template"] == "osworld"
    refused = manager_client.patch(f"/api/projects/{project.pk}/", {"environment_template": "nope"})
    assert refused.status_code == 400
    assert "no desktop template named 'nope'" in json.dumps(refused.json())
    assert Project.objects.get(pk=project.pk).environment_template == "osworld"


OSWORLD_TASK = {
    "id": "needs-python",
    "snapshot": "os",
    "instruction": "Run the script",
    "source": "osworld",
    "config": [{"type": "execute", "parameters": {"command": ["no-such-program-here", "-c", "1"]}}],
    "related_apps": ["os"],
    "evaluator": {
        "func": "check_telepathy",
        "result": {"type": "vm_command_line", "command": "true"},
    },
}


def test_an_import_flags_programs_the_desktop_lacks_and_evaluators_that_cannot_score(
    manager_client, project
):
    DesktopTemplate.objects.create(name="default")
    DesktopTemplate.objects.create(name="osworld", provider="docker", image="tandem-desktop:latest")
    Project.objects.filter(pk=project.pk).update(environment_template="default")
    file = SimpleUploadedFile("task.json", json.dumps(OSWORLD_TASK).encode())
    report = manager_client.post(
        f"/api/projects/{project.pk}/import/", {"file": file}, format="multipart"
    ).json()
    assert report["not_on_desktop_tasks"] == [
        {"id": "needs-python", "programs": ["no-such-program-here"]}
    ]
    assert report["not_scored_tasks"][0]["id"] == "needs-python"
    assert "check_telepathy" in report["not_scored_tasks"][0]["reason"]
    assert report["suggested_template"] == "osworld"
    task = manager_client.get(f"/api/tasks/?project={project.pk}").json()["results"][0]
    assert task["programs_missing"] == ["no-such-program-here"]
    # On a desktop with its own image, nothing is said of what it holds.
    manager_client.patch(f"/api/projects/{project.pk}/", {"environment_template": "osworld"})
    assert Task.objects.count() == 1
    task = manager_client.get(f"/api/tasks/?project={project.pk}").json()["results"][0]
    assert task["programs_missing"] == []


def test_a_project_with_recorded_work_is_not_deleted(
    manager_client, make_user, project, settings, tmp_path
):
    """Deleting it would delete its episodes, steps, reviews and exports with it."""
    settings.MEDIA_ROOT = tmp_path
    ann = make_user("ann", project, Role.ANNOTATOR)
    task = Task.objects.create(project=project, external_id="t1", instruction="Do it")
    episode = Episode.objects.create(
        task=task, annotator=ann, ended_at=timezone.now(), outcome="finished"
    )
    Step.objects.create(episode=episode, index=1, observation=store_screenshot(solid_png(8, 8)))
    refused = manager_client.delete(f"/api/projects/{project.pk}/")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "project_has_work"
    assert error["details"] == {"episodes": 1, "exports": 0}
    assert Step.objects.filter(episode=episode).count() == 1 and Task.objects.filter(pk=task.pk)
    # A project nobody worked in yet goes, its tasks with it.
    empty = Project.objects.create(name="Empty")
    mira = Membership.objects.get(project=project, role=Role.MANAGER).user
    Membership.objects.create(project=empty, user=mira, role=Role.MANAGER)
    Task.objects.create(project=empty, external_id="t1", instruction="Do it")
    assert manager_client.delete(f"/api/projects/{empty.pk}/").status_code == 204
    assert not Project.objects.filter(pk=empty.pk).exists()
