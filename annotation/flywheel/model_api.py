"""The API of fine-tuning jobs, model versions and offline evaluation (design §7, §8).

- ``POST /api/finetune-jobs/`` ``{exports: [ids, in stage order], base_model, version_name,
  parent_version?, base_url?, lora?, hyperparameters?, name?}`` → 201, the job, queued on the
  ``train`` queue (the web process only records and enqueues). ``GET /api/finetune-jobs/``
  (``?project=<id>``: the jobs trained on that project's exports),
  ``GET /api/finetune-jobs/{id}/``: status, progress, loss curve, logs, error, the version it
  registered. ``POST /api/finetune-jobs/{id}/cancel/``. ``GET /api/finetune-jobs/base-models/``:
  the base models the deployment knows (``TANDEM_BASE_MODELS``, names only) and the LoRA and
  hyperparameter values a job gets for what it leaves out. ``POST /api/finetune-jobs/estimate/``
  (the create body's exports, base and hyperparameters): rows, tokens per row, GPU memory and
  hours on the measured card, the rows past ``max_length`` (which ``create`` refuses).
- ``GET /api/model-versions/``, ``GET /api/model-versions/{id}/``: base model, adapter,
  endpoint, serving status, lineage (job, parent, datasets with sha256s, library versions) and
  the latest offline evaluations. ``POST /api/model-versions/`` registers a version made
  elsewhere (a base model on an endpoint, or an adapter already in storage).
  ``POST /api/model-versions/{id}/serve/`` → 202: a job loads it on its endpoint and checks
  that the endpoint lists it. ``POST /api/model-versions/{id}/evaluations/`` ``{project,
  tolerance?}`` → 201: a job scores it on the project's held-out steps;
  ``GET …/evaluations/`` lists the runs.
- ``GET /api/projects/{id}/model-versions/``: the versions the project runs (A, B and B's
  share) and, for every version that proposed there, its live acceptance rate next to its
  latest offline step success rate on the project. ``PUT`` the same path with
  ``{model_version, version_b, version_b_share}`` chooses them.

Who: engineers (``manage_datasets``) create jobs, register, serve and evaluate versions;
engineers and managers (``read_datasets``) read jobs of their projects and all versions;
managers (``manage_tasks``) choose a project's versions; the project overview is for anyone
who may view its episodes or read its datasets. Tokens need ``models:read`` / ``models:write``.
"""

from dataclasses import asdict
from functools import reduce
from operator import or_
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.flywheel import model_versions
from annotation.models import Project
from annotation.projects import access, versions
from backend.accounts.models import User
from backend.accounts.roles import Capability
from backend.celery import send_after_commit
from model_serving import finetune
from model_serving.evaluation import DEFAULT_TOLERANCE
from model_serving.models import EvaluationRun, FineTuneJob, ModelVersion
from model_serving.training.spec import Hyperparameters, LoraSettings
from model_serving.versions import is_adapter_name

# An OpenAI-compatible base URL; service names without a dot (http://vllm:8000/v1) included.
ENDPOINT = r"^https?://[^\s/]+(/\S*)?$"


def _require_anywhere(user: User, capability: Capability) -> None:
    if not (user.is_superuser or access.projects_where(user, capability).exists()):
        raise PermissionDenied(f"You may not do this in any project ({capability.value}).")


# --- serializers ----------------------------------------------------------------------------


class EvaluationSerializer(serializers.ModelSerializer):
    model_version = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = EvaluationRun
        fields = [
            "id",
            "model_version",
            "project_id",
            "status",
            "progress",
            "tolerance",
            "total",
            "succeeded",
            "invalid",
            "success_rate",
            "by_action",
            "results",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]


class ModelVersionSerializer(serializers.ModelSerializer):
    parent = serializers.SlugRelatedField(slug_field="name", read_only=True)
    served_name = serializers.CharField(read_only=True)
    evaluations = serializers.SerializerMethodField()
    training_projects = serializers.SerializerMethodField(
        help_text="The projects whose exports the version was fine-tuned on (none for a base "
        "version): where its offline evaluation belongs first."
    )

    class Meta:
        model = ModelVersion
        fields = [
            "id",
            "name",
            "served_name",
            "base_model",
            "base_model_path",
            "base_url",
            "coordinate_style",
            "adapter_location",
            "parent",
            "job",
            "lineage",
            "serving_status",
            "serving_error",
            "served_at",
            "created_at",
            "evaluations",
            "training_projects",
        ]
        read_only_fields = fields

    def get_training_projects(self, version: ModelVersion) -> list[int]:
        return list(version.job.project_ids) if version.job is not None else []

    def get_evaluations(self, version: ModelVersion) -> list[dict[str, Any]]:
        runs = sorted(version.evaluations.all(), key=lambda run: run.created_at, reverse=True)
        return [
            {k: v for k, v in EvaluationSerializer(run).data.items() if k != "results"}
            for run in runs[:5]
        ]


class ModelVersionCreateSerializer(serializers.Serializer):
    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$", max_length=200)
    base_model = serializers.CharField(max_length=500)
    base_url = serializers.RegexField(ENDPOINT, max_length=500)
    coordinate_style = serializers.ChoiceField(
        choices=["uitars15", "relative1000"], default="uitars15"
    )
    adapter_location = serializers.CharField(max_length=500, required=False, default="")
    parent = serializers.SlugRelatedField(
        slug_field="name", queryset=ModelVersion.objects.all(), required=False, allow_null=True
    )

    def validate_name(self, name: str) -> str:
        if finetune.name_taken(name):
            raise serializers.ValidationError(model_versions.TAKEN)
        return name

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        location = data["adapter_location"].strip("/")
        if location:
            if not is_adapter_name(data["name"]):
                raise serializers.ValidationError(
                    {"name": ["A version with an adapter is named with letters, digits, . _ -"]}
                )
            if not default_storage.exists(f"{location}/adapter_config.json"):
                raise serializers.ValidationError(
                    {"adapter_location": [f"No adapter_config.json in storage at {location}."]}
                )
        return {**data, "adapter_location": location}


class EndpointSerializer(serializers.Serializer):
    base_url = serializers.RegexField(ENDPOINT, max_length=500)


class FineTuneJobSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    parent_version = serializers.SlugRelatedField(slug_field="name", read_only=True)
    model_version = serializers.SerializerMethodField()

    class Meta:
        model = FineTuneJob
        fields = [
            "id",
            "name",
            "status",
            "progress",
            "base_model",
            "base_model_path",
            "parent_version",
            "stages",
            "project_ids",
            "lora",
            "hyperparameters",
            "version_name",
            "base_url",
            "loss_curve",
            "logs",
            "error",
            "cancel_requested",
            "artifacts_location",
            "attempt",
            "model_version",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_model_version(self, job: FineTuneJob) -> dict[str, Any] | None:
        try:
            version = job.model_version
        except ModelVersion.DoesNotExist:
            return None
        return {"id": version.pk, "name": version.name}


class FineTuneJobCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False, default="")
    exports = serializers.ListField(child=serializers.IntegerField(), min_length=1, max_length=8)
    base_model = serializers.CharField(max_length=500, required=False, default="")
    version_name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$", max_length=200)
    parent_version = serializers.SlugRelatedField(
        slug_field="name", queryset=ModelVersion.objects.all(), required=False, allow_null=True
    )
    base_url = serializers.RegexField(ENDPOINT, max_length=500, required=False, default="")
    lora = serializers.DictField(required=False, default=dict)
    hyperparameters = serializers.DictField(required=False, default=dict)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if not data["base_model"] and data.get("parent_version") is None:
            raise serializers.ValidationError({"base_model": ["Give a base model or a parent."]})
        return data


class FineTuneEstimateSerializer(serializers.Serializer):
    exports = serializers.ListField(child=serializers.IntegerField(), min_length=1, max_length=8)
    base_model = serializers.CharField(max_length=500, required=False, default="")
    parent_version = serializers.SlugRelatedField(
        slug_field="name", queryset=ModelVersion.objects.all(), required=False, allow_null=True
    )
    hyperparameters = serializers.DictField(required=False, default=dict)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if not data["base_model"] and data.get("parent_version") is None:
            raise serializers.ValidationError({"base_model": ["Give a base model or a parent."]})
        return data


class EvaluationCreateSerializer(serializers.Serializer):
    project = serializers.IntegerField()
    tolerance = serializers.FloatField(default=DEFAULT_TOLERANCE)


class ProjectVersionsSerializer(serializers.Serializer):
    model_version = serializers.SlugRelatedField(
        slug_field="name", queryset=ModelVersion.objects.all(), allow_null=True
    )
    version_b = serializers.SlugRelatedField(
        slug_field="name", queryset=ModelVersion.objects.all(), allow_null=True, required=False
    )
    version_b_share = serializers.FloatField(default=0.0)


# --- views ----------------------------------------------------------------------------------


class FineTuneJobViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    token_resource = "models"
    queryset = FineTuneJob.objects.none()  # the schema's model; requests use get_queryset
    serializer_class = FineTuneJobSerializer
    filterset_fields = ["status"]
    ordering_fields = ["created_at"]

    @extend_schema(
        parameters=[OpenApiParameter("project", int, description="Only jobs of this project.")]
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[FineTuneJob]:
        user = self.request.user
        jobs = FineTuneJob.objects.select_related("created_by", "parent_version", "model_version")
        project = self.request.query_params.get("project") if self.action == "list" else None
        if project is not None:
            if not project.isdecimal() or len(project) > 18:  # an id PostgreSQL can hold
                raise serializers.ValidationError({"project": "must be a project id"})
            jobs = jobs.filter(project_ids__contains=[int(project)])
        if user.is_superuser:
            return jobs
        projects = list(access.projects_where(user, Capability.READ_DATASETS).values_list("pk"))
        if not projects:
            return jobs.none()
        return jobs.filter(reduce(or_, (Q(project_ids__contains=[pk]) for (pk,) in projects)))

    def get_serializer_class(self) -> type[serializers.Serializer]:
        if self.action == "create":
            return FineTuneJobCreateSerializer
        return FineTuneJobSerializer

    @extend_schema(request=FineTuneJobCreateSerializer, responses={201: FineTuneJobSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        _require_anywhere(request.user, Capability.MANAGE_DATASETS)
        body = FineTuneJobCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        given = body.validated_data
        stages, project_ids = model_versions.training_stages(request.user, given["exports"])
        job = finetune.create_job(
            stages=stages,
            base_model=given["base_model"],
            version_name=given["version_name"],
            project_ids=project_ids,
            created_by=request.user,
            lora=given["lora"],
            hyperparameters=given["hyperparameters"],
            parent_version=given.get("parent_version"),
            base_url=given["base_url"],
            name=given["name"],
        )
        return Response(FineTuneJobSerializer(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=FineTuneEstimateSerializer, responses={200: dict})
    @action(detail=False, methods=["post"])
    def estimate(self, request: Request) -> Response:
        """What the job would cost before it is created (``model_serving.training.cost``)."""
        _require_anywhere(request.user, Capability.MANAGE_DATASETS)
        body = FineTuneEstimateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        given = body.validated_data
        stages, _ = model_versions.training_stages(request.user, given["exports"])
        return Response(
            finetune.estimate_cost(
                stages, given["base_model"], given["hyperparameters"], given.get("parent_version")
            )
        )

    @extend_schema(request=None, responses={200: dict})
    @action(detail=False, methods=["get"], url_path="base-models")
    def base_models(self, request: Request) -> Response:
        # Names only: the paths are the GPU hosts' business.
        _require_anywhere(request.user, Capability.READ_DATASETS)
        known: dict[str, str] = settings.TANDEM_BASE_MODELS
        # The endpoint already serving a base (its version without an adapter) is where its
        # fine-tuned adapters are most likely served too: the form offers it.
        endpoints = dict(
            ModelVersion.objects.filter(
                base_model__in=known,
                adapter_location="",
                serving_status=ModelVersion.Serving.SERVING,
            )
            .order_by("served_at")
            .values_list("base_model", "base_url")
        )
        return Response(
            {
                "base_models": [
                    {"name": name, "endpoint": endpoints.get(name, "")} for name in sorted(known)
                ],
                "defaults": {
                    "lora": asdict(LoraSettings()),
                    "hyperparameters": asdict(Hyperparameters()),
                },
            }
        )

    @extend_schema(request=None, responses={200: FineTuneJobSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        projects = Project.objects.filter(pk__in=job.project_ids)
        if not request.user.is_superuser and not projects.filter(
            pk__in=access.projects_where(request.user, Capability.MANAGE_DATASETS)
        ):
            raise PermissionDenied("Only the engineers of the job's projects may cancel it.")
        return Response(FineTuneJobSerializer(finetune.cancel_job(job.pk)).data)


class ModelVersionViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    token_resource = "models"
    queryset = ModelVersion.objects.none()  # the schema's model; requests use get_queryset
    serializer_class = ModelVersionSerializer
    filterset_fields = ["serving_status", "base_model"]
    search_fields = ["name", "base_model"]
    ordering_fields = ["created_at", "name"]

    def get_queryset(self) -> QuerySet[ModelVersion]:
        _require_anywhere(self.request.user, Capability.READ_DATASETS)
        return ModelVersion.objects.select_related("parent").prefetch_related("evaluations")

    def get_serializer_class(self) -> type[serializers.Serializer]:
        if self.action == "create":
            return ModelVersionCreateSerializer
        if self.action == "evaluations" and self.request.method == "POST":
            return EvaluationCreateSerializer
        return ModelVersionSerializer

    @extend_schema(request=ModelVersionCreateSerializer, responses={201: ModelVersionSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        _require_anywhere(request.user, Capability.MANAGE_DATASETS)
        body = ModelVersionCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        version = model_versions.register(body.validated_data, request.user)
        return Response(ModelVersionSerializer(version).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={202: ModelVersionSerializer})
    @action(detail=True, methods=["post"])
    def serve(self, request: Request, pk: str | None = None) -> Response:
        _require_anywhere(request.user, Capability.MANAGE_DATASETS)
        version = self.get_object()
        ModelVersion.objects.filter(pk=version.pk).update(
            serving_status=ModelVersion.Serving.LOADING, serving_error=""
        )
        send_after_commit("model_serving.jobs.serve_model_version", [version.pk], "default")
        version.refresh_from_db()
        return Response(ModelVersionSerializer(version).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=EndpointSerializer, responses={200: ModelVersionSerializer})
    @action(detail=True, methods=["post"])
    def endpoint(self, request: Request, pk: str | None = None) -> Response:
        """Give the version the endpoint that serves it; it is checked again by *serve*."""
        _require_anywhere(request.user, Capability.MANAGE_DATASETS)
        version = self.get_object()
        body = EndpointSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(
            ModelVersionSerializer(
                versions.set_endpoint(version, body.validated_data["base_url"])
            ).data
        )

    @extend_schema(
        methods=["POST"], request=EvaluationCreateSerializer, responses={201: EvaluationSerializer}
    )
    @extend_schema(methods=["GET"], responses={200: EvaluationSerializer(many=True)})
    @action(detail=True, methods=["get", "post"])
    def evaluations(self, request: Request, pk: str | None = None) -> Response:
        version = self.get_object()
        if request.method == "GET":
            runs = version.evaluations.filter(
                project_id__in=access.projects_where(request.user, Capability.READ_DATASETS)
            )
            return Response(EvaluationSerializer(runs, many=True).data)
        project = access.project_named_in(request.data, request.user, Capability.MANAGE_DATASETS)
        body = EvaluationCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = model_versions.start_evaluation(
            version, project, request.user, body.validated_data["tolerance"]
        )
        return Response(EvaluationSerializer(run).data, status=status.HTTP_201_CREATED)


class ProjectModelVersionsView(APIView):
    token_resource = "models"

    def _project(self, request: Request, pk: int) -> Project:
        project = get_object_or_404(access.visible_projects(request.user), pk=pk)
        user = request.user
        if not (
            user.is_superuser
            or access.projects_where(user, Capability.VIEW_EPISODES).filter(pk=pk)
            or access.projects_where(user, Capability.READ_DATASETS).filter(pk=pk)
        ):
            raise PermissionDenied("You may not see this project's models.")
        return project

    @extend_schema(responses={200: dict})
    def get(self, request: Request, pk: int) -> Response:
        return Response(model_versions.overview(self._project(request, pk)))

    @extend_schema(request=ProjectVersionsSerializer, responses={200: dict})
    def put(self, request: Request, pk: int) -> Response:
        project = self._project(request, pk)
        access.require(request.user, project, Capability.MANAGE_TASKS)
        body = ProjectVersionsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        given = body.validated_data
        versions.set_project_versions(
            project,
            given["model_version"],
            given.get("version_b"),
            given["version_b_share"],
        )
        return Response(model_versions.overview(project))
