"""The annotation API: thin views that check permission, validate, call one function, return."""

from collections.abc import Callable
from typing import IO, Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.db.models import Count, Prefetch, QuerySet
from django.http import FileResponse, QueryDict
from django.shortcuts import get_object_or_404
from django.utils.datastructures import MultiValueDict
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.parsers import BaseParser, DataAndFiles, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from annotation.episodes import loop as episodes
from annotation.episodes import ownership, reviews
from annotation.episodes.serializers import (
    BranchRequestSerializer,
    BranchTaskSerializer,
    EpisodeDetailSerializer,
    EpisodeSerializer,
    ReviewSerializer,
)
from annotation.models import Episode, Membership, Project, Step, Task, TaskEvent
from annotation.projects import access, importer, queue, versions
from annotation.rollouts import branching
from annotation.serializers import (
    AssignSerializer,
    ClaimRequestSerializer,
    ClaimSerializer,
    ImportUploadSerializer,
    LeaseSerializer,
    MembershipSerializer,
    ProjectSerializer,
    TaskDetailSerializer,
    TaskSelectionSerializer,
    TaskSerializer,
)
from backend.accounts.roles import Capability, Role
from backend.errors import DomainError
from model_serving.status import model_status
from vm_pool.models import Screenshot
from vm_pool.serializers import StreamSerializer
from vm_pool.streaming import open_stream


class UploadTooLarge(DomainError):
    status_code = 413
    code = "too_large"


class TaskFileBodyParser(BaseParser):
    """Takes any request body but a multipart form as the task file itself: it becomes
    ``FILES["file"]``, as a multipart upload's file would.

    So every task file reaches the importer, its one parser, the same way whether the caller
    signs in with a token or a session (a session's CSRF check reads the request's form fields,
    which parsed a JSONL body as JSON and refused it before the view ever saw it).
    """

    media_type = "*/*"

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None
    ) -> DataAndFiles:
        body = stream.read(settings.TANDEM_IMPORT_MAX_BYTES + 1)  # one byte more: "too large"
        jsonl = any(kind in (media_type or "") for kind in ("ndjson", "jsonl"))
        upload = SimpleUploadedFile(
            "body.jsonl" if jsonl else "body.json", body, media_type or "application/json"
        )
        return DataAndFiles(QueryDict(), MultiValueDict({"file": [upload]}))


def work_projects(request: Request) -> QuerySet[Project]:
    """The projects a claim may take from: the one asked for, else all the user annotates."""
    body = ClaimRequestSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    projects = access.projects_where(request.user, Capability.WORK_QUEUE)
    if "project" in body.validated_data:
        project = get_object_or_404(
            access.visible_projects(request.user), pk=body.validated_data["project"]
        )
        access.require(request.user, project, Capability.WORK_QUEUE)
        return Project.objects.filter(pk=project.pk)
    if not projects.exists():
        raise PermissionDenied("You are not an annotator of any project.")
    return projects


class ProjectHasWork(DomainError):
    status_code = 409
    code = "project_has_work"


class ProjectViewSet(viewsets.ModelViewSet):
    serializer_class = ProjectSerializer
    token_resource = "projects"
    search_fields = ["name", "description"]
    ordering_fields = ["name", "created_at"]

    # The browsable API draws each action's form from these (the import form is a file upload).
    action_serializers = {
        "import_tasks": ImportUploadSerializer,
        "assign": AssignSerializer,
        "unassign": TaskSelectionSerializer,
    }

    def get_queryset(self) -> QuerySet[Project]:
        user = self.request.user
        return access.visible_projects(user).prefetch_related("memberships").distinct()

    def get_serializer_class(self) -> type[Serializer]:
        return self.action_serializers.get(self.action, ProjectSerializer)

    # Create and update are authorised before the body is validated: its errors (a project
    # name already taken) are for those who may make the change.
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        user = request.user
        if not (user.is_superuser or user.can_create_projects):
            raise PermissionDenied("Only project managers may create projects.")
        return super().create(request, *args, **kwargs)

    def perform_create(self, serializer: ProjectSerializer) -> None:
        user = self.request.user
        with transaction.atomic():
            project = serializer.save(created_by=user)
            Membership.objects.create(project=project, user=user, role=Role.MANAGER)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self._managed()
        return super().update(request, *args, **kwargs)

    def perform_destroy(self, instance: Project) -> None:
        access.require(self.request.user, instance, Capability.MANAGE_TASKS)
        with transaction.atomic():
            locked = Project.objects.select_for_update().get(pk=instance.pk)
            episodes = Episode.objects.filter(task__project=locked).count()
            exports = locked.exports.count()
            if episodes or exports:
                raise ProjectHasWork(
                    f"{locked.name} holds recorded work ({episodes} episodes, {exports} dataset "
                    "exports): deleting it would delete that work, so it is kept.",
                    details={"episodes": episodes, "exports": exports},
                )
            locked.delete()

    def _managed(self) -> Project:
        project = self.get_object()
        access.require(self.request.user, project, Capability.MANAGE_TASKS)
        return project

    @extend_schema(
        request={"multipart/form-data": ImportUploadSerializer, "application/json": dict},
        responses={201: dict},
        description=(
            "Import tasks from a JSON or JSONL file (multipart field `file`) or from the request "
            "body (JSONL when its content type says `ndjson` or `jsonl`, or when its first line "
            "is a whole task). The file is imported whole or not at all; errors list every bad "
            "row."
        ),
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="import",
        parser_classes=[MultiPartParser, TaskFileBodyParser],
    )
    def import_tasks(self, request: Request, pk: str) -> Response:
        project = self._managed()
        limit = settings.TANDEM_IMPORT_MAX_BYTES
        too_large = UploadTooLarge(f"Task files may be at most {limit // (1024 * 1024)} MB.")
        declared = str(request.META.get("CONTENT_LENGTH") or "0")
        if declared.isdecimal() and int(declared) > limit + 64 * 1024:
            raise too_large
        upload = request.FILES.get("file")
        if upload is None and request.content_type.startswith("multipart/"):
            raise DomainError("A multipart upload needs the task file in its `file` field.")
        # An empty body reaches no parser: no file, and the importer says the file is empty.
        data = upload.read(limit + 1) if upload else b""
        if len(data) > limit:
            raise too_large
        filename = (upload.name or "") if upload else ""
        report = importer.import_tasks(project, data, filename, request.user)
        return Response(report.as_dict(), status=status.HTTP_201_CREATED)

    @extend_schema(request=AssignSerializer, responses={200: dict})
    @action(detail=True, methods=["post"])
    def assign(self, request: Request, pk: str) -> Response:
        project = self._managed()
        body = AssignSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        assignee = body.validated_data["assignee"]
        if (
            not access.projects_where(assignee, Capability.WORK_QUEUE)
            .filter(pk=project.pk)
            .exists()
        ):
            raise PermissionDenied(f"{assignee.username} is not an annotator of this project.")
        tasks = self._selected(project, body.validated_data["task_ids"])
        result = queue.assign_tasks(tasks, assignee, request.user)
        cannot_run = [{"id": task, "reason": reason} for task, reason in result.cannot_run]
        return Response(
            {
                "assigned": result.assigned,
                "assignee": assignee.username,
                "cannot_run": cannot_run,
                "message": result.message,
            }
        )

    @extend_schema(request=TaskSelectionSerializer, responses={200: dict})
    @action(detail=True, methods=["post"])
    def unassign(self, request: Request, pk: str) -> Response:
        project = self._managed()
        body = TaskSelectionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        tasks = self._selected(project, body.validated_data["task_ids"])
        result = queue.unassign_tasks(tasks, request.user)
        return Response(
            {
                "unassigned": result.unassigned,
                "not_assigned": result.not_assigned,
                "started": result.started,
                "left_alone": result.left_alone,
                "message": result.message,
            }
        )

    def _selected(self, project: Project, ids: list[int]) -> list[Task]:
        tasks = list(Task.objects.filter(project=project, pk__in=ids))
        missing = sorted(set(ids) - {t.pk for t in tasks})
        if missing:
            raise DomainError(f"These tasks are not in project {project.pk}: {missing[:20]}")
        return tasks

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def progress(self, request: Request, pk: str) -> Response:
        project = self.get_object()
        user = request.user
        if not access.projects_where(user, Capability.VIEW_EPISODES).filter(pk=project.pk).exists():
            access.require(user, project, Capability.MANAGE_TASKS)
        counts = dict(project.tasks.values_list("status").annotate(n=Count("id")).order_by())
        return Response({"project": project.pk, "tasks_by_status": counts})

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"], url_path="model")
    def model_health(self, request: Request, pk: str) -> Response:
        """The project's proposer, its model and whether it is up, to any member; its endpoint
        (``base_url``) to its managers only, as the model settings are.

        The endpoint is probed inside this request: ``GET /models`` with a 3-second timeout,
        a health probe and not a model call (see ``model_serving.status``)."""
        project = self.get_object()
        shown = model_status(versions.project_model_settings(project))
        if not access.allows(request.user, project, Capability.MANAGE_TASKS):
            del shown["base_url"]
        return Response(shown)


class MembershipViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = MembershipSerializer
    token_resource = "projects"
    filterset_fields = ["project", "role"]

    def get_queryset(self) -> QuerySet[Membership]:
        managed = access.projects_where(self.request.user, Capability.MANAGE_TASKS)
        return Membership.objects.filter(project__in=managed).select_related("user")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # Authorised before the body is validated, so that what a caller who does not manage
        # the project is told never depends on which projects or users exist.
        access.project_named_in(request.data, request.user, Capability.MANAGE_TASKS)
        return super().create(request, *args, **kwargs)


class TaskViewSet(viewsets.ReadOnlyModelViewSet):
    token_resource = "tasks"
    filterset_fields = ["project", "status", "assignee__username", "priority"]
    search_fields = ["instruction", "external_id"]
    ordering_fields = ["priority", "created_at", "updated_at", "id"]

    def get_queryset(self) -> QuerySet[Task]:
        tasks = access.visible_tasks(self.request.user).select_related(
            "assignee", "evaluator_check__cleared_by"
        )
        if self.action == "retrieve":
            tasks = tasks.prefetch_related("events__actor", "events__assignee")
        return tasks

    def get_serializer_class(self) -> type[TaskSerializer]:
        return TaskDetailSerializer if self.action == "retrieve" else TaskSerializer

    @extend_schema(request=ClaimRequestSerializer, responses={200: ClaimSerializer})
    @action(detail=False, methods=["post"])
    def claim(self, request: Request) -> Response:
        projects = work_projects(request)
        claim = queue.claim_next_task(request.user, projects)
        return Response(ClaimSerializer(claim).data)

    def _lease_action(self, request: Request, pk: str, operation: Callable[..., Any]) -> Any:
        body = LeaseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        # Any task of a project the user works in: a stale lease then gets "lease lost", not 404.
        workable = Task.objects.filter(
            project__in=access.projects_where(request.user, Capability.WORK_QUEUE)
        )
        task = get_object_or_404(workable, pk=pk)
        return operation(task.pk, body.validated_data["lease_id"], request.user)

    @extend_schema(request=LeaseSerializer, responses={200: dict})
    @action(detail=True, methods=["post"])
    def heartbeat(self, request: Request, pk: str) -> Response:
        expires = self._lease_action(request, pk, queue.heartbeat)
        return Response({"lease_expires_at": expires})

    @extend_schema(request=LeaseSerializer, responses={200: TaskSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str) -> Response:
        task = self._lease_action(request, pk, queue.release_task)
        return Response(_as_left(request, task, TaskEvent.Kind.RELEASED))

    @extend_schema(request=LeaseSerializer, responses={200: TaskSerializer})
    @action(detail=True, methods=["post"])
    def submit(self, request: Request, pk: str) -> Response:
        task = self._lease_action(request, pk, queue.submit_task)
        return Response(_as_left(request, task, TaskEvent.Kind.SUBMITTED))


def _as_left(request: Request, task: Task, kind: str) -> dict[str, Any]:
    """The task as the caller left it (``queue.as_left``), unless they manage its project."""
    serializer = TaskSerializer(task, context={"request": request})
    data = dict(serializer.data)
    if not serializer.managed(task):
        data["status"] = queue.as_left(kind)
        data["assignee"] = request.user.username if kind == TaskEvent.Kind.SUBMITTED else None
    return data


class EpisodeViewSet(viewsets.ReadOnlyModelViewSet):
    token_resource = "episodes"
    filterset_fields = {
        "task": ["exact"],
        "task__project": ["exact"],
        "outcome": ["exact"],
        "annotator__username": ["exact"],
        "model_version": ["exact"],
        "ended_at": ["isnull"],  # ?ended_at__isnull=true: the running ones
    }
    ordering_fields = ["started_at", "ended_at"]

    def get_queryset(self) -> QuerySet[Episode]:
        episodes = (
            access.visible_episodes(self.request.user)
            .select_related("annotator", "task__project", "rollout")
            .annotate(step_count=Count("steps"))
            .order_by("-started_at", "id")
        )
        if self.action == "retrieve":
            steps = Step.objects.select_related("observation", "decided_by").prefetch_related(
                "proposals", "revisions__author"
            )
            episodes = episodes.prefetch_related(
                Prefetch("steps", queryset=steps), "reviews__reviewer"
            )
        return episodes

    def get_serializer_class(self) -> type[EpisodeSerializer]:
        return EpisodeDetailSerializer if self.action == "retrieve" else EpisodeSerializer

    @extend_schema(request=ClaimRequestSerializer, responses={201: dict})
    @action(detail=False, methods=["post"])
    def start(self, request: Request) -> Response:
        """Claim (or resume) your task and start its episode on a leased desktop."""
        projects = work_projects(request)
        episode = episodes.start_episode(request.user, projects)
        return Response(
            {
                "episode": episode.pk,
                "task": episode.task_id,
                "socket": f"/ws/episodes/{episode.pk}/",
            },
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=None, responses={201: StreamSerializer})
    @action(detail=True, methods=["post"])
    def stream(self, request: Request, pk: str) -> Response:
        """The episode's live desktop, view-only for its annotator and for those who may view
        the project's episodes: the desktop changes only through recorded decisions."""
        episode = self.get_object()
        if episode.annotator_id != request.user.pk:
            access.require(request.user, episode.task.project, Capability.VIEW_EPISODES)
        if episode.ended_at is not None or episode.desktop is None:
            raise ownership.EpisodeError("This episode has ended; its desktop is not streamed.")
        if not ownership.owns_desktop(episode):  # reset since: maybe someone else's now
            raise ownership.DesktopNotOwned(f"Not streamed: {ownership.DESKTOP_LOST}.")
        stream = open_stream(episode.desktop, request.user)
        return Response(StreamSerializer(stream).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=ReviewSerializer, responses={201: ReviewSerializer, 200: ReviewSerializer}
    )
    @action(detail=True, methods=["post"], url_path="reviews")
    def review(self, request: Request, pk: str) -> Response:
        """Review an ended episode: 201 with the new review, or 200 with the review already stored
        when this one repeats it (a double click or a retry; see
        ``annotation.episodes.reviews``)."""
        episode = self.get_object()
        access.require(request.user, episode.task.project, Capability.REVIEW)
        body = ReviewSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        receipt = reviews.submit_review(
            episode,
            request.user,
            body.validated_data["verdict"],
            body.validated_data.get("first_wrong_step"),
            body.validated_data.get("comment", ""),
        )
        code = status.HTTP_200_OK if receipt.duplicate else status.HTTP_201_CREATED
        return Response(ReviewSerializer(receipt.review).data, status=code)

    @extend_schema(request=BranchRequestSerializer, responses={201: BranchTaskSerializer})
    @action(detail=True, methods=["post"])
    def branch(self, request: Request, pk: str) -> Response:
        """Mark a rollout's first wrong step and send it to annotators from there: the rollout is
        rejected with that step, and a branch task replays the steps before it (answered again,
        200, when that step was sent already; see ``annotation.rollouts.branching``)."""
        episode = self.get_object()
        access.require(request.user, episode.task.project, Capability.REVIEW)
        body = BranchRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        task, created = branching.send_to_annotators(
            episode,
            request.user,
            body.validated_data["step"],
            body.validated_data.get("comment", ""),
        )
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(BranchTaskSerializer(task).data, status=code)


class ScreenshotView(APIView):
    """A stored observation, to whoever may see an episode it belongs to."""

    token_resource = "episodes"

    @extend_schema(responses={(200, "image/png"): bytes})
    def get(self, request: Request, sha256: str) -> FileResponse:
        visible = access.visible_episodes(request.user)
        screenshot = get_object_or_404(
            Screenshot.objects.filter(steps__episode__in=visible).distinct(), pk=sha256
        )
        response = FileResponse(
            default_storage.open(str(screenshot.file.name), "rb"), content_type="image/png"
        )
        response["Cache-Control"] = "private, max-age=31536000, immutable"  # content-addressed
        return response
