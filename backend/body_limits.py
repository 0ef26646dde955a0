"""Request-body limits, enforced at the ASGI level before Django reads a body.

Django's ASGI handler reads a whole request body into a temporary file before any middleware,
authentication or view runs, so a limit checked in a view comes after the disk was filled. This
middleware comes first: a request whose declared ``Content-Length`` is over its route's limit
is answered 413 without reading a byte of it; a body without a length (chunked) is counted as
it arrives and cut off at the limit (Django sees a client that went away and answers nothing),
then answered 413. Either way at most the limit is ever spooled.

The limit of a route is the first of ``ROUTE_LIMITS`` whose pattern matches the path, else
``TANDEM_REQUEST_MAX_BYTES``: task imports keep ``TANDEM_IMPORT_MAX_BYTES``, task-file
uploads ``TANDEM_DOWNLOAD_MAX_BYTES`` and archives of task files
``TANDEM_TASK_ARCHIVE_MAX_BYTES`` (larger: many files at once), each with room for the
multipart envelope.
"""

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MULTIPART_OVERHEAD_BYTES = 64 * 1024
# (path pattern, the setting that holds its limit)
ROUTE_LIMITS = [
    (re.compile(r"^/api/projects/\d+/import/$"), "TANDEM_IMPORT_MAX_BYTES"),
    (re.compile(r"^/api/task-files/$"), "TANDEM_DOWNLOAD_MAX_BYTES"),
    (re.compile(r"^/api/task-files/archive/$"), "TANDEM_TASK_ARCHIVE_MAX_BYTES"),
]


def limit_for(path: str) -> int:
    for pattern, setting in ROUTE_LIMITS:
        if pattern.match(path):
            return int(getattr(settings, setting)) + MULTIPART_OVERHEAD_BYTES
    return int(settings.TANDEM_REQUEST_MAX_BYTES)


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(send: Send, limit: int) -> None:
    body = json.dumps(
        {
            "error": {
                "status": 413,
                "code": "too_large",
                "message": f"The request body is over this route's limit of {limit:,} bytes.",
            }
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: see the module's docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = limit_for(scope["path"])
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _refuse(send, limit)
            return
        received = 0
        over = False
        answered = False

        async def counted() -> Message:
            nonlocal received, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True  # the application reads a client that went away
                    return {"type": "http.disconnect"}
            return message

        async def answering(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = True
            await send(message)

        await self.app(scope, counted, answering)
        if over and not answered:
            await _refuse(send, limit)
