"""The domain model of annotation (design §2).

Steps are append-only: once a step is decided its row is frozen (a PostgreSQL trigger refuses
updates), and a review that changes it writes a ``StepRevision`` with its author.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from backend.accounts.roles import Role


class Platform(models.TextChoices):
    DESKTOP = "desktop"
    WEB = "web"
    ANDROID = "android"


class Project(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    platform = models.CharField(max_length=16, choices=Platform.choices, default=Platform.DESKTOP)
    environment_template = models.CharField(
        max_length=100, default="default", help_text="Name of the desktop template tasks run on."
    )
    model_settings = models.JSONField(
        default=dict,
        blank=True,
        help_text="Proposer, endpoint, model name and version, sampling and prompt settings.",
    )
    guidelines = models.TextField(blank=True, help_text="What annotators should know (Markdown).")
    default_max_steps = models.PositiveIntegerField(default=30)
    # The registered model version that proposes (empty: model_settings as they are), and a
    # second one that proposes for a share of the episodes (see annotation/model_versions.py).
    model_version = models.ForeignKey(
        "model_serving.ModelVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="projects_a",
    )
    version_b = models.ForeignKey(
        "model_serving.ModelVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="projects_b",
    )
    version_b_share = models.FloatField(default=0.0)
    # How autonomous rollouts of this project are validated (annotation/validation.py): the
    # judge model's endpoint, model and threshold, and which parts V(s) requires.
    validation_settings = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(version_b_share__gte=0) & Q(version_b_share__lte=1),
                name="project_version_b_share_0_1",
            )
        ]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=[(r.value, r.value) for r in Role])
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="one_role_per_project")
        ]
        ordering = ["project", "user"]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.project}"


class TaskStatus(models.TextChoices):
    QUEUED = "queued"  # in the project pool
    ASSIGNED = "assigned"  # waiting in one annotator's own queue
    IN_PROGRESS = "in_progress"  # claimed: held by its assignee under a lease
    SUBMITTED = "submitted"
    REVIEWED = "reviewed"
    REJECTED = "rejected"


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
    priority = models.IntegerField(default=0, help_text="Higher is claimed first.")
    # A branch task (``annotation.branches``): a rollout's trajectory handed to people from its
    # first wrong step. Its desktop replays the rollout's steps before ``branch_step``.
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


class EpisodeOutcome(models.TextChoices):
    FINISHED = "finished"
    CALL_USER = "call_user"
    ABANDONED = "abandoned"
    ENV_FAILED = "env_failed"
    MAX_STEPS = "max_steps"
    STOPPED = "stopped"  # an autonomous run ended by a stop rule; the reason names it


class EpisodeMode(models.TextChoices):
    INTERACTIVE = "interactive"  # an annotator decides every step
    AUTONOMOUS = "autonomous"  # a rollout: the model's proposal runs as it is (decision auto)


class EvaluationStatus(models.TextChoices):
    NONE = ""  # the task has no evaluator, or the episode did not end with work to score
    PENDING = "pending"  # the episode ended; its desktop is kept until the evaluator has run
    SCORED = "scored"
    FAILED = "failed"  # the evaluator could not run (its reason is in ``evaluation``)


class Episode(models.Model):
    """One attempt at a task by one annotator on one desktop."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="episodes")
    mode = models.CharField(
        max_length=12, choices=EpisodeMode.choices, default=EpisodeMode.INTERACTIVE
    )
    # For a rollout, the person who started its batch.
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="episodes"
    )
    desktop = models.ForeignKey(
        "vm_pool.Desktop", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The desktop's generation when this episode leased it: the episode owns that generation
    # only, never the desktop after a reset (when it may be someone else's).
    desktop_generation = models.PositiveIntegerField(null=True, blank=True)
    # Set while the annotator is away (no heartbeat): the desktop and task are kept for them
    # until TANDEM_EPISODE_GRACE_SECONDS after this moment.
    paused_at = models.DateTimeField(null=True, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    model_version = models.CharField(max_length=200, blank=True)
    # The registered version chosen for this episode when it started, if the project runs one.
    served_version = models.ForeignKey(
        "model_serving.ModelVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="episodes",
    )
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=EpisodeOutcome.choices, blank=True)
    end_reason = models.CharField(max_length=300, blank=True)
    # The task's evaluator run on the desktop as the episode left it (vm_pool.evaluation):
    # the score from 0 to 1, and each metric's score, details or error.
    evaluation_status = models.CharField(
        max_length=8, choices=EvaluationStatus.choices, blank=True, default=""
    )
    task_success = models.FloatField(null=True, blank=True)
    evaluation = models.JSONField(default=dict, blank=True)
    # The evaluation job in force (a lost one is sent again as the next attempt) and its last
    # sign of life: set when it is queued, beaten while it runs (``evaluations.recover_lost``).
    evaluation_attempt = models.PositiveSmallIntegerField(default=0)
    evaluation_beat_at = models.DateTimeField(null=True, blank=True)
    # What the task's setup went on after, as OSWorld does: a command's non-zero exit, a window
    # that was not there. Shown with the episode, so that a reviewer knows how it started.
    setup_log = models.JSONField(default=list, blank=True)
    # A branch task's replay of the rollout's steps (``annotation.branches``): the rollout, the
    # step handed over, the tolerance and each replayed step's screen difference.
    replay = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            # Rollouts sample a task several times at once; people work it once at a time.
            models.UniqueConstraint(
                fields=["task"],
                condition=Q(ended_at__isnull=True, mode="interactive"),
                name="one_running_episode_per_task",
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True, outcome="")
                | (Q(ended_at__isnull=False) & ~Q(outcome="")),
                name="episode_outcome_iff_ended",
            ),
        ]

    def __str__(self) -> str:
        return f"episode {self.pk} of task {self.task_id}"


class Decision(models.TextChoices):
    ACCEPTED = "accepted"
    CORRECTED = "corrected"
    ERROR_KEPT = "error_kept"
    AUTO = "auto"  # a rollout's step: the model's proposal ran as it was, nobody decided


PEOPLE_DECISIONS = (Decision.ACCEPTED, Decision.CORRECTED, Decision.ERROR_KEPT)


class Step(models.Model):
    """One step of an episode: observation, proposals, the decision and the final action.

    Actions are stored as the JSON of the unified action space, with points in screen pixels
    of this step's observation.
    """

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    observation = models.ForeignKey(
        "vm_pool.Screenshot", on_delete=models.PROTECT, related_name="steps"
    )
    created_at = models.DateTimeField(default=timezone.now)
    decision = models.CharField(max_length=16, choices=Decision.choices, blank=True)
    chosen_proposal = models.ForeignKey(
        "Proposal", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    final_thought = models.TextField(blank=True)
    final_action = models.JSONField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_ms = models.PositiveIntegerField(null=True, blank=True)
    # How long the screen took to settle for the stored observation, and how many times a
    # newer screen replaced it before the decision (``vm_pool.screen_watch``).
    settle_ms = models.PositiveIntegerField(null=True, blank=True)
    reobserved = models.PositiveSmallIntegerField(default=0)
    # Its action ran and the screen after it was the one it was decided on, though the action
    # was meant to change it (``rollout_rules.StepRecord.no_op``): keys a window manager or a
    # lost focus swallowed, say. Shown to reviewers; exports may leave such steps out.
    no_visible_effect = models.BooleanField(default=False)
    # When a job took the decided action to run it: a second job for the step leaves it alone.
    executing_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["episode", "index"]
        constraints = [
            models.UniqueConstraint(fields=["episode", "index"], name="step_index_unique"),
            models.CheckConstraint(
                condition=Q(decided_at__isnull=True, decision="")
                | (Q(decided_at__isnull=False) & ~Q(decision="") & Q(final_action__isnull=False)),
                name="step_decided_completely",
            ),
        ]

    def __str__(self) -> str:
        return f"step {self.index} of episode {self.episode_id}"


class Proposal(models.Model):
    """What the model proposed for a step; several when best-of-N sampling is on."""

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="proposals")
    rank = models.PositiveSmallIntegerField(default=0)
    raw_text = models.TextField()
    thought = models.TextField(blank=True)
    action = models.JSONField(null=True, blank=True)
    invalid_reason = models.CharField(max_length=500, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    model_version = models.CharField(max_length=200, blank=True)
    sampling = models.JSONField(default=dict, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    # Made for an observation the screen has since replaced: kept, never offered or used.
    superseded = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["step", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["step", "rank"], name="proposal_rank_unique"),
            models.CheckConstraint(
                condition=Q(action__isnull=False, invalid_reason="")
                | (Q(action__isnull=True) & ~Q(invalid_reason="")),
                name="proposal_valid_or_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"proposal {self.rank} for step {self.step_id}"

    @property
    def is_valid(self) -> bool:
        return not self.invalid_reason

    def copied_to(self, step: "Step") -> "Proposal":
        """The same answer as ``step``'s proposal, unsaved: what the model said and at what
        cost, at the same rank (a branch task's replayed step shows the rollout's own)."""
        copied = (
            "rank", "raw_text", "thought", "action", "invalid_reason", "model_name",
            "model_version", "sampling", "prompt_tokens", "completion_tokens", "latency_ms",
        )  # fmt: skip
        return Proposal(step=step, **{name: getattr(self, name) for name in copied})


class StepRevision(models.Model):
    """A later change to a decided step (by a reviewer), never an edit of the step itself."""

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    decision = models.CharField(max_length=16, choices=Decision.choices)
    final_thought = models.TextField(blank=True)
    final_action = models.JSONField()
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["step", "number"]
        constraints = [
            models.UniqueConstraint(fields=["step", "number"], name="revision_number_unique")
        ]

    def __str__(self) -> str:
        return f"revision {self.number} of step {self.step_id}"


class Review(models.Model):
    class Verdict(models.TextChoices):
        ACCEPTED = "accepted"
        REJECTED = "rejected"

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    first_wrong_step = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Index of the first wrong step; the steps before it stay usable as data.",
    )
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.verdict} by {self.reviewer_id} for episode {self.episode_id}"


class DatasetExport(models.Model):
    """A versioned dataset snapshot, produced by a background job (status and progress here)."""

    class Kind(models.TextChoices):
        SFT = "sft"
        DPO = "dpo"
        CT = "ct"

    class Format(models.TextChoices):
        TRL = "trl"
        LLAMA_FACTORY = "llama_factory"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="exports")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    format = models.CharField(max_length=16, choices=Format.choices, default=Format.TRL)
    filters = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)
    counts = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    location = models.CharField(max_length=500, blank=True)
    files = models.JSONField(
        default=list, blank=True, help_text="The published files: [{name, size, sha256}]."
    )
    error = models.TextField(blank=True)
    attempt = models.PositiveIntegerField(
        default=0, help_text="How many times a job has started building this export."
    )
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life of the job building it."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="dataset_exports"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=1), name="export_progress_0_1"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} export {self.pk} ({self.status})"


# Rollout batches live in a module of their own; imported here so that Django registers them.
from annotation.rollout_models import Rollout, RolloutBatch  # noqa: E402, F401
