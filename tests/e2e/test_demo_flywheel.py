"""The engineer's flywheel in the demo, in headless Chromium, against what ``make demo`` runs:
the demo base model saved by ``manage.py demo_model``, the demo endpoint process
(``manage.py demo_endpoint``, scripted answers), the projects and users of ``seed_demo``, a
worker owning real sandboxed desktops, a worker on the exports and default queues, a training
worker on the CPU, websockify and the web server.

Annotators record episodes of the demo tasks over the episode socket, the demo base proposing.
The engineer exports SFT and DPO from the web app, fine-tunes the demo base model on them, serves
the new version on the demo endpoint the form offers, and evaluates it on the held-out episodes.
The manager makes it version B for every episode; the next episode an annotator starts in the
browser is proposed by it, and the version's page shows its live acceptance beside its offline
step success rate.
"""

import math
import re
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command
from django.test import Client
from playwright.sync_api import Page, expect

from annotation.models import DatasetExport, Episode, EpisodeOutcome, Project, Proposal
from annotation.projects import versions
from backend.accounts.models import User
from model_serving.demo_endpoint import DEMO_LABEL
from model_serving.evaluation import is_held_out
from model_serving.models import EvaluationRun, FineTuneJob, ModelVersion
from tests.e2e.browser import accessibility_problems, chromium, sign_in
from tests.e2e.test_model_pages import worker as model_pages_worker
from tests.e2e.workspace import eventually
from tests.support.live import CSRF, Socket, asgi, service_env, websockify, worker
from tests.support.services import BIN, free_port, running
from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate

SHOTS = Path(__file__).resolve().parents[2] / "var" / "e2e-screenshots"
# One Redis database of this suite alone, for its queues and its channel groups.
REDIS = "redis://127.0.0.1:6379/12"
DEMO_BASE = "demo-tiny-qwen"
DEMO_PROJECT = "Demo: desktop basics"
VERSION = "demo-ft-1"
HELD_OUT_SHARE = 0.5
MORE_TASKS = 12  # the demo's tasks are few: episodes for both sides of the split (1 in 2048 fails)
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def percent(rate: float | None) -> str:
    return "—" if rate is None else f"{math.floor(rate * 100 + 0.5)}%"


@contextmanager
def demo_endpoint(bind: str, env: dict[str, str]):
    def ready() -> bool:
        try:
            return httpx.get(f"http://{bind}/v1/models", timeout=0.5).is_success
        except httpx.HTTPError:
            return False

    command = [str(BIN / "python"), "manage.py", "demo_endpoint", "--bind", bind]
    with running(command, env, ready):
        yield


def queue_worker(name: str, queues: str, pool: str, env: dict[str, str]):
    return model_pages_worker(name, queues, pool, env, broker=REDIS)


def held_out(episode_id: int) -> bool:
    """Whether the episode's task is in the held-out split."""
    return is_held_out(Episode.objects.get(pk=episode_id).task_id, HELD_OUT_SHARE)


def record_episode(server: str, username: str, project: Project) -> int:
    """One episode over the socket: the first (scripted) click corrected, the rest of the
    demo endpoint's steps accepted, up to its ``finished()``."""
    client = Client()
    client.force_login(User.objects.get(username=username))
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    # The desktop of the episode before is being reset: a start waits for a ready one.
    eventually(
        lambda: Desktop.objects.filter(status=DesktopStatus.READY).exists(), "a ready desktop", 60
    )
    started = httpx.post(
        f"http://{server}/api/episodes/start/",
        json={"project": project.pk},
        headers={"Cookie": f"{cookie}; csrftoken={CSRF}", "X-CSRFToken": CSRF},
        timeout=60,
    )
    assert started.status_code == 201, started.text
    episode = started.json()["episode"]
    ws = Socket(server, episode, cookie)
    try:
        first = ws.next("proposal", step=1)["candidates"][0]
    except TimeoutError:
        ended = Episode.objects.filter(pk=episode).values("outcome", "end_reason", "setup_log")
        raise AssertionError(f"episode {episode} has no first proposal: {list(ended)}") from None
    assert first["thought"].startswith(f"{DEMO_LABEL} {DEMO_BASE}:"), first
    click = {"type": "click", "point": [320, 200]}
    ws.send(type="decide", step=1, decision="corrected", thought="Click the text.", action=click)
    ws.next("decision_ack", step=1)
    for step in (2, 3, 4):  # type, save, finished
        ws.next("proposal", step=step)
        ws.send(type="decide", step=step, decision="accepted", proposal=0)
        ws.next("decision_ack", step=step)
    assert ws.next("ended")["outcome"] == EpisodeOutcome.FINISHED
    ws.close()
    return episode


def export_in_the_browser(page: Page, kind: str) -> DatasetExport:
    form = page.get_by_role("form", name="New dataset export")
    form.get_by_label("Kind").select_option(kind)
    form.get_by_label("Format").select_option("trl")
    expect(
        form.get_by_label("Leave out the evaluation split (needed for fine-tuning)")
    ).to_be_checked()
    before = set(DatasetExport.objects.values_list("pk", flat=True))
    form.get_by_role("button", name="Start export").click()
    export = eventually(
        lambda: DatasetExport.objects.exclude(pk__in=before).filter(status="succeeded").first(),
        f"the {kind} export",
        60,
    )
    assert export.counts.get("samples") or export.counts.get("pairs"), export.counts
    return export


def fine_tune_in_the_browser(page: Page, sft: DatasetExport, dpo: DatasetExport, endpoint: str):
    page.get_by_role("navigation", name="Engineer sections").get_by_role(
        "link", name="Fine-tuning"
    ).click()
    form = page.get_by_role("form", name="New fine-tuning job")
    form.get_by_label(re.compile(rf"#{sft.pk} SFT ")).check()
    form.get_by_label(re.compile(rf"#{dpo.pk} DPO ")).check()
    # The demo base model is the deployment's, and the endpoint serving it is offered.
    expect(form.get_by_label("Base model")).to_have_value(DEMO_BASE)
    expect(form.get_by_label("Endpoint that will serve it (optional)")).to_have_value(endpoint)
    form.get_by_label("New version name").fill(VERSION)
    form.get_by_label("Rank r").fill("4")
    form.get_by_label("Alpha").fill("8")
    form.get_by_label("Dropout").fill("0")
    form.get_by_label("Target modules").fill("q_proj, v_proj")
    form.get_by_label("Max steps (overrides epochs)").fill("2")
    form.get_by_label("Gradient accumulation").fill("1")
    page.screenshot(path=str(SHOTS / "demo-flywheel-finetune-form.png"), full_page=True)
    form.get_by_role("button", name="Start fine-tuning").click()
    expect(page.get_by_test_id("job-status")).to_contain_text("succeeded", timeout=240_000)
    job = FineTuneJob.objects.get()
    assert [s["kind"] for s in job.stages] == ["sft", "dpo"] and job.base_model == DEMO_BASE
    page.get_by_test_id("job-version").get_by_role("link", name=VERSION).click()
    expect(page.get_by_role("heading", name=f"Model version {VERSION}")).to_be_visible()


def serve_and_evaluate_in_the_browser(page: Page, project: Project) -> EvaluationRun:
    # A disabled button says why.
    endpoint_form = page.get_by_role("form", name="Endpoint of this version")
    expect(endpoint_form.get_by_role("button", name="Set endpoint")).to_be_disabled()
    expect(endpoint_form.get_by_test_id("disabled-reason")).to_have_text(
        "This is its endpoint already."
    )
    page.get_by_role("button", name="Serve on its endpoint").click()
    expect(page.get_by_test_id("serving-status")).to_contain_text("serving", timeout=30_000)
    page.get_by_role("form", name="Start an evaluation").get_by_label("Project").select_option(
        label=DEMO_PROJECT
    )
    page.get_by_role("button", name="Evaluate on held-out steps").click()
    table = page.get_by_test_id("evaluations-table")
    expect(table).to_contain_text("succeeded", timeout=90_000)
    run = EvaluationRun.objects.get(model_version__name=VERSION)
    assert run.status == "succeeded" and run.total > 0, run.error
    expect(table.get_by_test_id("step-success-rate")).to_have_text(percent(run.success_rate))
    figures = page.get_by_test_id("live-vs-offline")
    expect(figures).to_contain_text(f"offline step success rate {percent(run.success_rate)}")
    expect(figures).to_contain_text("live acceptance rate — (not used live yet)")
    page.screenshot(path=str(SHOTS / "demo-flywheel-version.png"), full_page=True)
    assert accessibility_problems(page) == []
    return run


def manager_makes_it_version_b(browser, base_url: str, project: Project) -> None:
    context, page, errors = sign_in(
        browser, base_url, "manager", f"/app/manage/projects/{project.pk}/models"
    )
    form = page.get_by_role("form", name="Which version proposes")
    expect(form.get_by_label("Version A")).to_have_value(DEMO_BASE)
    form.get_by_label("Version B (optional)").select_option(VERSION)
    form.get_by_label("Share of episodes for B (%)").fill("100")
    form.get_by_role("button", name="Save versions").click()
    expect(form.get_by_test_id("versions-saved")).to_contain_text(f"{VERSION} takes 100%")
    page.screenshot(path=str(SHOTS / "demo-flywheel-version-b.png"), full_page=True)
    errors.assert_none()
    context.close()
    project.refresh_from_db()
    assert (project.version_b.name, project.version_b_share) == (VERSION, 1.0)


def annotator_gets_proposals_from_it(browser, base_url: str) -> int:
    context, page, errors = sign_in(browser, base_url, "annotator2", "/app/")
    eventually(
        lambda: Desktop.objects.filter(status=DesktopStatus.READY).exists(), "a ready desktop", 60
    )
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Annotate").click()
    page.get_by_role("row", name=DEMO_PROJECT).get_by_role(
        "button", name="Start a task from this project"
    ).click()
    page.wait_for_url("**/app/annotate/episodes/*", timeout=30_000)
    episode_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    proposal = page.locator(".model-name")
    expect(proposal).to_contain_text(VERSION, timeout=60_000)
    expect(page.get_by_text(f"{DEMO_LABEL} {VERSION}:", exact=False)).to_be_visible()
    page.screenshot(path=str(SHOTS / "demo-flywheel-annotator-b.png"))
    page.get_by_role("button", name="Approve").click()
    eventually(
        lambda: Episode.objects.get(pk=episode_id).steps.filter(decision="accepted").exists(),
        "the approved step",
    )
    errors.assert_none()
    context.close()
    return episode_id


def test_an_engineer_walks_the_flywheel_in_the_demo(host, settings, tmp_path, monkeypatch):
    endpoint_bind = f"127.0.0.1:{free_port()}"
    endpoint = f"http://{endpoint_bind}/v1"
    folders = {
        "TANDEM_MEDIA_ROOT": tmp_path / "media",
        "TANDEM_EXPORT_STAGING_ROOT": tmp_path / "staging",
        "TANDEM_ADAPTER_DIR": tmp_path / "adapters",
        "TANDEM_DEMO_MODEL_DIR": tmp_path / "models" / DEMO_BASE,
    }
    settings.MEDIA_ROOT = folders["TANDEM_MEDIA_ROOT"]
    settings.TANDEM_EXPORT_STAGING_ROOT = folders["TANDEM_EXPORT_STAGING_ROOT"]
    settings.TANDEM_ADAPTER_DIR = folders["TANDEM_ADAPTER_DIR"]
    settings.TANDEM_VLLM_ADAPTER_DIR = str(folders["TANDEM_ADAPTER_DIR"])
    settings.TANDEM_DEMO_MODEL_DIR = folders["TANDEM_DEMO_MODEL_DIR"]
    settings.TANDEM_DEMO_ENDPOINT = endpoint
    settings.TANDEM_HELD_OUT_SHARE = HELD_OUT_SHARE
    call_command("demo_model")  # as `make demo` does, before the services start
    env = {
        **{name: str(folder) for name, folder in folders.items()},
        "TANDEM_VLLM_ADAPTER_DIR": str(folders["TANDEM_ADAPTER_DIR"]),
        "TANDEM_DEMO_ENDPOINT": endpoint,
        "TANDEM_HELD_OUT_SHARE": str(HELD_OUT_SHARE),
        "TANDEM_BASE_MODELS": f"{DEMO_BASE}={folders['TANDEM_DEMO_MODEL_DIR']}",
    }
    all_env = {**service_env(host, REDIS, REDIS), **env}
    port, stream_port = free_port(), free_port()
    server, base_url = f"127.0.0.1:{port}", f"http://127.0.0.1:{port}"
    SHOTS.mkdir(parents=True, exist_ok=True)

    with ExitStack() as stack:
        stack.enter_context(demo_endpoint(endpoint_bind, all_env))
        call_command("seed_demo")
        project = Project.objects.get(name=DEMO_PROJECT)
        base = ModelVersion.objects.get(name=DEMO_BASE)
        assert (base.serving_status, base.base_url) == ("serving", endpoint), base.serving_error
        # The manager lets the demo base propose (version A) before annotators start.
        versions.set_project_versions(project, base, None, 0.0)
        template = DesktopTemplate.objects.get(name=project.environment_template)
        for _ in range(2):
            desktop = pool.start_desktop(pool.create_desktop(template, host).pk)
            assert desktop.status == DesktopStatus.READY, desktop.broken_reason
        for n in range(MORE_TASKS):
            project.tasks.create(
                external_id=f"demo-more-{n}",
                instruction="In the terminal, print today's date.",
                setup=[{"type": "launch", "parameters": {"command": ["xterm"]}}],
            )

        stack.enter_context(websockify(stream_port))
        stack.enter_context(worker(host, REDIS, REDIS, **env))
        stack.enter_context(queue_worker(f"{host}@jobs", "exports,default", "threads", all_env))
        stack.enter_context(queue_worker(f"{host}@train", "train", "solo", all_env))
        stream_url = f"ws://127.0.0.1:{stream_port}"
        stack.enter_context(
            asgi(host, port, REDIS, REDIS, TANDEM_WEBSOCKIFY_PUBLIC_URL=stream_url, **env)
        )

        episodes: list[int] = []
        while len(episodes) < 2 or len({held_out(e) for e in episodes}) < 2:
            assert len(episodes) < MORE_TASKS, "no split on both sides in this many episodes"
            episodes.append(record_episode(server, "annotator", project))

        browser = stack.enter_context(chromium(monkeypatch))
        context, page, errors = sign_in(browser, base_url, "engineer", "/app/engineer/exports")
        page.get_by_label("Project").first.select_option(label=DEMO_PROJECT)
        sft = export_in_the_browser(page, "sft")
        dpo = export_in_the_browser(page, "dpo")
        page.screenshot(path=str(SHOTS / "demo-flywheel-exports.png"), full_page=True)
        fine_tune_in_the_browser(page, sft, dpo, endpoint)
        run = serve_and_evaluate_in_the_browser(page, project)
        assert httpx.get(f"{endpoint}/models").json()["data"][1]["id"] == VERSION

        manager_makes_it_version_b(browser, base_url, project)
        episode_id = annotator_gets_proposals_from_it(browser, base_url)
        proposed = Proposal.objects.filter(step__episode_id=episode_id)
        assert proposed.exists()
        assert set(proposed.values_list("model_version", flat=True)) == {VERSION}

        # Back on the version's page: its live acceptance beside its offline step success.
        page.reload()
        page.get_by_role("form", name="Start an evaluation").get_by_label("Project").select_option(
            label=DEMO_PROJECT
        )
        figures = page.get_by_test_id("live-vs-offline")
        expect(figures).to_contain_text("live acceptance rate 100% (1 accepted, 0 corrected")
        expect(figures).to_contain_text(f"offline step success rate {percent(run.success_rate)}")
        page.screenshot(path=str(SHOTS / "demo-flywheel-live-and-offline.png"), full_page=True)
        errors.assert_none()
        context.close()
