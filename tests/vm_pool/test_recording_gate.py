"""The recording gate on a real desktop, behind the deployment's websockify (``python -m
vm_pool.recording.proxy``): a control stream's input is written before the desktop gets it,
with the screen grabbed before each input that may begin a step; bad input is refused with its
reason and never reaches the desktop, and what was recorded before it stays.

The client is a plain RFB client over a WebSocket: it sends exactly the bytes a hostile client
could, which a browser's noVNC never would.
"""

import io
import itertools
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from PIL import Image
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from Xlib.display import Display

from tests.support.live import websockify as run_websockify
from tests.support.rfb_client import RfbClient
from tests.support.services import free_port
from vm_pool import pool
from vm_pool.desktop import MAX_CLIPBOARD_CHARS, ClipboardInput
from vm_pool.models import (
    Desktop,
    DesktopStatus,
    DesktopTemplate,
    InputKind,
    RecordedInput,
    Recording,
)
from vm_pool.recording import rfb
from vm_pool.recording.gate import BURST, RATE_PER_S
from vm_pool.screen.screenshots import screenshot_png
from vm_pool.streaming import StreamNotAllowed, issue_control_token, issue_stream_token

streams = pytest.mark.django_db(transaction=True)  # the proxy must see committed rows
KEY_A = 0x61


@pytest.fixture(scope="module")
def proxy(django_db_setup) -> Iterator[str]:
    port = free_port()
    with run_websockify(port):
        yield f"ws://127.0.0.1:{port}"


@pytest.fixture
def template() -> DesktopTemplate:
    return DesktopTemplate.objects.create(
        name="gated", width=800, height=600, min_ready=0, max_desktops=2,
        autostart=[["xsetroot", "-solid", "#2a6f97"]],
    )  # fmt: skip


@pytest.fixture
def desktop(template) -> Iterator[Desktop]:
    started = pool.start_desktop(pool.create_desktop(template, settings.TANDEM_HOST).pk)
    assert started.status == DesktopStatus.READY, started.broken_reason
    yield started
    for pk in Desktop.objects.exclude(status=DesktopStatus.STOPPED).values_list("pk", flat=True):
        pool.stop_desktop(pk)


def recording_on(desktop: Desktop, user) -> Recording:
    leased = pool.lease_desktop(desktop.template, user, f"demo:{user.pk}", 120)
    assert leased.pk == desktop.pk
    return Recording.objects.create(
        desktop=leased, user=user, generation=leased.generation, lease_ref=leased.lease_ref
    )


def x_display(desktop: Desktop) -> Display:
    os.environ.pop("XAUTHORITY", None)
    return Display(f":{desktop.display}")


def pointer_of(desktop: Desktop) -> tuple[int, int]:
    x = x_display(desktop)
    try:
        reply = x.screen().root.query_pointer()
        return reply.root_x, reply.root_y
    finally:
        x.close()


def wait_for_pointer(desktop: Desktop, where: tuple[int, int]) -> None:
    """The input is written before it passes: the pointer gets there a moment after its row."""
    deadline = time.monotonic() + 5
    while pointer_of(desktop) != where:
        assert time.monotonic() < deadline, pointer_of(desktop)
        time.sleep(0.02)


def clipboard_of(desktop: Desktop, text: str) -> str:
    """The desktop's clipboard once it holds ``text`` (or what it holds after 10 s): the paste is
    written before it passes, so the desktop takes it a moment after its row."""
    deadline = time.monotonic() + 10
    while True:
        control = pool.control_for(desktop)
        shown = control.run(["xclip", "-selection", "clipboard", "-o"], timeout=10)
        if shown.output == text or time.monotonic() > deadline:
            return shown.output
        time.sleep(0.05)


def control_url(proxy: str, recording: Recording) -> str:
    clear, _ = issue_control_token(recording)
    return f"{proxy}/websockify?token={clear}"


def wait_for_inputs(recording: Recording, count: int, kind: str = "") -> list[RecordedInput]:
    """The recording's inputs once ``count`` of them (of ``kind``, when given) are written."""
    deadline = time.monotonic() + 10
    while True:
        rows = list(RecordedInput.objects.filter(recording=recording))
        if len([row for row in rows if not kind or row.kind == kind]) >= count:
            return rows
        assert time.monotonic() < deadline, rows
        time.sleep(0.05)


def png_pixels(png: bytes) -> bytes:
    return Image.open(io.BytesIO(png)).convert("RGB").tobytes()


@streams
def test_each_input_is_recorded_before_it_passes_with_the_screen_before_each_step_start(
    desktop, proxy, make_user
):
    ann = make_user("ann")
    recording = recording_on(desktop, ann)
    client = RfbClient(control_url(proxy, recording))
    assert client.screen == (800, 600)

    # Moves, then a click: the press is held until the screen is grabbed; the pointer is there.
    for x in range(100, 300, 20):
        client.send(rfb.pointer_event(x, 200, 0))
        time.sleep(0.02)
    wait_for_pointer(desktop, (280, 200))
    before = pool.control_for(desktop).observe(settle=False).png
    client.click(280, 200)
    # Typing "aa": only its first key may begin a step.
    for down in (True, False, True, False):
        client.send(rfb.key_event(KEY_A, down))
    rows = wait_for_inputs(recording, 4, InputKind.KEY)

    assert [row.index for row in rows] == list(range(len(rows)))
    # Moves that came while the first was passing were folded into the latest: fewer rows.
    moves = [row.x for row in rows if row.kind == InputKind.POINTER and not row.buttons]
    assert 100 in moves and 280 in moves and moves == sorted(moves)
    assert [(row.buttons, row.keysym, row.down) for row in rows[-6:]] == [
        (1, None, None),
        (0, None, None),
        (None, KEY_A, True),
        (None, KEY_A, False),
        (None, KEY_A, True),
        (None, KEY_A, False),
    ]
    framed = [row for row in rows if row.frame_id]
    press, first_key = rows[-6], rows[-4]
    assert framed == [press, first_key]  # moves, releases and the run's second key: no grab
    # The press's frame is the screen as the test grabbed it just before sending the click.
    assert png_pixels(screenshot_png(press.frame)) == png_pixels(before)
    # The keys reached the desktop: the X server saw "a" go down and up.
    x = x_display(desktop)
    try:
        assert not any(x.query_keymap())  # nothing left held
    finally:
        x.close()
    client.ws.close()


@streams
def test_control_is_only_for_the_recording_holder_and_input_after_the_lease_never_passes(
    desktop, proxy, make_user
):
    ann, other = make_user("ann"), make_user("other")
    recording = recording_on(desktop, ann)
    # Only for an open recording of the lease holder; a view-only token never controls.
    ended = Recording.objects.create(
        desktop=desktop, user=ann, generation=desktop.generation, lease_ref="demo:other",
        ended_at=timezone.now(),
    )  # fmt: skip
    with pytest.raises(StreamNotAllowed):
        issue_control_token(ended)
    strange = Recording.objects.create(
        desktop=desktop, user=other, generation=recording.generation, lease_ref=recording.lease_ref
    )
    with pytest.raises(StreamNotAllowed):
        issue_control_token(strange)
    with pytest.raises(StreamNotAllowed):
        issue_stream_token(desktop, ann, view_only=False)

    client = RfbClient(control_url(proxy, recording))
    spare = control_url(proxy, recording)
    client.send(rfb.pointer_event(50, 60, 0))
    wait_for_inputs(recording, 1)
    wait_for_pointer(desktop, (50, 60))
    Desktop.objects.filter(pk=desktop.pk).update(lease_expires_at=timezone.now())
    # The gate finds it at its next look, input or none, and closes the stream.
    assert client.closed_reason() == "the lease has lapsed"
    with pytest.raises(ConnectionClosed):
        client.send(rfb.pointer_event(400, 300, 0))
    assert pointer_of(desktop) == (50, 60)
    assert RecordedInput.objects.filter(recording=recording).count() == 1
    recording.refresh_from_db()
    assert [r["reason"] for r in recording.refusals] == ["the lease has lapsed"]
    # No control stream opens on a lapsed lease: neither a new token nor one issued before.
    with pytest.raises(StreamNotAllowed):
        issue_control_token(recording)
    with pytest.raises((ConnectionClosed, EOFError, OSError, InvalidHandshake)):
        RfbClient(spare)


@streams
def test_bad_input_is_refused_with_its_reason_and_the_recording_so_far_is_kept(
    desktop, proxy, make_user
):
    ann = make_user("ann")
    recording = recording_on(desktop, ann)

    # A 10 MB paste: refused from its length, before its text is read.
    client = RfbClient(control_url(proxy, recording))
    client.send(rfb.pointer_event(10, 10, 0))
    wait_for_inputs(recording, 1)
    size = 10 * 1024 * 1024
    client.send(struct.pack(">BxxxI", 6, size) + b"x" * 65536)
    reason = client.closed_reason()
    assert reason == f"a clipboard paste of {size} bytes (at most {MAX_CLIPBOARD_CHARS})"
    assert [row.kind for row in RecordedInput.objects.filter(recording=recording)] == ["pointer"]

    # A paste within the limit is recorded and put on the desktop's clipboard.
    client = RfbClient(control_url(proxy, recording))
    client.send(rfb.cut_text("from the person's clipboard"))
    wait_for_inputs(recording, 2)
    assert clipboard_of(desktop, "from the person's clipboard") == "from the person's clipboard"

    # 10,000 moves a second for two seconds: folded to one every 10 ms, and another person driving
    # another desktop through the same websockify meanwhile is not held up.
    other = pool.start_desktop(pool.create_desktop(desktop.template, desktop.host).pk)
    assert other.status == DesktopStatus.READY, other.broken_reason
    bob = make_user("bob")
    leased = pool.lease_desktop(desktop.template, bob, "demo:bob", 120)
    assert leased.pk == other.pk
    neighbour = RfbClient(control_url(proxy, Recording.objects.create(
        desktop=leased, user=bob, generation=leased.generation, lease_ref=leased.lease_ref
    )))  # fmt: skip
    # Its first input pays for the start of its stream's path to the desktop: not timed.
    neighbour.send(rfb.pointer_event(99, 200, 0))
    wait_for_pointer(other, (99, 200))
    before_flood = RecordedInput.objects.filter(recording=recording).count()
    flooding = threading.Thread(
        target=lambda: [
            (client.send(b"".join(rfb.pointer_event(i % 800, j % 600, 0) for i in range(100))),
             time.sleep(0.01))
            for j in range(200)
        ]
    )  # fmt: skip
    flooding.start()
    waits = []
    for n in range(10):
        sent = time.monotonic()
        neighbour.send(rfb.pointer_event(100 + n, 200, 0))
        wait_for_pointer(other, (100 + n, 200))
        waits.append(time.monotonic() - sent)
        time.sleep(0.05)
    flooding.join()
    # Held up behind the flood, the other desktop's first input would wait the flood out (two
    # seconds at least); each arrived within half of that, however busy the machine.
    assert max(waits) < 1.0, waits
    passed = RecordedInput.objects.filter(recording=recording, index__gte=before_flood)
    moments = list(passed.values_list("at", flat=True))
    folded = len(moments)
    assert folded > 1, moments  # the flood's moves went on passing, folded
    # At most one move every 10 ms (the gate's own clock, 1 ms allowed between the two), not
    # the 20,000 sent: recorded at least 9 ms apart.
    assert min(b - a for a, b in itertools.pairwise(moments)) >= 0.009, moments
    neighbour.close()

    # 10,000 inputs at once: keys past the rate close the stream.
    started = time.monotonic()
    burst = b"".join(rfb.pointer_event(i % 800, 100, 0) for i in range(5000))
    burst += b"".join(rfb.key_event(KEY_A, i % 2 == 0) for i in range(5000))
    client.send(burst)
    reason = client.closed_reason()
    took = time.monotonic() - started
    assert reason == f"input over {RATE_PER_S:.0f} events a second"
    assert took < 5
    rows = RecordedInput.objects.filter(recording=recording)
    keys = rows.filter(kind=InputKind.KEY).count()
    assert keys <= BURST + RATE_PER_S * took  # the burst and what refilled: not 5,000
    assert rows.filter(kind=InputKind.POINTER).count() < before_flood + folded + 100
    x = x_display(desktop)
    try:
        x.query_keymap()  # the desktop still answers
    finally:
        x.close()

    # The recording cannot be written: the input does not pass (fail closed).
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION refuse_input() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'disk full'; END $$ LANGUAGE plpgsql; "
            "CREATE TRIGGER refuse_input BEFORE INSERT ON vm_pool_recordedinput "
            "FOR EACH ROW EXECUTE FUNCTION refuse_input()"
        )
    try:
        before = pointer_of(desktop)
        client = RfbClient(control_url(proxy, recording))
        client.send(rfb.pointer_event(before[0] + 100, 333, 0))
        reason = client.closed_reason()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER refuse_input ON vm_pool_recordedinput; "
                           "DROP FUNCTION refuse_input()")  # fmt: skip
    assert reason.startswith("the recording could not be written, so the input did not pass")
    assert pointer_of(desktop) == before
    assert RecordedInput.objects.filter(recording=recording).count() == rows.count()


def test_unknown_or_desktop_changing_rfb_messages_are_refused():
    stream = rfb.ClientStream(MAX_CLIPBOARD_CHARS)
    handshake = stream.feed(b"RFB 003.008\n\x01\x01")
    assert [m.data for m in handshake] == [b"RFB 003.008\n", b"\x01", b"\x01"]
    asked = stream.feed(struct.pack(">BxHi", 2, 1, 0) + bytes([3, 0]) + b"\0" * 8)
    assert [type(m).__name__ for m in asked] == ["Forward", "Forward"]
    with pytest.raises(rfb.Refused, match="RFB message type 252"):
        stream.feed(struct.pack(">BxHBx", 252, 800, 1) + b"\0" * 20)
    with pytest.raises(rfb.Refused, match="security type 2"):
        rfb.ClientStream(10).feed(b"RFB 003.008\n\x02")
    with pytest.raises(rfb.Refused, match="not an RFB client"):
        rfb.ClientStream(10).feed(b"GET / HTTP/1.1\r\n")


def test_the_extended_clipboard_is_read_as_a_paste_and_its_other_messages_pass_nowhere():
    def extended(flags: int, body: bytes = b"") -> bytes:
        data = struct.pack(">I", flags) + body
        return struct.pack(">Bxxxi", 6, -len(data)) + data

    stream = rfb.ClientStream(4096)
    stream.feed(b"RFB 003.008\n\x01\x01")
    # What noVNC sends on connect: every action it knows (provide too) and its formats' sizes.
    caps = extended((0x1F << 24) | 1, struct.pack(">I", 1024))
    assert stream.feed(caps) == [rfb.Dropped()]
    text = b"pasted by a person" + b"\0"
    provide = extended((1 << 28) | 1, zlib.compress(struct.pack(">I", len(text)) + text))
    assert stream.feed(provide) == [ClipboardInput("pasted by a person")]
    bomb = zlib.compress(struct.pack(">I", 10**6) + b"x" * 10**6)
    with pytest.raises(rfb.Refused, match="over 4096 characters"):
        stream.feed(extended((1 << 28) | 1, bomb))
