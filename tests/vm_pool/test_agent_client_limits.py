"""The agent client against a hostile agent: a real server on a real socket (TCP on loopback, as
a machine's agent is reached, or a unix socket, as a local desktop's) that answers with what a
desktop's programs could send once they hold the agent's place. Every such reply is a
``DesktopError`` that says why, within the call's deadline, holding no more than its cap."""

import json
import os
import random
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from vm_pool.actions import ScreenSize
from vm_pool.agent.endpoint import make_handler, serve
from vm_pool.agent.files import MAX_READ_BYTES
from vm_pool.agent.server import RUN_OUTPUT_CHARS, RUN_STDOUT_CHARS, AgentConfig, Desktop
from vm_pool.agent_client import (
    FILE_REPLY_BYTES,
    RUN_REPLY_BYTES,
    SMALL_REPLY_BYTES,
    AgentClient,
    observation_reply_bytes,
)
from vm_pool.desktop import DesktopError
from vm_pool.screen.capture import Frame, PngEncoder

KEY = "0123456789abcdef0123456789abcdef"
SCREEN = ScreenSize(320, 200)
MARGIN_S = 0.5  # past a deadline, for the thread switch and the close
STREAM_LIMIT = 256 * 1024 * 1024  # a flood stops by itself here, even if no one hangs up
# What the kernel may still hold between the two ends when the client hangs up (socket buffers).
IN_FLIGHT = 16 * 1024 * 1024
Reply = Callable[["HostileAgent", socket.socket], None]


class HostileAgent:
    """Answers every request with ``reply``: raw bytes on the connection, written as slowly,
    as many or as wrong as the test wants. Counts what it managed to send."""

    def __init__(self, family: int) -> None:
        self.directory = tempfile.mkdtemp(prefix="hostile-agent-", dir="/tmp")
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_UNIX:
            path = os.path.join(self.directory, "agent.sock")
            self.listener.bind(path)
            self.address = f"unix:{path}"
        else:
            self.listener.bind(("127.0.0.1", 0))
            self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.listener.listen(8)
        self.reply: Reply = lambda agent, conn: None
        self.requests: list[bytes] = []
        self.sent = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def client(self, timeout: float = 30.0) -> AgentClient:
        return AgentClient(self.address, KEY, SCREEN, timeout=timeout)

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed at the end of the test
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            try:
                self.requests.append(_read_request(conn))
                self.reply(self, conn)
            except OSError:  # the client hung up, as it should on a hostile reply
                pass

    def close(self) -> None:
        self.listener.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length:
        body += conn.recv(65536)
    return data


@pytest.fixture(params=[socket.AF_INET, socket.AF_UNIX], ids=["tcp", "unix"])
def agent(request) -> Iterator[HostileAgent]:
    hostile = HostileAgent(request.param)
    yield hostile
    hostile.close()


@pytest.fixture
def tcp_agent() -> Iterator[HostileAgent]:
    hostile = HostileAgent(socket.AF_INET)
    yield hostile
    hostile.close()


def head(status: int = 200, length: int | None = None, extra: str = "") -> bytes:
    lines = [f"HTTP/1.1 {status} X", "Content-Type: application/json", "Connection: close"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if extra:
        lines.append(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer(body: bytes, status: int = 200, extra: str = "") -> Reply:
    return lambda agent, conn: agent.send(conn, head(status, len(body), extra) + body)


def flood(agent: HostileAgent, conn: socket.socket) -> None:
    """A 200 with no Content-Length and a body that never ends (until the client hangs up)."""
    agent.send(conn, head())
    chunk = b"x" * 65536
    while agent.sent < STREAM_LIMIT:
        agent.send(conn, chunk)


def flood_chunked(agent: HostileAgent, conn: socket.socket) -> None:
    agent.send(conn, head(extra="Transfer-Encoding: chunked"))
    chunk = b"%x\r\n%s\r\n" % (1024 * 1024, b"x" * 1024 * 1024)
    while agent.sent < STREAM_LIMIT:
        agent.send(conn, chunk)


def dribble(prefix: bytes, every_s: float = 0.2, count: int = 100) -> Reply:
    """``prefix`` at once, then one byte every ``every_s``, ``count`` times."""

    def reply(agent: HostileAgent, conn: socket.socket) -> None:
        agent.send(conn, prefix)
        for _ in range(count):
            time.sleep(every_s)
            agent.send(conn, b"x")

    return reply


def fails(call: Callable[[], object], match: str) -> tuple[str, float]:
    """The ``DesktopError`` that ``call`` raises (its message), and how long the call took."""
    started = time.monotonic()
    with pytest.raises(DesktopError, match=match) as raised:
        call()
    return str(raised.value), time.monotonic() - started


# --- size --------------------------------------------------------------------------------------


def test_a_reply_that_never_ends_is_cut_at_the_calls_cap(agent):
    agent.reply = flood
    client = agent.client()

    message, _ = fails(lambda: client.put_file("notes.txt", b"hi"), "over its cap")

    assert f"the reply to /files is over its cap of {SMALL_REPLY_BYTES} bytes" in message
    assert agent.sent < SMALL_REPLY_BYTES + IN_FLIGHT  # it stopped reading there
    assert not client.health().ok


def test_a_chunked_reply_past_the_file_cap_is_cut_there(tcp_agent):
    tcp_agent.reply = flood_chunked

    message, _ = fails(lambda: tcp_agent.client().read_file("big.bin"), "over its cap")

    assert f"is over its cap of {FILE_REPLY_BYTES} bytes" in message
    assert FILE_REPLY_BYTES == MAX_READ_BYTES  # a file comes as its bytes, at the agent's cap
    assert tcp_agent.sent < FILE_REPLY_BYTES + IN_FLIGHT


def test_an_announced_length_past_the_cap_fails_before_the_body_is_read(agent):
    # Three times what the agent sends of a file: refused on the header, no body awaited.
    agent.reply = dribble(head(length=3 * MAX_READ_BYTES))
    client = agent.client()

    message, took = fails(lambda: client.read_file("big.bin"), "over its cap")
    assert f"over its cap of {MAX_READ_BYTES} bytes ({3 * MAX_READ_BYTES} bytes announced)" in (
        message
    )
    assert took < 0.5

    cap = observation_reply_bytes(SCREEN)
    agent.reply = dribble(head(length=cap + 1, extra="Content-Type: image/png"))
    message, took = fails(lambda: client.observe(), "over its cap")
    assert f"over its cap of {cap} bytes ({cap + 1} bytes announced)" in message
    assert took < 0.5


def test_a_reply_cut_short_of_its_announced_length_is_an_error(agent):
    agent.reply = lambda agent, conn: agent.send(conn, head(length=1000) + b"\x89PNG")

    fails(
        lambda: agent.client().observe(), r"ended its reply to /observe\?settle=1 after 4 of 1000"
    )


def test_the_caps_let_through_the_largest_reply_the_agent_can_send(tcp_agent):
    # A command's output at the agent's caps, every character an emoji (12 bytes of JSON each).
    emoji = "\U0001f600"
    largest = {
        "returncode": 0,
        "output": emoji * RUN_OUTPUT_CHARS,
        "stdout": emoji * RUN_STDOUT_CHARS,
        "stderr": emoji * RUN_OUTPUT_CHARS,
    }
    body = json.dumps(largest).encode()
    assert len(body) <= RUN_REPLY_BYTES
    tcp_agent.reply = answer(body)
    assert tcp_agent.client().run(["cat"], timeout=1).stdout == emoji * RUN_STDOUT_CHARS

    # A screenshot of noise, which deflate cannot shrink, from the agent's own encoder.
    pixels = random.Random(7).randbytes(SCREEN.width * SCREEN.height * 4)
    png = PngEncoder().encode(Frame(SCREEN.width, SCREEN.height, pixels))
    assert len(png) > SCREEN.width * SCREEN.height * 3  # incompressible indeed
    tcp_agent.reply = answer(png, extra="X-Settled: 1\r\nX-Waited-Ms: 12.5")
    observation = tcp_agent.client().observe()
    assert (observation.png, observation.settled, observation.waited_ms) == (png, True, 12.5)

    # A file at the agent's cap.
    data = b"\0" * MAX_READ_BYTES
    tcp_agent.reply = answer(data)
    assert tcp_agent.client().read_file("big.bin") == data


def test_the_real_agent_sends_a_flooding_command_back_within_the_cap(tmp_path):
    config = AgentConfig(
        display=0,
        width=SCREEN.width,
        height=SCREEN.height,
        listen=f"unix:{tempfile.mkdtemp(prefix='agent-', dir='/tmp')}/agent.sock",
        vnc_listen="unix:/nonexistent",
        agent_key=KEY,
        home=str(tmp_path),
        work_dir=str(tmp_path),
        autostart=[],
        window_manager=[],
    )
    server = serve(config.listen, make_handler(Desktop(config)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = AgentClient(config.listen, KEY, SCREEN)
    flood = "head -c 50000000 /dev/urandom"
    try:
        done = client.run(["sh", "-c", flood], timeout=30)
        assert done.returncode == 0 and len(done.stdout) == RUN_STDOUT_CHARS
        # Cut off by its timeout: the output it had so far, its tail only.
        cut = client.run(["sh", "-c", f"{flood}; exec sleep 30"], timeout=2)
        assert cut.returncode == -1 and cut.output.startswith("timed out after 2.0s: b")
        assert len(cut.output) <= RUN_OUTPUT_CHARS + 100
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(os.path.dirname(config.listen[len("unix:") :]), ignore_errors=True)


def test_clients_that_hang_up_write_nothing_to_the_agents_log(tmp_path, capfd):
    """Anything on the desktop can open the agent's socket; its log is a file on the host."""
    config = AgentConfig(
        display=0, width=SCREEN.width, height=SCREEN.height,
        listen=f"unix:{tempfile.mkdtemp(prefix='agent-', dir='/tmp')}/agent.sock",
        vnc_listen="unix:/nonexistent", agent_key=KEY, home=str(tmp_path),
        work_dir=str(tmp_path), autostart=[], window_manager=[],
    )  # fmt: skip
    server = serve(config.listen, make_handler(Desktop(config)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    path = config.listen[len("unix:") :]
    try:
        for _ in range(20):
            with socket.socket(socket.AF_UNIX) as hanging_up:
                hanging_up.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                hanging_up.connect(path)
                hanging_up.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        # The agent still answers (once it has taken the 20 off its listen queue, which holds
        # 5: a connection before then is refused with EAGAIN), and said nothing of them.
        client, deadline = AgentClient(config.listen, KEY, SCREEN), time.monotonic() + 10
        while True:
            try:
                assert client.run(["true"], timeout=5).returncode == 0
                break
            except DesktopError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    assert capfd.readouterr().err == ""


# --- time --------------------------------------------------------------------------------------


def test_a_reply_dribbled_a_byte_at_a_time_ends_at_the_calls_deadline(agent):
    agent.reply = dribble(head(length=1000, extra="Content-Type: image/png"))

    message, took = fails(lambda: agent.client(timeout=1).observe(), "deadline")

    assert message == (
        f"desktop agent at {agent.address} did not answer /observe?settle=1 within its 1s deadline"
    )
    # A byte every 0.2 s kept the call alive as long as bytes came (8 s and more): the deadline
    # ends it at its 1 s, give or take the thread switch.
    assert took >= 1
    assert took < 1 + MARGIN_S


def test_headers_dribbled_a_byte_at_a_time_end_at_the_deadline_too(agent):
    agent.reply = dribble(b"HTTP/1.1 200 OK\r\nX-Padding: ")
    client = agent.client(timeout=1)

    started = time.monotonic()
    health = client.health(timeout=1)
    took = time.monotonic() - started
    assert not health.ok and health.reason.endswith("did not answer /health within its 1s deadline")
    assert took < 1 + MARGIN_S

    _, took = fails(lambda: client.put_file("notes.txt", b"hi"), "within its 1s deadline")
    assert took < 1 + MARGIN_S


def test_an_agent_that_never_answers_ends_at_the_deadline(agent):
    agent.reply = lambda agent, conn: time.sleep(5)

    _, took = fails(lambda: agent.client(timeout=0.5).observe(), "within its 0.5s deadline")
    assert took < 0.5 + MARGIN_S


# --- shape -------------------------------------------------------------------------------------


def test_json_nested_past_what_python_parses_is_an_error(agent):
    agent.reply = answer(b"[" * 200_000 + b"]" * 200_000)
    client = agent.client()

    fails(lambda: client.put_file("notes.txt", b"hi"), "/files answered JSON nested too deep")
    health = client.health()
    assert (health.ok, health.reason) == (
        False,
        "desktop agent /health answered JSON nested too deep",
    )

    agent.reply = answer(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
    fails(lambda: client.launch(["xterm"]), "/launch answered JSON nested too deep")


def test_a_reply_that_is_not_a_json_object_is_an_error(agent):
    client = agent.client()
    for body, reason in [
        (b"<html>hello</html>", "/files answered with no JSON"),
        (b"\xff\xfe\x00not utf-8", "/files answered with no JSON"),
        (b'{"returncode": 1' + b"0" * 5000 + b"}", "/files answered with no JSON"),
        (b"[1, 2, 3]", "/files answered with no JSON object"),
    ]:
        agent.reply = answer(body)
        message, _ = fails(lambda: client.put_file("notes.txt", b"hi"), reason)
        assert len(message) < 500


def test_a_status_line_that_is_not_http_is_an_error_quoted_short(agent):
    agent.reply = lambda agent, conn: agent.send(conn, b"SSH-2.0-" + b"x" * 60_000 + b"\r\n")

    message, _ = fails(lambda: agent.client().put_file("notes.txt", b"hi"), "does not answer")
    assert len(message) < 500


def test_fields_of_the_wrong_kind_are_an_error(agent):
    client = agent.client()
    agent.reply = answer(b'{"pid": "twelve"}')
    fails(lambda: client.launch(["xterm"]), "/launch answered an unusable reply: TypeError")
    agent.reply = answer(b'{"window": true}')
    fails(lambda: client.launch(["xterm"]), "/launch answered an unusable reply: KeyError: 'pid'")
    agent.reply = answer(json.dumps({"returncode": 0, "output": [[[[]]]]}).encode())
    fails(lambda: client.run(["true"], timeout=1), "/run answered an unusable reply: TypeError")
    agent.reply = answer(b"\x89PNG", extra="X-Waited-Ms: soon")
    fails(lambda: client.observe(), "/observe answered an unusable reply: ValueError")
    agent.reply = answer(b"\x89PNG", extra="X-Waited-Ms: nan")
    fails(lambda: client.observe(), "/observe answered an unusable reply")
    # A picture whose header claims more pixels than the screen has (a decoder would allocate
    # them), or none at all.
    wide = PngEncoder().encode(Frame(SCREEN.width * 2, SCREEN.height, bytes(SCREEN.width * 8)
                                     * SCREEN.height))  # fmt: skip
    agent.reply = answer(wide, extra="X-Waited-Ms: 3")
    fails(lambda: client.observe(), f"a {SCREEN.width * 2}×{SCREEN.height} picture of a")
    agent.reply = answer(b"GIF89a" + bytes(40), extra="X-Waited-Ms: 3")
    fails(lambda: client.observe(), "/observe answered an unusable reply: NotAPng")


def test_the_agents_error_text_is_cut_short_in_the_message(agent):
    client = agent.client()
    agent.reply = answer(json.dumps({"error": "x" * 500_000}).encode(), status=400)
    message, _ = fails(lambda: client.put_file("notes.txt", b"hi"), "desktop agent /files: xxx")
    assert len(message) < 500

    nested = {"error": json.loads("[" * 400 + "]" * 400)}  # parses, but repr cannot write it
    agent.reply = answer(json.dumps(nested).encode(), status=400)
    fails(lambda: client.put_file("notes.txt", b"hi"), "^desktop agent /files: a JSON list$")
