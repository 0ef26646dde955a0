"""HTTP client of the in-desktop agent (see ``vm_pool.agent``), used by every provider.

The agent is reached directly, never through a proxy: on a unix socket (``unix:/path``, local
desktops) or at ``host:port`` (containers, machines on the private network).
"""

import base64
import http.client
import json
import socket
from typing import Any

from vm_pool.actions import Action, ScreenSize
from vm_pool.providers.base import CommandResult, DesktopError, Health, Launched, Observation


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
    def __init__(self, address: str, key: str, screen: ScreenSize, timeout: float = 30.0) -> None:
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
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"X-Tandem-Agent-Key": self.key, "Content-Type": "application/json"}
        connection = self._connection(timeout or self.timeout)
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            return response.status, dict(response.headers), response.read()
        except (OSError, http.client.HTTPException) as error:
            raise DesktopError(
                f"desktop agent at {self.address} does not answer: {error}"
            ) from error
        finally:
            connection.close()

    def _json(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        status, _, data = self._request(method, path, body, timeout=timeout)
        payload = json.loads(data or b"{}")
        if status != 200:
            raise DesktopError(f"desktop agent {path}: {payload.get('error', status)}")
        return payload

    def health(self, timeout: float = 2.0) -> Health:
        try:
            status, _, data = self._request("GET", "/health", timeout=timeout)
        except DesktopError as error:
            return Health(False, str(error))
        if status == 200:
            return Health(True)
        body = json.loads(data or b"{}")
        dead = [name for name, alive in body.items() if name != "ok" and alive is False]
        return Health(False, "not running: " + ", ".join(dead) if dead else f"agent said {status}")

    def execute(self, action: Action) -> None:
        self._json("POST", "/execute", {"action": action.to_json()})

    def observe(self, settle: bool = True) -> Observation:
        status, headers, data = self._request("GET", f"/observe?settle={int(settle)}")
        if status != 200:
            raise DesktopError(f"desktop agent /observe: {data[:200]!r}")
        return Observation(
            png=data,
            screen=self.screen,
            settled=headers.get("X-Settled") == "1",
            waited_ms=float(headers.get("X-Waited-Ms") or 0),
        )

    def launch(self, argv: list[str], window_timeout: float = 0.0) -> Launched:
        body = {"argv": argv, "window_timeout": window_timeout}
        reply = self._json("POST", "/launch", body, timeout=window_timeout + 10)
        return Launched(int(reply["pid"]), bool(reply.get("window", False)))

    def run(self, argv: list[str], timeout: float) -> CommandResult:
        body = self._json("POST", "/run", {"argv": argv, "timeout": timeout})
        return CommandResult(int(body["returncode"]), str(body["output"]))

    def put_file(self, path: str, data: bytes) -> None:
        self._json("POST", "/files", {"path": path, "data_b64": base64.b64encode(data).decode()})

    def close(self) -> None:
        pass
