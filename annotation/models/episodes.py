"""Episodes and what they record: steps (append-only once decided: a PostgreSQL trigger
refuses updates, and a review that changes one writes a ``StepRevision`` with its author),
the model's proposals, and reviews."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.models.tasks import Task


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
    # A branch task's replay of the rollout's steps (``annotation.episodes.replay``): the rollout,
    # the step handed over, the tolerance and each replayed step's screen difference.
    replay = models.JSONField(default=dict, blank=True)
    # Demonstrated from its first step: the annotator drives the desktop, no model proposes.
    demonstration = models.BooleanField(default=False)
    # A finished demonstration replayed on a fresh desktop with the same setup
    # (``annotation.episodes.replay_check``): its status, the first step whose screen differs,
    # and each replayed step's difference.
    replay_check = models.JSONField(default=dict, blank=True)

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
    # A person drove the desktop and the step is what their recorded input reduced to
    # (``annotation.episodes.demonstrations``); its thought comes after, as a revision.
    DEMONSTRATED = "demonstrated"


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
    # newer screen replaced it before the decision (``vm_pool.screen.watch``).
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
    # The model that drafted this thought for ``author`` to check; empty when a person wrote or
    # approved it. A drafted thought is no person's until a later revision approves it.
    drafted_by = models.CharField(max_length=200, blank=True)
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


class Demonstration(models.Model):
    """A stretch of an episode a person drove: the whole episode in demonstration mode, or a
    take over inside an interactive one. Its input went through the recording gate into
    ``recording``; when it ends, the input is reduced to the steps from ``from_step`` on."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="demonstrations")
    recording = models.OneToOneField(
        "vm_pool.Recording", on_delete=models.PROTECT, related_name="demonstration"
    )
    from_step = models.PositiveIntegerField()
    # The model's proposal on screen when a take over began: the rejected side of the pair
    # whose chosen side is the first demonstrated action.
    over_proposal = models.ForeignKey(
        Proposal, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    # Set once its input was reduced: how many steps it made, and the input no action of the
    # space holds (a middle click, a chord without a key name).
    steps_made = models.PositiveIntegerField(null=True, blank=True)
    skipped = models.JSONField(default=list, blank=True)
    # When each of its steps began (its first input), in seconds into the recording: the
    # person's pace, which the replay check keeps.
    starts = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["episode", "started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["episode"],
                condition=Q(ended_at__isnull=True),
                name="one_open_demonstration_per_episode",
            )
        ]

    def __str__(self) -> str:
        return f"demonstration from step {self.from_step} of episode {self.episode_id}"
