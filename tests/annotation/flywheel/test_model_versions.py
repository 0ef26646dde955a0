"""Model versions: loading one into a running OpenAI-compatible server (the fake one implements
vLLM's ``/v1/load_lora_adapter`` and lists loaded adapters in ``/v1/models``), serving one
with ``serve_model --version``, the API and commands that register and serve them, and a
project that splits its episodes between versions A and B, whose names land on every episode
and proposal."""

import io
import json
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation import jobs
from annotation.flywheel import model_versions
from annotation.models import Episode, Proposal, Step, Task
from annotation.projects import versions
from backend.accounts.roles import Role
from model_serving.models import FineTuneJob, ModelVersion
from model_serving.serving import ServingFailed, serve_version
from model_serving.versions import choose_version, gets_version_b
from tests.support.fake_model_server import Reply, serving
from tests.support.pngs import solid_png
from vm_pool.screen.screenshots import store_screenshot

pytestmark = pytest.mark.django_db

BASE = "ui-tars-1.5-7b"


@pytest.fixture
def adapter_storage(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TANDEM_ADAPTER_DIR = tmp_path / "adapters"
    settings.TANDEM_VLLM_ADAPTER_DIR = str(tmp_path / "adapters")
    return settings


def stored_adapter(prefix: str) -> str:
    default_storage.save(f"{prefix}/adapter_config.json", ContentFile(b'{"r": 4}'))
    default_storage.save(f"{prefix}/adapter_model.safetensors", ContentFile(b"weights"))
    return prefix


def adapter_version(base_url: str, name: str = "ui-tars-ft-1") -> ModelVersion:
    return ModelVersion.objects.create(
        name=name,
        base_model=BASE,
        base_url=base_url,
        adapter_location=stored_adapter(f"finetune/{name}/adapter"),
    )


def test_serving_a_version_loads_its_adapter_and_the_endpoint_lists_it(adapter_storage):
    with serving(model=BASE) as server:
        version = serve_version(adapter_version(server.base_url))
        listed = [m["id"] for m in json.loads(_get(server.base_url + "/models"))["data"]]

    assert version.serving_status == "serving" and version.serving_error == ""
    assert version.served_at is not None
    load = next(r for r in server.requests if r.path == "/v1/load_lora_adapter")
    path = Path(adapter_storage.TANDEM_ADAPTER_DIR) / "ui-tars-ft-1"
    assert load.body == {"lora_name": "ui-tars-ft-1", "lora_path": str(path)}
    assert (path / "adapter_model.safetensors").read_bytes() == b"weights"
    assert listed == [BASE, "ui-tars-ft-1"]


def test_serving_it_again_is_harmless(adapter_storage):
    with serving(model=BASE) as server:
        version = adapter_version(server.base_url)
        serve_version(version)
        assert serve_version(version).serving_status == "serving"
    assert list(server.adapters) == ["ui-tars-ft-1"]


def test_an_endpoint_that_refuses_the_adapter_gives_the_reason(adapter_storage):
    with serving(model=BASE) as server:
        server.refuse_adapters(400, "LoRA rank 128 is greater than max_lora_rank 64.")
        version = adapter_version(server.base_url)
        with pytest.raises(ServingFailed) as refused:
            serve_version(version)

    message = str(refused.value)
    assert "refused to load adapter 'ui-tars-ft-1'" in message
    assert "HTTP 400: LoRA rank 128 is greater than max_lora_rank 64." in message
    version.refresh_from_db()
    assert (version.serving_status, version.serving_error) == ("failed", message)


def test_an_endpoint_without_runtime_lora_loading_is_named_as_such(adapter_storage):
    with serving(model=BASE) as server:
        server.refuse_adapters(404, "Not Found")
        with pytest.raises(ServingFailed, match="VLLM_ALLOW_RUNTIME_LORA_UPDATING"):
            serve_version(adapter_version(server.base_url))


def test_a_base_version_the_endpoint_does_not_serve_fails(adapter_storage):
    with serving(model="some-other-model") as server:
        version = ModelVersion.objects.create(name=BASE, base_model=BASE, base_url=server.base_url)
        with pytest.raises(ServingFailed, match=f"lists some-other-model, not {BASE}"):
            serve_version(version)
    assert not any(r.path == "/v1/load_lora_adapter" for r in server.requests)


def test_an_unreachable_endpoint_fails_with_the_connection_error(adapter_storage):
    version = adapter_version("http://127.0.0.1:9/v1")
    with pytest.raises(ServingFailed, match="did not answer: ConnectError"):
        serve_version(version)


def _get(url: str) -> bytes:
    import httpx

    return httpx.get(url, timeout=5).content


# --- the API and the commands ---------------------------------------------------------------


def test_engineers_register_and_serve_versions_through_the_api(
    adapter_storage,
    project,
    make_user,
    token_client_for,
    client_for,
    django_capture_on_commit_callbacks,
):
    engineer = make_user("erin", project, Role.ENGINEER)
    client, _ = token_client_for(engineer, ["models:write"])
    body = {"name": BASE, "base_model": BASE, "base_url": "http://vllm:8000/v1"}
    created = client.post("/api/model-versions/", body, format="json")
    assert created.status_code == 201, created.json()
    again = client.post("/api/model-versions/", body, format="json")
    assert again.status_code == 400 and ModelVersion.objects.count() == 1
    # A name a fine-tuning job will register is taken too: that job would fail at its end.
    FineTuneJob.objects.create(
        base_model=BASE, base_model_path="/models/b", stages=[], version_name="ui-tars-ft-9"
    )
    planned = client.post("/api/model-versions/", {**body, "name": "ui-tars-ft-9"}, format="json")
    assert planned.status_code == 400
    assert planned.json()["error"]["details"]["name"] == [model_versions.TAKEN]
    # A registration that checked the name while another took it is refused, not a 500.
    with pytest.raises(model_versions.VersionNameTaken):
        model_versions.register({**body, "base_url": "http://vllm:8000/v1"}, engineer)
    assert list(ModelVersion.objects.values_list("name", flat=True)) == [BASE]

    with django_capture_on_commit_callbacks(execute=False) as queued:
        served = client.post(f"/api/model-versions/{created.json()['id']}/serve/")
    assert served.status_code == 202
    assert served.json()["serving_status"] == "loading"
    assert len(queued) == 1  # the load runs in a job, not in the request

    annotator = client_for(make_user("ann", project, Role.ANNOTATOR))
    assert annotator.get("/api/model-versions/").status_code == 403
    assert annotator.post("/api/model-versions/", body, format="json").status_code == 403
    manager = client_for(make_user("mia", project, Role.MANAGER))
    assert [v["name"] for v in manager.get("/api/model-versions/").json()["results"]] == [BASE]
    assert manager.post(f"/api/model-versions/{created.json()['id']}/serve/").status_code == 403
    reader, _ = token_client_for(engineer, ["datasets:read"])
    assert reader.get("/api/model-versions/").status_code == 403


def test_the_model_version_command_registers_and_serves(adapter_storage):
    with serving(model=BASE) as server:
        stored_adapter("finetune/cli/adapter")
        out = io.StringIO()
        call_command(
            "model_version",
            "register",
            "ui-tars-cli",
            "--base-model",
            BASE,
            "--base-url",
            server.base_url,
            "--adapter",
            "finetune/cli/adapter",
            stdout=out,
        )
        call_command("model_version", "serve", "ui-tars-cli", stdout=out)
        server.refuse_adapters(500, "out of GPU memory")
        adapter_version(server.base_url, "ui-tars-refused")
        with pytest.raises(CommandError, match="out of GPU memory"):
            call_command("model_version", "serve", "ui-tars-refused", stdout=out)
    assert f"ui-tars-cli is served by {server.base_url}" in out.getvalue()
    assert ModelVersion.objects.get(name="ui-tars-cli").serving_status == "serving"


def test_serve_model_loads_registered_adapters_at_start(adapter_storage):
    adapter_version("http://vllm:8000/v1")
    out = io.StringIO()
    call_command("serve_model", "--model-version", "ui-tars-ft-1", "--dry-run", stdout=out)
    line = out.getvalue().strip()
    path = Path(adapter_storage.TANDEM_ADAPTER_DIR) / "ui-tars-ft-1"
    assert f"--lora-modules ui-tars-ft-1={path}" in line
    assert "--enable-lora" in line
    with pytest.raises(CommandError, match="no model version named 'nope'"):
        call_command("serve_model", "--model-version", "nope", "--dry-run", stdout=out)


# --- A/B: which version proposes an episode -------------------------------------------------


def test_the_b_share_is_chosen_from_the_episode_id_alone():
    a, b = ModelVersion(name="a"), ModelVersion(name="b")
    choices = [choose_version(i, a, b, 0.3) for i in range(1, 2001)]
    assert choices == [choose_version(i, a, b, 0.3) for i in range(1, 2001)]
    assert 0.26 < sum(c is b for c in choices) / len(choices) < 0.34
    assert all(choose_version(i, a, b, 0.0) is a for i in range(1, 200))
    assert all(choose_version(i, a, b, 1.0) is b for i in range(1, 200))
    assert choose_version(7, None, None, 0.5) is None
    # Not the held-out split under another name.
    from model_serving.evaluation import is_held_out

    assert [gets_version_b(i, 0.1) for i in range(500)] != [is_held_out(i, 0.1) for i in range(500)]


def test_episodes_of_a_project_propose_with_their_version_and_record_its_name(
    adapter_storage, project, make_user, settings
):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    annotator = make_user("ann", project, Role.ANNOTATOR)
    screenshot = store_screenshot(solid_png(1280, 800))
    with serving(model=BASE) as server:
        server.default = Reply.text("Thought: Wait.\nAction: wait()")
        a = serve_version(
            ModelVersion.objects.create(name=BASE, base_model=BASE, base_url=server.base_url)
        )
        b = serve_version(adapter_version(server.base_url))
        project.model_settings = {"temperature": 0.2, "model": "ignored", "base_url": "ignored"}
        project.save(update_fields=["model_settings"])
        versions.set_project_versions(project, a, b, 0.5)
        by_version = {}
        for n in range(12):
            task = Task.objects.create(project=project, external_id=f"t{n}", instruction="Wait")
            episode = Episode.objects.create(task=task, annotator=annotator)
            versions.assign_version(episode, project)
            step = Step.objects.create(episode=episode, index=1, observation=screenshot)
            jobs.propose_step(step.pk)
            by_version.setdefault(episode.served_version.name, []).append(episode.pk)

    assert set(by_version) == {BASE, "ui-tars-ft-1"}
    for name, episode_ids in by_version.items():
        expected = choose_version(episode_ids[0], a, b, 0.5)
        assert expected.name == name
        for episode in Episode.objects.filter(pk__in=episode_ids):
            assert (episode.model_name, episode.model_version) == (expected.served_name, name)
        proposals = Proposal.objects.filter(step__episode_id__in=episode_ids)
        assert {p.model_version for p in proposals} == {name}
    asked = [r.body["model"] for r in server.chat_requests]
    assert sorted(set(asked)) == [BASE, "ui-tars-ft-1"]
    assert {r.body["temperature"] for r in server.chat_requests} == {0.2}


def test_managers_choose_a_projects_versions_and_see_them_side_by_side(
    project, make_user, client_for, token_client_for
):
    serving = ModelVersion.Serving.SERVING
    a = ModelVersion.objects.create(name="v1", base_model=BASE, serving_status=serving)
    b = ModelVersion.objects.create(name="v2", base_model=BASE, serving_status=serving)
    ModelVersion.objects.create(name="v3", base_model=BASE, serving_error="HTTP 400: no")
    manager = client_for(make_user("mia", project, Role.MANAGER))
    url = f"/api/projects/{project.pk}/model-versions/"

    chosen = manager.put(
        url, {"model_version": "v1", "version_b": "v2", "version_b_share": 0.25}, format="json"
    )
    assert chosen.status_code == 200, chosen.json()
    body = chosen.json()
    assert (body["model_version"], body["version_b"], body["version_b_share"]) == (
        "v1",
        "v2",
        0.25,
    )
    assert [row["model_version"] for row in body["versions"]] == ["v1", "v2"]
    assert body["versions"][0] == {"model_version": "v1", "live": None, "offline": None}

    bad = manager.put(url, {"model_version": "v1", "version_b": "v2", "version_b_share": 2})
    assert bad.status_code == 400
    same = manager.put(url, {"model_version": "v1", "version_b": "v1", "version_b_share": 0.5})
    assert same.status_code == 400
    unserved = manager.put(url, {"model_version": "v3"}, format="json")
    assert unserved.status_code == 400
    assert "v3 is registered, not served" in unserved.json()["error"]["message"]
    project.refresh_from_db()
    assert (project.model_version, project.version_b, project.version_b_share) == (a, b, 0.25)

    engineer = client_for(make_user("erin", project, Role.ENGINEER))
    assert engineer.get(url).status_code == 200
    assert engineer.put(url, {"model_version": None}, format="json").status_code == 403
    annotator = client_for(make_user("ann", project, Role.ANNOTATOR))
    assert annotator.get(url).status_code == 403
    outsider = client_for(make_user("otto"))
    assert outsider.get(url).status_code == 404
    token, _ = token_client_for(make_user("mo", project, Role.MANAGER), ["projects:write"])
    assert token.get(url).status_code == 403


def test_registering_an_adapter_checks_it_is_in_storage_under_a_usable_name(
    adapter_storage, project, make_user, client_for
):
    client = client_for(make_user("erin", project, Role.ENGINEER))
    stored_adapter("finetune/elsewhere/adapter")
    body = {"name": "ft-x", "base_model": BASE, "base_url": "http://vllm:8000/v1"}

    missing = client.post(
        "/api/model-versions/", {**body, "adapter_location": "finetune/nothing"}, format="json"
    )
    assert missing.status_code == 400
    assert "adapter_location" in missing.json()["error"]["details"]
    unsafe = {**body, "name": "a/b", "adapter_location": "finetune/elsewhere/adapter"}
    assert client.post("/api/model-versions/", unsafe, format="json").status_code == 400
    assert not ModelVersion.objects.exists()

    made = client.post(
        "/api/model-versions/",
        {**body, "adapter_location": "finetune/elsewhere/adapter/"},
        format="json",
    )
    assert made.status_code == 201
    assert made.json()["adapter_location"] == "finetune/elsewhere/adapter"
    assert made.json()["served_name"] == "ft-x"


def test_the_project_model_endpoint_probes_the_version_that_proposes(
    adapter_storage, project, make_user, client_for
):
    member = client_for(make_user("ann", project, Role.ANNOTATOR))
    with serving(model=BASE) as server:
        version = serve_version(adapter_version(server.base_url))
        versions.set_project_versions(project, version, None, 0.0)
        status = member.get(f"/api/projects/{project.pk}/model/").json()
        server.adapters.clear()  # the server restarted without it
        lost = member.get(f"/api/projects/{project.pk}/model/").json()

    assert (status["proposer"], status["model"], status["health"]["ok"]) == (
        "openai",
        "ui-tars-ft-1",
        True,
    )
    assert lost["health"]["ok"] is False
    assert lost["health"]["error"] == f"the endpoint serves {BASE}, not ui-tars-ft-1"


def test_a_versions_endpoint_is_set_by_engineers_and_kept_while_a_project_runs_it(
    adapter_storage, project, make_user, client_for
):
    version = ModelVersion.objects.create(name="ui-tars-ft-2", base_model=BASE)
    engineer = client_for(make_user("erin", project, Role.ENGINEER))
    url = f"/api/model-versions/{version.pk}/endpoint/"

    bad = engineer.post(url, {"base_url": "not a url"}, format="json")
    assert bad.status_code == 400 and "base_url" in bad.json()["error"]["details"]
    manager = client_for(make_user("mia", project, Role.MANAGER))
    assert manager.post(url, {"base_url": "http://vllm:8000/v1"}, format="json").status_code == 403
    version.refresh_from_db()
    assert version.base_url == ""

    with serving(model=BASE) as server:
        moved = engineer.post(url, {"base_url": server.base_url}, format="json")
        assert moved.status_code == 200, moved.json()
        assert (moved.json()["base_url"], moved.json()["serving_status"]) == (
            server.base_url,
            "registered",
        )
        version = serve_version(ModelVersion.objects.get(pk=version.pk))
        versions.set_project_versions(project, version, None, 0.0)

        # Moving the version a project runs would send its proposals somewhere unchecked.
        refused = engineer.post(url, {"base_url": "http://elsewhere:8000/v1"}, format="json")
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "version_in_use"
        assert project.name in refused.json()["error"]["message"]
    version.refresh_from_db()
    assert (version.base_url, version.serving_status) == (server.base_url, "serving")


def test_the_projects_own_settings_are_version_a_against_a_version_b(
    adapter_storage, project, make_user
):
    """The first A/B a project makes: its base (its own model settings) against a version."""
    annotator = make_user("ann", project, Role.ANNOTATOR)
    with serving(model=BASE) as server:
        b = serve_version(adapter_version(server.base_url))
        versions.set_project_versions(project, None, b, 0.5)
    project.refresh_from_db()
    assert (project.model_version, project.version_b, project.version_b_share) == (None, b, 0.5)
    served = set()
    for n in range(12):
        task = Task.objects.create(project=project, external_id=f"t{n}", instruction="Wait")
        episode = Episode.objects.create(task=task, annotator=annotator)
        versions.assign_version(episode, project)
        served.add(episode.served_version.name if episode.served_version else None)
    assert served == {None, b.name}
