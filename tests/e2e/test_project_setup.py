"""A project set up and staffed in the web app, as a newcomer manager does it, in headless Chromium
against the real services: she creates the project, imports one of OSWorld's task files as it is
(its setup runs ``python``, which a plain local desktop does not have), is told so at import and
switches the project to the OSWorld container desktop the import offers, adds an annotator and a
reviewer by username and e-mail, and assigns the task; the annotator's episode then sets up on
that desktop: the folder the task's setup makes is there, and the model proposes.
Screenshots go to var/e2e-screenshots/setup-*.png.
"""

from contextlib import ExitStack

import pytest
from playwright.sync_api import expect

from annotation.demo import osworld as demo_osworld
from annotation.models import Episode, Membership, Project, Step, Task, TaskStatus
from backend.accounts.roles import Role
from tests.e2e.browser import accessibility_problems, chromium, sign_in
from tests.e2e.workspace import BROKER, CHANNELS, MODEL, SCREEN, SHOTS, eventually, off_the_loop
from tests.support.fake_model_server import Reply, serving
from tests.support.live import asgi, websockify, worker
from tests.support.services import free_port
from vm_pool import pool
from vm_pool.models import DesktopStatus, DesktopTemplate

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

RENAME = "e0df059f-28a6-4169-924f-b9623e7184cc"  # os: rename a folder on the Desktop


def test_a_manager_sets_up_and_staffs_an_osworld_project_in_the_web_app(
    host, make_user, container_desktops, monkeypatch, tmp_path
):
    make_user("mona", can_create_projects=True)
    make_user("annie", email="annie@example.org", first_name="Annie")
    make_user("rex")
    DesktopTemplate.objects.create(name="default", width=SCREEN[0], height=SCREEN[1], min_ready=0)
    osworld = DesktopTemplate.objects.create(
        name="osworld", provider="docker", width=SCREEN[0], height=SCREEN[1], min_ready=0,
        image="tandem-desktop:latest",
    )  # fmt: skip
    ready = pool.start_desktop(pool.create_desktop(osworld, host).pk)
    assert ready.status == DesktopStatus.READY, ready.broken_reason
    task_file = tmp_path / f"{RENAME}.json"
    task_file.write_text((demo_osworld.TASKS / f"{RENAME}.json").read_text())
    SHOTS.mkdir(parents=True, exist_ok=True)
    port, stream_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"

    with ExitStack() as services:
        model = services.enter_context(serving(MODEL))
        model.default = Reply.text("Thought: Wait for the desktop.\nAction: wait()")
        services.enter_context(websockify(stream_port))
        services.enter_context(worker(host, BROKER, CHANNELS))
        services.enter_context(
            asgi(host, port, BROKER, CHANNELS,
                 TANDEM_WEBSOCKIFY_PUBLIC_URL=f"ws://127.0.0.1:{stream_port}")
        )  # fmt: skip
        browser = services.enter_context(chromium(monkeypatch))

        context, page, errors = sign_in(browser, base, "mona", "/app/manage")
        page.get_by_label("Name").fill("OSWorld practice")
        expect(page.get_by_test_id("new-project-desktop")).to_contain_text("osworld")
        page.get_by_role("button", name="Create project").click()
        page.wait_for_url("**/app/manage/projects/*/board")
        project = off_the_loop(lambda: Project.objects.get(name="OSWorld practice"))
        assert project.environment_template == "default"  # the plain local desktop, as chosen
        settings = {"base_url": model.base_url, "model": MODEL, "retries": 0}
        off_the_loop(lambda: Project.objects.filter(pk=project.pk).update(model_settings=settings))

        tabs = page.get_by_role("navigation", name="Project sections")
        tabs.get_by_role("link", name="Tasks").click()
        page.get_by_label("Task file").set_input_files(str(task_file))
        page.get_by_role("button", name="Import", exact=True).click()
        advice = page.get_by_test_id("import-desktop")
        expect(advice).to_contain_text("python")
        page.screenshot(path=str(SHOTS / "setup-import.png"), full_page=True)
        advice.get_by_role("button", name="Run this project's tasks on the osworld desktop").click()
        expect(page.get_by_test_id("desktop-switched")).to_contain_text("osworld")
        assert (
            off_the_loop(lambda: Project.objects.get(pk=project.pk)).environment_template
            == "osworld"
        )
        page.reload()
        expect(page.get_by_test_id("programs-missing")).to_have_count(0)

        tabs.get_by_role("link", name="Members and desktop").click()
        expect(page.get_by_test_id("no-annotators")).to_be_visible()
        expect(page.get_by_test_id("desktop-template")).to_have_value("osworld")
        add = page.get_by_role("form", name="Add a member")
        add.get_by_label("Username or e-mail").fill("annie@example.org")
        add.get_by_label("Role").select_option("annotator")
        add.get_by_role("button", name="Add member").click()
        expect(page.get_by_role("table", name="Members")).to_contain_text("annie")
        add.get_by_label("Username or e-mail").fill("rex")
        add.get_by_label("Role").select_option("reviewer")
        add.get_by_role("button", name="Add member").click()
        expect(page.get_by_role("table", name="Members")).to_contain_text("rex")
        expect(page.get_by_test_id("no-annotators")).to_have_count(0)
        page.screenshot(path=str(SHOTS / "setup-members.png"), full_page=True)
        assert accessibility_problems(page) == []
        roles = dict(
            off_the_loop(
                lambda: list(
                    Membership.objects.filter(project=project).values_list("user__username", "role")
                )
            )
        )
        assert roles == {"mona": Role.MANAGER, "annie": Role.ANNOTATOR, "rex": Role.REVIEWER}

        tabs.get_by_role("link", name="Tasks").click()
        task = off_the_loop(lambda: Task.objects.get(project=project))
        page.get_by_label(f"Select task {task.external_id}").check()
        page.get_by_label("Annotator").select_option("annie")
        page.get_by_role("button", name="Assign 1 selected").click()
        expect(page.get_by_text("1 task assigned to annie")).to_be_visible()
        assert off_the_loop(lambda: Task.objects.get(pk=task.pk)).status == TaskStatus.ASSIGNED
        errors.assert_none()
        context.close()

        context, page, errors = sign_in(browser, base, "annie", "/app/annotate")
        page.get_by_role("button", name="Start next task").click()
        page.wait_for_url("**/app/annotate/episodes/*", timeout=30_000)
        episode_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
        expect(page.get_by_text(task.instruction)).to_be_visible()
        eventually(
            lambda: Step.objects.filter(episode_id=episode_id, index=1).exists(),
            "the episode's first observation, once its setup ran",
            seconds=90,
        )
        expect(page.get_by_test_id("phase")).to_contain_text("Your decision", timeout=30_000)
        page.screenshot(path=str(SHOTS / "setup-episode.png"))
        episode = off_the_loop(
            lambda: Episode.objects.select_related("desktop__template").get(pk=episode_id)
        )
        assert episode.ended_at is None, episode.end_reason
        assert episode.desktop.template.name == "osworld"
        listed = off_the_loop(
            lambda: pool.control_for(episode.desktop).run(["ls", "/home/user/Desktop"], timeout=10)
        )
        assert "todo_list_Jan_1" in listed.stdout.split()  # the setup's folder, made with sudo
        errors.assert_none()
        context.close()
