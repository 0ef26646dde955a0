"""The desktop browser's DevTools protocol, spoken by the agent inside the desktop.

OSWorld's tasks drive the running Chrome over its debugging port (``--remote-debugging-port``,
9222 by their convention, often forwarded there by ``socat`` from 1337). In Tandem that port
lives in the desktop's own network namespace: nothing outside the desktop can reach it, and the
platform reaches it only through the agent, which asks here:

- ``request(method, path)``: the port's HTTP endpoints (``/json/list``, ``/json/new?<url>``,
  ``/json/close/<id>``, ``/json/activate/<id>``, ``/json/version``);
- ``evaluate(target_id, expression)``: run JavaScript in one tab (``Runtime.evaluate`` over the
  tab's WebSocket) and return its value, for the evaluators that read a page.

Standard library only, as the agent starts with the system's ``python3``.
"""

import base64
import http.client
import json
import os
import socket
import struct
from typing import Any
from urllib.parse import urlparse

PORT = 9222
HOST = "127.0.0.1"
TIMEOUT_S = 10.0
MAX_MESSAGE_BYTES = 32 * 1024 * 1024


class DevToolsError(RuntimeError):
    """The browser's debugging port is closed, or answered something unusable."""


def request(method: str, path: str, timeout: float = TIMEOUT_S) -> tuple[int, str]:
    """One request to the debugging port's HTTP endpoints (paths under ``/json`` only)."""
    if method not in ("GET", "PUT") or not path.startswith("/json"):
        raise DevToolsError(f"only GET and PUT of /json… paths are allowed, not {method} {path}")
    connection = http.client.HTTPConnection(HOST, PORT, timeout=timeout)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read(MAX_MESSAGE_BYTES).decode(errors="replace")
    except OSError as error:
        message = f"the browser's debugging port {PORT} does not answer: {error}"
        raise DevToolsError(message) from error
    finally:
        connection.close()


def tabs() -> list[dict[str, Any]]:
    """The open pages, the most recently active first (as the port lists them)."""
    status, body = request("GET", "/json/list")
    if status != 200:
        raise DevToolsError(f"/json/list answered {status}: {body[:200]}")
    return [t for t in json.loads(body) if t.get("type") == "page"]


class _WebSocket:
    """A client for one DevTools WebSocket: text frames, masked, no extensions."""

    def __init__(self, url: str, timeout: float) -> None:
        parsed = urlparse(url)
        if parsed.scheme != "ws" or parsed.hostname not in (HOST, "localhost"):
            raise DevToolsError(f"not a local DevTools WebSocket: {url}")
        self.sock = socket.create_connection((HOST, parsed.port or PORT), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {parsed.path} HTTP/1.1\r\nHost: {HOST}:{parsed.port or PORT}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise DevToolsError("the browser closed the WebSocket during its handshake")
            head += chunk
        status_line = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status_line:
            raise DevToolsError(f"WebSocket refused: {status_line!r}")
        self.buffer = head.split(b"\r\n\r\n", 1)[1]

    def send(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _read(self, count: int) -> bytes:
        while len(self.buffer) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise DevToolsError("the browser closed the WebSocket")
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def receive(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            if length > MAX_MESSAGE_BYTES:
                raise DevToolsError(f"a DevTools message of {length} bytes is too large")
            payload = self._read(length)
            opcode = first & 0x0F
            if opcode == 0x8:
                raise DevToolsError("the browser closed the WebSocket")
            if opcode in (0x1, 0x0):
                message += payload
                if first & 0x80:
                    return message.decode(errors="replace")

    def close(self) -> None:
        self.sock.close()


def evaluate(target_id: str, expression: str, timeout: float = TIMEOUT_S) -> Any:
    """The value of a JavaScript expression in one tab (awaiting a promise)."""
    target = next((t for t in tabs() if t.get("id") == target_id), None)
    if target is None or not target.get("webSocketDebuggerUrl"):
        raise DevToolsError(f"no open tab {target_id!r} to evaluate in")
    ws = _WebSocket(target["webSocketDebuggerUrl"], timeout)
    try:
        # userGesture: as Playwright's clicks are, a page script's click counts as the user's
        # (a link that opens a new tab is not popup-blocked).
        params = {
            "expression": expression,
            "returnByValue": True,
            "awaitPromise": True,
            "userGesture": True,
        }
        ws.send(json.dumps({"id": 1, "method": "Runtime.evaluate", "params": params}))
        while True:
            reply = json.loads(ws.receive())
            if reply.get("id") == 1:
                break
    finally:
        ws.close()
    if "error" in reply:
        raise DevToolsError(f"Runtime.evaluate failed: {reply['error']}")
    result = reply.get("result", {})
    if "exceptionDetails" in result:
        raise DevToolsError(f"the expression threw: {result['exceptionDetails'].get('text')}")
    return result.get("result", {}).get("value")
