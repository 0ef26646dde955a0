"""The demonstration API of an episode (``annotation.episodes.demonstrations``), for its annotator:

- ``POST /api/episodes/{id}/take-over/`` → 201 ``{from_step, over_proposal, ended}``: drive the
  desktop from the open step; ``POST …/hand-back/`` → 202: the recorded input becomes steps and
  the model proposes for the screen left; ``POST …/finish-demonstration/`` → 202: the same, then
  a ``finished`` step ends the episode.
- ``POST /api/episodes/{id}/control-stream/`` → 201 ``{url, token, view_only: false,
  expires_at, last_refusal}``: the control stream of the open demonstration, through the
  recording gate; ``last_refusal`` says why the gate closed the previous one, if it did.
- ``PUT /api/episodes/{id}/steps/{index}/thought/`` ``{thought}`` → 200 ``{thought, drafted_by,
  approved}``: the thought of a demonstrated step, or the approval of its draft (the same text).
- ``POST /api/episodes/{id}/draft-thoughts/`` → 202 ``{steps}``: the episode's model endpoint
  drafts the thoughts still missing (``steps`` of them), each marked as its draft.

Every refusal is a 4xx with its reason; nothing is stored then. Tokens need the ``episodes``
scopes, as the episode's stream does.
"""

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.episodes import demonstrations, thoughts
from annotation.models import Episode
from annotation.projects import access
from vm_pool.serializers import StreamSerializer


class ThoughtSerializer(serializers.Serializer):
    thought = serializers.CharField(max_length=thoughts.MAX_THOUGHT_CHARS, trim_whitespace=True)


class DrivingSerializer(serializers.Serializer):
    from_step = serializers.IntegerField()
    over_proposal = serializers.IntegerField(allow_null=True)
    ended = serializers.BooleanField()


def _episode(request: Request, pk: int) -> Episode:
    """The episode when the caller may see it (404 otherwise, as for the episode itself)."""
    return get_object_or_404(access.visible_episodes(request.user), pk=pk)


class DemonstrationView(APIView):
    token_resource = "episodes"
    operation = ""

    @extend_schema(request=None, responses={201: DrivingSerializer, 202: DrivingSerializer})
    def post(self, request: Request, pk: int) -> Response:
        episode = _episode(request, pk)
        if self.operation == "take-over":
            driving = demonstrations.take_over(episode.pk, request.user)
            code = status.HTTP_201_CREATED
        else:
            finish = self.operation == "finish-demonstration"
            driving = demonstrations.end(episode.pk, request.user, finish=finish)
            code = status.HTTP_202_ACCEPTED
        return Response(demonstrations.driving_json(driving), status=code)


class ControlStreamView(APIView):
    token_resource = "episodes"

    @extend_schema(request=None, responses={201: StreamSerializer})
    def post(self, request: Request, pk: int) -> Response:
        episode = _episode(request, pk)
        stream = demonstrations.control_stream(episode.pk, request.user)
        body = {**StreamSerializer(stream).data, "last_refusal": stream["last_refusal"]}
        return Response(body, status=status.HTTP_201_CREATED)


class DraftThoughtsView(APIView):
    token_resource = "episodes"

    @extend_schema(request=None, responses={202: dict})
    def post(self, request: Request, pk: int) -> Response:
        episode = _episode(request, pk)
        waiting = thoughts.ask_for_drafts(episode.pk, request.user)
        return Response({"steps": waiting}, status=status.HTTP_202_ACCEPTED)


class ThoughtView(APIView):
    token_resource = "episodes"

    @extend_schema(request=ThoughtSerializer, responses={200: dict})
    def put(self, request: Request, pk: int, index: int) -> Response:
        episode = _episode(request, pk)
        body = ThoughtSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        thought = thoughts.write(episode.pk, request.user, index, body.validated_data["thought"])
        return Response(_thought_json(thought))


def _thought_json(thought: thoughts.Thought) -> dict[str, Any]:
    return {"thought": thought.text, "drafted_by": thought.drafted_by, "approved": thought.approved}
