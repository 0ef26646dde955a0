"""An in-process WebSocket client of Tandem's ASGI routes, for tests that need no server.

It speaks the ASGI WebSocket protocol through asgiref's ``ApplicationCommunicator``
(``channels.testing`` needs Daphne, which Tandem does not install); the signed-in user is put
in the scope as the session middleware would. Tests using it run with
``django_db(transaction=True)`` and the in-memory channel layer.
"""

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator
from channels.routing import URLRouter
from django.db import connections

from backend.routing import websocket_urlpatterns

T = TypeVar("T")
IN_MEMORY_LAYER = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


class Socket:
    """A WebSocket client of the ASGI application, in the test's event loop."""

    def __init__(self, user: Any, path: str) -> None:
        scope = {"type": "websocket", "path": path, "headers": [], "subprotocols": []}
        self.app = ApplicationCommunicator(
            URLRouter(websocket_urlpatterns), {**scope, "user": user}
        )

    async def connect(self) -> None:
        await self.app.send_input({"type": "websocket.connect"})
        accepted = await self.app.receive_output(5)
        assert accepted["type"] == "websocket.accept", accepted

    async def send_to(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        frame = {"text": text_data} if text_data is not None else {"bytes": bytes_data}
        await self.app.send_input({"type": "websocket.receive", **frame})

    async def send_json_to(self, content: Any) -> None:
        await self.send_to(text_data=json.dumps(content))

    async def receive_json_from(self, timeout: float = 5) -> dict[str, Any]:
        output = await self.app.receive_output(timeout)
        assert output["type"] == "websocket.send", output  # not websocket.close
        return json.loads(output["text"])

    async def disconnect(self) -> None:
        await self.app.send_input({"type": "websocket.disconnect", "code": 1000})
        await self.app.wait(5)


def run(test: Callable[[], Awaitable[T]]) -> T:
    """Run an async test body, then close the database connection the consumers used (their
    ``database_sync_to_async`` calls share one thread), so the test database can be dropped."""

    async def body() -> T:
        try:
            return await test()
        finally:
            await sync_to_async(connections.close_all)()

    return asyncio.run(body())


async def socket_of(user: Any, path: str) -> Socket:
    socket = Socket(user, path)
    await socket.connect()
    return socket
