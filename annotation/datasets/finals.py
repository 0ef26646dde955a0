"""Reading recorded episodes for the pair builder (``pairs``): which episodes an export reads,
and their decided steps as they finally are (the latest revision applied), with their revisions'
drafts and (for pairs) their proposals, a chunk of episodes at a time. Rows are read as plain
values, three queries per chunk, so that memory holds one chunk, never a project.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import F, Lookup, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from annotation.datasets.records import Filters, HistoryTurn, StepTarget
from annotation.models import (
    DatasetExport,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    Project,
    Proposal,
    Review,
    Step,
    StepRevision,
)
from annotation.quality.kept import gold_failing, kept
from vm_pool.actions import Action, ScreenSize


def episodes_for(filters: Filters, kind: str) -> QuerySet[Episode]:
    latest = Review.objects.filter(episode=OuterRef("pk")).order_by("-created_at", "-id")
    episodes = Episode.objects.filter(
        task__project_id=filters.project_id, ended_at__isnull=False
    ).annotate(
        review_verdict=Subquery(latest.values("verdict")[:1]),
        review_first_wrong_step=Subquery(latest.values("first_wrong_step")[:1]),
    )
    if filters.ended_from is not None:
        episodes = episodes.filter(ended_at__gte=filters.ended_from)
    if filters.ended_until is not None:
        episodes = episodes.filter(ended_at__lt=filters.ended_until)
    if filters.model_version is not None:
        episodes = episodes.filter(model_version=filters.model_version)
    if filters.annotator_id is not None:
        episodes = episodes.filter(annotator_id=filters.annotator_id)
    if filters.min_task_success is not None:
        episodes = episodes.filter(task_success__gte=filters.min_task_success)
    if filters.review_status == "unreviewed":
        episodes = episodes.filter(review_verdict__isnull=True)
    elif filters.review_status != "any":
        episodes = episodes.filter(review_verdict=filters.review_status)
    if filters.source == "rollout":
        episodes = episodes.filter(mode=EpisodeMode.AUTONOMOUS)
        if kind == DatasetExport.Kind.SFT:
            # V = 1, or a reviewer named the first wrong step: the steps before it are valid.
            prefix = Q(
                review_verdict=Review.Verdict.REJECTED, review_first_wrong_step__isnull=False
            )
            episodes = episodes.filter(Q(rollout__verdict=True) | prefix)
        elif kind == DatasetExport.Kind.CT:
            episodes = episodes.filter(rollout__verdict=False)
        else:  # a rollout's pairs come from the branch tasks people work, not from itself
            episodes = episodes.none()
        return episodes.order_by("id")
    episodes = people(episodes, filters)
    if kind == DatasetExport.Kind.CT:
        episodes = episodes.filter(
            Q(review_verdict=Review.Verdict.REJECTED) | Q(outcome=EpisodeOutcome.ABANDONED)
        )
    return episodes.order_by("id")


def people(episodes: QuerySet[Any], filters: Filters) -> QuerySet[Any]:
    """People's episodes that may be data (``annotation.quality.kept``): never a honeypot run,
    a held episode (or any of an annotator now below the project's gold threshold) once a
    review accepted it, and the quality filters."""
    episodes = episodes.filter(mode=EpisodeMode.INTERACTIVE, honeypot_run__isnull=True)
    not_held = Q(quality_hold__isnull=True)
    threshold = (
        Project.objects.filter(pk=filters.project_id)
        .values_list("gold_threshold", flat=True)
        .first()
    )
    if threshold is not None:
        not_held &= ~Q(annotator_id__in=gold_failing(filters.project_id, threshold))
    episodes = episodes.filter(not_held | Q(review_verdict=Review.Verdict.ACCEPTED))
    return kept(episodes, filters.project_id, filters.min_gold_accuracy, filters.min_agreement)


# The task an episode's held-out split is decided by (``model_serving.evaluation``): its own,
# or for a branch task's episode its rollout's task.
SPLIT_TASK = Coalesce("task__branch_of__task_id", "task_id")
# Rows are read as plain values, not model instances: building Step and Proposal objects was
# most of the reading time, and the records only need these columns.
EPISODE_COLUMNS = (
    "pk",
    "split_task",
    "task__instruction",
    "task__project__platform",
    "outcome",
    "review_verdict",
    "review_first_wrong_step",
    "task_success",
    "replay_check",
)
STEP_COLUMNS = (
    "pk",
    "episode_id",
    "index",
    "decision",
    "final_thought",
    "final_action",
    "chosen_proposal_id",
    "observation_id",  # the screenshot's sha256, its primary key
    "observation__width",
    "observation__height",
    "no_visible_effect",
)


class AnyOf(Lookup):  # type: ignore[type-arg]
    """``column = ANY(array)``: the values as one array parameter. ``__in`` sends one parameter
    per value, and preparing a chunk's thousand step ids that way cost more than the query."""

    lookup_name = "any_of"

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} = ANY({rhs})", (*lhs_params, *rhs_params)


@dataclass(frozen=True, slots=True)
class EpisodeRow:
    id: int
    split_task: int
    instruction: str
    platform: str
    outcome: str
    review_verdict: str | None
    review_first_wrong_step: int | None
    task_success: float | None
    replay_check: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ProposalRow:
    id: int
    thought: str
    action_json: dict[str, Any] | None
    invalid_reason: str

    @property
    def is_valid(self) -> bool:
        return not self.invalid_reason


@dataclass(frozen=True, slots=True)
class Final:
    """A decided step as it finally was (its latest revision applied), with its proposals."""

    turn: HistoryTurn
    chosen_proposal_id: int | None
    proposals: list[ProposalRow]  # by rank; read for pairs only
    no_visible_effect: bool = False
    drafted: bool = False  # its thought is a model's draft no person approved yet

    def target(self) -> StepTarget:
        return StepTarget(self.turn.thought, self.turn.action_json, self.turn.action_text)


def read_finals(ids: list[int], with_proposals: bool) -> dict[int, list[Final]]:
    """The finals of a chunk of episodes, by episode id, in step order: their decided steps,
    then those steps' revisions and (for pairs) proposals, in one query each."""
    steps = list(
        Step.objects.filter(episode_id__in=ids, decided_at__isnull=False)
        .order_by("episode_id", "index")
        .values_list(*STEP_COLUMNS)
    )
    # Revisions and proposals are looked up by step id, as a prefetch would: an index scan
    # whatever the size of the tables.
    of_steps = AnyOf(F("step_id"), Value([step[0] for step in steps]))
    latest_revision = {
        step_id: (decision, thought, action, drafted_by)  # by number: the last read is latest
        for step_id, decision, thought, action, drafted_by in StepRevision.objects.filter(of_steps)
        .order_by("step_id", "number")
        .values_list("step_id", "decision", "final_thought", "final_action", "drafted_by")
    }
    proposals: dict[int, list[ProposalRow]] = defaultdict(list)
    if with_proposals:
        for step_id, proposal_id, thought, action, invalid_reason in (
            Proposal.objects.filter(of_steps, superseded=False)  # made for a replaced screen
            .order_by("step_id", "rank")
            .values_list("step_id", "pk", "thought", "action", "invalid_reason")
        ):
            proposals[step_id].append(ProposalRow(proposal_id, thought, action, invalid_reason))
    finals: dict[int, list[Final]] = {episode_id: [] for episode_id in ids}
    screens: dict[tuple[int, int], ScreenSize] = {}
    for (
        step_id,
        episode_id,
        index,
        decision,
        thought,
        action,
        chosen,
        sha,
        width,
        height,
        inert,
    ) in steps:
        drafted_by = ""
        if step_id in latest_revision:
            decision, thought, action, drafted_by = latest_revision[step_id]
        assert action is not None  # decided steps always have one
        screen = screens.setdefault((width, height), ScreenSize(width, height))
        turn = HistoryTurn(
            step_index=index,
            decision=decision,
            screenshot=sha,
            screen=screen,
            thought=thought,
            action_json=action,
            action_text=Action.from_json(action).to_text(),
        )
        finals[episode_id].append(
            Final(turn, chosen, proposals.get(step_id, []), inert, bool(drafted_by))
        )
    return finals
