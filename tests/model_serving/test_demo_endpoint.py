"""The demo's model side: the tiny base model ``make demo`` saves, the demo endpoint process
(``manage.py demo_endpoint``) answering the real proposer with scripted UI-TARS text, and the
demo base version ``seed_demo`` registers and checks on it."""

import asyncio
import io
import json
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command

from model_serving.demo_endpoint import DEMO_LABEL
from model_serving.models import ModelVersion
from model_serving.proposers.base import HistoryStep, ModelUnavailable, ProposalRequest
from model_serving.proposers.openai import OpenAIProposer
from model_serving.serving import ServingFailed, serve_version
from tests.support.pngs import solid_png
from tests.support.services import BIN, child_env, free_port, running
from vm_pool.actions import Action, ActionType, Point, ScreenSize

SCREEN = ScreenSize(1280, 800)
DEMO_BASE = "demo-tiny-qwen"  # the default TANDEM_DEMO_BASE_MODEL
pytestmark = pytest.mark.django_db


@contextmanager
def demo_endpoint(adapters: Path):
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"

    def ready() -> bool:
        try:
            return httpx.get(f"{base_url}/models", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    command = [str(BIN / "python"), "manage.py", "demo_endpoint", "--bind", f"127.0.0.1:{port}"]
    with running(command, child_env(TANDEM_ADAPTER_DIR=str(adapters)), ready):
        yield base_url


def adapter_folder(parent: Path, name: str) -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": 4}))
    return folder


def propose(base_url: str, model: str, history: tuple[HistoryStep, ...] = ()):
    request = ProposalRequest(
        instruction="Write a greeting and save it.",
        platform="desktop",
        screenshot_png=solid_png(SCREEN.width, SCREEN.height),
        screen=SCREEN,
        history=history,
    )
    return asyncio.run(OpenAIProposer(base_url, model, retries=0).propose(request))


def test_the_demo_endpoint_answers_the_proposer_with_labelled_scripted_steps(tmp_path):
    with demo_endpoint(tmp_path / "adapters") as base_url:
        first = propose(base_url, DEMO_BASE)
        candidate = first.candidates[0]
        assert candidate.is_valid, candidate.invalid_reason
        # The middle of the screen, through UI-TARS-1.5's coordinates and back.
        assert candidate.action == Action(ActionType.CLICK, Point(640, 400))
        assert candidate.thought.startswith(f"{DEMO_LABEL} {DEMO_BASE}:")
        assert first.prompt_tokens and first.completion_tokens  # estimated, and labelled so

        earlier = HistoryStep(
            solid_png(SCREEN.width, SCREEN.height), SCREEN, "Focus it.", candidate.action
        )
        second = propose(base_url, DEMO_BASE, (earlier,)).candidates[0]
        assert second.action == Action(ActionType.TYPE, content="Hello from Tandem")


def test_adapters_load_once_and_a_model_it_does_not_serve_is_refused(tmp_path):
    adapters = tmp_path / "adapters"
    adapter_folder(adapters, "kept-from-before")  # loaded at start, as --lora-modules would
    new = adapter_folder(tmp_path / "elsewhere", "demo-ft-1")
    with demo_endpoint(adapters) as base_url:
        listed = httpx.get(f"{base_url}/models").json()["data"]
        assert [(m["id"], m.get("parent")) for m in listed] == [
            (DEMO_BASE, None),
            ("kept-from-before", DEMO_BASE),
        ]
        load = f"{base_url}/load_lora_adapter"
        missing = httpx.post(load, json={"lora_name": "x", "lora_path": str(tmp_path / "none")})
        assert missing.status_code == 400 and "No adapter found" in missing.text
        assert httpx.post(load, content=b"{not json").status_code == 400
        assert httpx.post(load, json={"lora_name": "demo-ft-1", "lora_path": str(new)}).is_success
        again = httpx.post(load, json={"lora_name": "demo-ft-1", "lora_path": str(new)})
        assert "already been loaded" in again.text
        assert (
            propose(base_url, "demo-ft-1")
            .candidates[0]
            .thought.startswith(f"{DEMO_LABEL} demo-ft-1:")
        )
        with pytest.raises(ModelUnavailable, match="404"):
            propose(base_url, "never-loaded")
        listed = [m["id"] for m in httpx.get(f"{base_url}/models").json()["data"]]
        assert listed == [DEMO_BASE, "demo-ft-1", "kept-from-before"]


def test_seed_demo_registers_the_demo_base_and_serves_it_when_the_endpoint_runs(tmp_path, settings):
    settings.TANDEM_DEMO_MODEL_DIR = tmp_path / "models" / DEMO_BASE
    settings.TANDEM_ADAPTER_DIR = tmp_path / "adapters"
    out = io.StringIO()
    call_command("demo_model", stdout=out)
    assert f"TANDEM_BASE_MODELS={DEMO_BASE}={settings.TANDEM_DEMO_MODEL_DIR}" in out.getvalue()
    config = json.loads((settings.TANDEM_DEMO_MODEL_DIR / "config.json").read_text())
    assert config["model_type"] == "qwen2_5_vl"
    assert (settings.TANDEM_DEMO_MODEL_DIR / "tokenizer.json").exists()

    # No endpoint yet: the version is registered, and the seed says why it is not served.
    settings.TANDEM_DEMO_ENDPOINT = f"http://127.0.0.1:{free_port()}/v1"
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    assert f"Demo model version {DEMO_BASE}: not served yet" in out.getvalue()
    version = ModelVersion.objects.get(name=DEMO_BASE)
    assert version.serving_status == ModelVersion.Serving.FAILED

    with demo_endpoint(settings.TANDEM_ADAPTER_DIR) as base_url:
        ModelVersion.objects.filter(pk=version.pk).update(base_url=base_url)
        out = io.StringIO()
        call_command("seed_demo", stdout=out)
        assert f"served by the demo endpoint {base_url}" in out.getvalue()
    version.refresh_from_db()
    assert (version.serving_status, version.adapter_location) == ("serving", "")
    assert ModelVersion.objects.filter(name=DEMO_BASE).count() == 1  # seeding twice keeps one
    with pytest.raises(ServingFailed):  # the endpoint is gone, and serving says so
        serve_version(version)
