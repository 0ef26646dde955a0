"""Desktop streams: stream tokens, the one websockify process and its token plugin, the API.

The stream tests run real desktops from the pool, a real websockify with Tandem's token plugin
reading the test database, and the real noVNC client in headless Chromium (served from
tests/vnc_client, installed there by ``deploy/dev.sh install``).
"""

import functools
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from websockets.exceptions import InvalidHandshake
from websockets.sync.client import connect

from backend.accounts.models import User
from tests.support import live
from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.support.services import free_port
from vm_pool import pool
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate, StreamToken
from vm_pool.streaming import (
    DesktopNotStreamable,
    StreamNotAllowed,
    issue_stream_token,
    resolve_stream_token,
)

CLIENT_DIR = Path(__file__).resolve().parents[1] / "vnc_client"
NOVNC_DIR = CLIENT_DIR / "node_modules" / "@novnc" / "novnc"
# The desktops' root window is painted this colour, so a frame that arrived is recognisable.
ROOT_COLOUR = (0x2A, 0x6F, 0x97)
RFB_BANNER = b"RFB 003.008\n"

streams = pytest.mark.django_db(transaction=True)  # websockify must see committed rows


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def websockify(django_db_setup) -> Iterator[str]:
    """One websockify with the token plugin, on the test database; yields its ws:// address."""
    port = free_port()
    with live.websockify(port):
        yield f"ws://127.0.0.1:{port}"


@pytest.fixture
def template() -> DesktopTemplate:
    colour = "#{:02x}{:02x}{:02x}".format(*ROOT_COLOUR)
    return DesktopTemplate.objects.create(
        name="streamed",
        width=800,
        height=600,
        min_ready=0,
        max_desktops=2,
        autostart=[["xsetroot", "-solid", colour]],
    )


@pytest.fixture
def desktop(template) -> Iterator[Desktop]:
    """A ready desktop; every desktop the test started is stopped afterwards."""
    started = pool.start_desktop(pool.create_desktop(template, settings.TANDEM_HOST).pk)
    assert started.status == DesktopStatus.READY, started.broken_reason
    yield started
    for pk in Desktop.objects.exclude(status=DesktopStatus.STOPPED).values_list("pk", flat=True):
        pool.stop_desktop(pk)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an asyncio loop running in this thread, which Django takes
    # for an async context; the ORM calls of these tests are plain synchronous code.
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def client_origin() -> Iterator[str]:
    """tests/vnc_client over HTTP on 127.0.0.1: a secure context on the loopback network, as
    noVNC and Chromium's local-network checks want for a page that opens ws://127.0.0.1."""
    assert (NOVNC_DIR / "core" / "rfb.js").is_file(), "noVNC is missing: run deploy/dev.sh install"
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(CLIENT_DIR))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def vnc_client(browser, client_origin) -> Iterator[Callable[[], "VncClient"]]:
    """Opens noVNC pages in a fresh browser context."""
    context = browser.new_context(viewport={"width": 1000, "height": 800})

    def open_page() -> VncClient:
        page = context.new_page()
        page.goto(f"{client_origin}/index.html")
        page.wait_for_function("window.clientReady === true")
        return VncClient(page)

    yield open_page
    context.close()


class VncClient:
    """One noVNC RFB connection in one page."""

    def __init__(self, page) -> None:
        self.page = page

    def open(self, url: str) -> None:
        self.page.evaluate("(url) => openStream(url)", url)

    @property
    def state(self) -> str:
        return self.page.evaluate("window.vnc.state")

    def wait_for(self, state: str, seconds: float = 10) -> None:
        self.page.wait_for_function(
            f"window.vnc.state === '{state}'", timeout=seconds * 1000, polling=50
        )

    def pixel(self, x: int, y: int) -> dict:
        return self.page.evaluate("([x, y]) => canvasPixel(x, y)", [x, y])

    def wait_for_root_colour(self, seconds: float = 10) -> dict:
        deadline = time.monotonic() + seconds
        while True:
            pixel = self.pixel(5, 5)
            if tuple(pixel["rgba"][:3]) == ROOT_COLOUR and pixel["rgba"][3] == 255:
                return pixel
            assert time.monotonic() < deadline, f"no frame of the desktop arrived: {pixel}"
            time.sleep(0.05)

    def move_pointer(self, x: int, y: int) -> None:
        box = self.page.locator("#screen canvas").bounding_box()
        self.page.mouse.move(box["x"] + x, box["y"] + y)


# --- helpers -----------------------------------------------------------------------------------


def stream_url(base: str, clear: str) -> str:
    return f"{base}/websockify?token={clear}"


def lease(desktop: Desktop, user: User) -> Desktop:
    leased = pool.lease_desktop(desktop.template, user, "task:1", 120)
    assert leased.pk == desktop.pk
    return leased


def pointer_of(desktop: Desktop) -> tuple[int, int]:
    """Where the X server's pointer is, read on the desktop's own display."""
    env = {k: v for k, v in os.environ.items() if k != "XAUTHORITY"}
    env["DISPLAY"] = f":{desktop.display}"
    out = subprocess.run(
        ["xdotool", "getmouselocation"], env=env, capture_output=True, text=True, timeout=5
    ).stdout
    fields = dict(part.split(":", 1) for part in out.split())
    return int(fields["x"]), int(fields["y"])


def refused(url: str) -> bool:
    """True when websockify refuses the WebSocket handshake (it closes without upgrading)."""
    try:
        with connect(url, open_timeout=5) as ws:
            ws.recv(timeout=5)
    except (InvalidHandshake, EOFError, ConnectionError):
        return True
    return False


def rfb_banner(url: str) -> bytes:
    with connect(url, open_timeout=5) as ws:
        return ws.recv(timeout=5)


# --- streams of real desktops ------------------------------------------------------------------


@streams
def test_lease_holder_sees_the_desktop_in_novnc(desktop, websockify, vnc_client, make_user):
    ann = make_user("ann")
    lease(desktop, ann)
    clear, token = issue_stream_token(desktop, ann, view_only=True)
    client = vnc_client()
    client.open(stream_url(websockify, clear))  # no password: the browser holds no VNC secret
    client.wait_for("connected")
    pixel = client.wait_for_root_colour()
    assert (pixel["width"], pixel["height"]) == (desktop.width, desktop.height) == (800, 600)
    corner = client.pixel(desktop.width - 1, desktop.height - 1)
    assert tuple(corner["rgba"]) == (*ROOT_COLOUR, 255)


@streams
def test_no_stream_moves_the_pointer_and_no_control_token_is_issued(
    desktop, websockify, vnc_client, make_user
):
    ann, watcher = make_user("ann"), make_user("watcher")
    lease(desktop, ann)
    start = pointer_of(desktop)

    # The lease holder's own stream and a watcher's: noVNC sends their pointer moves, the
    # view-only VNC server the tokens lead to ignores them.
    for user in (ann, watcher):
        clear, _ = issue_stream_token(desktop, user, view_only=True)
        client = vnc_client()
        client.open(stream_url(websockify, clear))
        client.wait_for("connected")
        client.wait_for_root_colour()
        for x, y in [(100, 100), (150, 120), (321, 234)]:
            client.move_pointer(x, y)
        time.sleep(1.0)  # x11vnc handles a control client's pointer in well under 100 ms
        assert pointer_of(desktop) == start
        assert client.state == "connected"  # input is ignored, the picture keeps coming

    with pytest.raises(StreamNotAllowed, match="view-only"):
        issue_stream_token(desktop, ann, view_only=False)
    # A control token written straight into the database must name a recording: the database
    # refuses one without (a control stream is only ever the recording gate's).
    issue_stream_token(desktop, ann, view_only=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        StreamToken.objects.filter(user=ann).update(view_only=False)


@streams
def test_release_then_reset_closes_the_open_stream(desktop, websockify, vnc_client, make_user):
    ann = make_user("ann")
    lease(desktop, ann)
    clear, token = issue_stream_token(desktop, ann, view_only=True)
    client = vnc_client()
    client.open(stream_url(websockify, clear))
    client.wait_for("connected")
    client.wait_for_root_colour()

    assert pool.release_desktop(desktop.pk, ann)
    reset_started_at = client.page.evaluate("Date.now()")
    reset = pool.reset_desktop(desktop.pk)
    assert reset.status == DesktopStatus.READY, reset.broken_reason
    client.wait_for("disconnected", seconds=3)
    closed_after_ms = client.page.evaluate("window.vnc.disconnectedAt") - reset_started_at
    assert closed_after_ms < 3000
    # The token named the generation before the release: it opens nothing on the fresh desktop.
    assert refused(stream_url(websockify, clear))


@streams
def test_unknown_or_missing_token_is_refused(desktop, websockify, vnc_client, make_user):
    ann = make_user("ann")
    lease(desktop, ann)
    issue_stream_token(desktop, ann, view_only=True)
    assert refused(stream_url(websockify, "not-a-token"))
    assert refused(f"{websockify}/websockify")

    client = vnc_client()
    client.open(stream_url(websockify, "not-a-token"))
    client.wait_for("disconnected")
    assert client.page.evaluate("window.vnc.everConnected") is False


@streams
def test_expired_token_opens_no_new_connection_but_the_open_stream_goes_on(
    desktop, websockify, make_user
):
    ann = make_user("ann")
    lease(desktop, ann)
    clear, token = issue_stream_token(desktop, ann, view_only=True)
    url = stream_url(websockify, clear)
    with connect(url, open_timeout=5) as open_stream:
        assert open_stream.recv(timeout=5) == RFB_BANNER
        StreamToken.objects.filter(pk=token.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        assert refused(url)
        open_stream.send(RFB_BANNER)
        security_types = open_stream.recv(timeout=5)
        # The server goes on with the handshake, offering "None": the socket is the secret.
        assert security_types[0] == 1 and security_types[1:2] == b"\x01"


@streams
def test_token_of_the_previous_lease_is_refused_for_the_next_holder(desktop, websockify, make_user):
    ann, bob = make_user("ann"), make_user("bob")
    lease(desktop, ann)
    ann_token, _ = issue_stream_token(desktop, ann, view_only=True)
    assert rfb_banner(stream_url(websockify, ann_token)) == RFB_BANNER
    pool.release_desktop(desktop.pk, ann)
    pool.reset_desktop(desktop.pk)
    lease(desktop, bob)

    assert refused(stream_url(websockify, ann_token))
    bob_token, _ = issue_stream_token(desktop, bob, view_only=True)
    assert rfb_banner(stream_url(websockify, bob_token)) == RFB_BANNER


# --- issuing and resolving tokens (no processes) -----------------------------------------------


@pytest.fixture
def leased_row(make_user) -> Desktop:
    """A leased desktop row; no processes behind it."""
    template = DesktopTemplate.objects.create(name="rows", min_ready=0)
    now = timezone.now()
    return Desktop.objects.create(
        template=template,
        host="host-a",
        provider="local",
        status=DesktopStatus.LEASED,
        display=150,
        vnc_socket="/var/lib/tandem/desktops/desktop-1/run/vnc.sock",
        width=1280,
        height=800,
        leased_by=make_user("holder"),
        lease_ref="task:7",
        leased_at=now,
        lease_expires_at=now + timedelta(minutes=2),
    )


@pytest.mark.django_db
def test_no_one_gets_a_control_token_not_even_the_lease_holder(leased_row, make_user):
    for user in (leased_row.leased_by, make_user("someone")):
        with pytest.raises(StreamNotAllowed):
            issue_stream_token(leased_row, user, view_only=False)
    assert not StreamToken.objects.exists()


@pytest.mark.django_db
def test_a_token_leads_to_the_desktops_view_only_socket(leased_row, make_user):
    clear, token = issue_stream_token(leased_row, make_user("watcher"), view_only=True)
    assert token.view_only and token.generation == leased_row.generation
    assert resolve_stream_token(clear) == ("unix_socket", leased_row.vnc_socket)


@pytest.mark.django_db
def test_a_token_of_a_container_desktop_leads_to_its_published_port(leased_row, make_user):
    Desktop.objects.filter(pk=leased_row.pk).update(
        vnc_socket="", vnc_host="127.0.0.1", vnc_port=32768
    )
    clear, _ = issue_stream_token(leased_row, make_user("watcher"), view_only=True)
    assert resolve_stream_token(clear) == ("127.0.0.1", 32768)


@pytest.mark.django_db
def test_only_the_token_hash_is_stored(leased_row):
    clear, token = issue_stream_token(leased_row, leased_row.leased_by, view_only=True)
    stored = StreamToken.objects.get(pk=token.pk)
    assert clear not in stored.token_hash and len(stored.token_hash) == 64


@pytest.mark.django_db
def test_token_lives_the_configured_seconds(leased_row, settings):
    settings.TANDEM_STREAM_TOKEN_SECONDS = 7
    before = timezone.now()
    _, token = issue_stream_token(leased_row, leased_row.leased_by, view_only=True)
    assert timedelta(seconds=6) < token.expires_at - before <= timedelta(seconds=8)


@pytest.mark.django_db
def test_desktop_that_is_resetting_cannot_be_streamed(leased_row):
    clear, _ = issue_stream_token(leased_row, leased_row.leased_by, view_only=True)
    holder = leased_row.leased_by
    assert pool.release_desktop(leased_row.pk)
    assert resolve_stream_token(clear) is None
    with pytest.raises(DesktopNotStreamable):
        issue_stream_token(leased_row, holder, view_only=True)


@pytest.mark.django_db
def test_token_of_an_inactive_user_resolves_to_nothing(leased_row):
    clear, _ = issue_stream_token(leased_row, leased_row.leased_by, view_only=True)
    User.objects.filter(pk=leased_row.leased_by_id).update(is_active=False)
    assert resolve_stream_token(clear) is None


# --- the API -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_holder_gets_a_view_only_stream_with_no_password_in_it(leased_row, client_for):
    response = client_for(leased_row.leased_by).post(f"/api/desktops/{leased_row.pk}/stream/")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert set(body) == {"url", "token", "view_only", "expires_at"}
    assert body["view_only"] is True
    assert body["url"] == f"ws://127.0.0.1:6080/websockify?token={body['token']}"
    assert resolve_stream_token(body["token"]) == ("unix_socket", leased_row.vnc_socket)
    assert "vnc.sock" not in response.content.decode()  # nor where the desktop is


@pytest.mark.django_db
def test_holder_asking_for_control_is_refused(leased_row, client_for):
    client = client_for(leased_row.leased_by)
    response = client.post(f"/api/desktops/{leased_row.pk}/stream/", {"view_only": False})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "stream_not_allowed"
    assert "recorded decision" in response.json()["error"]["message"]
    assert not StreamToken.objects.exists()


@pytest.mark.django_db
def test_stream_url_uses_the_public_websockify_address(leased_row, client_for, settings):
    settings.TANDEM_WEBSOCKIFY_PUBLIC_URL = "wss://desktops.example.org"
    body = client_for(leased_row.leased_by).post(f"/api/desktops/{leased_row.pk}/stream/").json()
    assert body["url"].startswith("wss://desktops.example.org/websockify?token=")


@pytest.mark.django_db
def test_admins_get_view_only_streams(leased_row, client_for, make_user):
    client = client_for(make_user("watcher", is_superuser=True))
    response = client.post(f"/api/desktops/{leased_row.pk}/stream/")
    assert response.status_code == 201
    assert response.json()["view_only"] is True and "password" not in response.json()
    denied = client.post(f"/api/desktops/{leased_row.pk}/stream/", {"view_only": False})
    assert denied.status_code == 403
    assert denied.json()["error"]["code"] == "stream_not_allowed"


@pytest.mark.django_db
def test_another_annotator_cannot_stream_or_see_the_desktop(leased_row, client_for, make_user):
    client = client_for(make_user("other"))
    for body in ({}, {"view_only": True}):
        response = client.post(f"/api/desktops/{leased_row.pk}/stream/", body)
        assert response.status_code == 404
    assert client.get(f"/api/desktops/{leased_row.pk}/").status_code == 404
    assert client.get("/api/desktops/").json()["count"] == 0
    assert not StreamToken.objects.exists()


@pytest.mark.django_db
def test_anonymous_caller_gets_401(leased_row, client_for):
    assert client_for(None).post(f"/api/desktops/{leased_row.pk}/stream/").status_code == 401
    assert client_for(None).get("/api/desktops/").status_code == 401


@pytest.mark.django_db
def test_no_stream_of_a_desktop_being_reset(leased_row, client_for, make_user):
    admin = client_for(make_user("watcher", is_superuser=True))
    pool.release_desktop(leased_row.pk)
    response = admin.post(f"/api/desktops/{leased_row.pk}/stream/")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "desktop_not_streamable"


@pytest.mark.django_db
def test_admins_list_the_pool_and_holders_see_their_own_desktop(leased_row, client_for, make_user):
    spare = Desktop.objects.create(
        template=leased_row.template, host="host-b", provider="local", width=1280, height=800
    )
    listed = client_for(make_user("watcher", is_superuser=True)).get("/api/desktops/").json()
    rows = {row["id"]: row for row in listed["results"]}
    assert set(rows) == {leased_row.pk, spare.pk}
    assert rows[leased_row.pk]["leased_by"] == "holder"
    assert rows[leased_row.pk]["template"] == "rows"
    assert rows[spare.pk]["leased_by"] is None and rows[spare.pk]["status"] == "starting"
    assert all("vnc_password" not in row and "agent_key" not in row for row in rows.values())

    own = client_for(leased_row.leased_by).get("/api/desktops/").json()
    assert [row["id"] for row in own["results"]] == [leased_row.pk]


@pytest.mark.django_db
def test_access_token_needs_the_episodes_write_scope_to_stream(leased_row, token_client_for):
    reader, _ = token_client_for(leased_row.leased_by, ["episodes:read"])
    assert reader.post(f"/api/desktops/{leased_row.pk}/stream/").status_code == 403
    assert reader.get("/api/desktops/").status_code == 200
    writer, _ = token_client_for(leased_row.leased_by, ["episodes:write"])
    assert writer.post(f"/api/desktops/{leased_row.pk}/stream/").status_code == 201
