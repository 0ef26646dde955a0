"""The rollout API: batches of autonomous rollouts, their rollouts, and a project's validation.

- ``POST /api/rollout-batches/`` ``{project, model_version, version_b?, version_b_share?,
  tasks?: [external ids] (all runnable tasks when left out), samples_per_task, sampling?:
  {temperature, top_p, max_tokens}, stop_rules?: {invalid_in_row, same_action_repeats,
  unchanged_steps, max_steps}, max_concurrent?, desktop_share?, name?}`` → 201, the batch,
  queued. ``GET /api/rollout-batches/?project=<id>``, ``GET /api/rollout-batches/{id}/`` with
  its summary (``annotation.rollouts.stats``). ``POST …/{id}/pause/``, ``…/resume/``,
  ``…/cancel/``.
- ``GET /api/rollout-batches/tasks/?project=<id>``: the tasks a new batch of the project may
  run (its runnable tasks), and how many of its tasks cannot run here.
- ``GET /api/rollouts/?batch=<id>``, ``GET /api/rollouts/{id}/``: status, stop reason, its
  episode, the validation's parts and V.
- ``GET|PUT /api/projects/{id}/validation/``: the project's validation settings (judge
  endpoint, model and threshold, minimum task success, human review); the judge's API key is
  write-only.

Managers and engineers start and steer batches (``run_rollouts``); those who may read a
project's episodes or datasets read them. Tokens use the ``models`` scopes.
"""

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import BatchStatus, Project, Rollout, RolloutBatch, Task
from annotation.projects import access
from annotation.rollouts import batches as rollouts
from annotation.rollouts import stats, validation
from backend.accounts.models import User
from backend.accounts.roles import Capability
from model_serving.models import ModelVersion


def readable_projects(user: User) -> QuerySet[Project]:
    return access.projects_where(user, Capability.VIEW_EPISODES) | access.projects_where(
        user, Capability.READ_DATASETS
    )


def runnable_tasks(project: Project) -> QuerySet[Task]:
    """The tasks a batch of the project may run: those that can run here, branches aside."""
    return Task.objects.filter(project=project, cannot_run="", branch_of=None).order_by("id")


# What each sampling setting may be: (lowest, highest, whole numbers only).
SAMPLING_BOUNDS: dict[str, tuple[float, float | None, bool]] = {
    "temperature": (0, 2, False),
    "top_p": (0, 1, False),
    "max_tokens": (1, None, True),
}


class RolloutBatchSerializer(serializers.ModelSerializer):
    model_version = serializers.SlugRelatedField(slug_field="name", read_only=True)
    version_b = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    tasks = serializers.SerializerMethodField()

    class Meta:
        model = RolloutBatch
        fields = [
            "id",
            "project",
            "name",
            "model_version",
            "version_b",
            "version_b_share",
            "tasks",
            "samples_per_task",
            "sampling",
            "stop_rules",
            "max_concurrent",
            "desktop_share",
            "status",
            "progress",
            "counts",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_tasks(self, batch: RolloutBatch) -> int:
        return len(batch.task_ids)


class BatchCreateSerializer(serializers.Serializer):
    project = serializers.IntegerField()
    name = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)
    model_version = serializers.SlugRelatedField(
        slug_field="name", queryset=ModelVersion.objects.all()
    )
    version_b = serializers.SlugRelatedField(
        slug_field="name", queryset=ModelVersion.objects.all(), required=False, allow_null=True
    )
    version_b_share = serializers.FloatField(min_value=0, max_value=1, default=0.0)
    tasks = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, allow_empty=False
    )
    samples_per_task = serializers.IntegerField(min_value=1, max_value=rollouts.MAX_SAMPLES)
    sampling = serializers.DictField(required=False, default=dict)
    stop_rules = serializers.DictField(required=False, default=dict)
    max_concurrent = serializers.IntegerField(min_value=1, max_value=64, default=4)
    desktop_share = serializers.FloatField(min_value=0.01, max_value=1, default=0.5)

    def validate_sampling(self, given: dict[str, Any]) -> dict[str, Any]:
        """Known settings must be numbers in their range; unknown ones are refused by name when
        the batch is created."""
        for key, value in given.items():
            if key not in SAMPLING_BOUNDS:
                continue
            lowest, highest, whole = SAMPLING_BOUNDS[key]
            number = not isinstance(value, bool) and isinstance(value, int | float)
            if (
                not number
                or (whole and not isinstance(value, int))
                or value < lowest
                or (highest is not None and value > highest)
            ):
                kind = "a whole number" if whole else "a number"
                upto = f" to {highest:g}" if highest is not None else " or more"
                raise serializers.ValidationError(
                    f"{key} must be {kind} from {lowest:g}{upto}, not {value!r}"
                )
        return given


class RunnableTaskSerializer(serializers.ModelSerializer):
    class Meta:
        model = Task
        fields = ["external_id", "instruction", "max_steps"]
        read_only_fields = fields


class RunnableTasksSerializer(serializers.Serializer):
    runnable = RunnableTaskSerializer(many=True)
    cannot_run = serializers.IntegerField(help_text="The project's tasks that cannot run here.")


class RolloutSerializer(serializers.ModelSerializer):
    task = serializers.SlugRelatedField(slug_field="external_id", read_only=True)
    model_version = serializers.SerializerMethodField()
    outcome = serializers.SerializerMethodField()
    task_success = serializers.SerializerMethodField()

    class Meta:
        model = Rollout
        fields = [
            "id",
            "batch",
            "task",
            "sample",
            "status",
            "episode",
            "attempt",
            "model_version",
            "outcome",
            "task_success",
            "stop_reason",
            "steps",
            "tokens",
            "verdict",
            "validation",
            "started_at",
            "ended_at",
        ]
        read_only_fields = fields

    def get_model_version(self, rollout: Rollout) -> str:
        return rollout.episode.model_version if rollout.episode else ""

    def get_outcome(self, rollout: Rollout) -> str:
        return rollout.episode.outcome if rollout.episode else ""

    def get_task_success(self, rollout: Rollout) -> float | None:
        return rollout.episode.task_success if rollout.episode else None


class RolloutBatchViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    serializer_class = RolloutBatchSerializer
    token_resource = "models"
    filterset_fields = ["project", "status"]
    ordering_fields = ["created_at"]

    def get_queryset(self) -> QuerySet[RolloutBatch]:
        if getattr(self, "swagger_fake_view", False):
            return RolloutBatch.objects.none()
        return RolloutBatch.objects.filter(
            project__in=readable_projects(self.request.user)
        ).select_related("model_version", "version_b", "created_by")

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        batch = self.get_object()
        return Response({**self.get_serializer(batch).data, **stats.summary(batch)})

    @extend_schema(request=BatchCreateSerializer, responses={201: RolloutBatchSerializer})
    def create(self, request: Request) -> Response:
        project = access.project_named_in(request.data, request.user, Capability.RUN_ROLLOUTS)
        body = BatchCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        given = body.validated_data
        runnable = runnable_tasks(project)
        if "tasks" in given:
            named = list(runnable.filter(external_id__in=given["tasks"]))
            missing = sorted(set(given["tasks"]) - {t.external_id for t in named})
            if missing:
                raise rollouts.RolloutRejected(f"no runnable task {', '.join(missing)}")
        else:
            named = list(runnable)
        batch = rollouts.create_batch(
            project,
            request.user,
            rollouts.BatchRequest(
                tasks=named,
                samples_per_task=given["samples_per_task"],
                model_version=given["model_version"],
                version_b=given.get("version_b"),
                version_b_share=given["version_b_share"],
                sampling=given["sampling"],
                stop_rules=given["stop_rules"],
                max_concurrent=given["max_concurrent"],
                desktop_share=given["desktop_share"],
                name=given["name"],
            ),
        )
        batch.refresh_from_db()  # its counts were made in the database
        return Response(self.get_serializer(batch).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[OpenApiParameter("project", int, required=True)],
        responses={200: RunnableTasksSerializer},
    )
    @action(detail=False, methods=["get"])
    def tasks(self, request: Request) -> Response:
        """The tasks a new batch of the project may run, for those who start batches."""
        project = access.project_named_in(
            request.query_params, request.user, Capability.RUN_ROLLOUTS
        )
        runnable = runnable_tasks(project)
        blocked = (
            Task.objects.filter(project=project, branch_of=None).exclude(cannot_run="").count()
        )
        return Response(RunnableTasksSerializer({"runnable": runnable, "cannot_run": blocked}).data)

    def _steer(self, request: Request, to: str) -> Response:
        batch = self.get_object()
        access.require(request.user, batch.project, Capability.RUN_ROLLOUTS)
        steered = rollouts.set_status(batch, to)
        steered.refresh_from_db()  # its progress and counts were recounted in the database
        return Response(self.get_serializer(steered).data)

    @extend_schema(request=None, responses={200: RolloutBatchSerializer})
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str) -> Response:
        return self._steer(request, BatchStatus.PAUSED)

    @extend_schema(request=None, responses={200: RolloutBatchSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str) -> Response:
        return self._steer(request, BatchStatus.RUNNING)

    @extend_schema(request=None, responses={200: RolloutBatchSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        return self._steer(request, BatchStatus.CANCELLED)


class RolloutViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = RolloutSerializer
    token_resource = "models"
    filterset_fields = ["batch", "status", "verdict"]

    def get_queryset(self) -> QuerySet[Rollout]:
        if getattr(self, "swagger_fake_view", False):
            return Rollout.objects.none()
        return Rollout.objects.filter(
            batch__project__in=readable_projects(self.request.user)
        ).select_related("task", "episode")


class ValidationSettingsView(APIView):
    token_resource = "models"

    def _project(self, request: Request, pk: int) -> Project:
        project = get_object_or_404(access.visible_projects(request.user), pk=pk)
        if not readable_projects(request.user).filter(pk=pk).exists():
            raise PermissionDenied("You may not see this project's validation.")
        return project

    @staticmethod
    def _shown(options: dict[str, Any]) -> dict[str, Any]:
        judge = dict(options.get("judge") or {})
        if judge:
            judge["api_key_set"] = bool(judge.pop("api_key", ""))
        return {**options, **({"judge": judge} if judge else {})}

    @staticmethod
    def _without_markers(given: Any) -> Any:
        """Settings as sent, less the ``api_key_set`` marker a read shows: settings read and
        sent back as they are keep the stored key."""
        if not isinstance(given, dict) or not isinstance(given.get("judge"), dict):
            return given
        judge = {k: v for k, v in given["judge"].items() if k != "api_key_set"}
        return {**given, "judge": judge}

    @extend_schema(responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        return Response(self._shown(self._project(request, pk).validation_settings))

    @extend_schema(
        request=dict,
        responses={200: dict},
        parameters=[OpenApiParameter("pk", int, OpenApiParameter.PATH)],
    )
    def put(self, request: Request, pk: int) -> Response:
        project = self._project(request, pk)
        access.require(request.user, project, Capability.RUN_ROLLOUTS)
        given = validation.written_settings(
            project.validation_settings, self._without_markers(request.data)
        )
        project.validation_settings = given
        project.save(update_fields=["validation_settings"])
        return Response(self._shown(given))
