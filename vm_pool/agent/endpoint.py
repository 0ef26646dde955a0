"""The agent's control endpoint: a small HTTP API for whoever owns the desktop, on a unix
socket (local desktops) or a TCP port (containers, machines), served by ``vm_pool.agent.server``.

- ``GET /health``: Xvfb, window manager and VNC server are alive and VNC greets a connection
- ``POST /launch``: start a program in the desktop, ``{"argv": [...], "window_timeout": s}`` →
  ``{"pid", "window"}``; with a timeout, it returns once the window manager maps a new window
  (``window``: true) or when the timeout passes (false: a program with no window of its own);
  a program that does not exist (cannot start, or a shell's 127) is an error; one that ends
  before any window shows answers ``exited`` with its code
- ``POST /run``: run a command to completion, ``{"argv", "timeout"}`` →
  ``{"returncode", "output", "stdout", "stderr"}``
- ``POST /files``: put a file in place, ``{"path", "data_b64"}``: relative and ``~/`` paths are
  under HOME; a path that leads outside HOME and ``/tmp`` (``..``, an absolute path elsewhere, a
  symlink) is refused
- ``GET /files?path=``: a file's bytes, from HOME or ``/tmp`` only (404 when there is none)
- ``POST /devtools``: a request to the desktop browser's debugging port, which only the agent
  can reach, ``{"method", "path"}`` → ``{"status", "body"}``; with ``{"target", "expression"}``,
  the value of JavaScript run in that tab (``vm_pool.devtools``)
- ``POST /execute``: execute an action of the action space, ``{"action": {...}}``
- ``GET /observe``: a PNG screenshot (``?settle=1`` waits until the screen settles)
- ``GET /accessibility``: the desktop's AT-SPI tree as OSWorld's XML, ``{"xml"}``, or
  ``{"refused": why}`` for a tree past its bounds (``vm_pool.agent.accessibility``)

Every request must carry the desktop's agent key in ``X-Tandem-Agent-Key``; a request without
it, or with another, is answered 401 and does nothing. A malformed request is a 400 naming the
error.
"""

import base64
import hmac
import json
import os
import socketserver
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlparse

from vm_pool.agent import accessibility
from vm_pool.agent.files import PathRefused


class ServedDesktop(Protocol):
    """What the endpoint asks of the desktop it serves (``vm_pool.agent.server.Desktop``)."""

    agent_key: str
    env: dict[str, str]
    lock: Any  # held around the desktop's control: one action or screenshot at a time

    def health(self) -> dict[str, Any]: ...
    def control(self) -> Any: ...
    def launch(
        self, argv: list[str], window_timeout: float = 0.0, window_title: str = ""
    ) -> dict[str, Any]: ...
    def run(self, argv: list[str], timeout: float) -> dict[str, Any]: ...
    def put_file(self, path: str, data: bytes) -> str: ...
    def read_file(self, path: str) -> bytes | None: ...
    def inject(self, data: Any) -> None: ...


def unix_path(address: str) -> str | None:
    """The socket path of a ``unix:/path`` address, None for ``host:port``."""
    return address[len("unix:") :] if address.startswith("unix:") else None


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


class _Quiet:
    """A request that fails (its client hung up, or sent garbage) is the client's business:
    socketserver would print its traceback, and anything on the desktop can connect, so the
    agent's log (a file on the host) would grow at its will."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class UnixHTTPServer(_Quiet, socketserver.ThreadingUnixStreamServer):
    """The agent's HTTP API on a unix socket only the desktop's owner can open."""

    daemon_threads = True


class TcpHTTPServer(_Quiet, ThreadingHTTPServer):
    """The agent's HTTP API on a TCP port (a desktop machine of its own, behind its key)."""


def make_handler(desktop: ServedDesktop) -> type[BaseHTTPRequestHandler]:
    from vm_pool.actions import Action, InvalidAction  # weight: loaded when the agent serves

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _authorised(self) -> bool:
            given = self.headers.get("X-Tandem-Agent-Key", "")
            if hmac.compare_digest(given.encode(), desktop.agent_key.encode()):
                return True
            self._json(HTTPStatus.UNAUTHORIZED, {"error": "wrong or missing agent key"})
            return False

        def _json(self, status: HTTPStatus, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}")

        def do_GET(self) -> None:
            if not self._authorised():
                return
            url = urlparse(self.path)
            if url.path == "/health":
                health = desktop.health()
                self._json(
                    HTTPStatus.OK if health["ok"] else HTTPStatus.SERVICE_UNAVAILABLE, health
                )
            elif url.path == "/observe":
                settle = parse_qs(url.query).get("settle", ["1"])[0] == "1"
                with desktop.lock:
                    observation = desktop.control().observe(settle=settle)
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(observation.png)))
                self.send_header("X-Settled", "1" if observation.settled else "0")
                self.send_header("X-Waited-Ms", f"{observation.waited_ms:.1f}")
                self.end_headers()
                self.wfile.write(observation.png)
            elif url.path == "/files":
                self._send_file(parse_qs(url.query).get("path", [""])[0])
            elif url.path == "/accessibility":
                try:
                    self._json(HTTPStatus.OK, accessibility.read_tree(desktop.env))
                except (RuntimeError, OSError) as error:
                    self._json(
                        HTTPStatus.BAD_REQUEST, {"error": f"{type(error).__name__}: {error}"}
                    )
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no such endpoint {url.path}"})

        def _send_file(self, path: str) -> None:
            try:
                data = desktop.read_file(path)
            except (PathRefused, OSError) as error:
                self._json(HTTPStatus.BAD_REQUEST, {"error": f"{type(error).__name__}: {error}"})
                return
            if data is None:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no file {path!r}"})
                return
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            if not self._authorised():
                return
            try:
                body = self._body()
                if self.path == "/launch":
                    timeout = float(body.get("window_timeout", 0))
                    title = str(body.get("window_title", ""))
                    self._json(HTTPStatus.OK, desktop.launch(list(body["argv"]), timeout, title))
                elif self.path == "/run":
                    result = desktop.run(list(body["argv"]), float(body.get("timeout", 30)))
                    self._json(HTTPStatus.OK, result)
                elif self.path == "/files":
                    data = base64.b64decode(body["data_b64"])
                    self._json(HTTPStatus.OK, {"path": desktop.put_file(body["path"], data)})
                elif self.path == "/devtools":
                    self._json(HTTPStatus.OK, _devtools(body))
                elif self.path == "/input":
                    desktop.inject(body["input"])
                    self._json(HTTPStatus.OK, {})
                elif self.path == "/execute":
                    action = Action.from_json(body["action"])
                    with desktop.lock:
                        desktop.control().execute(action)
                    self._json(HTTPStatus.OK, {})
                else:
                    self._json(HTTPStatus.NOT_FOUND, {"error": f"no such endpoint {self.path}"})
            except (KeyError, ValueError, TypeError, InvalidAction, OSError, RuntimeError) as error:
                # RuntimeError: a DesktopError of the controller (an action past its time limit).
                self._json(HTTPStatus.BAD_REQUEST, {"error": f"{type(error).__name__}: {error}"})

    return Handler


def _devtools(body: dict[str, Any]) -> dict[str, Any]:
    from vm_pool import devtools  # weight: only a devtools request loads it

    try:
        if "expression" in body:
            value = devtools.evaluate(str(body["target"]), str(body["expression"]))
            return {"value": value}
        status, text = devtools.request(str(body.get("method", "GET")), str(body["path"]))
        return {"status": status, "body": text}
    except devtools.DevToolsError as error:
        return {"error": str(error)}


def serve(address: str, handler: type[BaseHTTPRequestHandler]) -> socketserver.BaseServer:
    path = unix_path(address)
    if path is None:
        return TcpHTTPServer(host_port(address), handler)
    Path(path).unlink(missing_ok=True)
    old_mask = os.umask(0o077)  # the socket is the owner's alone from the moment it exists
    try:
        return UnixHTTPServer(path, handler)
    finally:
        os.umask(old_mask)
