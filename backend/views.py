"""Pages outside the API: the web app's shell (the built frontend) and the health check.

Sign-in stays Django's login page; everything a signed-in person sees is the web app under
/app/, whose built files (``npm run build`` in frontend/) are served from /static/app/.
"""

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.views.decorators.csrf import ensure_csrf_cookie

APP_PATH = "/app/"


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return HttpResponseRedirect(APP_PATH)


@login_required
@ensure_csrf_cookie  # the app sends the cookie's value back in X-CSRFToken
def web_app(request: HttpRequest, route: str = "") -> HttpResponse:
    """The web app's index for every route under /app/; the app's router takes it from there."""
    index = settings.FRONTEND_DIST / "index.html"
    try:
        html = index.read_text(encoding="utf-8")
    except FileNotFoundError:
        return HttpResponse(
            f"The web app is not built: {index} is missing. Run `deploy/dev.sh install` "
            "(or `npm ci && npm run build` in frontend/).",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
    response = HttpResponse(html)
    # The index names the hashed asset files of one build: never serve a stale one.
    response["Cache-Control"] = "no-cache"
    return response


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
