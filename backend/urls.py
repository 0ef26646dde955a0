"""URL map: the web app under /app/, the API under /api/, its schema and docs, the admin,
sign-in, health."""

from typing import Any

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from annotation.api import (
    EpisodeViewSet,
    MembershipViewSet,
    ProjectViewSet,
    ScreenshotView,
    TaskViewSet,
)
from annotation.datasets.api import ExportViewSet
from annotation.episodes.api import (
    ControlStreamView,
    DemonstrationView,
    DraftThoughtsView,
    ThoughtView,
)
from annotation.flywheel.api import (
    AcceptanceView,
    FlywheelView,
    ProgressBoardView,
    ReviewQueueView,
    ThroughputView,
)
from annotation.flywheel.model_api import (
    FineTuneJobViewSet,
    ModelVersionViewSet,
    ProjectModelVersionsView,
)
from annotation.projects.checks_api import ClearEvaluatorCheckView, EvaluatorChecksView
from annotation.quality.api import (
    GoldView,
    HoneypotsView,
    HoneypotView,
    MyScorecardView,
    ScorecardsView,
)
from annotation.rollouts.api import RolloutBatchViewSet, RolloutViewSet, ValidationSettingsView
from backend import views
from backend.accounts.api import AccessTokenViewSet, MeView
from vm_pool.api import DesktopTemplateViewSet, DesktopViewSet
from vm_pool.task_files.api import TaskFileViewSet


class Router(DefaultRouter):
    """Every resource of the API is found by its integer id: a path with anything else there is
    the resolver's 404, never a lookup that fails inside a view."""

    def get_lookup_regex(self, viewset: Any, lookup_prefix: str = "") -> str:
        lookup_field = getattr(viewset, "lookup_field", "pk")
        kwarg = getattr(viewset, "lookup_url_kwarg", None) or lookup_field
        value = getattr(viewset, "lookup_value_regex", "[0-9]+")
        return f"(?P<{lookup_prefix}{kwarg}>{value})"


router = Router()
router.register("projects", ProjectViewSet, basename="project")
router.register("memberships", MembershipViewSet, basename="membership")
router.register("tasks", TaskViewSet, basename="task")
router.register("episodes", EpisodeViewSet, basename="episode")
router.register("exports", ExportViewSet, basename="export")
router.register("finetune-jobs", FineTuneJobViewSet, basename="finetune-job")
router.register("model-versions", ModelVersionViewSet, basename="model-version")
router.register("tokens", AccessTokenViewSet, basename="token")
router.register("desktops", DesktopViewSet, basename="desktop")
router.register("desktop-templates", DesktopTemplateViewSet, basename="desktop-template")
router.register("task-files", TaskFileViewSet, basename="task-file")
router.register("rollout-batches", RolloutBatchViewSet, basename="rollout-batch")
router.register("rollouts", RolloutViewSet, basename="rollout")

admin.site.site_header = "Tandem administration"
admin.site.site_title = "Tandem"

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("app/", views.web_app, name="app"),
    re_path(r"^app/(?P<route>.*)$", views.web_app),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/projects/<int:pk>/board/", ProgressBoardView.as_view(), name="project-board"),
    path("api/projects/<int:pk>/throughput/", ThroughputView.as_view(), name="project-throughput"),
    path("api/projects/<int:pk>/acceptance/", AcceptanceView.as_view(), name="project-acceptance"),
    path(
        "api/projects/<int:pk>/model-versions/",
        ProjectModelVersionsView.as_view(),
        name="project-model-versions",
    ),
    path("api/projects/<int:pk>/flywheel/", FlywheelView.as_view(), name="project-flywheel"),
    path("api/review-queue/", ReviewQueueView.as_view(), name="review-queue"),
    path(
        "api/projects/<int:pk>/validation/",
        ValidationSettingsView.as_view(),
        name="project-validation",
    ),
    path(
        "api/episodes/<int:pk>/take-over/",
        DemonstrationView.as_view(operation="take-over"),
        name="episode-take-over",
    ),
    path(
        "api/episodes/<int:pk>/hand-back/",
        DemonstrationView.as_view(operation="hand-back"),
        name="episode-hand-back",
    ),
    path(
        "api/episodes/<int:pk>/finish-demonstration/",
        DemonstrationView.as_view(operation="finish-demonstration"),
        name="episode-finish-demonstration",
    ),
    path(
        "api/episodes/<int:pk>/control-stream/",
        ControlStreamView.as_view(),
        name="episode-control-stream",
    ),
    path("api/episodes/<int:pk>/gold/", GoldView.as_view(), name="episode-gold"),
    path("api/episodes/<int:pk>/honeypot/", HoneypotView.as_view(), name="episode-honeypot"),
    path("api/projects/<int:pk>/honeypots/", HoneypotsView.as_view(), name="project-honeypots"),
    path(
        "api/projects/<int:pk>/evaluator-checks/",
        EvaluatorChecksView.as_view(),
        name="project-evaluator-checks",
    ),
    path(
        "api/tasks/<int:pk>/evaluator-check/clear/",
        ClearEvaluatorCheckView.as_view(),
        name="task-evaluator-check-clear",
    ),
    path(
        "api/projects/<int:pk>/scorecards/",
        ScorecardsView.as_view(),
        name="project-scorecards",
    ),
    path(
        "api/projects/<int:pk>/scorecards/mine/",
        MyScorecardView.as_view(),
        name="project-my-scorecard",
    ),
    path(
        "api/episodes/<int:pk>/draft-thoughts/",
        DraftThoughtsView.as_view(),
        name="episode-draft-thoughts",
    ),
    path(
        "api/episodes/<int:pk>/steps/<int:index>/thought/",
        ThoughtView.as_view(),
        name="episode-step-thought",
    ),
    path("api/", include(router.urls)),
    path("api/me/", MeView.as_view(), name="me"),
    path("api/screenshots/<str:sha256>/", ScreenshotView.as_view(), name="screenshot"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("api-auth/", include("rest_framework.urls")),
]
