"""The annotator's workspace against real services, shared by the browser tests of the loop:
a ready desktop on a test host, the scripted model server, websockify, a Celery worker, the web
server and Chromium with the annotator signed in; and the steps a test takes in it."""

import math
import os
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connections
from playwright.sync_api import Browser, Page, expect

from annotation.models import Project, Step
from backend.accounts.models import User
from backend.accounts.roles import Role
from tests.conftest import PASSWORD
from tests.e2e.browser import BrowserErrors, chromium
from tests.support.fake_model_server import FakeModelServer, Reply, serving
from tests.support.live import asgi, websockify, worker
from tests.support.services import free_port
from vm_pool import pool
from vm_pool.models import DesktopStatus, DesktopTemplate

# Redis databases of these suites alone, so that they can run beside the other live suites.
BROKER, CHANNELS = "redis://127.0.0.1:6379/10", "redis://127.0.0.1:6379/11"
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "var" / "e2e-screenshots"
SCREEN = (1280, 800)
ROOT_COLOUR = "#2a6f97"
MODEL = "ui-tars-1.5-7b"
T = TypeVar("T")


def eventually(read: Callable[[], T | None], what: str, seconds: float = 30) -> T:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = read()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def decided(episode_id: int, index: int) -> Step:
    return eventually(
        lambda: (
            Step.objects.filter(episode_id=episode_id, index=index).exclude(decision="").first()
        ),
        f"step {index} to be decided",
    )


def annotator_who_can_sign_in(project: Project) -> User:
    """An annotator whose password the web server's own hashers can check (the tests' fast
    hasher is only configured in the test process)."""
    user = User.objects.create(username="annie", first_name="Annie")
    hasher = PBKDF2PasswordHasher()
    user.password = hasher.encode(PASSWORD, hasher.salt(), iterations=1000)
    user.save(update_fields=["password"])
    project.memberships.create(user=user, role=Role.ANNOTATOR)
    return user


def canvas_colours(page: Page) -> dict[str, int]:
    """How many sampled pixels of the noVNC canvas are lit, and how many colours there are."""
    return page.locator("[data-testid=desktop-vnc] canvas").evaluate(
        """(canvas) => {
            const context = canvas.getContext('2d');
            const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
            const colours = new Set();
            let lit = 0;
            for (let i = 0; i < data.length; i += 4 * 101) {
                if (data[i] + data[i + 1] + data[i + 2] > 60) lit++;
                colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
            }
            return {lit, colours: colours.size, width: canvas.width, height: canvas.height};
        }"""
    )


def wait_for_proposal(page: Page, step: int) -> None:
    expect(page.get_by_test_id(f"trajectory-step-{step}")).to_be_attached(timeout=30_000)
    expect(page.get_by_test_id("phase")).to_have_text("Your decision", timeout=30_000)


LOOK_S = 2.0


def look(page: Page, step: int) -> None:
    """Look at the open step for a moment, as people do: a screen that changed meanwhile (a
    dialog opening or closing late) brings a newer observation and proposal, decided on
    instead; a decision sent for the older one would be refused as stale."""
    wait_for_proposal(page, step)
    time.sleep(LOOK_S)
    wait_for_proposal(page, step)


def settled_box(page: Page) -> dict[str, float]:
    """The live desktop's drawn box once it has stopped moving: after the window is resized or
    a panel changes, the page and noVNC lay the canvas out again over a few frames."""
    canvas = page.locator("[data-testid=desktop-vnc] canvas")
    box, still = canvas.bounding_box(), 0
    for _ in range(100):
        time.sleep(0.05)
        again = canvas.bounding_box()
        still = still + 1 if again == box else 0
        box = again
        if box is not None and still == 4:
            return box
    raise AssertionError(f"the desktop's canvas kept moving: {box}")


def click_desktop(page: Page, fx: float, fy: float) -> tuple[int, int]:
    """Click the live desktop at a fraction of its drawn box; the screen pixel expected there."""
    box = settled_box(page)
    x, y = round(box["x"] + fx * box["width"]), round(box["y"] + fy * box["height"])
    page.mouse.click(x, y)
    return (
        math.floor((x - box["x"]) * SCREEN[0] / box["width"]),
        math.floor((y - box["y"]) * SCREEN[1] / box["height"]),
    )


def assert_within_a_pixel(stored: Any, expected: tuple[int, int]) -> None:
    assert abs(stored[0] - expected[0]) <= 1 and abs(stored[1] - expected[1]) <= 1, (
        stored,
        expected,
    )


@dataclass
class Live:
    """The running services of a test, and the annotator's browser page."""

    base: str
    model: FakeModelServer
    browser: Browser
    page: Page
    errors: BrowserErrors
    restart_web: Callable[[Callable[[], None]], None]


@contextmanager
def live_workspace(
    host: str,
    project: Project,
    monkeypatch,
    script: list[Reply],
    desktops: int = 1,
    provider: str = "local",
    queues: str = "",
    beat: Path | None = None,
) -> Iterator[Live]:
    """Ready desktops of ``provider``, the model scripted with ``script``, websockify, a worker,
    the web server and a browser page with the annotator signed in on the sign-in page."""
    DesktopTemplate.objects.create(
        name="e2e",
        provider=provider,
        width=SCREEN[0],
        height=SCREEN[1],
        min_ready=0,
        autostart=[["xsetroot", "-solid", ROOT_COLOUR]],
    )
    annie = annotator_who_can_sign_in(project)
    for _ in range(desktops):
        desktop = pool.start_desktop(pool.create_desktop(DesktopTemplate.objects.get(), host).pk)
        assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    SHOTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the browser run: {SHOTS}")
    port, stream_port = free_port(), free_port()
    stream_url = f"ws://127.0.0.1:{stream_port}"

    with ExitStack() as services:
        model = services.enter_context(serving(MODEL))
        model.script(*script)
        model.default = Reply.text("Thought: Wait for the screen.\nAction: wait()")
        Project.objects.filter(pk=project.pk).update(
            environment_template="e2e",
            model_settings={"base_url": model.base_url, "model": MODEL, "retries": 0},
        )
        services.enter_context(websockify(stream_port))
        services.enter_context(worker(host, BROKER, CHANNELS, queues, beat))

        def web_server():
            return services.enter_context(
                asgi(host, port, BROKER, CHANNELS, TANDEM_WEBSOCKIFY_PUBLIC_URL=stream_url)
            )

        web = [web_server()]

        def restart_web(while_down: Callable[[], None]) -> None:
            """SIGKILL the web server, run ``while_down``, start a new one on the same port."""
            os.killpg(web[0].pid, signal.SIGKILL)
            web[0].wait()
            while_down()
            web[0] = web_server()

        browser = services.enter_context(chromium(monkeypatch))
        base = f"http://127.0.0.1:{port}"
        context = browser.new_context(viewport={"width": 1366, "height": 768}, base_url=base)
        errors = BrowserErrors(context)
        page = context.new_page()
        page.goto("/")
        page.get_by_label("Username").fill(annie.username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Welcome, Annie")).to_be_visible()
        page.screenshot(path=str(SHOTS / "home.png"))
        yield Live(base, model, browser, page, errors, restart_web)
        context.close()


def start_task(page: Page) -> int:
    """From the app's home: the annotator's queue, then the next task; the episode's id."""
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Annotate").click()
    expect(page.get_by_role("heading", name="Your queue")).to_be_visible()
    page.screenshot(path=str(SHOTS / "annotator-queue.png"))
    page.get_by_role("button", name="Start next task").click()
    page.wait_for_url("**/app/annotate/episodes/*", timeout=30_000)
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def off_the_loop(function: Callable[..., T], *args: Any) -> T:
    """Run ``function`` in a thread of its own: Playwright's event loop runs in this one, and
    the channel layer's synchronous calls refuse to run beside it."""

    def call() -> T:
        try:
            return function(*args)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(call).result()
