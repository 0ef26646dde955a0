"""The task-file API, ``/api/task-files/``: the files kept for tasks' downloads, by URL (design §6).

- ``GET /api/task-files/?url=<url>``: the files kept (url, sha256, size_bytes, source,
  uploaded_by, created_at).
- ``POST /api/task-files/`` multipart ``{url, file}``: keep ``file`` as the file at ``url``,
  replacing what was kept for that URL; setups then use it and never fetch the URL. This is how
  a platform with no way out to the internet gets OSWorld's files.
- ``POST /api/task-files/archive/`` multipart ``{file}``: a .zip or .tar(.gz) of many files, each
  named by its URL (``vm_pool.task_files.archives``); stored whole or not at all. The request may
  be up to ``TANDEM_TASK_ARCHIVE_MAX_BYTES`` (1 GB by default), each file in it up to the
  single upload's limit. Up to ``TANDEM_TASK_ARCHIVE_BACKGROUND_BYTES`` (8 MB) it is answered
  201 with the counts ``stored``, ``replaced``, ``unchanged`` and each file's result, or 400 with
  every problem; a larger one 202 with the job that reads it (``Location``: its URL).
- ``GET /api/task-files/archives/{id}/``: that job: status (queued, running, done, failed),
  progress 0–1, then the counts and each file's result, or every problem.
- ``DELETE /api/task-files/{id}/``: forget it; the next setup that needs it fetches the URL.

Project managers and admins, the people who import tasks, may do all of it; everyone else gets
"permission denied". Tokens need ``tasks:read`` or ``tasks:write``.
"""

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from backend.accounts.permissions import TokenScopePermission
from backend.accounts.roles import Capability, role_allows
from vm_pool.models import TaskFile, TaskFileArchive
from vm_pool.task_files import archive_jobs, downloads
from vm_pool.task_files import archives as task_file_archives

# Room for the multipart envelope and the url field around the file itself.
MULTIPART_OVERHEAD_BYTES = 64 * 1024


class ImportsTasks(permissions.BasePermission):
    message = "Only project managers and admins manage task files."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if user.is_superuser or user.can_create_projects:
            return True
        roles = user.memberships.values_list("role", flat=True)
        return any(role_allows(role, Capability.MANAGE_TASKS) for role in roles)


class TaskFileSerializer(serializers.ModelSerializer):
    uploaded_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = TaskFile
        fields = ["id", "url", "sha256", "size_bytes", "source", "uploaded_by", "created_at"]
        read_only_fields = fields


class TaskFileUploadSerializer(serializers.Serializer):
    url = serializers.CharField(help_text="The http(s) URL a task's download step names.")
    file = serializers.FileField(allow_empty_file=True)

    def validate_url(self, url: str) -> str:
        try:
            downloads.check_url(url)
        except downloads.DownloadRefused as refusal:
            raise serializers.ValidationError(refusal.message) from None
        return url


class TaskFileArchiveUploadSerializer(serializers.Serializer):
    file = serializers.FileField(
        help_text="A .zip or .tar(.gz) holding an index.json {url: path}, or files named by "
        "their percent-encoded URL."
    )


class TaskFileArchiveSerializer(serializers.ModelSerializer):
    """The job that reads a large archive, and where to follow it."""

    uploaded_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    url = serializers.SerializerMethodField()

    class Meta:
        model = TaskFileArchive
        fields = [
            "id",
            "url",
            "name",
            "size_bytes",
            "status",
            "progress",
            "counts",
            "files",
            "problems",
            "error",
            "uploaded_by",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_url(self, job: TaskFileArchive) -> str:
        path = reverse("task-file-archive-job", kwargs={"archive_id": job.pk})
        return str(self.context["request"].build_absolute_uri(path))


class TaskFileViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    serializer_class = TaskFileSerializer
    permission_classes = [permissions.IsAuthenticated, TokenScopePermission, ImportsTasks]
    parser_classes = [MultiPartParser, FormParser]
    token_resource = "tasks"
    filterset_fields = ["url", "sha256", "source"]
    ordering_fields = ["created_at", "size_bytes"]

    def get_queryset(self) -> QuerySet[TaskFile]:
        return TaskFile.objects.select_related("uploaded_by")

    @extend_schema(
        request={"multipart/form-data": TaskFileUploadSerializer},
        responses={201: TaskFileSerializer},
    )
    def create(self, request: Request) -> Response:
        limit = settings.TANDEM_DOWNLOAD_MAX_BYTES
        too_large = f"The file is {downloads.size_limit_text(limit)}."
        body, upload = _uploaded(request, TaskFileUploadSerializer, limit, too_large)
        task_file = downloads.store_task_file(
            body.validated_data["url"], upload.read(), TaskFile.Source.UPLOADED, request.user
        )
        return Response(TaskFileSerializer(task_file).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request={"multipart/form-data": TaskFileArchiveUploadSerializer},
        responses={201: dict, 202: TaskFileArchiveSerializer},
    )
    @action(detail=False, methods=["post"])
    def archive(self, request: Request) -> Response:
        limit = settings.TANDEM_TASK_ARCHIVE_MAX_BYTES
        too_large = f"An archive of task files may be at most {limit:,} bytes."
        _, upload = _uploaded(request, TaskFileArchiveUploadSerializer, limit, too_large)
        if upload.size > settings.TANDEM_TASK_ARCHIVE_BACKGROUND_BYTES:
            job = archive_jobs.queue_archive(upload, request.user)
            body = TaskFileArchiveSerializer(job, context={"request": request}).data
            headers = {"Location": body["url"]}
            return Response(body, status=status.HTTP_202_ACCEPTED, headers=headers)
        seconds = settings.TANDEM_TASK_ARCHIVE_REQUEST_SECONDS
        report = task_file_archives.store_archive(upload, request.user, seconds)
        return Response(report.as_dict(), status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: TaskFileArchiveSerializer})
    @action(
        detail=False,
        methods=["get"],
        url_path=r"archives/(?P<archive_id>[0-9]+)",
        url_name="archive-job",
    )
    def archive_job(self, request: Request, archive_id: str) -> Response:
        jobs = TaskFileArchive.objects.select_related("uploaded_by")
        job = get_object_or_404(jobs, pk=archive_id)
        return Response(TaskFileArchiveSerializer(job, context={"request": request}).data)

    def perform_destroy(self, instance: TaskFile) -> None:
        downloads.delete_task_file(instance)


def _uploaded(
    request: Request, form: type[serializers.Serializer], limit: int, too_large: str
) -> tuple[serializers.Serializer, Any]:
    """The checked form and its ``file``, refused as too large before the body is parsed (so an
    oversized upload is never spooled to disk) and again by the file's own size."""
    if int(request.META.get("CONTENT_LENGTH") or 0) > limit + MULTIPART_OVERHEAD_BYTES:
        raise RequestDataTooBig(too_large)
    body = form(data=request.data)
    body.is_valid(raise_exception=True)
    upload = body.validated_data["file"]
    if upload.size > limit:
        raise RequestDataTooBig(too_large)
    return body, upload
