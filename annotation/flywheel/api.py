"""What managers and reviewers watch: the progress board, throughput and acceptance charts (figures
defined in ``annotation.flywheel.figures``), the review queue, and for managers and engineers the
flywheel chart (``annotation.flywheel.chart``). Thin views: check permission, validate, call one
function, return."""

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.episodes.serializers import EpisodeSerializer
from annotation.flywheel import chart as flywheel
from annotation.flywheel import figures as stats
from annotation.models import (
    Agreement,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    Project,
    QualityHold,
    Review,
)
from annotation.projects import access
from annotation.quality.overlap import SUBMITTED
from backend.accounts.roles import Capability


class BoardQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=500, default=50)


class SeriesQuerySerializer(serializers.Serializer):
    bucket = serializers.ChoiceField(choices=list(stats.BUCKETS), default="day")
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)


def overseen_project(request: Request, pk: int) -> Project:
    """The project, if the caller may view its episodes (404 to non-members, 403 to others)."""
    return access.project_by_id(request.user, pk, Capability.VIEW_EPISODES)


class ProgressBoardView(APIView):
    token_resource = "projects"

    @extend_schema(parameters=[BoardQuerySerializer], responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        """Task counts by status and, per status, the most recently updated tasks."""
        project = overseen_project(request, pk)
        query = BoardQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(stats.progress_board(project, query.validated_data["limit"]))


class SeriesView(APIView):
    token_resource = "projects"

    def span(self, request: Request) -> stats.Window:
        query = SeriesQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        return stats.window(data["bucket"], data.get("since"), data.get("until"))


class ThroughputView(SeriesView):
    @extend_schema(parameters=[SeriesQuerySerializer], responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        """Steps decided and episodes submitted per annotator per hour or day."""
        project = overseen_project(request, pk)
        return Response(stats.throughput(project, self.span(request)))


class AcceptanceView(SeriesView):
    @extend_schema(parameters=[SeriesQuerySerializer], responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        """Accepted / corrected / error-kept decisions and the acceptance rate per model
        version per hour or day, and beside them the evaluator's task success."""
        project = overseen_project(request, pk)
        return Response(stats.acceptance(project, self.span(request)))


class FlywheelView(APIView):
    token_resource = "models"

    @extend_schema(responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        """Per model version of the project, oldest first: its rollouts' success rate, its live
        acceptance rate, its latest offline step success rate and the dataset exports it was
        trained on; and the project's datasets now. For those who read its datasets."""
        project = access.project_by_id(request.user, pk, Capability.READ_DATASETS)
        return Response(flywheel.flywheel(project))


ROLLOUT_WORK = (EpisodeOutcome.FINISHED, EpisodeOutcome.CALL_USER, EpisodeOutcome.MAX_STEPS)


class ReviewQueueView(generics.ListAPIView):
    """Episodes waiting for a verdict in the projects the caller reviews, with no review yet: a
    person's ended episode that submitted its task, and every rollout that ended with work to
    judge (its task may have been reviewed long ago: a rollout is judged as an episode of its
    own). First the episodes held for review (``QualityHold``), then those of tasks whose
    overlapping annotators disagreed (``annotation.quality.overlap``), then oldest first."""

    token_resource = "episodes"
    serializer_class = EpisodeSerializer
    queryset = Episode.objects.none()  # the schema's model; get_queryset gives the rows

    @extend_schema(
        parameters=[OpenApiParameter("project", int, description="Only this project.")],
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Episode]:
        reviewed = Review.objects.filter(episode=OuterRef("pk"))
        episodes = (
            Episode.objects.filter(
                Q(mode=EpisodeMode.INTERACTIVE, outcome__in=SUBMITTED)
                | Q(mode=EpisodeMode.AUTONOMOUS, outcome__in=ROLLOUT_WORK),
                task__project__in=access.projects_where(self.request.user, Capability.REVIEW),
                ended_at__isnull=False,
            )
            .exclude(Exists(reviewed))
            .select_related("annotator", "task__project", "rollout")
            .annotate(
                step_count=Count("steps"),
                held=Exists(QualityHold.objects.filter(episode=OuterRef("pk"))),
                disputed=Exists(Agreement.objects.filter(task=OuterRef("task"), agree=False)),
            )
            .order_by("-held", "-disputed", "ended_at", "id")
        )
        project = self.request.query_params.get("project")
        if project is not None:
            if not project.isdecimal() or len(project) > 18:  # an id PostgreSQL can hold
                raise serializers.ValidationError({"project": "must be a project id"})
            episodes = episodes.filter(task__project_id=int(project))
        return episodes
