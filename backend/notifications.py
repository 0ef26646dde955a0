"""Live notices to signed-in users over WebSockets (the Channels layer on Redis).

Each user's sockets join the group ``user-<id>``; an episode's sockets join ``episode-<id>``.
Notices are sent after the transaction that caused them commits, so a client never hears of a
change it cannot yet read.
"""

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction


def user_group(user_id: int) -> str:
    return f"user-{user_id}"


def send_now(group: str, event: str, payload: dict[str, Any]) -> None:
    """Send at once, outside any transaction rule (progress that is not stored, e.g. deltas)."""
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(
            group, {"type": "notice", "event": event, "payload": payload}
        )


def notify_group(group: str, event: str, payload: dict[str, Any]) -> None:
    transaction.on_commit(lambda: send_now(group, event, payload))


def notify_user(user_id: int, event: str, payload: dict[str, Any]) -> None:
    notify_group(user_group(user_id), event, payload)
