"""HTTP client of the in-desktop agent (see ``vm_pool.agent``), used by every provider.

The agent is reached directly, never through a proxy: on a unix socket (``unix:/path``, local
desktops) or at ``host:port`` (containers, machines on the private network).

Whatever comes back from a desktop is hostile input: the desktop's programs may have taken its
agent's place. So every call is bounded, and every way it can go wrong is a ``DesktopError``:

- **in time**: a call has one wall-clock deadline, its timeout, for connecting, sending and
  reading the whole reply. Each socket operation waits only for the time left (a socket's own
  timeout restarts with every byte, so an agent dribbling its reply would never trip it), and
  a hung agent ends the job that asked, never stalls it. Calls that wait on purpose (a
  command's own timeout, a launch's window timeout, a long ``type``) get that wait plus a
  margin.
- **in size**: a reply may be as large as what that call can legitimately return, and no
  larger (``*_REPLY_BYTES``, from the agent's own caps). A larger ``Content-Length`` fails
  before the body is read; a body without one is read in chunks and fails as soon as it passes
  the cap, so no more than the cap is ever held.
- **in shape**: a JSON reply is parsed only once it is within its cap; one that is not JSON,
  nests too deep to parse, is not an object, or lacks a field or has one of the wrong kind fails
  with the reason. Text of the agent's that goes into an error message is cut short.
"""

import base64
import http.client
import json
import math
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from vm_pool.actions import ACTION_TIMEOUT_S, Action, ScreenSize
from vm_pool.agent.files import MAX_READ_BYTES
from vm_pool.agent.server import RUN_OUTPUT_CHARS, RUN_STDOUT_CHARS
from vm_pool.desktop import (
    MAX_TREE_BYTES,
    TREE_TIMEOUT_S,
    AccessibilityTree,
    CommandResult,
    DesktopError,
    Health,
    Input,
    Launched,
    Observation,
    input_to_json,
)
from vm_pool.devtools import MAX_MESSAGE_BYTES
from vm_pool.screen.png import png_size

HEALTH_TIMEOUT_S = 2.0
CALL_TIMEOUT_S = 30.0  # files and observations
# Added to a wait the agent does on purpose: the agent's own bookkeeping after it (killing a
# timed-out command and collecting its output) is not instant.
MARGIN_S = 10.0
READ_TIMEOUT_S = 120.0  # a file of up to 100 MB read back for an evaluator
DEVTOOLS_TIMEOUT_S = 30.0

# What each call can legitimately return. Health, an action, a launch, a file put in place and
# every error are a few hundred bytes of JSON.
SMALL_REPLY_BYTES = 1024 * 1024
# A command's stdout tail, and its stderr tail and the two joined (the agent's caps, in
# characters), each character written by JSON as at most 12 bytes (a surrogate pair's escapes).
RUN_REPLY_BYTES = 12 * (RUN_STDOUT_CHARS + 2 * RUN_OUTPUT_CHARS) + SMALL_REPLY_BYTES
# A file read back comes as its bytes, of at most the agent's cap.
FILE_REPLY_BYTES = MAX_READ_BYTES
# A tab list, or the value of JavaScript run in a tab: one DevTools message at most.
DEVTOOLS_REPLY_BYTES = MAX_MESSAGE_BYTES + SMALL_REPLY_BYTES
# The accessibility tree's XML (the agent's cap, in UTF-8 bytes), which JSON writes in at most
# 3 bytes for each of them (a two-byte character's \\uXXXX escape).
ACCESSIBILITY_REPLY_BYTES = 3 * MAX_TREE_BYTES + SMALL_REPLY_BYTES
READ_CHUNK_BYTES = 64 * 1024
EXCERPT_CHARS = 300  # of the agent's own text in an error message


def observation_reply_bytes(screen: ScreenSize) -> int:
    """The largest PNG of a screen this size: its pixels uncompressed (8-bit RGBA, and a filter
    byte a row), as deflate grows data it cannot compress by far less than 1/64, plus chunks."""
    rows = screen.height * (1 + 4 * screen.width)
    return rows + rows // 64 + 64 * 1024


class _DeadlineSocket(socket.socket):
    """A socket whose every wait ends by one deadline: connecting, sending and each read may
    block only for the time left, however slowly the other side answers."""

    deadline = 0.0

    def _wait_at_most_the_time_left(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the call's deadline has passed")
        self.settimeout(left)

    def connect(self, address: Any) -> None:
        self._wait_at_most_the_time_left()
        super().connect(address)

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._wait_at_most_the_time_left()  # sendall's timeout bounds the whole send
        super().sendall(data, flags)

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._wait_at_most_the_time_left()  # how http.client reads, through makefile()
        return super().recv_into(buffer, nbytes, flags)


class _AgentConnection(http.client.HTTPConnection):
    """One call's connection to the agent, on a unix socket or TCP, bound by its deadline."""

    def __init__(self, address: str, deadline: float) -> None:
        self.unix_path = address[len("unix:") :] if address.startswith("unix:") else None
        if self.unix_path is None:
            host, _, port = address.rpartition(":")
            super().__init__(host, int(port))
        else:
            super().__init__("localhost")
        self.deadline = deadline

    def connect(self) -> None:
        if self.unix_path is not None:
            sock = _DeadlineSocket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.deadline = self.deadline
            try:
                sock.connect(self.unix_path)
            except OSError:
                sock.close()
                raise
        else:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the call's deadline has passed")
            tcp = socket.create_connection((self.host, self.port), timeout=left)
            sock = _DeadlineSocket(tcp.family, tcp.type, tcp.proto, fileno=tcp.detach())
            sock.deadline = self.deadline
        self.sock = sock


class AgentClient:
    def __init__(
        self, address: str, key: str, screen: ScreenSize, timeout: float = CALL_TIMEOUT_S
    ) -> None:
        self.address = address
        self.key = key
        self.screen = screen
        self.timeout = timeout

    def _request(
        self,
        method: str,
        path: str,
        timeout: float,
        cap: int,
        body: dict[str, Any] | None = None,
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One call: its status, headers and body, the body at most ``cap`` bytes, all of it
        within ``timeout`` seconds."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"X-Tandem-Agent-Key": self.key, "Content-Type": "application/json"}
        connection = _AgentConnection(self.address, time.monotonic() + timeout)
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            return response.status, response.headers, self._body(response, path, cap)
        except TimeoutError as error:
            raise DesktopError(
                f"desktop agent at {self.address} did not answer {path} within its "
                f"{timeout:g}s deadline"
            ) from error
        except (OSError, http.client.HTTPException) as error:  # a bad status line is quoted
            raise DesktopError(
                f"desktop agent at {self.address} does not answer: {_excerpt(error)}"
            ) from error
        finally:
            connection.close()

    def _body(self, response: http.client.HTTPResponse, path: str, cap: int) -> bytes:
        over = (
            f"desktop agent at {self.address}: the reply to {path} is over its cap of {cap} bytes"
        )
        announced = response.length  # None without a Content-Length (or when chunked)
        if announced is not None:
            if announced > cap:
                raise DesktopError(f"{over} ({announced} bytes announced)")
            data = response.read(announced)
            if len(data) < announced:
                raise DesktopError(
                    f"desktop agent at {self.address} ended its reply to {path} after "
                    f"{len(data)} of {announced} bytes"
                )
            return data
        chunks: list[bytes] = []
        size = 0
        while chunk := response.read(min(READ_CHUNK_BYTES, cap + 1 - size)):
            size += len(chunk)
            if size > cap:
                raise DesktopError(over)
            chunks.append(chunk)
        return b"".join(chunks)

    def _json(
        self,
        method: str,
        path: str,
        timeout: float,
        body: dict[str, Any] | None = None,
        cap: int = SMALL_REPLY_BYTES,
    ) -> dict[str, Any]:
        status, _, data = self._request(method, path, timeout, cap, body)
        payload = _payload(path, data)
        if status != 200:
            raise DesktopError(f"desktop agent {path}: {_excerpt(payload.get('error', status))}")
        return payload

    def health(self, timeout: float = HEALTH_TIMEOUT_S) -> Health:
        try:
            status, _, data = self._request("GET", "/health", timeout, SMALL_REPLY_BYTES)
            body = _payload("/health", data)
        except DesktopError as error:
            return Health(False, str(error))
        if status == 200:
            return Health(True)
        dead = [name for name, alive in body.items() if name != "ok" and alive is False]
        if dead:
            return Health(False, _excerpt("not running: " + ", ".join(dead)))
        return Health(False, f"agent said {status}")

    def execute(self, action: Action) -> None:
        # Every action ends within ACTION_TIMEOUT_S on the desktop; then the agent answers.
        timeout = ACTION_TIMEOUT_S + MARGIN_S
        self._json("POST", "/execute", timeout, {"action": action.to_json()})

    def inject(self, event: Input) -> None:
        self._json("POST", "/input", self.timeout, {"input": input_to_json(event)})

    def observe(self, settle: bool = True) -> Observation:
        path = f"/observe?settle={int(settle)}"
        cap = observation_reply_bytes(self.screen)
        status, headers, data = self._request("GET", path, self.timeout, cap)
        if status != 200:
            raise DesktopError(f"desktop agent /observe: {_excerpt(data)}")
        with _reply_fields("/observe"):
            waited_ms = float(headers.get("X-Waited-Ms") or 0)
            if not math.isfinite(waited_ms):
                raise ValueError(f"X-Waited-Ms {waited_ms}")
            # Its header says what size a decoder would allocate: the screen's, or nothing.
            width, height = png_size(data)
            if (width, height) != (self.screen.width, self.screen.height):
                raise ValueError(
                    f"a {width}×{height} picture of a {self.screen.width}×{self.screen.height} "
                    "screen"
                )
        return Observation(
            png=data,
            screen=self.screen,
            settled=headers.get("X-Settled") == "1",
            waited_ms=waited_ms,
        )

    def launch(
        self, argv: list[str], window_timeout: float = 0.0, window_title: str = ""
    ) -> Launched:
        body = {"argv": argv, "window_timeout": window_timeout, "window_title": window_title}
        reply = self._json("POST", "/launch", window_timeout + MARGIN_S, body)
        with _reply_fields("/launch"):
            exited = reply.get("exited")
            return Launched(
                _integer(reply["pid"]),
                bool(reply.get("window", False)),
                None if exited is None else _integer(exited),
            )

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        body = {"argv": argv, "timeout": timeout}
        reply = self._json("POST", "/run", timeout + MARGIN_S, body, cap=RUN_REPLY_BYTES)
        with _reply_fields("/run"):
            return CommandResult(
                _integer(reply["returncode"]),
                _text(reply["output"]),
                _text(reply.get("stdout", "")),
                _text(reply.get("stderr", "")),
            )

    def put_file(self, path: str, data: bytes) -> None:
        body = {"path": path, "data_b64": base64.b64encode(data).decode()}
        self._json("POST", "/files", self.timeout, body)

    def read_file(self, path: str) -> bytes | None:
        status, _, data = self._request(
            "GET", f"/files?path={quote(path)}", READ_TIMEOUT_S, FILE_REPLY_BYTES
        )
        if status == 404:
            return None
        if status != 200:
            error = _payload("/files", data).get("error")
            raise DesktopError(f"desktop agent /files: {_excerpt(error)}")
        return data

    def devtools(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", "/devtools", DEVTOOLS_TIMEOUT_S, request, DEVTOOLS_REPLY_BYTES)

    def accessibility_tree(self) -> AccessibilityTree:
        reply = self._json(
            "GET", "/accessibility", TREE_TIMEOUT_S + MARGIN_S, cap=ACCESSIBILITY_REPLY_BYTES
        )
        with _reply_fields("/accessibility"):
            if "refused" in reply:
                return AccessibilityTree(None, _text(reply["refused"]))
            return AccessibilityTree(_text(reply["xml"]))

    def close(self) -> None:
        pass


def _payload(path: str, data: bytes) -> dict[str, Any]:
    """A reply's JSON object; anything else the agent sent is a ``DesktopError``."""
    try:
        payload = json.loads(data or b"{}")
    except RecursionError as error:
        raise DesktopError(f"desktop agent {path} answered JSON nested too deep") from error
    except ValueError as error:  # not JSON, not UTF-8, or a number past Python's limits
        raise DesktopError(
            f"desktop agent {path} answered with no JSON ({error}): {_excerpt(data)}"
        ) from error
    if not isinstance(payload, dict):
        raise DesktopError(f"desktop agent {path} answered with no JSON object: {_excerpt(data)}")
    return payload


@contextmanager
def _reply_fields(path: str) -> Iterator[None]:
    """A field of a reply that is missing or of the wrong kind is a ``DesktopError``."""
    try:
        yield
    except (KeyError, TypeError, ValueError, OverflowError) as error:
        raise DesktopError(
            f"desktop agent {path} answered an unusable reply: "
            f"{type(error).__name__}: {_excerpt(error)}"
        ) from error


def _integer(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"a JSON {type(value).__name__} where an integer belongs")
    return value


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a JSON {type(value).__name__} where text belongs")
    return value


def _excerpt(text: object) -> str:
    """The start of something the agent sent, for an error message; a JSON list or object is
    named, not written out (it may nest past what ``repr`` can write)."""
    if isinstance(text, bytes):
        shown = repr(text[:EXCERPT_CHARS])
    elif isinstance(text, list | dict):
        shown = f"a JSON {type(text).__name__}"
    else:
        shown = str(text)
    return shown if len(shown) <= EXCERPT_CHARS else shown[:EXCERPT_CHARS] + "…"
