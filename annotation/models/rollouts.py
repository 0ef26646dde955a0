"""Rollout batches: a model version running a project's tasks by itself, k samples a task.

A ``RolloutBatch`` is the background job's row (status, progress, counts, pause/cancel); each
of its ``Rollout`` rows is one sample of one task, and runs as an ``Episode`` with
``mode=autonomous`` recorded with the same Step and Proposal rows as an interactive one (the
decision ``auto``), so every view and export reads it. How they run is
``annotation.rollouts.batches``; how a finished one is judged, ``annotation.rollouts.validation``.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class BatchStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"  # no new rollout starts; running ones finish
    CANCELLED = "cancelled"  # no new rollout starts; running ones stop at their next step
    SUCCEEDED = "succeeded"  # every rollout ended (whatever its own result)


class RolloutBatch(models.Model):
    project = models.ForeignKey(
        "annotation.Project", on_delete=models.CASCADE, related_name="rollout_batches"
    )
    name = models.CharField(max_length=200, blank=True)
    # The version that proposes, and a second one for a share of the samples (A/B).
    model_version = models.ForeignKey(
        "model_serving.ModelVersion", on_delete=models.PROTECT, related_name="rollout_batches"
    )
    version_b = models.ForeignKey(
        "model_serving.ModelVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="rollout_batches_b",
    )
    version_b_share = models.FloatField(default=0.0)
    task_ids = models.JSONField(default=list, help_text="The tasks, fixed when it was created.")
    samples_per_task = models.PositiveSmallIntegerField(default=1)
    sampling = models.JSONField(default=dict, blank=True, help_text="temperature, top_p, …")
    stop_rules = models.JSONField(default=dict, blank=True)
    # At most this many rollouts at once (the endpoint's concurrency), and at most this share
    # of the template's desktops: people keep the rest.
    max_concurrent = models.PositiveSmallIntegerField(default=4)
    desktop_share = models.FloatField(default=0.5)
    status = models.CharField(
        max_length=16, choices=BatchStatus.choices, default=BatchStatus.QUEUED
    )
    progress = models.FloatField(default=0.0)
    counts = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="rollout_batches"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(version_b_share__gte=0) & Q(version_b_share__lte=1),
                name="rollout_batch_b_share_0_1",
            ),
            models.CheckConstraint(
                condition=Q(desktop_share__gt=0) & Q(desktop_share__lte=1),
                name="rollout_batch_desktop_share",
            ),
        ]

    def __str__(self) -> str:
        return f"rollout batch {self.pk} of {self.project_id}"


class RolloutStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    ENDED = "ended"  # its episode ended (stop_reason says how); validation follows
    VALIDATED = "validated"
    CANCELLED = "cancelled"  # never started, or stopped by the batch's cancellation


class Rollout(models.Model):
    batch = models.ForeignKey(RolloutBatch, on_delete=models.CASCADE, related_name="rollouts")
    task = models.ForeignKey("annotation.Task", on_delete=models.CASCADE, related_name="+")
    sample = models.PositiveSmallIntegerField()
    status = models.CharField(
        max_length=16, choices=RolloutStatus.choices, default=RolloutStatus.QUEUED
    )
    # The episode of its current attempt; an attempt a dead worker left is ended and kept.
    episode = models.OneToOneField(
        "annotation.Episode",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="rollout",
    )
    attempt = models.PositiveSmallIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(max_length=32, blank=True)
    # What the stop rules and the rule checks read, step by step (``rollout_rules.StepRecord``
    # as JSON): each answer's action or invalid reason, the screen before and after it.
    records = models.JSONField(default=list, blank=True)
    # V(s): every part's verdict and reason, and the whole (null until validated).
    validation = models.JSONField(default=dict, blank=True)
    verdict = models.BooleanField(null=True, blank=True)
    # Tokens the model spent on it (prompt + completion), for the batch's cost.
    tokens = models.PositiveIntegerField(default=0)
    steps = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["batch", "task", "sample"]
        constraints = [
            models.UniqueConstraint(
                fields=["batch", "task", "sample"], name="one_rollout_per_sample"
            )
        ]
        indexes = [models.Index(fields=["batch", "status"])]

    def __str__(self) -> str:
        return f"rollout {self.pk} (task {self.task_id}, sample {self.sample})"
