"""Tasks and their history: the queue's rows (status, assignee, lease) and every event of a
task (claimed, released, lapsed, paused, submitted, reviewed)."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.models.projects import Project


class TaskStatus(models.TextChoices):
    QUEUED = "queued"  # in the project pool
    ASSIGNED = "assigned"  # waiting in one annotator's own queue
    IN_PROGRESS = "in_progress"  # claimed: held by its assignee under a lease
    SUBMITTED = "submitted"
    REVIEWED = "reviewed"
    REJECTED = "rejected"
    GOLD = "gold"  # a honeypot between runs: handed out at the project's rate, never pooled


class Task(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tasks")
    external_id = models.CharField(
        max_length=200, help_text="The task's id in its source file; unique within the project."
    )
    instruction = models.TextField()
    setup = models.JSONField(
        default=list, blank=True, help_text="Setup steps, OSWorld style: [{type, parameters}]."
    )
    evaluator = models.JSONField(default=dict, blank=True)
    cannot_run = models.CharField(
        max_length=300,
        blank=True,
        help_text="Why the task cannot run here: its setup or evaluator needs third-party "
        "accounts (Google Drive, a login). Such a task is kept but never claimed.",
    )
    related_apps = models.JSONField(default=list, blank=True)
    source = models.JSONField(default=dict, blank=True, help_text="The row as it was imported.")
    max_steps = models.PositiveIntegerField(default=30)
    demonstrate = models.BooleanField(
        default=False, help_text="Demonstrated: the annotator drives the desktop from the start."
    )
    priority = models.IntegerField(default=0, help_text="Higher is claimed first.")
    # A branch task (``annotation.episodes.replay``): a rollout's trajectory handed to people from
    # its first wrong step. Its desktop replays the rollout's steps before ``branch_step``.
    branch_of = models.ForeignKey(
        "Episode", null=True, blank=True, on_delete=models.PROTECT, related_name="branches"
    )
    branch_step = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=TaskStatus.choices, default=TaskStatus.QUEUED, db_index=True
    )
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="assigned_tasks",
    )
    lease_id = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claim_reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-priority", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"], name="task_id_unique_in_project"
            ),
            models.CheckConstraint(
                condition=~Q(status="in_progress")
                | (
                    Q(assignee__isnull=False)
                    & Q(lease_id__isnull=False)
                    & Q(lease_expires_at__isnull=False)
                ),
                name="task_in_progress_has_lease",
            ),
            models.CheckConstraint(
                condition=~Q(status="assigned") | Q(assignee__isnull=False),
                name="task_assigned_has_assignee",
            ),
            models.CheckConstraint(
                condition=Q(branch_of__isnull=True, branch_step__isnull=True)
                | Q(branch_of__isnull=False, branch_step__gte=1),
                name="task_branch_names_its_step",
            ),
            models.UniqueConstraint(
                fields=["branch_of", "branch_step"], name="one_branch_per_rollout_step"
            ),
        ]
        indexes = [
            models.Index(
                fields=["project", "-priority", "id"],
                condition=Q(status="queued"),
                name="task_pool_order",
            ),
            # For annotators of several projects: walk all queued tasks in claim order.
            models.Index(
                fields=["-priority", "id"],
                condition=Q(status="queued"),
                name="task_pool_order_all_projects",
            ),
            models.Index(
                fields=["assignee", "status", "-priority", "id"], name="task_assignee_queue"
            ),
            models.Index(
                fields=["lease_expires_at"],
                condition=Q(status="in_progress"),
                name="task_live_leases",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.external_id}: {self.instruction[:60]}"


class TaskEvent(models.Model):
    """What happened to a task and why: imports, assignments, claims, leases, submissions."""

    class Kind(models.TextChoices):
        IMPORTED = "imported"
        UPDATED = "updated"
        ASSIGNED = "assigned"
        UNASSIGNED = "unassigned"
        CLAIMED = "claimed"
        RELEASED = "released"
        LEASE_LAPSED = "lease_lapsed"
        PAUSED = "paused"
        RESUMED = "resumed"
        SUBMITTED = "submitted"
        REVIEWED = "reviewed"
        BRANCHED = "branched"  # made from a rollout's first wrong step

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    lease_id = models.UUIDField(null=True, blank=True)
    reason = models.CharField(max_length=300, blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["task", "kind"])]

    def __str__(self) -> str:
        return f"{self.kind} of task {self.task_id}"


class EvaluatorCheckStatus(models.TextChoices):
    PENDING = "pending"  # queued or running
    TRUSTED = "trusted"  # scored 0 on the untouched desktop
    PASSES_WITHOUT_WORK = "passes_without_work"  # scored above 0 with no work done
    CANNOT_EVALUATE = "cannot_evaluate"  # the evaluator could not score: the reason says why
    FAILED = "failed"  # the check itself did not run: no desktop, the setup failed


class EvaluatorCheck(models.Model):
    """A task's evaluator run on the untouched desktop, right after its setup
    (``annotation.projects.evaluator_checks``): one per task, for the content it checked."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="evaluator_check")
    status = models.CharField(
        max_length=24, choices=EvaluatorCheckStatus.choices, default=EvaluatorCheckStatus.PENDING
    )
    score = models.FloatField(null=True, blank=True)
    reason = models.CharField(max_length=1000, blank=True)
    details = models.JSONField(default=dict, blank=True)  # the score's per-metric record
    content_sha = models.CharField(max_length=64)  # sha256 of the setup and evaluator checked
    requested_at = models.DateTimeField(default=timezone.now)
    # who asked (the importer, or a manager): the desktop it runs on is leased in their name
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    checked_at = models.DateTimeField(null=True, blank=True)
    cleared_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    cleared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status"], name="evaluator_check_status")]

    def __str__(self) -> str:
        return f"{self.task_id}: {self.status}"
