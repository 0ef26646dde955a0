"""The gold API, for a project's managers (``annotation.quality.gold``):

- ``GET /api/episodes/{id}/gold/`` → 200 ``{steps: [{step, answers, source}]}``.
- ``PUT /api/episodes/{id}/gold/`` ``{steps?: [{step, answers?}]}`` → 200, the same: the named
  steps (every decided step when ``steps`` is left out) become gold, each with its answers or
  the answer its final action makes. A refusal (400 ``bad_gold``, 409 ``gold_not_allowed``) says
  why and stores nothing.
- ``PUT /api/episodes/{id}/honeypot/`` ``{decoys?: {"<step>": {thought, action}}}`` → 200
  ``{task, episode, decoys, active}``: the episode's task becomes a honeypot with its gold
  (``annotation.quality.honeypots``); ``DELETE`` retires it (204). Managers only; a refusal
  stores nothing. ``GET /api/projects/{id}/honeypots/`` lists them, with their runs' figures.
- ``GET /api/projects/{id}/scorecards/?ended_from=&ended_until=&as=csv`` → every annotator's
  scorecard (``annotation.quality.scorecards``) with the pairs' agreement and the timeline, for
  those who view the project's episodes; ``GET /api/projects/{id}/scorecards/mine/`` → the
  caller's own, for anyone who works in it (gold counted up to yesterday), with the feedback
  they were given (``annotation.quality.feedback``).
"""

from datetime import UTC, datetime, time
from typing import Any

from django.db.models import Count, Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import GoldStep, Honeypot, Project
from annotation.projects import access
from annotation.quality import feedback, gold, honeypots, scorecards
from backend.accounts.roles import Capability
from backend.errors import DomainError


def _gold_json(steps: list[GoldStep]) -> dict[str, Any]:
    return {
        "steps": [
            {"step": g.step.index, "answers": g.answers, "source": g.source}
            for g in sorted(steps, key=lambda g: g.step.index)
        ]
    }


def _managed_episode(request: Request, pk: int) -> Any:
    """An episode the caller manages the project of; 404 when they cannot see it."""
    episode = get_object_or_404(access.visible_episodes(request.user), pk=pk)
    access.require(request.user, episode.task.project, Capability.MANAGE_TASKS)
    return episode


class GoldView(APIView):
    token_resource = "episodes"

    @extend_schema(responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        episode = _managed_episode(request, pk)
        return Response(_gold_json(list(GoldStep.objects.filter(step__episode=episode))))

    @extend_schema(request=dict, responses={200: dict})
    def put(self, request: Request, pk: int) -> Response:
        episode = _managed_episode(request, pk)
        body = request.data if isinstance(request.data, dict) else {}
        steps = body.get("steps")
        if steps is not None and not isinstance(steps, list):
            raise gold.BadGold("steps is a list of {step, answers}.")
        return Response(_gold_json(gold.set_gold(episode, request.user, steps)))


def _honeypot_json(honeypot: Honeypot) -> dict[str, Any]:
    return {
        "task": honeypot.task_id,
        "external_id": honeypot.task.external_id,
        "episode": honeypot.gold_episode_id,
        "decoys": honeypot.decoys,
        "active": honeypot.active,
    }


class HoneypotView(APIView):
    token_resource = "episodes"

    @extend_schema(request=dict, responses={200: dict})
    def put(self, request: Request, pk: int) -> Response:
        episode = _managed_episode(request, pk)
        body = request.data if isinstance(request.data, dict) else {}
        made = honeypots.make_honeypot(episode, request.user, body.get("decoys"))
        return Response(_honeypot_json(made))

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        episode = _managed_episode(request, pk)
        honeypot = get_object_or_404(Honeypot, task_id=episode.task_id)
        honeypots.retire(honeypot)
        return Response(status=204)


class HoneypotsView(APIView):
    token_resource = "projects"

    @extend_schema(responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        project = get_object_or_404(Project, pk=pk)
        access.require(request.user, project, Capability.MANAGE_TASKS)
        rows = (
            Honeypot.objects.filter(task__project=project)
            .select_related("task")
            .annotate(
                runs_count=Count("runs", distinct=True),
                scored=Count("runs__verdicts"),
                right=Count("runs__verdicts", filter=Q(runs__verdicts__right=True)),
            )
            .order_by("task__external_id")
        )
        return Response(
            {
                "honeypots": [
                    {
                        **_honeypot_json(h),
                        "runs": h.runs_count,
                        "gold_steps_scored": h.scored,
                        "gold_steps_right": h.right,
                    }  # fmt: skip
                    for h in rows
                ]
            }
        )


def _period(request: Request) -> dict[str, Any]:
    period: dict[str, Any] = {}
    for name in ("ended_from", "ended_until"):
        value = request.query_params.get(name)
        if value:
            try:
                parsed = parse_datetime(value) or _date(value)
            except ValueError:
                parsed = None
            if parsed is None:
                raise BadPeriod(f"{name} is a date or a date and time, not {value!r}.")
            period[name] = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return period


def _date(value: str) -> Any:
    day = parse_date(value)
    return None if day is None else datetime.combine(day, time.min, tzinfo=UTC)


class BadPeriod(DomainError):
    status_code = 400
    code = "bad_period"


class ScorecardsView(APIView):
    token_resource = "projects"

    @extend_schema(responses={200: dict})
    def get(self, request: Request, pk: int) -> Any:
        project = get_object_or_404(Project, pk=pk)
        access.require(request.user, project, Capability.VIEW_EPISODES)
        cards = scorecards.scorecards(project.pk, **_period(request))
        if request.query_params.get("as") == "csv":
            response = HttpResponse(scorecards.as_csv(cards), content_type="text/csv")
            response["Content-Disposition"] = f'attachment; filename="scorecards-{pk}.csv"'
            return response
        period = _period(request)
        return Response(
            {
                "scorecards": scorecards.as_json(cards),
                "pairs": scorecards.pairs(project.pk, **period),
                "tasks": scorecards.tasks(project.pk, **period),
                "timeline": scorecards.timeline(project.pk, **period),
            }
        )


class MyScorecardView(APIView):
    token_resource = "projects"

    @extend_schema(responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        project = get_object_or_404(Project, pk=pk)
        access.require(request.user, project, Capability.WORK_QUEUE)
        today = datetime.combine(timezone.now().astimezone(UTC).date(), time.min, tzinfo=UTC)
        if set(request.query_params) & {"ended_from", "ended_until"}:
            raise BadPeriod("Your own scorecard covers the whole project; it takes no period.")
        cards = scorecards.scorecards(project.pk, annotator_id=request.user.pk, checks_before=today)
        return Response(
            {
                "scorecard": scorecards.as_json(cards)[0] if cards else None,
                "feedback": feedback.for_annotator(project, request.user),
            }
        )
