"""Secrets in a project's model settings: stored and used, never shown (design §8).

The API key of a model endpoint is write-only: no endpoint returns it, a read says whether it
is set, a write that leaves it out keeps it and an empty one clears it. The key is bound to the
base_url it was entered with: a write that re-points the settings without a key clears it, and
a model version served on another host never gets the project's key. The model settings as a
whole are the project managers' (and admins'): other members do not get them.
"""

import json

import pytest

from annotation import jobs
from annotation.models import Episode, Project, Task
from annotation.projects import versions
from backend.accounts.roles import Role
from model_serving.models import ModelVersion
from model_serving.registry import get_proposer
from tests.support.fake_model_server import Reply, serving
from tests.support.pngs import solid_png
from vm_pool.screen.screenshots import store_screenshot

SECRET = "sk-live-0123456789abcdef"
ENDPOINT = {"proposer": "openai", "base_url": "http://gpu-host:8001/v1", "model": "ui-tars"}


@pytest.fixture
def keyed(project) -> Project:
    project.model_settings = {**ENDPOINT, "api_key": SECRET}
    project.save()
    return project


@pytest.fixture
def manager(make_user, project):
    return make_user("manager", project, Role.MANAGER, can_create_projects=True)


def stored(project: Project) -> dict:
    project.refresh_from_db()
    return project.model_settings


@pytest.mark.django_db
def test_a_manager_reads_the_settings_with_the_key_shown_only_as_set(keyed, manager, client_for):
    client = client_for(manager)
    detail = client.get(f"/api/projects/{keyed.pk}/")
    listed = client.get("/api/projects/").json()["results"]

    assert detail.json()["model_settings"] == {**ENDPOINT, "api_key_set": True}
    assert listed[0]["model_settings"] == {**ENDPOINT, "api_key_set": True}
    assert SECRET not in detail.content.decode()
    assert stored(keyed)["api_key"] == SECRET


@pytest.mark.django_db
def test_a_project_without_a_key_reads_as_not_set(project, manager, client_for):
    body = client_for(manager).get(f"/api/projects/{project.pk}/").json()
    assert body["model_settings"] == {"api_key_set": False}


@pytest.mark.django_db
@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.REVIEWER, Role.ENGINEER])
def test_other_members_get_no_model_settings_at_all(keyed, make_user, client_for, role):
    client = client_for(make_user("member", keyed, role))
    detail = client.get(f"/api/projects/{keyed.pk}/")
    listed = client.get("/api/projects/").json()["results"]

    assert detail.status_code == 200
    assert "model_settings" not in detail.json()
    assert "model_settings" not in listed[0]
    assert SECRET not in detail.content.decode()
    assert "gpu-host" not in detail.content.decode()
    assert stored(keyed)["api_key"] == SECRET


@pytest.mark.django_db
def test_an_admin_reads_the_settings_without_the_key(keyed, make_user, client_for):
    admin = make_user("admin", is_superuser=True, is_staff=True)
    body = client_for(admin).get(f"/api/projects/{keyed.pk}/").json()
    assert body["model_settings"] == {**ENDPOINT, "api_key_set": True}


@pytest.mark.django_db
def test_creating_a_project_with_a_key_stores_it_and_does_not_echo_it(manager, client_for):
    settings = {**ENDPOINT, "api_key": SECRET}
    response = client_for(manager).post(
        "/api/projects/", {"name": "Keyed", "model_settings": settings}, format="json"
    )

    assert response.status_code == 201, response.content
    assert response.json()["model_settings"] == {**ENDPOINT, "api_key_set": True}
    assert SECRET not in response.content.decode()
    assert Project.objects.get(name="Keyed").model_settings == settings


@pytest.mark.django_db
def test_an_update_that_leaves_the_key_out_keeps_it(keyed, manager, client_for):
    changed = {**ENDPOINT, "model": "ui-tars-ft-1"}
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/", {"model_settings": changed}, format="json"
    )

    assert response.status_code == 200, response.content
    assert response.json()["model_settings"] == {**changed, "api_key_set": True}
    assert SECRET not in response.content.decode()
    assert stored(keyed) == {**changed, "api_key": SECRET}


@pytest.mark.django_db
def test_settings_read_and_sent_back_as_they_are_keep_the_key(keyed, manager, client_for):
    client = client_for(manager)
    read = client.get(f"/api/projects/{keyed.pk}/").json()
    client.put(f"/api/projects/{keyed.pk}/", read, format="json")
    assert stored(keyed) == {**ENDPOINT, "api_key": SECRET}


@pytest.mark.django_db
def test_a_new_key_replaces_the_stored_one(keyed, manager, client_for):
    settings = {**ENDPOINT, "api_key": "sk-rotated"}
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/", {"model_settings": settings}, format="json"
    )
    assert "sk-rotated" not in response.content.decode()
    assert stored(keyed)["api_key"] == "sk-rotated"


@pytest.mark.django_db
@pytest.mark.parametrize("cleared", ["", None])
def test_an_empty_key_clears_the_stored_one(keyed, manager, client_for, cleared):
    settings = {**ENDPOINT, "api_key": cleared}
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/", {"model_settings": settings}, format="json"
    )
    assert response.json()["model_settings"] == {**ENDPOINT, "api_key_set": False}
    assert stored(keyed) == ENDPOINT


@pytest.mark.django_db
def test_a_key_that_is_not_text_is_refused(keyed, manager, client_for):
    settings = {**ENDPOINT, "api_key": 42}
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/", {"model_settings": settings}, format="json"
    )
    assert response.status_code == 400
    assert "api_key must be a string" in response.content.decode()
    assert stored(keyed)["api_key"] == SECRET


@pytest.mark.django_db
def test_an_update_of_other_fields_keeps_the_settings_and_the_key(keyed, manager, client_for):
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/", {"guidelines": "Be careful."}, format="json"
    )
    assert SECRET not in response.content.decode()
    assert stored(keyed) == {**ENDPOINT, "api_key": SECRET}


@pytest.mark.django_db
def test_the_proposer_gets_the_stored_key(keyed):
    proposer = get_proposer(versions.project_model_settings(keyed))
    assert proposer.api_key == SECRET


@pytest.mark.django_db
def test_the_health_probe_sends_the_stored_key_and_shows_it_to_nobody(
    project, manager, make_user, client_for
):
    annotator = make_user("annotator", project, Role.ANNOTATOR)
    with serving() as server:
        settings = {"base_url": server.base_url, "model": server.model, "api_key": SECRET}
        client_for(manager).patch(
            f"/api/projects/{project.pk}/", {"model_settings": settings}, format="json"
        )
        shown = [
            client_for(user).get(f"/api/projects/{project.pk}/model/")
            for user in (manager, annotator)
        ]
    assert server.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert all(r.status_code == 200 and SECRET not in r.content.decode() for r in shown)
    assert [r.json()["health"]["ok"] for r in shown] == [True, True]


# --- model settings that are not an object ----------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["null", ""])
def test_form_data_without_settings_creates_no_project_and_says_why(manager, client_for, value):
    response = client_for(manager).post(
        "/api/projects/", {"name": "Form", "model_settings": value}, format="multipart"
    )
    assert response.status_code == 400, response.content
    assert "model_settings must be a JSON object" in str(response.json()["error"]["details"])
    assert not Project.objects.filter(name="Form").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["null", "", "[1]", '"baseline"'])
def test_form_data_without_settings_changes_no_project_and_says_why(
    keyed, manager, client_for, value
):
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/", {"model_settings": value}, format="multipart"
    )
    assert response.status_code == 400, response.content
    assert "model_settings must be a JSON object" in str(response.json()["error"]["details"])
    assert stored(keyed) == {**ENDPOINT, "api_key": SECRET}


@pytest.mark.django_db
def test_json_null_settings_are_refused_the_same_way(keyed, manager, client_for):
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/", {"model_settings": None}, format="json"
    )
    assert response.status_code == 400
    assert "model_settings must be a JSON object" in str(response.json()["error"]["details"])
    assert stored(keyed) == {**ENDPOINT, "api_key": SECRET}


@pytest.mark.django_db
def test_form_data_settings_as_json_text_are_taken(keyed, manager, client_for):
    changed = {**ENDPOINT, "model": "ui-tars-ft-1"}
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/",
        {"model_settings": json.dumps(changed)},
        format="multipart",
    )
    assert response.status_code == 200, response.content
    assert stored(keyed) == {**changed, "api_key": SECRET}


# --- the key stays with its endpoint -----------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "moved",
    [
        {**ENDPOINT, "base_url": "http://other-host:8001/v1"},
        {**ENDPOINT, "base_url": "http://gpu-host:8002/v1"},
        {**ENDPOINT, "base_url": "https://gpu-host:8001/v1"},
        {**ENDPOINT, "base_url": "http://gpu-host:8001/v2"},
        {"proposer": "baseline"},  # no endpoint at all
    ],
)
def test_re_pointing_the_settings_without_a_key_clears_the_stored_key(
    keyed, manager, client_for, moved
):
    # As the settings page sends them back: with the marker a read showed.
    given = {**moved, "api_key_set": True}
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/", {"model_settings": given}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["model_settings"] == {**moved, "api_key_set": False}
    assert stored(keyed) == moved


@pytest.mark.django_db
def test_re_pointing_with_a_key_in_the_same_request_keeps_the_new_key(keyed, manager, client_for):
    moved = {**ENDPOINT, "base_url": "http://other-host:8001/v1", "api_key": "sk-other-host"}
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/", {"model_settings": moved}, format="json"
    )
    assert response.json()["model_settings"]["api_key_set"] is True
    assert "sk-other-host" not in response.content.decode()
    assert stored(keyed) == moved


@pytest.mark.django_db
@pytest.mark.parametrize(
    "same", ["http://gpu-host:8001/v1", "http://gpu-host:8001/v1/", "HTTP://GPU-Host:8001/v1"]
)
def test_a_write_to_the_same_endpoint_without_a_key_keeps_it(keyed, manager, client_for, same):
    settings = {**ENDPOINT, "base_url": same, "temperature": 0.3}
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/", {"model_settings": settings}, format="json"
    )
    assert response.json()["model_settings"]["api_key_set"] is True
    assert stored(keyed) == {**settings, "api_key": SECRET}


@pytest.mark.django_db
def test_the_default_port_is_the_same_endpoint(project, manager, client_for):
    client = client_for(manager)
    url = f"/api/projects/{project.pk}/"
    https = {"base_url": "https://models.example.org/v1", "api_key": SECRET}
    client.patch(url, {"model_settings": https}, format="json")
    client.patch(
        url, {"model_settings": {"base_url": "https://models.example.org:443/v1"}}, format="json"
    )
    assert stored(project)["api_key"] == SECRET


@pytest.mark.django_db
@pytest.mark.parametrize(
    "base_url",
    [
        "gpu-host:8001/v1",
        "ftp://gpu-host/v1",
        "http:///v1",
        "http://gpu-host:99999/v1",
        "http://gpu host:8001/v1",
        42,
    ],
)
def test_a_base_url_that_names_no_endpoint_is_refused_and_the_key_kept(
    keyed, manager, client_for, base_url
):
    settings = {**ENDPOINT, "base_url": base_url}
    response = client_for(manager).patch(
        f"/api/projects/{keyed.pk}/", {"model_settings": settings}, format="json"
    )
    assert response.status_code == 400, response.content
    expected = f"base_url must be an http:// or https:// URL with a host, not {base_url!r}."
    assert expected in str(response.json()["error"]["details"])
    assert stored(keyed) == {**ENDPOINT, "api_key": SECRET}


def serve_a_version_for(project: Project, client, base_url: str, model: str) -> ModelVersion:
    """A served version at ``base_url``, chosen as the project's version A by its manager."""
    version = ModelVersion.objects.create(
        name="ui-tars-elsewhere",
        base_model=model,
        base_url=base_url,
        serving_status=ModelVersion.Serving.SERVING,
    )
    chosen = client.put(
        f"/api/projects/{project.pk}/model-versions/",
        {"model_version": version.name},
        format="json",
    )
    assert chosen.status_code == 200, chosen.content
    return version


def authorization(request) -> str | None:
    return {k.lower(): v for k, v in request.headers.items()}.get("authorization")


@pytest.mark.django_db
def test_a_model_version_on_another_host_gets_no_key(
    project, manager, make_user, client_for, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    client = client_for(manager)
    with serving() as own, serving() as elsewhere:
        keyed = {"base_url": own.base_url, "model": own.model, "api_key": SECRET}
        client.patch(f"/api/projects/{project.pk}/", {"model_settings": keyed}, format="json")
        serve_a_version_for(project, client, elsewhere.base_url, elsewhere.model)

        # The health probe of the project's model, and a proposal on one of its episodes.
        health = client.get(f"/api/projects/{project.pk}/model/").json()["health"]
        elsewhere.script(Reply.text("Thought: Wait.\nAction: wait()"))
        task = Task.objects.create(project=project, external_id="t1", instruction="Wait")
        episode = Episode.objects.create(
            task=task, annotator=make_user("ann", project, "annotator")
        )
        project.refresh_from_db()  # version A, as the manager chose it
        versions.assign_version(episode, project)
        shot = store_screenshot(solid_png(64, 40))
        jobs.propose_step(episode.steps.create(index=1, observation=shot).pk)
        proposer = get_proposer(versions.episode_model_settings(episode))

    assert health["ok"] is True
    assert [r.path for r in elsewhere.requests] == ["/v1/models", "/v1/chat/completions"]
    assert [authorization(r) for r in elsewhere.requests] == [None, None]
    assert own.requests == []
    assert proposer.base_url == elsewhere.base_url and proposer.api_key == ""
    assert stored(project)["api_key"] == SECRET


@pytest.mark.django_db
def test_a_model_version_at_the_projects_own_endpoint_gets_its_key(project, manager, client_for):
    client = client_for(manager)
    with serving() as own:
        keyed = {"base_url": own.base_url, "model": own.model, "api_key": SECRET}
        client.patch(f"/api/projects/{project.pk}/", {"model_settings": keyed}, format="json")
        serve_a_version_for(project, client, f"{own.base_url}/", own.model)
        health = client.get(f"/api/projects/{project.pk}/model/").json()["health"]
    assert health["ok"] is True
    assert [authorization(r) for r in own.requests] == [f"Bearer {SECRET}"]


@pytest.mark.django_db
def test_a_project_key_without_an_endpoint_goes_to_no_version(project):
    project.model_settings = {"api_key": SECRET, "temperature": 0.2}
    project.save()
    project.model_version = ModelVersion.objects.create(
        name="v1",
        base_model="ui-tars",
        base_url="http://gpu-host:8001/v1",
        serving_status=ModelVersion.Serving.SERVING,
    )
    proposer = get_proposer(versions.project_model_settings(project))
    assert (proposer.api_key, proposer.temperature) == ("", 0.2)
