"""The Django admin for managers: each manager sees and edits only the projects they manage.

Staff who manage a project may use the admin for it; superusers see everything. Steps,
proposals, revisions and task events are read-only here: they are the record of what happened.
"""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from annotation.models import (
    DatasetExport,
    Episode,
    Membership,
    Project,
    Proposal,
    Review,
    Step,
    Task,
    TaskEvent,
)
from annotation.projects import access, queue
from backend.accounts.models import User
from backend.accounts.roles import Capability


def _staff(request: HttpRequest) -> User:
    """The admin's user: the admin site lets only signed-in staff in."""
    assert isinstance(request.user, User)
    return request.user


class ManagedProjectAdmin(admin.ModelAdmin):
    """Limits rows to the projects the signed-in staff member manages."""

    project_path = "project"

    def _managed(self, request: HttpRequest) -> QuerySet[Project]:
        return access.projects_where(_staff(request), Capability.MANAGE_TASKS)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        rows = super().get_queryset(request)
        if request.user.is_superuser:
            return rows
        return rows.filter(**{f"{self.project_path}__in": self._managed(request)})

    def has_module_permission(self, request: HttpRequest) -> bool:
        return (
            request.user.is_active
            and request.user.is_staff
            and (request.user.is_superuser or self._managed(request).exists())
        )

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "project" and not request.user.is_superuser:
            kwargs["queryset"] = self._managed(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(ManagedProjectAdmin):
    project_path = "pk"
    list_display = ("name", "platform", "environment_template", "created_at")
    list_filter = ("platform",)
    search_fields = ("name", "description")
    inlines = [MembershipInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        user = _staff(request)
        return user.is_superuser or user.can_create_projects

    def get_queryset(self, request: HttpRequest) -> QuerySet[Project]:
        rows = admin.ModelAdmin.get_queryset(self, request)
        return rows if request.user.is_superuser else rows.filter(pk__in=self._managed(request))


class TaskEventInline(ReadOnlyInline):
    model = TaskEvent
    fields = ("at", "kind", "actor", "assignee", "reason")
    readonly_fields = fields


@admin.register(Task)
class TaskAdmin(ManagedProjectAdmin):
    list_display = ("external_id", "project", "status", "priority", "assignee", "lease_expires_at")
    list_filter = (
        "status",
        ("project", admin.RelatedOnlyFieldListFilter),
        ("assignee", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("external_id", "instruction")
    list_select_related = ("project", "assignee")
    readonly_fields = (
        "status",
        "assignee",
        "lease_id",
        "lease_expires_at",
        "claimed_at",
        "claim_reason",
        "source",
    )
    inlines = [TaskEventInline]
    actions = ["return_to_pool"]

    @admin.action(description="Unassign: return assigned tasks to the project pool")
    def return_to_pool(self, request: HttpRequest, rows: QuerySet[Task]) -> None:
        self.message_user(request, queue.unassign_tasks(rows, _staff(request)).message)


class StepInline(ReadOnlyInline):
    model = Step
    fields = ("index", "decision", "final_thought", "final_action", "decided_by", "decided_at")
    readonly_fields = fields


class ReviewInline(ReadOnlyInline):
    model = Review
    fields = ("created_at", "reviewer", "verdict", "first_wrong_step", "comment")
    readonly_fields = fields


@admin.register(Episode)
class EpisodeAdmin(ManagedProjectAdmin):
    project_path = "task__project"
    list_display = ("id", "task", "annotator", "model_version", "started_at", "ended_at", "outcome")
    list_filter = ("outcome", "model_version", ("task__project", admin.RelatedOnlyFieldListFilter))
    search_fields = ("task__external_id", "task__instruction", "annotator__username")
    list_select_related = ("task", "annotator")
    readonly_fields = (
        "task",
        "annotator",
        "model_version",
        "started_at",
        "ended_at",
        "outcome",
        "end_reason",
    )
    inlines = [StepInline, ReviewInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class ProposalInline(ReadOnlyInline):
    model = Proposal
    fields = ("rank", "thought", "action", "invalid_reason", "model_version", "latency_ms")
    readonly_fields = fields


@admin.register(Step)
class StepAdmin(ManagedProjectAdmin):
    """Steps are the record of what happened: they can be read here, never edited."""

    project_path = "episode__task__project"
    list_display = ("episode", "index", "decision", "decided_by", "decided_at")
    list_filter = ("decision", ("episode__task__project", admin.RelatedOnlyFieldListFilter))
    search_fields = ("final_thought", "episode__task__external_id")
    inlines = [ProposalInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Review)
class ReviewAdmin(ManagedProjectAdmin):
    project_path = "episode__task__project"
    list_display = ("episode", "reviewer", "verdict", "first_wrong_step", "created_at")
    list_filter = ("verdict", ("episode__task__project", admin.RelatedOnlyFieldListFilter))
    search_fields = ("comment", "reviewer__username")
    readonly_fields = (
        "episode",
        "reviewer",
        "verdict",
        "first_wrong_step",
        "comment",
        "created_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(DatasetExport)
class DatasetExportAdmin(ManagedProjectAdmin):
    list_display = (
        "id",
        "project",
        "kind",
        "format",
        "status",
        "progress",
        "created_by",
        "created_at",
    )
    list_filter = ("kind", "format", "status", ("project", admin.RelatedOnlyFieldListFilter))
    search_fields = ("content_hash", "created_by__username")
    readonly_fields = [f.name for f in DatasetExport._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
