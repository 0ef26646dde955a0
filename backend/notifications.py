"""Live notices to signed-in users over WebSockets (the Channels layer on Redis).

Each user's sockets join the group ``user-<id>``; an episode's sockets join ``episode-<id>``.
Notices are sent after the transaction that caused them commits, so a client never hears of a
change it cannot yet read.

Synchronous code sends through one event loop per process, kept in a thread of its own: the
layer keeps its Redis connections per event loop, and ``async_to_sync`` would start a thread, a
loop and a connection for every notice (a rollout's step, a proposal's streamed text). Code that
runs in an event loop already (a proposal streaming its text) awaits ``send_async`` in its own.
"""

import asyncio
import os
import threading
from typing import Any

from channels.layers import get_channel_layer
from django.db import transaction

SEND_TIMEOUT_S = 10.0


def user_group(user_id: int) -> str:
    return f"user-{user_id}"


class _NoticeLoop:
    """The process's event loop for notices of synchronous code; started on first use, and
    again in a forked child (a thread does not survive a fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._loop, self._pid = asyncio.new_event_loop(), os.getpid()
                threading.Thread(target=self._loop.run_forever, name="notices", daemon=True).start()
            return self._loop


_notices = _NoticeLoop()


async def send_async(group: str, event: str, payload: dict[str, Any]) -> None:
    """Send at once from a running event loop, in that loop."""
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(group, {"type": "notice", "event": event, "payload": payload})


def send_now(group: str, event: str, payload: dict[str, Any]) -> None:
    """Send at once, outside any transaction rule (progress that is not stored, e.g. deltas);
    returns once the layer has taken the notice."""
    if get_channel_layer() is not None:
        sent = asyncio.run_coroutine_threadsafe(send_async(group, event, payload), _notices.loop())
        sent.result(SEND_TIMEOUT_S)


def notify_group(group: str, event: str, payload: dict[str, Any]) -> None:
    transaction.on_commit(lambda: send_now(group, event, payload))


def notify_user(user_id: int, event: str, payload: dict[str, Any]) -> None:
    notify_group(user_group(user_id), event, payload)
