"""API representations of projects, members and tasks; episodes have their own
(``annotation.episodes.serializers``)."""

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework import serializers

from annotation.models import (
    EvaluatorCheck,
    Membership,
    Project,
    Task,
    TaskEvent,
)
from annotation.projects import access, evaluator_checks
from annotation.projects.support import files_missing, missing_programs
from annotation.quality.overlap import BadOverlap, check_overlap, reopen_for_overlap
from backend.accounts.roles import Capability, Role, role_allows
from model_serving.endpoint_keys import API_KEY, endpoint, written
from vm_pool.models import DesktopTemplate

User = get_user_model()


# Model settings that are secrets: stored and handed to the proposer, never shown. A read says
# whether each is set (``api_key_set``); writes keep, replace or clear the key by the rules of
# ``model_serving.endpoint_keys`` (a changed base_url clears it).
SECRET_MODEL_SETTINGS = (API_KEY,)
SECRET_SET_MARKERS = tuple(f"{key}_set" for key in SECRET_MODEL_SETTINGS)


class ModelSettingsField(serializers.JSONField):
    """A project's model settings: a JSON object, shown without its secrets."""

    default_error_messages = {
        "null": "model_settings must be a JSON object ({{}} for the defaults), not null.",
        "not_an_object": "model_settings must be a JSON object ({{}} for the defaults).",
    }

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        # A form field gives "null" or "" as text; JSONField would turn "null" into None.
        if data == "":
            self.fail("not_an_object")
        settings = super().to_internal_value(data)
        if settings is None:
            self.fail("null")
        if not isinstance(settings, dict):
            self.fail("not_an_object")
        # The markers a read shows are not settings: a settings object read and sent back as it
        # is keeps its secrets.
        return {key: value for key, value in settings.items() if key not in SECRET_SET_MARKERS}

    def to_representation(self, settings: dict[str, Any]) -> dict[str, Any]:
        shown = {k: v for k, v in settings.items() if k not in SECRET_MODEL_SETTINGS}
        return {**shown, **{f"{k}_set": bool(settings.get(k)) for k in SECRET_MODEL_SETTINGS}}


QUALITY_SETTINGS = ("overlap", "honeypot_rate", "gold_threshold", "immediate_feedback")


class ProjectSerializer(serializers.ModelSerializer):
    model_settings = ModelSettingsField(
        required=False,
        help_text=(
            "Proposer, endpoint, model, sampling and prompt settings; shown to the project's "
            "managers only. Secrets (api_key) are write-only: a read shows api_key_set, a write "
            "that leaves api_key out keeps it while base_url stays the same endpoint and clears "
            "it when base_url changes, an empty api_key clears it."
        ),
    )
    my_role = serializers.SerializerMethodField()

    class Meta:
        model = Project
        fields = [
            "id",
            "name",
            "description",
            "platform",
            "environment_template",
            "model_settings",
            "guidelines",
            "default_max_steps",
            *QUALITY_SETTINGS,
            "created_at",
            "my_role",
        ]
        read_only_fields = ["created_at"]
        extra_kwargs = {
            "honeypot_rate": {"min_value": 0.0, "max_value": 0.5},
            "gold_threshold": {"min_value": 0.0, "max_value": 1.0},
        }

    def update(self, instance: Project, validated_data: dict[str, Any]) -> Project:
        before = instance.overlap
        project = super().update(instance, validated_data)
        if project.overlap > before:
            reopen_for_overlap(project)
        return project

    def validate_overlap(self, k: int) -> int:
        if self.instance is None:
            if k != 1:
                raise serializers.ValidationError("Add annotators before setting an overlap.")
            return k
        try:
            return check_overlap(self.instance, k)
        except BadOverlap as error:
            raise serializers.ValidationError(str(error)) from None

    def validate_environment_template(self, name: str) -> str:
        if not DesktopTemplate.objects.filter(name=name).exists():
            known = ", ".join(
                DesktopTemplate.objects.order_by("name").values_list("name", flat=True)
            )
            raise serializers.ValidationError(
                f"There is no desktop template named {name!r}; "
                f"the templates are: {known or 'none'}."
            )
        return name

    def get_my_role(self, project: Project) -> str | None:
        user = self.context["request"].user
        if user.is_superuser:
            return "admin"
        for membership in project.memberships.all():
            if membership.user_id == user.pk:
                return membership.role
        return None

    def validate_model_settings(self, settings: dict[str, Any]) -> dict[str, Any]:
        if settings.get("base_url") not in ("", None):
            try:
                endpoint(settings["base_url"])
            except ValueError as error:
                raise serializers.ValidationError(f"base_url {error}.") from None
        if settings.get(API_KEY) is not None and not isinstance(settings[API_KEY], str):
            raise serializers.ValidationError(f"{API_KEY} must be a string.")
        stored = self.instance.model_settings if self.instance is not None else {}
        return written(stored, settings)

    def to_representation(self, project: Project) -> dict[str, Any]:
        shown = super().to_representation(project)
        role = shown["my_role"]
        if not (role == "admin" or role_allows(role, Capability.MANAGE_TASKS)):
            del shown["model_settings"]
            for name in QUALITY_SETTINGS:  # how work is checked is the managers' business
                del shown[name]
        return shown


class UserByNameOrEmail(serializers.RelatedField):  # type: ignore[type-arg]
    """A user given by username or by e-mail address (an e-mail that names one user only)."""

    default_error_messages = {
        "unknown": "No user has the username or e-mail {value!r}.",
        "ambiguous": "More than one user has the e-mail {value!r}: give the username.",
    }

    def to_internal_value(self, data: Any) -> Any:
        value = str(data).strip()
        user = User.objects.filter(username=value).first()
        if user is not None:
            return user
        by_email = list(User.objects.filter(email__iexact=value)[:2]) if "@" in value else []
        if len(by_email) > 1:
            self.fail("ambiguous", value=value)
        if not by_email:
            self.fail("unknown", value=value)
        return by_email[0]

    def to_representation(self, value: Any) -> str:
        return str(value.username)


class MembershipSerializer(serializers.ModelSerializer):
    username = UserByNameOrEmail(
        source="user",
        queryset=User.objects.all(),
        help_text="The member's username, or their e-mail address.",
    )
    role = serializers.ChoiceField(choices=[r.value for r in Role])

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if Membership.objects.filter(project=attrs["project"], user=attrs["user"]).exists():
            raise serializers.ValidationError(
                {"username": f"{attrs['user'].username} is a member of this project already."}
            )
        return attrs

    class Meta:
        model = Membership
        fields = ["id", "project", "username", "role", "created_at"]
        read_only_fields = ["created_at"]
        validators: list[Any] = []  # one role per project: said in words by ``validate``


class TaskEventSerializer(serializers.ModelSerializer):
    actor = serializers.SlugRelatedField(slug_field="username", read_only=True)
    assignee = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = TaskEvent
        fields = ["kind", "actor", "assignee", "reason", "at"]


FILES_MISSING = "files_missing"  # the context key: task id → its URLs the cache lacks
TEMPLATES = "templates"  # the context key: project id → its desktop template (or None)
MANAGED = "managed"  # the context key: the ids of the caller's projects that they manage


class TaskListSerializer(serializers.ListSerializer):
    """A page of tasks, whose missing files are looked up for the whole page in one query."""

    def to_representation(self, data: Any) -> list[Any]:
        tasks = list(data.all() if hasattr(data, "all") else data)
        self.child.context[FILES_MISSING] = files_missing(tasks)
        self.child.context[TEMPLATES] = project_templates({task.project_id for task in tasks})
        self.child.context[MANAGED] = managed_projects(self.child.context)
        return super().to_representation(tasks)


def managed_projects(context: dict[str, Any]) -> set[int]:
    """The projects the request's caller manages (none without a request)."""
    request = context.get("request")
    if request is None:
        return set()
    return set(
        access.projects_where(request.user, Capability.MANAGE_TASKS).values_list("pk", flat=True)
    )


def project_templates(project_ids: Any) -> dict[int, DesktopTemplate | None]:
    """Each project's desktop template, in two queries."""
    named = dict(
        Project.objects.filter(pk__in=project_ids).values_list("pk", "environment_template")
    )
    templates = {t.name: t for t in DesktopTemplate.objects.filter(name__in=named.values())}
    return {pk: templates.get(name) for pk, name in named.items()}


class TaskSerializer(serializers.ModelSerializer):
    assignee = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    files_missing = serializers.SerializerMethodField(
        help_text="The URLs this task takes from the task-file cache that it does not hold yet."
    )
    programs_missing = serializers.SerializerMethodField(
        help_text="The programs this task's setup starts that its project's desktop lacks "
        "(a local desktop runs the host's programs)."
    )
    evaluator_check = serializers.SerializerMethodField(
        help_text="Its evaluator's self-check on an untouched desktop (managers only; null "
        "before any, and for others)."
    )

    class Meta:
        model = Task
        list_serializer_class = TaskListSerializer
        fields = [
            "id",
            "project",
            "external_id",
            "instruction",
            "setup",
            "evaluator",
            "related_apps",
            "max_steps",
            "priority",
            "status",
            "assignee",
            "lease_expires_at",
            "claimed_at",
            "claim_reason",
            "cannot_run",
            "branch_of",
            "branch_step",
            "files_missing",
            "programs_missing",
            "evaluator_check",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def managed(self, task: Task) -> bool:
        """Whether the caller manages the task's project (computed once per response)."""
        managed = self.context.get(MANAGED)
        if managed is None:
            managed = self.context[MANAGED] = managed_projects(self.context)
        return task.project_id in managed

    def to_representation(self, task: Task) -> dict[str, Any]:
        data = super().to_representation(task)
        if not self.managed(task):
            # The evaluator's expected values are the task's answer, and its setup and evaluator
            # are a manager's: an annotator on the task needs neither.
            data["setup"], data["evaluator"] = None, None
        return data

    def get_files_missing(self, task: Task) -> list[str]:
        known = self.context.get(FILES_MISSING)
        if known is None or task.pk not in known:
            known = files_missing([task])
        return known[task.pk]

    def get_evaluator_check(self, task: Task) -> dict[str, Any] | None:
        if not self.managed(task):
            return None
        try:
            check = task.evaluator_check  # selected with the page (TaskViewSet), else one query
        except EvaluatorCheck.DoesNotExist:
            check = None
        return evaluator_checks.as_json(check, task)

    def get_programs_missing(self, task: Task) -> list[str]:
        templates = self.context.get(TEMPLATES)
        if templates is None or task.project_id not in templates:
            templates = project_templates([task.project_id])
        return missing_programs(task.setup, task.evaluator, templates[task.project_id])


class TaskDetailSerializer(TaskSerializer):
    events = TaskEventSerializer(many=True, read_only=True)

    class Meta(TaskSerializer.Meta):
        fields = [*TaskSerializer.Meta.fields, "source", "events"]
        read_only_fields = fields

    def to_representation(self, task: Task) -> dict[str, Any]:
        data = super().to_representation(task)
        if not self.managed(task):
            # Others' events would tell a task was worked before (a gold task's source
            # episode, its reviews, earlier runs; overlap's other annotators): each caller sees
            # their own, and not where the task came from.
            request = self.context.get("request")
            me = request.user.username if request is not None else None
            data["events"] = [event for event in data["events"] if me and event["actor"] == me]
            data["source"] = None
        return data


class ClaimRequestSerializer(serializers.Serializer):
    project = serializers.IntegerField(required=False, help_text="Claim only from this project.")


class ClaimSerializer(serializers.Serializer):
    task = TaskSerializer()
    lease_id = serializers.UUIDField()
    lease_expires_at = serializers.DateTimeField()
    reason = serializers.CharField()
    resumed = serializers.BooleanField()


class LeaseSerializer(serializers.Serializer):
    lease_id = serializers.UUIDField()


class TaskSelectionSerializer(serializers.Serializer):
    task_ids = serializers.ListField(
        child=serializers.IntegerField(), min_length=1, max_length=10_000
    )


class AssignSerializer(TaskSelectionSerializer):
    assignee = serializers.SlugRelatedField(slug_field="username", queryset=User.objects.all())


class ImportUploadSerializer(serializers.Serializer):
    file = serializers.FileField(
        help_text="A .json or .jsonl file of tasks (OSWorld files as they are)."
    )
