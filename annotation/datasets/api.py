"""The dataset export API, ``/api/exports/``: ML engineers create exports, follow them, cancel
them and pull their files (design §5, §8).

- ``POST /api/exports/`` ``{project, kind: sft|dpo|ct, format: trl|llama_factory, filters:
  {date_from, date_to, model_version, review_status, annotator, include_accepted, exclude_held_out,
  min_task_success, source, drop_no_visible_effect, require_approved_thoughts,
  require_replay, min_gold_accuracy, min_agreement}}`` → 201, the export, queued.
- ``GET /api/exports/?project=<id>&kind=&dataset_format=&status=`` (``format`` is DRF's
  response-format switch, so the format filter has its own name), ``GET /api/exports/{id}/``:
  status, progress 0–1, counts, ``content_hash`` and, once succeeded, ``files``: ``[{name, size,
  sha256, download_url}]``.
- ``POST /api/exports/{id}/cancel/``: a queued or running export stops and publishes nothing.
- ``GET /api/exports/{id}/archive/``: every file of a succeeded export in one tar, streamed
  (``annotation.datasets.archive``).
- ``GET /api/exports/{id}/download/?file=<name>``: the file, streamed from local storage, or a
  302 to a short-lived presigned URL on S3.

Engineers and admins create, cancel and download; project managers read (list, retrieve,
download) — the ``read_datasets``/``manage_datasets`` capabilities. Tokens need
``datasets:read`` or ``datasets:write``.
"""

from typing import Any
from urllib.parse import urlencode

import django_filters
from django.db.models import QuerySet
from django.http import FileResponse, HttpResponseRedirect, StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.datasets import archive as export_archive
from annotation.datasets import exports
from annotation.models import DatasetExport
from annotation.projects import access
from backend.accounts.roles import Capability

DATE_FORMATS = ["iso-8601", "%Y-%m-%d"]


class ExportFiltersSerializer(serializers.Serializer):
    date_from = serializers.DateTimeField(
        required=False, allow_null=True, input_formats=DATE_FORMATS
    )
    date_to = serializers.DateTimeField(required=False, allow_null=True, input_formats=DATE_FORMATS)
    model_version = serializers.CharField(required=False, allow_null=True, max_length=200)
    review_status = serializers.ChoiceField(
        choices=["any", "accepted", "rejected", "unreviewed"], default="any"
    )
    annotator = serializers.CharField(required=False, allow_null=True, max_length=150)
    include_accepted = serializers.BooleanField(default=False)
    exclude_held_out = serializers.BooleanField(default=False)
    min_task_success = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0.0,
        max_value=1.0,
        help_text="Only episodes their task's evaluator scored at least this (0–1); "
        "episodes with no score are left out.",
    )

    drop_no_visible_effect = serializers.BooleanField(
        default=False,
        help_text="Leave out steps whose action left the screen as it was though it was meant to "
        "change it (flagged no_visible_effect on the step): keys swallowed, say.",
    )
    require_approved_thoughts = serializers.BooleanField(
        default=True,
        help_text="Leave out episodes with a demonstrated step whose thought no person wrote "
        "or approved (empty, or a model's draft). On unless turned off: such a step would "
        "teach the model an empty or unchecked thought.",
    )
    require_replay = serializers.BooleanField(
        default=False,
        help_text="Leave out episodes with demonstrated steps whose replay check on a fresh "
        "desktop did not find them replaying.",
    )
    min_gold_accuracy = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0.0,
        max_value=1.0,
        help_text="Keep people's work only where its annotator's gold accuracy is at least this "
        "(0–1), or where it agrees at every compared step with such an annotator's.",
    )
    min_agreement = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0.0,
        max_value=1.0,
        help_text="Keep people's work only where its annotator agrees with the others on "
        "overlapping tasks at least this often (0–1); annotators never compared are left out.",
    )
    source = serializers.ChoiceField(
        choices=["interactive", "rollout"],
        default="interactive",
        help_text="People's episodes, or autonomous rollouts routed by their validation "
        "(V=1 to SFT, V=0 to CT).",
    )

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown filter."] for name in unknown})
        return super().to_internal_value(data)


class ExportCreateSerializer(serializers.Serializer):
    project = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=DatasetExport.Kind.values)
    format = serializers.ChoiceField(
        choices=DatasetExport.Format.values, default=DatasetExport.Format.TRL
    )
    filters = ExportFiltersSerializer(required=False)


class ExportSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    files = serializers.SerializerMethodField()

    class Meta:
        model = DatasetExport
        fields = [
            "id",
            "project",
            "kind",
            "format",
            "filters",
            "coordinate_style",
            "status",
            "progress",
            "counts",
            "content_hash",
            "location",
            "files",
            "error",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "expires_at",
        ]

    def get_files(self, export: DatasetExport) -> list[dict[str, Any]]:
        if export.status != DatasetExport.Status.SUCCEEDED:
            return []
        request = self.context["request"]
        path = reverse("export-download", args=[export.pk])
        return [
            {
                **entry,
                "download_url": request.build_absolute_uri(
                    f"{path}?{urlencode({'file': entry['name']})}"
                ),
            }
            for entry in export.files
        ]


class ExportFilterSet(django_filters.FilterSet):
    dataset_format = django_filters.ChoiceFilter(
        field_name="format", choices=DatasetExport.Format.choices
    )

    class Meta:
        model = DatasetExport
        fields = ["project", "kind", "status"]


class ExportViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = ExportSerializer
    token_resource = "datasets"
    filterset_class = ExportFilterSet
    ordering_fields = ["created_at", "finished_at"]

    def get_queryset(self) -> QuerySet[DatasetExport]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no user
            return DatasetExport.objects.none()
        readable = access.projects_where(self.request.user, Capability.READ_DATASETS)
        return (
            DatasetExport.objects.filter(project__in=readable)
            .select_related("created_by")
            .order_by("-created_at", "-id")
        )

    def _managed(self) -> DatasetExport:
        export = self.get_object()
        access.require(self.request.user, export.project, Capability.MANAGE_DATASETS)
        return export

    @extend_schema(request=ExportCreateSerializer, responses={201: ExportSerializer})
    def create(self, request: Request) -> Response:
        project = access.project_named_in(request.data, request.user, Capability.MANAGE_DATASETS)
        body = ExportCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        export = exports.create_export(
            project,
            request.user,
            data["kind"],
            data["format"],
            exports.ExportFilters(**data.get("filters", {})),
        )
        serializer = self.get_serializer(export)
        return Response(serializer.data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: ExportSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        export = exports.cancel_export(self._managed().pk)
        return Response(self.get_serializer(export).data)

    @extend_schema(responses={(200, "application/x-tar"): bytes})
    @action(detail=True, methods=["get"])
    def archive(self, request: Request, pk: str) -> Any:
        export = self.get_object()  # readers may download: reading a dataset is pulling it
        chunks = export_archive.archive_chunks(export)
        response = StreamingHttpResponse(chunks, content_type="application/x-tar")
        name = export_archive.folder_name(export)
        response["Content-Disposition"] = f'attachment; filename="{name}.tar"'
        return response

    @extend_schema(
        parameters=[OpenApiParameter("file", str, required=True)],
        responses={(200, "application/octet-stream"): bytes, 302: None},
    )
    @action(detail=True, methods=["get"])
    def download(self, request: Request, pk: str) -> Any:
        export = self.get_object()  # readers may download: reading a dataset is pulling it
        name = request.query_params.get("file")
        if not name:
            raise exports.ExportError("Name the file to download: ?file=<name>.")
        exports.published_file(export, name)
        path = exports.local_path(export, name)
        if path is None:
            return HttpResponseRedirect(exports.presigned_url(export, name))
        filename = f"export-{export.pk}-{name.replace('/', '-')}"
        return FileResponse(open(path, "rb"), as_attachment=True, filename=filename)  # noqa: SIM115
