"""Every endpoint × every role → the expected allow or deny (design §8), enforced on the server.

Non-members get 404 (a project's existence is not revealed); members whose role lacks the
capability get 403; anonymous callers get 401.
"""

import io
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from annotation.models import (
    DatasetExport,
    Episode,
    EpisodeOutcome,
    Membership,
    Project,
    Task,
    TaskStatus,
)
from backend.accounts.models import User
from backend.accounts.roles import Role
from model_serving.models import EvaluationRun, ModelVersion
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate, StreamToken

ROLES = [
    "anonymous",
    "outsider",
    "owner",
    "annotator",
    "reviewer",
    "manager",
    "engineer",
    "admin",
]


@dataclass
class World:
    project: Project
    users: dict
    task: Task
    episode: Episode
    running: Episode


@pytest.fixture
def world(make_user, project, other_project) -> World:
    users = {
        "owner": make_user("owner", project, Role.ANNOTATOR),
        "annotator": make_user("annotator", project, Role.ANNOTATOR),
        "reviewer": make_user("reviewer", project, Role.REVIEWER),
        "manager": make_user("manager", project, Role.MANAGER, can_create_projects=True),
        "engineer": make_user("engineer", project, Role.ENGINEER),
        "outsider": make_user("outsider", other_project, Role.MANAGER, can_create_projects=True),
        "admin": make_user("admin", is_superuser=True, is_staff=True),
    }
    task = Task.objects.create(project=project, external_id="queued", instruction="Open the editor")
    done = Task.objects.create(
        project=project,
        external_id="done",
        instruction="Save the file",
        status=TaskStatus.SUBMITTED,
        assignee=users["owner"],
    )
    episode = Episode.objects.create(
        task=done,
        annotator=users["owner"],
        ended_at=timezone.now(),
        outcome=EpisodeOutcome.FINISHED,
    )
    # A running episode on a leased desktop (rows only: issuing a stream starts no process).
    desktop = Desktop.objects.create(
        template=DesktopTemplate.objects.create(name="default"),
        host="elsewhere",
        provider="local",
        status=DesktopStatus.LEASED,
        leased_by=users["owner"],
        lease_expires_at=timezone.now() + timedelta(minutes=5),
        vnc_port=15999,
        width=1280,
        height=800,
    )
    working = Task.objects.create(
        project=project, external_id="working", instruction="Close the window"
    )
    running = Episode.objects.create(
        task=working, annotator=users["owner"], desktop=desktop, desktop_generation=0
    )
    return World(project, users, task, episode, running)


# (name, method, path, body, {role: expected status}); roles not listed expect the default.
ENDPOINTS = [
    ("list projects", "get", "/api/projects/", None, {"anonymous": 401}, 200),
    ("read project", "get", "/api/projects/{p}/", None, {"anonymous": 401, "outsider": 404}, 200),
    (
        "create project",
        "post",
        "/api/projects/",
        {"name": "New project"},
        {"anonymous": 401, "manager": 201, "outsider": 201, "admin": 201},
        403,
    ),
    (
        "edit project",
        "patch",
        "/api/projects/{p}/",
        {"guidelines": "Be careful."},
        {"anonymous": 401, "outsider": 404, "manager": 200, "admin": 200},
        403,
    ),
    (
        "delete project",
        "delete",
        "/api/projects/{p}/",
        None,
        # Allowed, and refused for what it holds: the world's project has episodes.
        {"anonymous": 401, "outsider": 404, "manager": 409, "admin": 409},
        403,
    ),
    (
        "import tasks",
        "post",
        "/api/projects/{p}/import/",
        [{"id": "x1", "instruction": "Close the window"}],
        {"anonymous": 401, "outsider": 404, "manager": 201, "admin": 201},
        403,
    ),
    (
        "assign tasks",
        "post",
        "/api/projects/{p}/assign/",
        {"task_ids": ["{t}"], "assignee": "annotator"},
        {"anonymous": 401, "outsider": 404, "manager": 200, "admin": 200},
        403,
    ),
    (
        "unassign tasks",
        "post",
        "/api/projects/{p}/unassign/",
        {"task_ids": ["{t}"]},
        {"anonymous": 401, "outsider": 404, "manager": 200, "admin": 200},
        403,
    ),
    (
        "progress board",
        "get",
        "/api/projects/{p}/progress/",
        None,
        {"anonymous": 401, "outsider": 404, "manager": 200, "reviewer": 200, "admin": 200},
        403,
    ),
    (
        "task board",
        "get",
        "/api/projects/{p}/board/",
        None,
        {"anonymous": 401, "outsider": 404, "manager": 200, "reviewer": 200, "admin": 200},
        403,
    ),
    (
        "throughput chart",
        "get",
        "/api/projects/{p}/throughput/",
        None,
        {"anonymous": 401, "outsider": 404, "manager": 200, "reviewer": 200, "admin": 200},
        403,
    ),
    (
        "acceptance chart",
        "get",
        "/api/projects/{p}/acceptance/?bucket=hour",
        None,
        {"anonymous": 401, "outsider": 404, "manager": 200, "reviewer": 200, "admin": 200},
        403,
    ),
    (
        "flywheel chart",
        "get",
        "/api/projects/{p}/flywheel/",
        None,
        {"anonymous": 401, "outsider": 404, "manager": 200, "engineer": 200, "admin": 200},
        403,
    ),
    ("review queue", "get", "/api/review-queue/", None, {"anonymous": 401}, 200),
    (
        "model health",
        "get",
        "/api/projects/{p}/model/",
        None,
        {"anonymous": 401, "outsider": 404},
        200,
    ),
    (
        "add a member",
        "post",
        "/api/memberships/",
        {"project": "{p}", "username": "outsider", "role": "annotator"},
        {"anonymous": 401, "outsider": 404, "manager": 201, "admin": 201},
        403,
    ),
    (
        "read a queued task",
        "get",
        "/api/tasks/{t}/",
        None,
        {"anonymous": 401, "manager": 200, "reviewer": 200, "admin": 200},
        404,
    ),
    (
        "claim the next task",
        "post",
        "/api/tasks/claim/",
        {"project": "{p}"},
        {"anonymous": 401, "outsider": 404, "owner": 200, "annotator": 200, "admin": 200},
        403,
    ),
    (
        "read an annotator's episode",
        "get",
        "/api/episodes/{e}/",
        None,
        {"anonymous": 401, "owner": 200, "reviewer": 200, "manager": 200, "admin": 200},
        404,
    ),
    (
        "review an episode",
        "post",
        "/api/episodes/{e}/reviews/",
        {"verdict": "accepted"},
        {"anonymous": 401, "owner": 403, "reviewer": 201, "manager": 201, "admin": 201},
        404,
    ),
    (
        "stream a running episode's desktop",
        "post",
        "/api/episodes/{r}/stream/",
        None,
        {"anonymous": 401, "owner": 201, "reviewer": 201, "manager": 201, "admin": 201},
        404,
    ),
    (
        "read a running episode's desktop",
        "get",
        "/api/desktops/{d}/",
        None,
        {"anonymous": 401, "owner": 200, "reviewer": 200, "manager": 200, "admin": 200},
        404,
    ),
    (
        "stream a running episode's desktop by its id",
        "post",
        "/api/desktops/{d}/stream/",
        None,
        {"anonymous": 401, "owner": 201, "reviewer": 201, "manager": 201, "admin": 201},
        404,
    ),
    ("list own tokens", "get", "/api/tokens/", None, {"anonymous": 401}, 200),
    (
        "create a token",
        "post",
        "/api/tokens/",
        {"name": "ci", "scopes": ["tasks:read"], "days": 7},
        {"anonymous": 401},
        201,
    ),
    ("who am I", "get", "/api/me/", None, {"anonymous": 401}, 200),
]

CASES = [
    pytest.param(method, path, body, role, expected.get(role, default), id=f"{name}-{role}")
    for name, method, path, body, expected, default in ENDPOINTS
    for role in ROLES
]


def fill(value, world: World):
    """Replace {p}/{t}/{e} placeholders in a request body with this world's ids."""
    if isinstance(value, str) and value in ("{p}", "{t}", "{e}"):
        return {"{p}": world.project.pk, "{t}": world.task.pk, "{e}": world.episode.pk}[value]
    if isinstance(value, list):
        return [fill(v, world) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, world) for k, v in value.items()}
    return value


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "body", "role", "expected"), CASES)
def test_endpoint_allows_or_denies_each_role(world, client_for, method, path, body, role, expected):
    client = client_for(None if role == "anonymous" else world.users[role])
    url = path.format(
        p=world.project.pk,
        t=world.task.pk,
        e=world.episode.pk,
        r=world.running.pk,
        d=world.running.desktop_id,
    )
    kwargs = {"format": "json"} if body is not None else {}
    response = getattr(client, method)(url, fill(body, world), **kwargs)

    assert response.status_code == expected, response.content
    if expected >= 400:
        assert response.json()["error"]["status"] == expected


@pytest.mark.django_db
def test_project_list_shows_only_the_callers_projects(world, client_for, other_project):
    names = {
        role: {
            p["name"] for p in client_for(world.users[role]).get("/api/projects/").json()["results"]
        }
        for role in ("annotator", "outsider", "admin")
    }
    assert names["annotator"] == {world.project.name}
    assert names["outsider"] == {other_project.name}
    assert names["admin"] == {world.project.name, other_project.name}


@pytest.mark.django_db
def test_annotator_lists_only_their_own_episodes(world, client_for):
    own = client_for(world.users["owner"]).get("/api/episodes/").json()["results"]
    other = client_for(world.users["annotator"]).get("/api/episodes/").json()["results"]
    assert sorted(e["id"] for e in own) == sorted([world.episode.pk, world.running.pk])
    assert other == []


@pytest.mark.django_db
def test_denied_requests_change_nothing(world, client_for):
    before = (Task.objects.count(), world.project.guidelines)
    client = client_for(world.users["annotator"])
    client.post(
        f"/api/projects/{world.project.pk}/import/",
        [{"id": "y", "instruction": "x"}],
        format="json",
    )
    client.patch(f"/api/projects/{world.project.pk}/", {"guidelines": "changed"}, format="json")
    world.project.refresh_from_db()
    assert (Task.objects.count(), world.project.guidelines) == before


@pytest.mark.django_db
def test_every_stream_of_an_episode_is_view_only_and_holds_no_password(world, client_for):
    bodies = {
        role: client_for(world.users[role]).post(f"/api/episodes/{world.running.pk}/stream/")
        for role in ("owner", "reviewer", "manager", "admin")
    }
    assert {role: r.status_code for role, r in bodies.items()} == dict.fromkeys(bodies, 201)
    # The annotator's workspace too: the desktop changes only through recorded decisions.
    assert all(r.json()["view_only"] is True for r in bodies.values())
    assert all(
        set(r.json()) == {"url", "token", "view_only", "expires_at"} for r in bodies.values()
    )
    assert StreamToken.objects.filter(view_only=False).count() == 0


@pytest.mark.django_db
def test_review_queue_lists_submitted_episodes_only_to_their_reviewers(world, client_for):
    queued = {
        role: [
            e["id"]
            for e in client_for(world.users[role]).get("/api/review-queue/").json()["results"]
        ]
        for role in ("owner", "reviewer", "manager", "engineer", "outsider", "admin")
    }
    waiting = [world.episode.pk]
    assert queued == {
        "owner": [],
        "reviewer": waiting,
        "manager": waiting,
        "engineer": [],
        "outsider": [],
        "admin": waiting,
    }


# --- desktops: seen by project capability, never by staff status ------------------------------


def desktop_responses(client, desktop_id: int) -> list:
    return [
        client.get(f"/api/desktops/{desktop_id}/"),
        client.post(f"/api/desktops/{desktop_id}/stream/"),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("flags", [{}, {"is_staff": True}])
def test_a_manager_of_another_project_is_told_no_such_desktop_nor_stream(
    world, client_for, make_user, other_project, flags
):
    other_manager = make_user("elsewhere", other_project, Role.MANAGER, **flags)
    client = client_for(other_manager)
    desktop_id = world.running.desktop_id

    assert [r.status_code for r in desktop_responses(client, desktop_id)] == [404, 404]
    assert client.get("/api/desktops/").json()["count"] == 0
    assert not StreamToken.objects.exists()
    desktop = Desktop.objects.get(pk=desktop_id)
    assert (desktop.status, desktop.leased_by) == (DesktopStatus.LEASED, world.users["owner"])


@pytest.mark.django_db
def test_staff_status_alone_shows_no_desktop(world, client_for, make_user):
    client = client_for(make_user("staff", is_staff=True))
    assert [r.status_code for r in desktop_responses(client, world.running.desktop_id)] == [
        404,
        404,
    ]
    assert client.get("/api/desktops/").json()["count"] == 0


@pytest.mark.django_db
def test_the_pool_lists_each_user_the_desktops_they_may_watch(world, client_for):
    ready = Desktop.objects.create(
        template=DesktopTemplate.objects.get(name="default"),
        host="elsewhere",
        provider="local",
        status=DesktopStatus.READY,
        vnc_port=15998,
        width=1280,
        height=800,
    )
    listed = {
        role: [
            d["id"] for d in client_for(world.users[role]).get("/api/desktops/").json()["results"]
        ]
        for role in ("owner", "annotator", "reviewer", "manager", "engineer", "outsider", "admin")
    }
    running = world.running.desktop_id
    assert listed == {
        "owner": [running],
        "annotator": [],
        "reviewer": [running],
        "manager": [running],
        "engineer": [],
        "outsider": [],
        "admin": [running, ready.pk],
    }


@pytest.mark.django_db
def test_a_desktop_is_not_watched_after_its_episode_ended(world, client_for):
    Episode.objects.filter(pk=world.running.pk).update(
        ended_at=timezone.now(), outcome=EpisodeOutcome.ABANDONED
    )
    manager = client_for(world.users["manager"])
    owner = client_for(world.users["owner"])
    assert manager.get(f"/api/desktops/{world.running.desktop_id}/").status_code == 404
    assert owner.get(f"/api/desktops/{world.running.desktop_id}/").status_code == 200


@pytest.mark.django_db
def test_a_desktop_leased_to_someone_else_since_is_not_the_episodes_to_watch(
    world, client_for, make_user, other_project
):
    newcomer = make_user("newcomer", other_project, Role.ANNOTATOR)
    Desktop.objects.filter(pk=world.running.desktop_id).update(leased_by=newcomer, generation=1)
    for role in ("manager", "reviewer", "owner"):
        client = client_for(world.users[role])
        assert client.get(f"/api/desktops/{world.running.desktop_id}/").status_code == 404
    assert client_for(newcomer).get(f"/api/desktops/{world.running.desktop_id}/").status_code == 200


@pytest.mark.django_db
def test_demo_users_get_their_roles_and_only_the_admin_is_staff(make_user):
    # A manager seeded by an earlier version was staff: seeding again takes it away.
    make_user("manager", is_staff=True)
    call_command("seed_demo", stdout=io.StringIO())
    flags = {
        u.username: (u.is_staff, u.is_superuser, u.can_create_projects)
        for u in User.objects.filter(username__in=["admin", "manager", "annotator", "reviewer"])
    }
    assert flags == {
        "admin": (True, True, False),
        "manager": (False, False, True),
        "annotator": (False, False, False),
        "reviewer": (False, False, False),
    }
    demo = Project.objects.get(name="Demo: desktop basics")
    assert demo.memberships.get(user__username="manager").role == Role.MANAGER


# --- requests naming a project: authorised before the body is read ----------------------------


MEMBER_BODIES = [
    {"username": "annotator", "role": "reviewer"},
    {"username": "nobody-by-this-name", "role": "reviewer"},
    {"username": "annotator", "role": "overlord"},
    {},
]


@pytest.mark.django_db
def test_adding_a_member_to_a_project_one_is_not_in_is_not_found_whatever_the_body(
    world, client_for
):
    client = client_for(world.users["outsider"])
    before = list(Membership.objects.values_list("pk", "role"))
    answers = {
        (r.status_code, r.content)
        for body in MEMBER_BODIES
        for project in (world.project.pk, 987654321)
        for r in [client.post("/api/memberships/", {**body, "project": project}, format="json")]
    }
    assert answers == {
        (404, b'{"error":{"status":404,"code":"not_found","message":"No such project."}}')
    }
    assert list(Membership.objects.values_list("pk", "role")) == before


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["annotator", "reviewer", "engineer"])
def test_adding_a_member_without_managing_the_project_is_denied_whatever_the_body(
    world, client_for, role
):
    client = client_for(world.users[role])
    before = list(Membership.objects.values_list("pk", "role"))
    answers = {
        (r.status_code, r.content)
        for body in MEMBER_BODIES
        for r in [
            client.post("/api/memberships/", {**body, "project": world.project.pk}, format="json")
        ]
    }
    assert len(answers) == 1
    assert answers.pop()[0] == 403
    assert list(Membership.objects.values_list("pk", "role")) == before


@pytest.mark.django_db
def test_a_manager_adding_a_member_gets_the_body_checked(world, client_for):
    client = client_for(world.users["manager"])
    body = {"project": world.project.pk, "username": "nobody-by-this-name", "role": "reviewer"}
    response = client.post("/api/memberships/", body, format="json")
    assert response.status_code == 400
    assert "username" in response.json()["error"]["details"]


@pytest.mark.django_db
def test_a_malformed_project_is_refused_the_same_for_everyone(world, client_for):
    answers = {
        (r.status_code, r.content)
        for role in ("outsider", "annotator", "manager")
        for body in ({"project": "x"}, {"username": "annotator", "role": "reviewer"})
        for r in [client_for(world.users[role]).post("/api/memberships/", body, format="json")]
    }
    assert {status for status, _ in answers} == {400}
    assert len(answers) == 2  # one answer per body, whoever asks


@pytest.mark.django_db
def test_exports_and_evaluations_in_a_project_one_is_not_in_are_not_found_whatever_the_body(
    world, client_for
):
    version = ModelVersion.objects.create(name="v1", base_model="ui-tars")
    client = client_for(world.users["outsider"])
    exports = [
        client.post("/api/exports/", {"project": world.project.pk, **body}, format="json")
        for body in ({"kind": "sft"}, {"kind": "nonsense"}, {"kind": "dpo", "filters": {"x": 1}})
    ]
    evaluations = [
        client.post(
            f"/api/model-versions/{version.pk}/evaluations/",
            {"project": world.project.pk, **body},
            format="json",
        )
        for body in ({}, {"tolerance": "x"})
    ]
    assert [r.status_code for r in exports + evaluations] == [404] * 5
    assert not DatasetExport.objects.exists()
    assert not EvaluationRun.objects.exists()


@pytest.mark.django_db
def test_exports_by_a_member_who_may_not_make_them_are_denied_whatever_the_body(world, client_for):
    client = client_for(world.users["manager"])
    statuses = [
        client.post("/api/exports/", {"project": world.project.pk, **body}, format="json")
        for body in ({"kind": "sft"}, {"kind": "nonsense"})
    ]
    assert [r.status_code for r in statuses] == [403, 403]
    assert not DatasetExport.objects.exists()


@pytest.mark.django_db
def test_renaming_a_project_one_does_not_manage_is_denied_before_names_are_compared(
    world, client_for, other_project
):
    client = client_for(world.users["annotator"])
    for name in (other_project.name, "A fresh name"):
        response = client.patch(f"/api/projects/{world.project.pk}/", {"name": name}, format="json")
        assert response.status_code == 403
    world.project.refresh_from_db()
    assert world.project.name == "Office tasks"


@pytest.mark.django_db
def test_creating_a_project_without_the_right_is_denied_before_names_are_compared(
    world, client_for, other_project
):
    client = client_for(world.users["annotator"])
    for name in (other_project.name, "A fresh name"):
        assert client.post("/api/projects/", {"name": name}, format="json").status_code == 403
    assert not Project.objects.filter(name="A fresh name").exists()
