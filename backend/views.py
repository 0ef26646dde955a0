"""Server-rendered pages of the project shell (home) and the health check."""

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from annotation import access
from annotation.models import TaskStatus


@login_required
def home(request: HttpRequest) -> HttpResponse:
    projects = (
        access.visible_projects(request.user)
        .annotate(task_count=Count("tasks"))
        .order_by("name")
        .distinct()
    )
    roles = dict(request.user.memberships.values_list("project_id", "role"))
    mine = request.user.assigned_tasks.filter(
        status__in=[TaskStatus.ASSIGNED, TaskStatus.IN_PROGRESS]
    ).select_related("project")
    return render(
        request,
        "tandem/home.html",
        {"projects": [(p, roles.get(p.pk, "admin")) for p in projects], "my_tasks": mine},
    )


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness of what the web process depends on: PostgreSQL and Redis."""
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["postgresql"] = "ok"
    except Exception as error:  # a health check reports every failure, whatever its type
        checks["postgresql"] = f"error: {error}"
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
        checks["redis"] = "ok"
    except Exception as error:
        checks["redis"] = f"error: {error}"
    healthy = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "degraded", **checks}, status=200 if healthy else 503
    )
