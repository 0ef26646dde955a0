"""WebSocket consumers of the annotation app."""

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from annotation import access, episodes
from annotation.models import Episode, EpisodeOutcome
from backend.errors import DomainError
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


class EpisodeConsumer(AsyncJsonWebsocketConsumer):
    """The live loop's socket: the episode's annotator decides, people who may view it watch.

    Client → server: ``{"type": "decide", "step", "decision", "proposal", "thought", "action",
    "decision_ms"}``, ``{"type": "heartbeat"}``, ``{"type": "abandon"}``, ``{"type": "state"}``.
    Server → client: ``{"event", "payload"}`` with events ``state``, ``observation``,
    ``proposal_delta``, ``proposal``, ``model_unavailable``, ``decided``, ``decision_ack``,
    ``ended``, ``desktop_failed``, ``heartbeat_ack`` and ``error`` (``code``, ``message``).
    All the work happens in ``annotation.episodes`` and in Celery jobs; this only relays.
    """

    async def connect(self) -> None:
        user = self.scope.get("user")
        self.episode_id = int(self.scope["url_route"]["kwargs"]["episode_id"])
        role = await self._role(user)
        if role is None:
            await self.close()
            return
        self.controls = role == "annotator"
        self.group = episodes.episode_group(self.episode_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        if self.controls:
            await self.channel_layer.group_add(user_group(user.pk), self.channel_name)
        await self.accept()
        await self._send_state()
        if self.controls:
            await database_sync_to_async(episodes.resume_if_stalled)(self.episode_id)

    @database_sync_to_async
    def _role(self, user: Any) -> str | None:
        if user is None or not user.is_authenticated:
            return None
        episode = access.visible_episodes(user).filter(pk=self.episode_id).first()
        if episode is None:
            return None
        return "annotator" if episode.annotator_id == user.pk else "viewer"

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def notice(self, message: dict[str, Any]) -> None:
        await self.send_json({"event": message["event"], "payload": message["payload"]})

    async def _send_state(self) -> None:
        state = await database_sync_to_async(
            lambda: episodes.episode_state(
                Episode.objects.select_related("task").get(pk=self.episode_id)
            )
        )()
        await self.send_json({"event": "state", "payload": state})

    async def _error(self, error: DomainError, **extra: Any) -> None:
        await self.send_json(
            {"event": "error", "payload": {"code": error.code, "message": error.message, **extra}}
        )

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "state":
            await self._send_state()
            return
        if not self.controls:
            await self._error(episodes.EpisodeError("This stream is view-only."))
            return
        user = self.scope["user"]
        try:
            if kind == "decide":
                receipt = await database_sync_to_async(episodes.decide)(
                    self.episode_id,
                    user,
                    int(content["step"]),
                    str(content["decision"]),
                    proposal_rank=content.get("proposal"),
                    thought=str(content.get("thought", "")),
                    action=content.get("action"),
                    decision_ms=content.get("decision_ms"),
                )
                await self.send_json(
                    {
                        "event": "decision_ack",
                        "payload": {"step": receipt.step, "duplicate": receipt.duplicate},
                    }
                )
            elif kind == "heartbeat":
                await database_sync_to_async(episodes.heartbeat)(self.episode_id, user)
                await self.send_json({"event": "heartbeat_ack", "payload": {}})
            elif kind == "abandon":
                await database_sync_to_async(episodes.end_episode)(
                    self.episode_id, EpisodeOutcome.ABANDONED, "abandoned by the annotator"
                )
            else:
                raise episodes.InvalidDecision(f"unknown message type {kind!r}")
        except DomainError as error:
            await self._error(
                error, step=content.get("step") if isinstance(content, dict) else None
            )
        except (KeyError, TypeError, ValueError) as error:
            await self._error(episodes.InvalidDecision(f"malformed message: {error}"))
