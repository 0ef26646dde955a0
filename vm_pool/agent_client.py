"""HTTP client of the in-desktop agent (see ``vm_pool.agent``), used by every provider.

The agent is reached directly, never through a proxy: on a unix socket (``unix:/path``, local
desktops) or at ``host:port`` (containers, machines on the private network).

Every call is bounded: the timeout of a call is how long the agent may stay silent (connecting,
sending, waiting for its answer) before the call fails with a ``DesktopError``, so a hung
agent ends the job that asked, never stalls it. Calls that wait on purpose (a command's own
timeout, a launch's window timeout, a long ``type``) get that wait plus a margin.
"""

import base64
import http.client
import json
import socket
from typing import Any
from urllib.parse import quote

from vm_pool.actions import ACTION_TIMEOUT_S, Action, ScreenSize
from vm_pool.providers.base import CommandResult, DesktopError, Health, Launched, Observation

HEALTH_TIMEOUT_S = 2.0
CALL_TIMEOUT_S = 30.0  # files and observations
# Added to a wait the agent does on purpose: the agent's own bookkeeping after it (killing a
# timed-out command and collecting its output) is not instant.
MARGIN_S = 10.0
READ_TIMEOUT_S = 120.0  # a file of up to 100 MB read back for an evaluator
DEVTOOLS_TIMEOUT_S = 30.0


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class AgentClient:
    def __init__(
        self, address: str, key: str, screen: ScreenSize, timeout: float = CALL_TIMEOUT_S
    ) -> None:
        self.address = address
        self.key = key
        self.screen = screen
        self.timeout = timeout

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.address.startswith("unix:"):
            return UnixHTTPConnection(self.address[len("unix:") :], timeout)
        host, _, port = self.address.rpartition(":")
        return http.client.HTTPConnection(host, int(port), timeout=timeout)

    def _request(
        self, method: str, path: str, timeout: float, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"X-Tandem-Agent-Key": self.key, "Content-Type": "application/json"}
        connection = self._connection(timeout)
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            return response.status, dict(response.headers), response.read()
        except TimeoutError as error:
            raise DesktopError(
                f"desktop agent at {self.address} did not answer {path} within {timeout:.0f}s"
            ) from error
        except (OSError, http.client.HTTPException) as error:
            raise DesktopError(
                f"desktop agent at {self.address} does not answer: {error}"
            ) from error
        finally:
            connection.close()

    def _json(
        self, method: str, path: str, timeout: float, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        status, _, data = self._request(method, path, timeout, body)
        payload = _payload(path, data)
        if status != 200:
            raise DesktopError(f"desktop agent {path}: {payload.get('error', status)}")
        return payload

    def health(self, timeout: float = HEALTH_TIMEOUT_S) -> Health:
        try:
            status, _, data = self._request("GET", "/health", timeout)
            body = _payload("/health", data)
        except DesktopError as error:
            return Health(False, str(error))
        if status == 200:
            return Health(True)
        dead = [name for name, alive in body.items() if name != "ok" and alive is False]
        return Health(False, "not running: " + ", ".join(dead) if dead else f"agent said {status}")

    def execute(self, action: Action) -> None:
        # Every action ends within ACTION_TIMEOUT_S on the desktop; then the agent answers.
        timeout = ACTION_TIMEOUT_S + MARGIN_S
        self._json("POST", "/execute", timeout, {"action": action.to_json()})

    def observe(self, settle: bool = True) -> Observation:
        status, headers, data = self._request("GET", f"/observe?settle={int(settle)}", self.timeout)
        if status != 200:
            raise DesktopError(f"desktop agent /observe: {data[:200]!r}")
        return Observation(
            png=data,
            screen=self.screen,
            settled=headers.get("X-Settled") == "1",
            waited_ms=float(headers.get("X-Waited-Ms") or 0),
        )

    def launch(
        self, argv: list[str], window_timeout: float = 0.0, window_title: str = ""
    ) -> Launched:
        body = {"argv": argv, "window_timeout": window_timeout, "window_title": window_title}
        reply = self._json("POST", "/launch", window_timeout + MARGIN_S, body)
        exited = reply.get("exited")
        return Launched(
            int(reply["pid"]),
            bool(reply.get("window", False)),
            None if exited is None else int(exited),
        )

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        body = {"argv": argv, "timeout": timeout}
        reply = self._json("POST", "/run", timeout + MARGIN_S, body)
        return CommandResult(
            int(reply["returncode"]),
            str(reply["output"]),
            str(reply.get("stdout", "")),
            str(reply.get("stderr", "")),
        )

    def put_file(self, path: str, data: bytes) -> None:
        body = {"path": path, "data_b64": base64.b64encode(data).decode()}
        self._json("POST", "/files", self.timeout, body)

    def read_file(self, path: str) -> bytes | None:
        status, _, data = self._request("GET", f"/files?path={quote(path)}", READ_TIMEOUT_S)
        if status == 404:
            return None
        if status != 200:
            raise DesktopError(f"desktop agent /files: {_payload('/files', data).get('error')}")
        return data

    def devtools(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", "/devtools", DEVTOOLS_TIMEOUT_S, request)

    def close(self) -> None:
        pass


def _payload(path: str, data: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(data or b"{}")
    except ValueError as error:
        raise DesktopError(f"desktop agent {path} answered with no JSON: {data[:200]!r}") from error
    if not isinstance(payload, dict):
        raise DesktopError(f"desktop agent {path} answered with no JSON object: {data[:200]!r}")
    return payload
