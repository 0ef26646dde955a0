"""Quality control's records (design §13): gold steps, honeypots and their verdicts, overlap
agreement, and episodes held for review."""

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from annotation.models.episodes import Episode, Step
from annotation.models.tasks import Task


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


class Honeypot(models.Model):
    """A gold task: a task of the project one of whose episodes holds gold steps, handed out
    again at the project's honeypot rate with that episode's proposals (``decoys`` replace some
    with deliberately wrong ones). Between runs its task is ``TaskStatus.GOLD``: out of the pool."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="honeypot")
    gold_episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="+")
    # {"<step index>": {"thought": str, "action": {...}}}: shown instead of the recorded answer.
    decoys = models.JSONField(default=dict, blank=True)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["task"]

    def __str__(self) -> str:
        return f"honeypot of task {self.task_id}"


class HoneypotRun(models.Model):
    """An annotator's episode on a honeypot: never ordinary data, scored against gold at its end."""

    episode = models.OneToOneField(Episode, on_delete=models.CASCADE, related_name="honeypot_run")
    honeypot = models.ForeignKey(Honeypot, on_delete=models.CASCADE, related_name="runs")
    scored_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"honeypot run {self.episode_id}"


class GoldVerdict(models.Model):
    """One scored step of a honeypot run (``annotation.quality.honeypots``)."""

    run = models.ForeignKey(HoneypotRun, on_delete=models.CASCADE, related_name="verdicts")
    step = models.OneToOneField(Step, on_delete=models.CASCADE, related_name="gold_verdict")
    gold = models.ForeignKey(GoldStep, on_delete=models.CASCADE, related_name="verdicts")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    right = models.BooleanField()
    shown_right = models.BooleanField()  # whether the proposal shown there was right
    reason = models.CharField(max_length=300, blank=True)
    at = models.DateTimeField()  # the run's end: scorecards' periods bound it

    class Meta:
        ordering = ["run", "step"]
        indexes = [models.Index(fields=["annotator", "at"])]

    def __str__(self) -> str:
        return f"{'right' if self.right else 'miss'} at step {self.step_id}"


class Agreement(models.Model):
    """Two annotators' decisions at one comparable step of one task (``quality.overlap``);
    ``annotator_a`` has the lower id."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="agreements")
    step_a = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="+")
    step_b = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="+")
    annotator_a = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    annotator_b = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    agree = models.BooleanField()
    at = models.DateTimeField()  # the later episode's end

    class Meta:
        ordering = ["task", "step_a"]
        constraints = [
            models.UniqueConstraint(fields=["step_a", "step_b"], name="agreement_once_per_pair"),
            models.CheckConstraint(
                condition=Q(annotator_a__lt=F("annotator_b")), name="agreement_pair_ordered"
            ),
        ]
        indexes = [models.Index(fields=["task", "agree"])]

    def __str__(self) -> str:
        return f"{'agree' if self.agree else 'disagree'}: steps {self.step_a_id}/{self.step_b_id}"


class QualityHold(models.Model):
    """An episode of an annotator below the project's gold threshold when it ended: it waits
    for a review that accepts it before it counts (exports, figures)."""

    episode = models.OneToOneField(Episode, on_delete=models.CASCADE, related_name="quality_hold")
    gold_accuracy = models.FloatField()
    threshold = models.FloatField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"episode {self.episode_id} held for review"
