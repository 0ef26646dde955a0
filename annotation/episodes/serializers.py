"""API representations of episodes: their steps, proposals, revisions, reviews and branches."""

from typing import Any

from rest_framework import serializers

from annotation.episodes.leases import SUBMITTING
from annotation.models import (
    Episode,
    EpisodeMode,
    Proposal,
    Review,
    Step,
    StepRevision,
    Task,
    TaskEvent,
)
from annotation.projects import access, queue
from backend.accounts.roles import Capability
from vm_pool.actions import Action, InvalidAction


def action_text(action: Any) -> str | None:
    """A stored action as UI-TARS text (screen pixels), for people reading an episode."""
    if action is None:
        return None
    try:
        return Action.from_json(action).to_text()
    except InvalidAction:
        return None


class ProposalSerializer(serializers.ModelSerializer):
    action_text = serializers.SerializerMethodField()

    class Meta:
        model = Proposal
        fields = [
            "rank",
            "raw_text",
            "thought",
            "action",
            "action_text",
            "invalid_reason",
            "model_name",
            "model_version",
            "sampling",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
            "created_at",
        ]

    def get_action_text(self, proposal: Proposal) -> str | None:
        return action_text(proposal.action)


class StepRevisionSerializer(serializers.ModelSerializer):
    author = serializers.SlugRelatedField(slug_field="username", read_only=True)
    final_action_text = serializers.SerializerMethodField()

    class Meta:
        model = StepRevision
        fields = [
            "number",
            "decision",
            "final_thought",
            "final_action",
            "final_action_text",
            "author",
            "note",
            "drafted_by",
            "created_at",
        ]

    def get_final_action_text(self, revision: StepRevision) -> str | None:
        return action_text(revision.final_action)


class StepSerializer(serializers.ModelSerializer):
    proposals = ProposalSerializer(many=True, read_only=True)
    revisions = StepRevisionSerializer(many=True, read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    screenshot = serializers.CharField(source="observation_id", read_only=True)
    screen_size = serializers.SerializerMethodField()
    final_action_text = serializers.SerializerMethodField()
    chosen_rank = serializers.SerializerMethodField(
        help_text="Rank of the proposal the annotator picked (accepted or kept), else null."
    )

    class Meta:
        model = Step
        fields = [
            "index",
            "screenshot",
            "screen_size",
            "proposals",
            "chosen_rank",
            "decision",
            "final_thought",
            "final_action",
            "final_action_text",
            "decided_by",
            "decided_at",
            "decision_ms",
            "no_visible_effect",
            "revisions",
        ]

    def get_screen_size(self, step: Step) -> list[int]:
        return [step.observation.width, step.observation.height]

    def get_final_action_text(self, step: Step) -> str | None:
        return action_text(step.final_action)

    def get_chosen_rank(self, step: Step) -> int | None:
        chosen = [p.rank for p in step.proposals.all() if p.pk == step.chosen_proposal_id]
        return chosen[0] if chosen else None


class ReviewSerializer(serializers.ModelSerializer):
    reviewer = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Review
        fields = [
            "id",
            "episode",
            "reviewer",
            "verdict",
            "first_wrong_step",
            "comment",
            "created_at",
        ]
        read_only_fields = ["id", "episode", "reviewer", "created_at"]


# What the task's evaluator made of an episode, in detail. Shown to those who view the project's
# episodes; an annotator reading their own episode sees its score and these fields empty: the
# getters' expected values would tell them the answer. (Empty, not absent: the API's schema
# stays the same for every reader.)
EVALUATION_DETAILS = {"evaluation_reason": "", "evaluation": {}, "setup_log": []}
OVERSEEN_PROJECTS = "overseen_projects"  # the context key: the project ids the reader oversees


class EpisodeSerializer(serializers.ModelSerializer):
    annotator = serializers.SlugRelatedField(slug_field="username", read_only=True)
    project = serializers.IntegerField(source="task.project_id", read_only=True)
    project_name = serializers.CharField(source="task.project.name", read_only=True)
    instruction = serializers.CharField(source="task.instruction", read_only=True)
    task_external_id = serializers.CharField(source="task.external_id", read_only=True)
    step_count = serializers.IntegerField(read_only=True)
    evaluation_reason = serializers.SerializerMethodField(
        help_text="Why the episode scored what it did, or why it could not be scored."
    )
    rollout = serializers.SerializerMethodField(help_text="The rollout it runs (autonomous).")
    kept_until = serializers.SerializerMethodField(
        help_text="A paused episode: until when its task and desktop are kept for its annotator."
    )
    rollout_batch = serializers.SerializerMethodField(help_text="That rollout's batch.")

    class Meta:
        model = Episode
        fields = [
            "id",
            "mode",
            "rollout",
            "rollout_batch",
            "task",
            "task_external_id",
            "instruction",
            "project",
            "project_name",
            "annotator",
            "model_version",
            "started_at",
            "ended_at",
            "paused_at",
            "kept_until",
            "outcome",
            "end_reason",
            "step_count",
            "evaluation_status",
            "task_success",
            "evaluation_reason",
            "demonstration",
            "replay_check",
        ]

    def get_kept_until(self, episode: Episode) -> Any:
        """Until when a paused episode's task and desktop are kept for its annotator."""
        if episode.paused_at is None or episode.ended_at is not None:
            return None
        return episode.task.lease_expires_at

    def get_evaluation_reason(self, episode: Episode) -> str:
        return str(episode.evaluation.get("error") or episode.evaluation.get("reason") or "")

    def get_rollout(self, episode: Episode) -> int | None:
        rollout = getattr(episode, "rollout", None)
        return rollout.pk if rollout is not None else None

    def get_rollout_batch(self, episode: Episode) -> int | None:
        rollout = getattr(episode, "rollout", None)
        return rollout.batch_id if rollout is not None else None

    def to_representation(self, episode: Episode) -> dict[str, Any]:
        shown = super().to_representation(episode)
        if not self._oversees(episode.task.project_id):
            for field, empty in EVALUATION_DETAILS.items():
                if field in shown:
                    shown[field] = type(empty)()
        return shown

    def _oversees(self, project_id: int) -> bool:
        """May the reader view this project's episodes? Looked up once per response."""
        request = self.context.get("request")
        if request is None:
            return False
        if request.user.is_superuser:
            return True
        overseen = self.context.get(OVERSEEN_PROJECTS)
        if overseen is None:
            viewable = access.projects_where(request.user, Capability.VIEW_EPISODES)
            overseen = self.context[OVERSEEN_PROJECTS] = set(viewable.values_list("pk", flat=True))
        return project_id in overseen


class BranchTaskSerializer(serializers.ModelSerializer):
    """A branch task made from a rollout's step, as the rollout's viewer lists it."""

    assignee = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    episodes = serializers.SerializerMethodField(help_text="Its episodes, newest first.")

    class Meta:
        model = Task
        fields = ["id", "external_id", "branch_step", "status", "assignee", "cannot_run",
                  "episodes"]  # fmt: skip
        read_only_fields = fields

    def get_episodes(self, task: Task) -> list[dict[str, Any]]:
        return [
            {"id": e.pk, "outcome": e.outcome, "annotator": e.annotator.username}
            for e in task.episodes.select_related("annotator").order_by("-started_at")
        ]


class BranchRequestSerializer(serializers.Serializer):
    step = serializers.IntegerField(min_value=1, help_text="The rollout's first wrong step.")
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class EpisodeDetailSerializer(EpisodeSerializer):
    task_status = serializers.CharField(source="task.status", read_only=True)
    steps = StepSerializer(many=True, read_only=True)
    reviews = ReviewSerializer(many=True, read_only=True)
    branch_of = serializers.IntegerField(
        source="task.branch_of_id", read_only=True, allow_null=True,
        help_text="For a branch task's episode: the rollout episode it goes on from.",
    )  # fmt: skip
    branch_step = serializers.IntegerField(
        source="task.branch_step", read_only=True, allow_null=True
    )
    branches = BranchTaskSerializer(
        many=True, read_only=True, help_text="For a rollout: the branch tasks made from it."
    )

    class Meta(EpisodeSerializer.Meta):
        fields = [
            *EpisodeSerializer.Meta.fields,
            "task_status",
            "steps",
            "reviews",
            "evaluation",
            "setup_log",
            "branch_of",
            "branch_step",
            "replay",
            "branches",
        ]

    def to_representation(self, episode: Episode) -> dict[str, Any]:
        shown = super().to_representation(episode)
        if episode.ended_at is not None and episode.mode == EpisodeMode.INTERACTIVE:
            # What became of the task (gold again, back in the pool for overlap, reviewed) would
            # tell its annotator of a quality check: to those who do not oversee the project it
            # reads as they left it when the episode ended.
            request = self.context.get("request")
            user = request.user if request is not None else None
            if user is None or not access.allows(
                user, episode.task.project, Capability.VIEW_EPISODES
            ):
                kind = (
                    TaskEvent.Kind.SUBMITTED
                    if episode.outcome in SUBMITTING
                    else TaskEvent.Kind.RELEASED
                )
                shown["task_status"] = queue.as_left(kind)
        return shown
