"""Running the model server and watching it: the `vllm serve` command, the `serve_model`
management command, the endpoint probe, and the project's model health endpoint."""

import io
import json
import os
import shlex
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Project
from backend.accounts.roles import Role
from model_serving.uitars import HISTORY_IMAGES, smart_resize
from model_serving.vllm import endpoint_health, serve_command
from tests.support.fake_model_server import serving

ROOT = Path(__file__).resolve().parents[2]
UITARS = "ByteDance-Seed/UI-TARS-1.5-7B"
# Everything but the screenshots: system turn, prompt and instruction, a hundred earlier steps
# of about a hundred tokens each, and a 512-token answer.
TEXT_TOKENS = 600 + 100 * 100 + 512


def value_of(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_command_has_the_flags_ui_tars_needs():
    command = serve_command(UITARS, port=8001, served_name="ui-tars")
    argv = command.argv
    assert argv[:3] == ["vllm", "serve", UITARS]
    assert json.loads(value_of(argv, "--limit-mm-per-prompt")) == {"image": HISTORY_IMAGES}
    assert value_of(argv, "--port") == "8001"
    assert value_of(argv, "--served-model-name") == "ui-tars"
    assert value_of(argv, "--max-loras") == "4"
    assert value_of(argv, "--max-lora-rank") == "64"
    assert value_of(argv, "--gpu-memory-utilization") == "0.9"
    assert {"--enable-lora", "--enable-prefix-caching"} <= set(argv)
    assert "--trust-remote-code" not in argv
    assert command.env == {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}


def test_served_name_defaults_to_the_model_id_and_extra_flags_come_last():
    argv = serve_command(UITARS, extra=["--tensor-parallel-size", "2"]).argv
    assert value_of(argv, "--served-model-name") == UITARS
    assert argv[-2:] == ["--tensor-parallel-size", "2"]


def test_without_lora_no_adapter_flags_and_no_runtime_loading():
    command = serve_command(UITARS, lora=False, prefix_caching=False)
    assert not {"--enable-lora", "--max-loras", "--max-lora-rank"} & set(command.argv)
    assert "--no-enable-prefix-caching" in command.argv
    assert command.env == {}


def test_context_holds_five_smart_resized_1080p_screenshots_and_a_long_history():
    height, width = smart_resize(1080, 1920)
    assert (width, height) == (1932, 1092)
    # One token per 28x28 square (14-pixel patches merged 2x2), plus vision start and end.
    per_image = (height // 28) * (width // 28) + 2
    assert per_image == 2693
    needed = HISTORY_IMAGES * per_image + TEXT_TOKENS
    assert int(value_of(serve_command(UITARS).argv, "--max-model-len")) >= needed


def test_dry_run_prints_the_command_and_starts_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    out = io.StringIO()
    call_command("serve_model", "--model", UITARS, "--port", "8001", "--dry-run", stdout=out)
    printed = out.getvalue().strip()
    assert printed == serve_command(UITARS, port=8001).shell()
    assignment, *argv = shlex.split(printed)
    assert assignment == "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
    assert argv == serve_command(UITARS, port=8001).argv


def test_without_vllm_installed_serving_fails_with_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CommandError) as failure:
        call_command("serve_model", "--model", UITARS, stdout=io.StringIO())
    message = str(failure.value)
    assert "pip install vllm" in message
    assert "--profile gpu" in message


def test_serving_replaces_the_process_with_vllm_and_its_environment(tmp_path):
    # A stand-in `vllm` on PATH that reports how it was started.
    fake = tmp_path / "vllm"
    fake.write_text(
        '#!/bin/sh\necho "argv: $*"\necho "lora updating: $VLLM_ALLOW_RUNTIME_LORA_UPDATING"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "manage.py", "serve_model", "--port", "8001"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    printed, started, lora = done.stdout.strip().splitlines()
    assert printed == serve_command(UITARS, port=8001).shell()
    assert started == "argv: " + " ".join(serve_command(UITARS, port=8001).argv[1:])
    assert lora == "lora updating: True"


def test_a_running_endpoint_is_healthy_and_lists_its_model():
    with serving() as server:
        health = endpoint_health(server.base_url)
    assert health.ok
    assert health.models == [server.model]
    assert health.latency_ms is not None and health.latency_ms < 3000
    assert health.error is None
    assert server.requests[0].path == "/v1/models"


def test_an_endpoint_nobody_listens_on_is_unreachable_and_the_exception_is_not_told():
    health = endpoint_health(f"http://127.0.0.1:{closed_port()}/v1", timeout=1)
    assert not health.ok
    assert health.status == "unreachable"
    assert health.models == []
    assert health.error == "the endpoint could not be reached"
    # Not even how long it took: a refusal and a timeout would tell closed and filtered apart.
    assert (health.latency_ms, health.http_status) == (None, None)


def test_a_name_that_does_not_resolve_reads_the_same_as_a_closed_port():
    refused = endpoint_health(f"http://127.0.0.1:{closed_port()}/v1", timeout=1)
    unknown = endpoint_health("http://no-such-host.invalid/v1", timeout=1)
    assert unknown == refused


def test_an_endpoint_without_an_openai_api_gives_its_http_status_not_its_answer():
    with serving() as server:
        health = endpoint_health(f"http://127.0.0.1:{server.port}/not-openai")
    assert not health.ok
    assert (health.status, health.http_status) == ("error", 404)
    assert health.error == "the endpoint answered HTTP 404"
    assert "no route" not in str(health)


@pytest.mark.django_db
def test_members_see_the_projects_endpoint_is_up_and_only_managers_see_where(make_user, client_for):
    with serving() as server:
        settings = {"proposer": "openai", "base_url": server.base_url, "model": server.model}
        project = Project.objects.create(name="Served", model_settings=settings)
        reviewer = make_user("reviewer", project, Role.REVIEWER)
        manager = make_user("manager", project, Role.MANAGER)
        response = client_for(reviewer).get(f"/api/projects/{project.pk}/model/")
        managed = client_for(manager).get(f"/api/projects/{project.pk}/model/").json()
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["proposer"] == "openai"
    assert "base_url" not in body
    assert managed["base_url"] == server.base_url
    assert body["model"] == server.model
    assert body["baseline"] is False
    assert body["health"]["ok"] is True
    assert body["health"]["status"] == "ok"
    assert body["health"]["models"] == [server.model]
    assert body["health"]["error"] is None


@pytest.mark.django_db
def test_an_endpoint_that_serves_another_model_is_shown_unhealthy(make_user, client_for):
    with serving(model="some-other-model") as server:
        settings = {"base_url": server.base_url, "model": UITARS}
        project = Project.objects.create(name="Misnamed", model_settings=settings)
        annotator = make_user("annotator", project, Role.ANNOTATOR)
        health = client_for(annotator).get(f"/api/projects/{project.pk}/model/").json()["health"]
    assert health["ok"] is False
    assert health["models"] == ["some-other-model"]
    assert UITARS in health["error"]


@pytest.mark.django_db
def test_an_unreachable_endpoint_is_shown_unhealthy(make_user, client_for):
    settings = {"base_url": f"http://127.0.0.1:{closed_port()}/v1", "model": UITARS}
    project = Project.objects.create(name="Down", model_settings=settings)
    annotator = make_user("annotator", project, Role.ANNOTATOR)
    body = client_for(annotator).get(f"/api/projects/{project.pk}/model/").json()
    assert body["proposer"] == "openai"
    assert body["health"]["ok"] is False
    assert body["health"]["status"] == "unreachable"
    assert body["health"]["error"] == "the endpoint could not be reached"


@pytest.mark.django_db
def test_the_health_of_an_endpoint_that_refuses_shows_its_status_not_its_answer(
    make_user, client_for
):
    with serving() as server:
        settings = {"base_url": f"http://127.0.0.1:{server.port}/private", "model": UITARS}
        project = Project.objects.create(name="Probed", model_settings=settings)
        manager = make_user("manager", project, Role.MANAGER)
        response = client_for(manager).get(f"/api/projects/{project.pk}/model/")
    health = response.json()["health"]
    assert (health["ok"], health["status"], health["http_status"]) == (False, "error", 404)
    assert health["error"] == "the endpoint answered HTTP 404"
    assert "no route" not in response.content.decode()


@pytest.mark.django_db
def test_a_project_without_a_model_shows_the_baseline_and_its_tesseract(make_user, client_for):
    project = Project.objects.create(name="No GPU")
    engineer = make_user("engineer", project, Role.ENGINEER)
    body = client_for(engineer).get(f"/api/projects/{project.pk}/model/").json()
    assert body["proposer"] == "baseline"
    assert body["baseline"] is True
    assert "base_url" not in body  # the model settings are the managers'
    assert body["model"] == "tandem-baseline"
    assert body["health"]["ok"] is True
    version = subprocess.run(["tesseract", "--version"], capture_output=True, text=True).stdout
    assert body["health"]["tesseract"] in version


@pytest.mark.django_db
def test_misconfigured_model_settings_are_shown_unhealthy(make_user, client_for):
    project = Project.objects.create(name="Typo", model_settings={"proposer": "opneai"})
    manager = make_user("manager", project, Role.MANAGER)
    body = client_for(manager).get(f"/api/projects/{project.pk}/model/").json()
    assert body["proposer"] == "opneai"
    assert body["health"]["ok"] is False
    assert "unknown proposer" in body["health"]["error"]


@pytest.mark.django_db
def test_non_members_get_not_found(make_user, client_for, project, other_project):
    outsider = make_user("outsider", other_project, Role.MANAGER)
    response = client_for(outsider).get(f"/api/projects/{project.pk}/model/")
    assert response.status_code == 404
