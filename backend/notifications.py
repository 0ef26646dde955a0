"""Live notices to signed-in users over WebSockets (the Channels layer on Redis).

Each user's sockets join the group ``user-<id>``. Notices are sent after the transaction that
caused them commits, so a client never hears of a change it cannot yet read.
"""

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction


def user_group(user_id: int) -> str:
    return f"user-{user_id}"


def notify_user(user_id: int, event: str, payload: dict[str, Any]) -> None:
    def send() -> None:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(
                user_group(user_id), {"type": "notice", "event": event, "payload": payload}
            )

    transaction.on_commit(send)
