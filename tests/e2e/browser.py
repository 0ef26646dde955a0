"""Headless Chromium for the browser tests: how it is started, how a test signs a user in,
and the console and page errors every test asserts there are none of."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connections
from django.test import Client
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from backend.accounts.models import User
from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS

VIEWPORT = {"width": 1366, "height": 768}


class BrowserErrors:
    """Console errors and uncaught exceptions of every page of a browser context."""

    def __init__(self, context: BrowserContext) -> None:
        self.messages: list[str] = []
        context.on("page", self.watch)

    def watch(self, page: Page) -> None:
        page.on(
            "console",
            lambda m: (
                self.messages.append(f"console: {m.text} ({m.location.get('url')})")
                if m.type == "error"
                else None
            ),
        )
        page.on("pageerror", lambda e: self.messages.append(f"page error: {e} at {page.url}"))

    def assert_none(self, expected: tuple[str, ...] = ()) -> None:
        """No errors but the ``expected`` ones (substrings of a message): a request the test
        makes fail on purpose is logged by the browser as a failed resource."""
        unexpected = [m for m in self.messages if not any(e in m for e in expected)]
        assert unexpected == [], "\n".join(unexpected)


def sign_in(browser: Browser, base_url: str, username: str, landing: str):
    """A new browser context with a session of ``username`` (made as Django's login makes
    it, so it does not depend on the password hasher the user was created with), on
    ``landing``."""
    client = Client()
    client.force_login(User.objects.get(username=username))
    context = browser.new_context(viewport=VIEWPORT, base_url=base_url)
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": base_url,
            }
        ]
    )
    errors = BrowserErrors(context)
    page = context.new_page()
    page.goto(landing)
    return context, page, errors


@contextmanager
def chromium(monkeypatch) -> Iterator[Browser]:
    """Debian's Chromium, headless. Playwright's sync API runs an event loop in this thread;
    the test's synchronous database checks need Django's leave, given only once the services
    run so that their processes do not inherit it. While that loop runs, Django hands out
    connections of their own; they are closed before it stops, or the test database could not
    be dropped."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            connections.close_all()
            browser.close()


AXE = Path(__file__).resolve().parents[2] / "frontend" / "node_modules" / "axe-core" / "axe.min.js"


def accessibility_problems(page: Page) -> list[str]:
    """Serious and critical WCAG problems axe-core finds on the page (labels, contrast, …)."""
    assert AXE.is_file(), f"{AXE} is missing: run deploy/dev.sh install"
    page.add_script_tag(path=str(AXE))
    return page.evaluate(
        """async () => {
            const result = await axe.run(document, {resultTypes: ['violations']});
            return result.violations
                .filter((v) => v.impact === 'serious' || v.impact === 'critical')
                .map((v) => `${v.id}: ${v.help} at ${v.nodes.map((n) => n.target).join(', ')}`);
        }"""
    )
