"""Fine-tuning jobs, the model versions they register, and offline evaluations of versions.

A **model version** is what proposes: a base model served by an OpenAI-compatible endpoint,
optionally with a LoRA adapter on top. Its ``name`` is the label recorded on every episode and
proposal it makes (so acceptance rates compare versions), and for an adapter also the name the
endpoint serves it under (vLLM's ``lora_name``). Its lineage says where it came from: the job,
the parent version, the exact dataset files (with sha256s) it was trained on.

A **fine-tuning job** is a row, not a process: status, progress, loss curve, logs and a cancel
flag live here, and a worker on the ``train`` queue does the work. Its datasets are stored as
data (export id, kind, location, files and hashes), resolved by the API layer when the job is
created: this app never reads the annotation app's tables.

An **evaluation run** scores a version on the held-out steps of a project (their step ids are
data here too) and keeps the result next to the version.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL_STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


class FineTuneJob(models.Model):
    """SFT and/or DPO stages with LoRA on dataset exports, run by a GPU worker."""

    name = models.CharField(max_length=200, blank=True)
    status = models.CharField(
        max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True
    )
    progress = models.FloatField(default=0.0)
    base_model = models.CharField(
        max_length=500, help_text="The base model as asked: a name the deployment knows, or a path."
    )
    base_model_path = models.CharField(
        max_length=500, help_text="Where the worker loads the base model from."
    )
    parent_version = models.ForeignKey(
        "ModelVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    stages = models.JSONField(
        help_text="In order: [{kind: sft|dpo, dataset: {export_id, kind, location, files}}]."
    )
    project_ids = models.JSONField(default=list, help_text="Projects the datasets come from.")
    lora = models.JSONField(default=dict, blank=True)
    hyperparameters = models.JSONField(default=dict, blank=True)
    version_name = models.CharField(
        max_length=200, help_text="The name the model version gets when the job succeeds."
    )
    base_url = models.CharField(
        max_length=500, blank=True, help_text="Endpoint that will serve the new version."
    )
    loss_curve = models.JSONField(default=list, blank=True)
    logs = models.TextField(blank=True)
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    artifacts_location = models.CharField(max_length=500, blank=True)
    attempt = models.PositiveIntegerField(
        default=0, help_text="How many times a worker has started this job."
    )
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life of the attempt running it."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=1), name="finetune_progress_0_1"
            ),
            # Two requests for one new version (a retry, a double click) make one job.
            models.UniqueConstraint(
                fields=["version_name"],
                condition=~Q(status__in=["failed", "cancelled"]),
                name="finetune_one_live_job_a_version",
            ),
        ]

    def __str__(self) -> str:
        return f"fine-tuning job {self.pk} ({self.status})"


class ModelVersion(models.Model):
    class Serving(models.TextChoices):
        REGISTERED = "registered"  # known, not (yet) checked on an endpoint
        LOADING = "loading"
        SERVING = "serving"  # the endpoint lists it
        FAILED = "failed"

    name = models.CharField(
        max_length=200,
        unique=True,
        help_text="Recorded on episodes and proposals; the served name of an adapter.",
    )
    base_model = models.CharField(
        max_length=500, help_text="The base model's served name (what the endpoint calls it)."
    )
    base_model_path = models.CharField(max_length=500, blank=True)
    base_url = models.CharField(
        max_length=500, blank=True, help_text="The OpenAI-compatible endpoint that serves it."
    )
    coordinate_style = models.CharField(max_length=16, default="uitars15")
    adapter_location = models.CharField(
        max_length=500, blank=True, help_text="Storage folder of the LoRA adapter; empty: none."
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    job = models.OneToOneField(
        FineTuneJob, null=True, blank=True, on_delete=models.PROTECT, related_name="model_version"
    )
    lineage = models.JSONField(default=dict, blank=True)
    serving_status = models.CharField(
        max_length=16, choices=Serving.choices, default=Serving.REGISTERED
    )
    serving_error = models.TextField(blank=True)
    served_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def served_name(self) -> str:
        """The model name requests ask the endpoint for."""
        return self.name if self.adapter_location else self.base_model


class EvaluationRun(models.Model):
    """Step success rate of a version on a project's held-out steps."""

    model_version = models.ForeignKey(
        ModelVersion, on_delete=models.CASCADE, related_name="evaluations"
    )
    project_id = models.PositiveIntegerField(db_index=True)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    progress = models.FloatField(default=0.0)
    tolerance = models.FloatField(help_text="Allowed point distance, a share of the diagonal.")
    step_ids = models.JSONField(default=list, help_text="The held-out steps scored, in order.")
    total = models.PositiveIntegerField(default=0)
    succeeded = models.PositiveIntegerField(default=0)
    invalid = models.PositiveIntegerField(default=0)
    success_rate = models.FloatField(null=True, blank=True)
    by_action = models.JSONField(default=dict, blank=True)
    results = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"evaluation {self.pk} of {self.model_version_id}"
