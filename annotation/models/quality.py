"""Quality control's records (design §13): the right answers of gold steps."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotation.models.episodes import Step


class GoldStep(models.Model):
    """A step's right answers (``annotation.quality.rules``): set by a manager on a reviewed
    episode, or taken from one its task's evaluator scored 1. Never shown to annotators."""

    class Source(models.TextChoices):
        REVIEW = "review"  # the episode's latest review accepted it
        EVALUATOR = "evaluator"  # the task's evaluator scored the episode 1

    step = models.OneToOneField(Step, on_delete=models.CASCADE, related_name="gold")
    answers = models.JSONField()
    source = models.CharField(max_length=16, choices=Source.choices)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["step"]

    def __str__(self) -> str:
        return f"gold of step {self.step_id}"
