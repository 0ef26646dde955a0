"""WebSocket consumers of the annotation app."""

import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from annotation.episodes import leases
from annotation.episodes import loop as episodes
from annotation.episodes.events import episode_group
from annotation.episodes.messages import Decide, MessageRefused, parse_message, read_frame
from annotation.episodes.ownership import EpisodeError
from annotation.models import Episode, EpisodeOutcome
from annotation.projects import access
from backend.errors import DomainError
from backend.notifications import user_group

logger = logging.getLogger(__name__)


class ServerFailed(DomainError):
    status_code = 500
    code = "server_error"


class CheckedJsonConsumer(AsyncJsonWebsocketConsumer):
    """A JSON socket that answers every frame it cannot read (binary, too large, not JSON)
    with an ``error`` event, and stays open: a client's mistake never closes it."""

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        try:
            content = read_frame(text_data)
        except MessageRefused as error:
            await self._error(error)
            return
        await self.receive_json(content, **kwargs)

    async def _error(self, error: DomainError, **extra: Any) -> None:
        payload = {"code": error.code, "message": error.message, **extra}
        if isinstance(error, MessageRefused):
            payload["field"] = error.field
            if payload.get("step") is None:
                payload["step"] = error.step
        await self.send_json({"event": "error", "payload": payload})


class NotificationConsumer(CheckedJsonConsumer):
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

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        await self._error(MessageRefused("This socket only sends notices; send nothing on it."))


class EpisodeConsumer(CheckedJsonConsumer):
    """The live loop's socket: the episode's annotator decides, people who may view it watch.

    Client → server: ``{"type": "decide", "step", "decision", "proposal", "thought", "action",
    "decision_ms", "observation"}``, ``{"type": "heartbeat"}``, ``{"type": "abandon"}``,
    ``{"type": "state"}``.
    Server → client: ``{"event", "payload"}`` with events ``state``, ``observation``,
    ``proposal_delta``, ``proposal``, ``model_unavailable``, ``decided``, ``decision_ack``,
    ``ended``, ``desktop_failed``, ``heartbeat_ack`` and ``error`` (``code``, ``message``, the
    ``step`` it answers when known and, for a message refused as malformed, its ``field``).
    Every message is checked by ``annotation.episodes.messages`` before anything is stored; a
    refused message, and any failure while handling one, is answered with an ``error`` event
    and the socket stays open.
    All the work happens in ``annotation.episodes.loop`` and in Celery jobs; this only relays.
    """

    async def connect(self) -> None:
        user = self.scope.get("user")
        self.episode_id = int(self.scope["url_route"]["kwargs"]["episode_id"])
        role = await self._role(user)
        if role is None:
            await self.close()
            return
        self.controls = role == "annotator"
        self.group = episode_group(self.episode_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        if self.controls:
            await self.channel_layer.group_add(user_group(user.pk), self.channel_name)
        await self.accept()
        if self.controls:  # the annotator is back: a paused episode runs again at once
            await database_sync_to_async(self._resume)()
        await self._send_state()
        if self.controls:
            await database_sync_to_async(episodes.resume_if_stalled)(self.episode_id)

    def _resume(self) -> None:
        leases.resume(Episode.objects.get(pk=self.episode_id))

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

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        step = None
        try:
            message = parse_message(content)
            if message == "state":
                await self._send_state()
                return
            if not self.controls:
                raise EpisodeError("This stream is view-only.")
            if isinstance(message, Decide):
                step = message.step
                await self._decide(message)
            elif message == "heartbeat":
                await database_sync_to_async(leases.heartbeat)(self.episode_id, self.user)
                await self.send_json({"event": "heartbeat_ack", "payload": {}})
            else:
                await database_sync_to_async(episodes.end_episode)(
                    self.episode_id, EpisodeOutcome.ABANDONED, "abandoned by the annotator"
                )
        except DomainError as error:
            await self._error(error, step=step)
        except Exception:
            logger.exception("episode %s: a socket message failed", self.episode_id)
            failed = ServerFailed("The server failed on this message; ask for the state again.")
            await self._error(failed, step=step)

    @property
    def user(self) -> Any:
        return self.scope["user"]

    async def _decide(self, message: Decide) -> None:
        # The screenshot decided on is checked only when the client names it.
        seen = {} if message.observation is None else {"observation": message.observation}
        receipt = await database_sync_to_async(episodes.decide)(
            self.episode_id,
            self.user,
            message.step,
            message.decision,
            proposal_rank=message.proposal,
            thought=message.thought,
            action=message.action,
            decision_ms=message.decision_ms,
            **seen,
        )
        await self.send_json(
            {
                "event": "decision_ack",
                "payload": {"step": receipt.step, "duplicate": receipt.duplicate},
            }
        )
