"""Request bodies over a route's limit are refused before they are stored, by a real uvicorn.

A 300 MB body sent without credentials to the task import (limit 10 MB): declared in
``Content-Length`` it is answered 413 before a byte of it is read; sent chunked it is cut off
at the limit and answered 413, and the web process never holds a temporary file larger than
the limit (its open files are watched while the body streams). Other routes take 1 MB.
"""

import json
import os
import select
import socket
import tempfile
import threading
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from backend import body_limits
from tests.support.live import asgi
from tests.support.services import free_port

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
HUGE = 300 * 1024 * 1024
CHUNK = 256 * 1024
IMPORT = "/api/projects/1/import/"


def read_response(connection: socket.socket) -> tuple[int, dict]:
    connection.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        piece = connection.recv(65536)
        assert piece, f"the server closed the connection without an answer: {data!r}"
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    headers = dict(
        line.decode().lower().split(": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line
    )
    while len(body) < int(headers.get("content-length", 0)):
        piece = connection.recv(65536)
        if not piece:
            break
        body += piece
    return int(head.split()[1]), json.loads(body)


def request_head(path: str, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    return ("\r\n".join([*lines, *headers]) + "\r\n\r\n").encode()


def temp_file_sizes(pid: int) -> list[int]:
    """Sizes of the files under the temporary folder that process ``pid`` has open (not its
    logs, which are in the repository, itself under /tmp in a fresh clone)."""
    sizes = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
            if target.startswith(tempfile.gettempdir()) and not target.startswith(str(ROOT)):
                sizes.append(os.stat(fd).st_size)
        except OSError:  # closed meanwhile
            continue
    return sizes


@pytest.fixture
def web():
    port = free_port()
    with asgi(f"limits-{uuid.uuid4().hex[:6]}", port) as process:
        yield port, process.pid


def test_a_declared_300_mb_body_is_refused_before_it_is_read(web):
    port, pid = web
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.sendall(request_head(IMPORT, f"Content-Length: {HUGE}"))
        status, body = read_response(connection)  # nothing of the body was sent
    assert status == 413
    assert body["error"]["code"] == "too_large"
    assert (
        f"{settings.TANDEM_IMPORT_MAX_BYTES + body_limits.MULTIPART_OVERHEAD_BYTES:,}"
        in (body["error"]["message"])
    )
    assert temp_file_sizes(pid) == []


def send_until_answered(connection: socket.socket, payload: bytes) -> tuple[int, str]:
    """Send ``payload`` again and again until the server answers; how much was sent, and the
    answer's status and error code, or "reset" when the server's close reached the sender
    first as a reset (which drops the answer with it)."""
    sent = 0
    try:
        while sent < HUGE and not select.select([connection], [], [], 0)[0]:
            connection.sendall(payload)
            sent += CHUNK
        status, body = read_response(connection)
    except (ConnectionResetError, BrokenPipeError):
        return sent, "reset"
    return sent, f"{status} {body['error']['code']}"


def test_a_chunked_300_mb_body_is_cut_off_at_the_limit_and_never_spooled_whole(web):
    port, pid = web
    limit = settings.TANDEM_IMPORT_MAX_BYTES + body_limits.MULTIPART_OVERHEAD_BYTES
    largest = [0]
    sending = threading.Event()

    def watch() -> None:
        while sending.is_set():
            largest[0] = max([largest[0], *temp_file_sizes(pid)])

    payload = f"{CHUNK:x}\r\n".encode() + b"x" * CHUNK + b"\r\n"
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.sendall(request_head(IMPORT, "Transfer-Encoding: chunked"))
        sending.set()
        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            sent, answer = send_until_answered(connection, payload)
        finally:
            sending.clear()
            watcher.join()

    # The answer is 413, unless the server's close reached the sender first as a reset: either
    # way the body was cut off at the limit.
    assert answer in ("413 too_large", "reset"), answer
    assert sent < 4 * limit, sent  # answered as the limit was reached, not after 300 MB
    assert largest[0] <= limit + CHUNK, largest[0]  # at most the limit was ever on disk
    assert temp_file_sizes(pid) == []


def test_other_routes_take_a_megabyte(web):
    port, _ = web
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.sendall(request_head("/api/projects/", f"Content-Length: {2 * 1024 * 1024}"))
        assert read_response(connection)[0] == 413
    with socket.create_connection(("127.0.0.1", port)) as connection:
        size = 512 * 1024
        connection.sendall(request_head("/api/projects/", f"Content-Length: {size}"))
        connection.sendall(b" " * size)
        assert read_response(connection)[0] == 401  # read, then refused as unauthenticated


def test_a_route_limit_is_its_setting_and_the_multipart_envelope(settings):
    settings.TANDEM_IMPORT_MAX_BYTES = 5_000
    settings.TANDEM_REQUEST_MAX_BYTES = 100
    assert body_limits.limit_for("/api/projects/12/import/") == 5_000 + 64 * 1024
    assert body_limits.limit_for("/api/projects/12/") == 100
    assert body_limits.limit_for("/api/task-files/") == (
        settings.TANDEM_DOWNLOAD_MAX_BYTES + 64 * 1024
    )
