"""Dataset exports: the background job's row of each SFT, DPO or CT export."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.models.projects import Project


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
    coordinate_style = models.CharField(
        max_length=16,
        default="uitars15",
        help_text="How the rows write coordinates: the convention of the model the project "
        "served when the export was asked for (its version A's, else its own settings').",
    )
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
