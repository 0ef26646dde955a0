"""The evaluator self-check API, for managers (``annotation.projects.evaluator_checks``):

- ``GET /api/projects/{id}/evaluator-checks/?status=&task=&requested_from=`` → 200 ``{counts,
  checks: [{task, external_id, status, flagged, score, reason, stale, requested_at, checked_at,
  cleared_by, cleared_at}]}``: every task's check (``task`` may repeat; ``requested_from``, an ISO
  time: those requested since, as the import report follows the checks its import requested).
- ``POST /api/projects/{id}/evaluator-checks/`` ``{task_ids?: [...]}`` → 202 ``{counts}``: check
  these tasks again (every task with an evaluator when left out).
- ``POST /api/tasks/{id}/evaluator-check/clear/`` → 200, the task's check: a manager trusts an
  evaluator that passes without work (409 ``evaluator_check_not_clearable`` for any other).
"""

from typing import Any

from django.db.models import Count
from django.shortcuts import get_object_or_404
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import EvaluatorCheck, EvaluatorCheckStatus, Project, Task
from annotation.projects import access, evaluator_checks
from backend.accounts.roles import Capability
from backend.errors import DomainError

STATUSES = {choice.value for choice in EvaluatorCheckStatus}
LISTED_TASKS = 5000


def _managed_project(request: Request, pk: int) -> Project:
    project: Project = get_object_or_404(
        access.projects_where(request.user, Capability.MANAGE_TASKS), pk=pk
    )
    return project


def _row(check: EvaluatorCheck) -> dict[str, Any]:
    shown = evaluator_checks.as_json(check, check.task) or {}
    return {"task": check.task_id, "external_id": check.task.external_id, **shown}


def _ids(raw: Any, what: str) -> list[int]:
    if not isinstance(raw, list) or not all(isinstance(i, int) for i in raw):
        raise DomainError(f"{what} is a list of task ids.")
    if len(raw) > LISTED_TASKS:
        raise DomainError(f"{what} names at most {LISTED_TASKS} tasks.")
    return raw


class EvaluatorChecksView(APIView):
    token_resource = "projects"

    @extend_schema(responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        project = _managed_project(request, pk)
        checks = EvaluatorCheck.objects.filter(task__project=project)
        counts = dict(checks.values_list("status").annotate(n=Count("id")).order_by())
        wanted = request.query_params.get("status")
        if wanted:
            if wanted not in STATUSES:
                raise DomainError(f"status is one of {sorted(STATUSES)}.")
            checks = checks.filter(status=wanted)
        tasks = request.query_params.getlist("task")
        if tasks:
            if not all(t.isdecimal() for t in tasks):
                raise DomainError("task is a task id.")
            checks = checks.filter(task_id__in=[int(t) for t in tasks[:LISTED_TASKS]])
        since = request.query_params.get("requested_from")
        if since:
            try:
                moment = parse_datetime(since)
            except ValueError:  # well formed, but no such moment (February 30th)
                moment = None
            if moment is None:
                raise DomainError("requested_from is an ISO date and time.")
            checks = checks.filter(requested_at__gte=moment)
        rows = checks.select_related("task", "cleared_by").order_by("task_id")[:LISTED_TASKS]
        return Response({"counts": counts, "checks": [_row(check) for check in rows]})

    @extend_schema(request=dict, responses={202: dict})
    def post(self, request: Request, pk: int) -> Response:
        project = _managed_project(request, pk)
        body = request.data if isinstance(request.data, dict) else {}
        tasks = Task.objects.filter(project=project).exclude(evaluator={})
        if "task_ids" in body:
            ids = _ids(body["task_ids"], "task_ids")
            tasks = tasks.filter(pk__in=ids)
            missing = sorted(set(ids) - set(tasks.values_list("pk", flat=True)))
            if missing:
                raise DomainError(f"These tasks are not in project {project.pk}: {missing[:20]}")
        counts = evaluator_checks.request(project, list(tasks), request.user)
        return Response({"counts": dict(counts)}, status=202)


class ClearEvaluatorCheckView(APIView):
    token_resource = "tasks"

    @extend_schema(request=None, responses={200: dict})
    def post(self, request: Request, pk: int) -> Response:
        task = get_object_or_404(access.visible_tasks(request.user), pk=pk)
        access.require(request.user, task.project, Capability.MANAGE_TASKS)
        check = evaluator_checks.clear(task, request.user)
        return Response(_row(check))
