"""Fine-tuning jobs and model versions in headless Chromium against real services: uvicorn
serving the built app, a Celery worker on the ``train`` queue (one job at a time, as a GPU host
runs it), a worker on the ``exports`` and ``default`` queues (evaluations, serving), and the fake
OpenAI-compatible server standing in for vLLM (``/v1/models``, ``/v1/load_lora_adapter``,
chat completions).

An engineer starts a job from the web app over SFT and DPO exports of recorded episodes, with a
tiny Qwen2.5-VL the deployment knows as a base model, and watches it succeed with its loss
curve; serves the version it registered (first refused by the endpoint, whose reason is shown,
then loaded, and the endpoint lists it); evaluates it on the held-out steps and reads its step
success rate next to its live acceptance rate. A manager makes it version B of an A/B split,
after the server refused a B without an A, and the acceptance chart shows A and B apart. An
annotator's navigation shows none of it.
"""

import math
import re
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from annotation.flywheel.model_versions import overview
from annotation.models import Episode, Project
from backend.accounts.roles import Role
from model_serving.demo_model import save_demo_base
from model_serving.evaluation import is_held_out
from model_serving.models import EvaluationRun, FineTuneJob, ModelVersion
from model_serving.serving import serve_version
from tests.e2e.browser import accessibility_problems, chromium, sign_in
from tests.support.export_data import make_episodes
from tests.support.fake_model_server import Reply, serving
from tests.support.finetune_data import built_export
from tests.support.services import (
    BIN,
    celery_worker,
    child_env,
    free_port,
    port_open,
    running,
    worker_answers,
)

# Redis databases of this suite alone, so that it can run beside the other live suites.
BROKER, CHANNELS = "redis://127.0.0.1:6379/6", "redis://127.0.0.1:6379/7"
SHOTS = Path(__file__).resolve().parents[2] / "var" / "e2e-screenshots"
BASE = "tiny-qwen"  # the deployment's name for the tiny model (TANDEM_BASE_MODELS)
VERSION = "ui-tars-ft-e2e"
HELD_OUT_SHARE = 0.5
# The fake model clicks (644,406) on UI-TARS-1.5's resized screen: (640,400) on this one.
SCREEN = (1280, 800)
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def percent(rate: float | None) -> str:
    """As the web app writes a rate (JavaScript's Math.round)."""
    return "—" if rate is None else f"{math.floor(rate * 100 + 0.5)}%"


def worker(name: str, queues: str, pool: str, env: dict[str, str], broker: str = BROKER):
    command = celery_worker(name, queues, pool)

    def ready() -> bool:
        return worker_answers(broker, name)

    return running(command, env, ready, 90)


def recorded_episodes(project: Project, annotator, version: str) -> None:
    """Episodes the live loop recorded with ``version`` proposing, some of them held out for
    evaluation and some not (the split is a hash of the task id; one task an episode here)."""
    ids: list[int] = []

    def split() -> set[bool]:
        tasks = Episode.objects.filter(pk__in=ids).values_list("task_id", flat=True)
        return {is_held_out(task, HELD_OUT_SHARE) for task in tasks}

    while split() != {True, False}:
        ids += make_episodes(
            project, annotator, episodes=3, steps=4, size=SCREEN, model_version=version
        )


def check_annotator_sees_no_models(browser, base_url: str) -> None:
    context, page, errors = sign_in(browser, base_url, "ann", "/app/")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Annotate")).to_be_visible()
    expect(nav.get_by_role("link")).to_have_count(1)
    expect(page.get_by_role("link", name=re.compile("models|fine-tuning", re.I))).to_have_count(0)
    errors.assert_none()
    context.close()


def create_job_in_the_browser(page: Page, sft_id: int, dpo_id: int, endpoint: str) -> int:
    form = page.get_by_role("form", name="New fine-tuning job")
    # Chosen DPO first: the stages still run SFT, then DPO.
    form.get_by_label(re.compile(rf"#{dpo_id} DPO ")).check()
    form.get_by_label(re.compile(rf"#{sft_id} SFT ")).check()
    expect(form.get_by_test_id("stage-order")).to_have_text(
        f"Stages: 1. SFT on export {sft_id} → 2. DPO on export {dpo_id}"
    )
    expect(form.get_by_label("Base model")).to_have_value(BASE)
    form.get_by_label("New version name").fill("not a name!")
    form.get_by_role("button", name="Start fine-tuning").click()
    expect(form.get_by_text("letters, digits, dots, dashes and underscores")).to_be_visible()
    assert not FineTuneJob.objects.exists()  # the form's mistake never reached the server
    page.screenshot(path=str(SHOTS / "finetune-new-job.png"), full_page=True)
    assert accessibility_problems(page) == []

    form.get_by_label("New version name").fill(VERSION)
    form.get_by_label("Endpoint that will serve it (optional)").fill(endpoint)
    # The smallest run: a rank-4 adapter, two steps a stage.
    form.get_by_label("Rank r").fill("4")
    form.get_by_label("Alpha").fill("8")
    form.get_by_label("Dropout").fill("0")
    form.get_by_label("Target modules").fill("q_proj, v_proj")
    form.get_by_label("Max steps (overrides epochs)").fill("2")
    form.get_by_label("Gradient accumulation").fill("1")
    form.get_by_role("button", name="Start fine-tuning").click()
    expect(page.get_by_role("heading", name=re.compile(r"Fine-tuning job #\d+"))).to_be_visible()
    return int(re.search(r"/engineer/finetune/(\d+)$", page.url).group(1))


def watch_the_job_succeed(page: Page, job_id: int) -> ModelVersion:
    expect(page.get_by_test_id("job-status")).to_contain_text("succeeded", timeout=150_000)
    job = FineTuneJob.objects.get(pk=job_id)
    assert [s["kind"] for s in job.stages] == ["sft", "dpo"]
    assert (job.lora["r"], job.hyperparameters["max_steps"], job.base_model) == (4, 2, BASE)
    chart = page.get_by_test_id("loss-chart")
    expect(chart.locator("circle")).to_have_count(len(job.loss_curve))
    expect(chart.locator("path")).to_have_count(2)  # one line per stage
    expect(chart).to_contain_text("Stage 1 (SFT)")
    expect(chart).to_contain_text("Stage 2 (DPO)")
    expect(page.get_by_test_id("job-logs")).to_contain_text(f"registered model version {VERSION}")
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
    page.screenshot(path=str(SHOTS / "finetune-job-loss-curve.png"), full_page=True)
    assert accessibility_problems(page) == []
    page.get_by_test_id("job-version").get_by_role("link", name=VERSION).click()
    expect(page.get_by_role("heading", name=f"Model version {VERSION}")).to_be_visible()
    return ModelVersion.objects.get(name=VERSION)


def serve_refused_then_served(page: Page, server, version: ModelVersion) -> None:
    lineage = page.get_by_test_id("lineage-datasets")
    for dataset in version.lineage["datasets"]:
        expect(lineage).to_contain_text(f"#{dataset['export_id']}")
        expect(lineage).to_contain_text(dataset["content_hash"])
    server.refuse_adapters(400, "LoRA rank 128 is greater than max_lora_rank 64.")
    page.get_by_role("button", name="Serve on its endpoint").click()
    status = page.get_by_test_id("serving-status")
    expect(status).to_contain_text("failed", timeout=30_000)
    expect(status).to_contain_text("LoRA rank 128 is greater than max_lora_rank 64.")
    server.adapter_refusal = None
    page.get_by_role("button", name="Serve on its endpoint").click()
    expect(status).to_contain_text("serving", timeout=30_000)
    assert VERSION in server.adapters


def evaluate_next_to_live(page: Page, project: Project) -> None:
    page.get_by_role("button", name="Evaluate on held-out steps").click()
    table = page.get_by_test_id("evaluations-table")
    expect(table).to_contain_text("succeeded", timeout=60_000)
    run = EvaluationRun.objects.get(model_version__name=VERSION)
    assert run.status == "succeeded" and run.total > 0, run.error
    expect(table.get_by_test_id("step-success-rate")).to_have_text(percent(run.success_rate))
    expect(table).to_contain_text(f"{run.succeeded} of {run.total}")
    row = next(r for r in overview(project)["versions"] if r["model_version"] == VERSION)
    figures = page.get_by_test_id("live-vs-offline")
    expect(figures).to_contain_text(f"live acceptance rate {percent(row['live']['rate'])}")
    expect(figures).to_contain_text(f"offline step success rate {percent(run.success_rate)}")
    expect(figures).to_contain_text(f"({run.total} steps, {run.invalid} invalid outputs)")
    page.screenshot(path=str(SHOTS / "model-version.png"), full_page=True)
    assert accessibility_problems(page) == []

    page.get_by_role("link", name="← Model versions").click()
    versions = page.get_by_role("table").first
    expect(versions.get_by_role("link", name=VERSION)).to_be_visible()
    comparison = page.get_by_test_id("version-comparison")
    ours = comparison.locator(f"tr[data-version='{VERSION}']")
    expect(ours.get_by_test_id("live-rate")).to_have_text(percent(row["live"]["rate"]))
    expect(ours.get_by_test_id("offline-rate")).to_have_text(percent(run.success_rate))
    page.screenshot(path=str(SHOTS / "model-versions.png"), full_page=True)
    assert accessibility_problems(page) == []


def check_manager_chooses_b(browser, base_url: str, project: Project, job_id: int) -> None:
    context, page, errors = sign_in(
        browser, base_url, "mona", f"/app/manage/projects/{project.pk}/board"
    )
    tabs = page.get_by_role("navigation", name="Project sections")
    tabs.get_by_role("link", name="Model versions").click()
    form = page.get_by_role("form", name="Which version proposes")
    # The project's own model settings against a version: the first A/B a project makes.
    form.get_by_label("Version B (optional)").select_option(VERSION)
    form.get_by_role("button", name="Save versions").click()
    saved = form.get_by_test_id("versions-saved")
    expect(saved).to_contain_text(f"the project's own model settings proposes, {VERSION} takes")
    project.refresh_from_db()
    assert (project.model_version, project.version_b.name) == (None, VERSION)

    form.get_by_label("Version A").select_option(BASE)
    form.get_by_label("Share of episodes for B (%)").fill("30")
    form.get_by_role("button", name="Save versions").click()
    expect(form.get_by_test_id("versions-saved")).to_contain_text(f"{VERSION} takes 30%")
    project.refresh_from_db()
    assert (project.model_version.name, project.version_b.name) == (BASE, VERSION)
    assert project.version_b_share == pytest.approx(0.3)
    comparison = page.get_by_test_id("version-comparison")
    expect(comparison.locator(f"tr[data-version='{VERSION}']")).to_contain_text(
        "B (30% of episodes)"
    )
    expect(comparison.locator(f"tr[data-version='{BASE}'] td").first).to_have_text("A")
    page.screenshot(path=str(SHOTS / "manager-project-versions.png"), full_page=True)
    assert accessibility_problems(page) == []

    tabs.get_by_role("link", name="Charts").click()
    acceptance = page.get_by_test_id("acceptance-table")
    for name in (BASE, VERSION):
        expect(acceptance.get_by_role("cell", name=name, exact=True)).to_be_visible()
    expect(page.get_by_test_id("acceptance-chart").locator("circle")).to_have_count(2)

    # Managers read the project's jobs, and may not start one.
    tabs.get_by_role("link", name="Fine-tuning jobs").click()
    expect(page.get_by_role("link", name=re.compile(rf"^#{job_id} "))).to_be_visible()
    expect(page.get_by_role("button", name="Start fine-tuning")).to_have_count(0)
    refused = f"status of 400 (Bad Request) ({base_url}/api/projects/{project.pk}/model-versions/)"
    errors.assert_none(expected=(refused,))
    context.close()


def test_an_engineer_fine_tunes_serves_and_evaluates_and_a_manager_splits_a_b(
    make_user, project, settings, tmp_path, monkeypatch
):
    media, adapters = tmp_path / "media", tmp_path / "adapters"
    settings.MEDIA_ROOT = media
    settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    settings.TANDEM_HELD_OUT_SHARE = HELD_OUT_SHARE
    settings.TANDEM_ADAPTER_DIR = adapters
    settings.TANDEM_VLLM_ADAPTER_DIR = str(adapters)
    ann = make_user("ann", project, Role.ANNOTATOR)
    eve = make_user("eve", project, Role.ENGINEER)
    make_user("mona", project, Role.MANAGER)
    base = save_demo_base(tmp_path / "tiny-base")
    recorded_episodes(project, ann, BASE)
    sft, dpo = built_export(project, eve, "sft"), built_export(project, eve, "dpo")
    SHOTS.mkdir(parents=True, exist_ok=True)
    env = child_env(
        TANDEM_MEDIA_ROOT=str(media),
        TANDEM_HELD_OUT_SHARE=str(HELD_OUT_SHARE),
        TANDEM_BASE_MODELS=f"{BASE}={base}",
        TANDEM_ADAPTER_DIR=str(adapters),
        TANDEM_VLLM_ADAPTER_DIR=str(adapters),
        TANDEM_CELERY_BROKER_URL=BROKER,
        TANDEM_REDIS_URL=CHANNELS,
    )
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    suite = uuid.uuid4().hex[:8]

    with ExitStack() as stack:
        server = stack.enter_context(serving(model=BASE))
        server.default = Reply.text("Thought: Click it.\nAction: click(start_box='(644,406)')")
        # Version A: the base model as the endpoint serves it, checked the way any version is.
        serve_version(
            ModelVersion.objects.create(name=BASE, base_model=BASE, base_url=server.base_url)
        )
        stack.enter_context(worker(f"{suite}@train", "train", "solo", env))
        stack.enter_context(worker(f"{suite}@jobs", "exports,default", "threads", env))
        command = [str(BIN / "uvicorn"), "backend.asgi:application", "--port", str(port)]
        stack.enter_context(running(command, env, port_open(port)))
        browser = stack.enter_context(chromium(monkeypatch))

        check_annotator_sees_no_models(browser, base_url)

        context, page, errors = sign_in(browser, base_url, "eve", "/app/engineer")
        page.get_by_role("link", name="Fine-tuning", exact=True).click()
        job_id = create_job_in_the_browser(page, sft.pk, dpo.pk, server.base_url)
        version = watch_the_job_succeed(page, job_id)
        serve_refused_then_served(page, server, version)
        # The new version proposes in some episodes (as version B would): live figures exist.
        recorded_episodes(project, ann, VERSION)
        evaluate_next_to_live(page, project)
        errors.assert_none()
        context.close()

        check_manager_chooses_b(browser, base_url, project, job_id)
