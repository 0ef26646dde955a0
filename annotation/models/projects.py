"""Projects and who works in them: the platform a project's tasks run on, its model settings,
its members and their roles."""

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
    demonstrate = models.BooleanField(
        default=False,
        help_text="Every task is demonstrated: the annotator drives the desktop from the start.",
    )
    # Quality control (annotation/quality/): k annotators per task, the share of claims that
    # are honeypots, the gold accuracy below which new episodes wait for review before they
    # count, and whether a miss or a rejection shows the right answer at once.
    overlap = models.PositiveSmallIntegerField(default=1)
    honeypot_rate = models.FloatField(default=0.0)
    gold_threshold = models.FloatField(null=True, blank=True)
    immediate_feedback = models.BooleanField(default=False)
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
            ),
            models.CheckConstraint(
                condition=Q(overlap__gte=1) & Q(overlap__lte=5), name="project_overlap_1_5"
            ),
            models.CheckConstraint(
                condition=Q(honeypot_rate__gte=0) & Q(honeypot_rate__lte=0.5),
                name="project_honeypot_rate_0_half",
            ),
            models.CheckConstraint(
                condition=Q(gold_threshold__isnull=True)
                | (Q(gold_threshold__gte=0) & Q(gold_threshold__lte=1)),
                name="project_gold_threshold_0_1",
            ),
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
