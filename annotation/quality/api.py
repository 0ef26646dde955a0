"""The gold API, for a project's managers (``annotation.quality.gold``):

- ``GET /api/episodes/{id}/gold/`` → 200 ``{steps: [{step, answers, source}]}``.
- ``PUT /api/episodes/{id}/gold/`` ``{steps?: [{step, answers?}]}`` → 200, the same: the named
  steps (every decided step when ``steps`` is left out) become gold, each with its answers or
  the answer its final action makes. A refusal (400 ``bad_gold``, 409 ``gold_not_allowed``) says
  why and stores nothing.
"""

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import GoldStep
from annotation.projects import access
from annotation.quality import gold
from backend.accounts.roles import Capability


def _gold_json(steps: list[GoldStep]) -> dict[str, Any]:
    return {
        "steps": [
            {"step": g.step.index, "answers": g.answers, "source": g.source}
            for g in sorted(steps, key=lambda g: g.step.index)
        ]
    }


class GoldView(APIView):
    token_resource = "episodes"

    def _episode(self, request: Request, pk: int) -> Any:
        episode = get_object_or_404(access.visible_episodes(request.user), pk=pk)
        access.require(request.user, episode.task.project, Capability.MANAGE_TASKS)
        return episode

    @extend_schema(responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        episode = self._episode(request, pk)
        return Response(_gold_json(list(GoldStep.objects.filter(step__episode=episode))))

    @extend_schema(request=dict, responses={200: dict})
    def put(self, request: Request, pk: int) -> Response:
        episode = self._episode(request, pk)
        body = request.data if isinstance(request.data, dict) else {}
        steps = body.get("steps")
        if steps is not None and not isinstance(steps, list):
            raise gold.BadGold("steps is a list of {step, answers}.")
        return Response(_gold_json(gold.set_gold(episode, request.user, steps)))
