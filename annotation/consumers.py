"""WebSocket consumers of the annotation app."""

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from backend.notifications import user_group


class NotificationConsumer(AsyncJsonWebsocketConsumer):
    """Pushes notices for the signed-in user (e.g. tasks assigned to them); refuses anonymous."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()  # before accept: the handshake is refused with 403
            return
        self.group = user_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"event": "hello", "payload": {"username": user.username}})

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def notice(self, message: dict[str, Any]) -> None:
        await self.send_json({"event": message["event"], "payload": message["payload"]})
