"""The pair builder: what the recorded episodes become as training data (design §5).

This module turns episodes into typed records; writing them as TRL or LLaMA-Factory files
(and converting points to a model's coordinate convention) is the exporters' job.

Rules, exactly:

- **Final step.** A step's final (decision, thought, action) is its latest ``StepRevision`` when
  a reviewer revised it, else the step's own. Undecided steps (the open step of an episode that
  ended) are never data.
- **Context** for step τ: the task's instruction; every earlier step's final thought and action,
  in order (``history``); and the screenshots of the last ``IMAGE_WINDOW`` (5) observations up to
  and including oτ, as sha256s, with their screen sizes. Actions are kept as JSON and as UI-TARS
  text in screen pixels of the observation they were taken on.
- **The model's proposal** at a step: the proposal the annotator picked, when it is valid, else
  the lowest-ranked valid proposal. A step may have none (the model answered nothing usable).
- **Error-correction pair** at each step whose final decision is ``corrected`` and which is not
  a reflection: context at τ; chosen = the final (t*τ, a*τ); rejected = the model's proposal.
  Skipped, with a counted reason, when there is no valid proposal or when it equals the final
  (``decision_rules.same_step``: thoughts equal but for surrounding whitespace, actions equal
  in canonical JSON), so a pair's chosen never equals its rejected.
- **Post-reflection pair** after ``error_kept`` at τ: context at τ+1 (its history holds the kept
  error); chosen = the final step at τ+1; rejected = the model's proposal at τ+1. No pair, with a
  counted reason, when the proposal equals the final (the model reflected by itself), when there
  is no valid proposal, when τ+1 was not decided or lies outside the usable steps, or when τ+1 is
  itself an ``error_kept`` (a kept error is never a target). A corrected reflective step gives
  this pair only, never an error-correction pair as well: it would be the same pair twice.
- **Demonstrated steps** (``annotation.episodes.demonstrations``) are SFT samples (kind
  ``demonstrated``), like corrected ones. The first step of a take over begun over a valid
  proposal (the step's ``chosen_proposal``) is an error-correction pair with that proposal
  rejected; no other demonstrated step has a rejected side, and none is invented. With
  ``require_approved_thoughts``, an episode with a demonstrated step whose thought is empty or
  a model's unapproved draft is left out; with ``require_replay``, one whose replay check did
  not find it replaying (each a counted reason).
- **SFT samples**: context → completion = the final step, for every corrected step (kind
  ``corrected``) and every reflective step, the step right after an ``error_kept`` (kind
  ``reflection``, whatever its own decision, unless it is itself an ``error_kept``); accepted
  steps (kind ``accepted``) only with ``include_accepted``. An ``error_kept`` step is never a
  target, but stays in the history of the steps after it.
- **Reviews.** The latest review of an episode is in force. A rejection naming
  ``first_wrong_step = k`` keeps the valid prefix: only steps with index < k give SFT samples and
  pairs (as target and as reflective step). A rejection without a first wrong step gives none.
  Accepted and unreviewed episodes give all their steps. Only ended episodes are data; any
  outcome counts, since every step was decided by a person.
- **CT samples**: every ended episode whose latest review rejected it, or whose outcome is
  ``abandoned``: the whole trajectory of decided steps (observation, final thought and action);
  one with no decided step gives none (a counted reason).
- **Sources.** An export reads people's episodes (``source=interactive``, the default) or autonomous
  rollouts (``source=rollout``), never both. A rollout is data only once its validation decided
  (``annotation.rollouts.validation``): V = 1 makes every step an SFT sample (kind ``rollout``,
  rejection sampling; a reviewer's first wrong step keeps the prefix before it), V = 0 makes the
  trajectory a CT sample; a rollout gives no pairs by itself. A rollout whose reviewer named its
  first wrong step gives the steps before it as SFT samples whatever V is (the valid prefix); the
  pairs come from the branch task people work from that step (``annotation.episodes.replay``), whose
  replayed steps (``auto``) are history there, never targets.

Order is deterministic: episodes by id, then steps by index. Records stream: episodes are read
with ``QuerySet.iterator(chunk_size=…)``; their decided steps, revisions and proposals are read
a chunk of episodes at a time (three queries per chunk, plain values rather than model
instances), so memory holds one chunk, never a project. Each step's final is built once per
export and shared by every record of its episode.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.db.models import F, Lookup, OuterRef, Q, QuerySet, Subquery, Value

from annotation.episodes.decision_rules import same_step
from annotation.models import (
    DatasetExport,
    Decision,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    Proposal,
    Review,
    Step,
    StepRevision,
)
from model_serving.evaluation import is_held_out
from model_serving.proposers.base import IMAGE_WINDOW
from vm_pool.actions import Action, ScreenSize

ReviewStatus = Literal["accepted", "rejected", "unreviewed", "any"]
SftKind = Literal["corrected", "reflection", "accepted", "rollout", "demonstrated"]
Source = Literal["interactive", "rollout"]

DEFAULT_CHUNK_SIZE = 50

NO_VALID_PROPOSAL = "corrected step without a valid model proposal"
CORRECTION_EQUALS_PROPOSAL = "correction equal to the model's proposal"
REFLECTION_NO_VALID_PROPOSAL = "reflective step without a valid model proposal"
REFLECTION_EQUALS_PROPOSAL = "reflection equal to the model's proposal"
REFLECTION_IS_ERROR_KEPT = "step after an error_kept is itself an error_kept"
NO_REFLECTIVE_STEP = "error_kept without a usable next step"
REJECTED_WITHOUT_PREFIX = "episode rejected without a first wrong step"
HELD_OUT = "episode held out for evaluation"
NO_DECIDED_STEP = "episode without a decided step"
NO_VISIBLE_EFFECT = "step whose action had no visible effect"
THOUGHTS_NOT_APPROVED = "demonstration with a thought not written or approved by a person"
NOT_REPLAYED = "demonstration whose replay check did not pass"


# --- records -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryTurn:
    """An earlier step as it finally was: its observation and the final thought and action."""

    step_index: int
    decision: str
    screenshot: str  # sha256 of the step's observation
    screen: ScreenSize
    thought: str
    action_json: dict[str, Any]
    action_text: str  # UI-TARS text, screen pixels of ``screen``


@dataclass(frozen=True, slots=True)
class Context:
    """What the model sees before step τ."""

    instruction: str
    platform: str
    history: tuple[HistoryTurn, ...]
    screenshots: tuple[str, ...]  # the last IMAGE_WINDOW observations, oτ last
    screen_sizes: tuple[ScreenSize, ...]  # one per screenshot
    # The episode's score by its task's evaluator (0–1), None where it was not scored.
    task_success: float | None = None


@dataclass(frozen=True, slots=True)
class StepTarget:
    thought: str
    action_json: dict[str, Any]
    action_text: str  # UI-TARS text, screen pixels of oτ


@dataclass(frozen=True, slots=True)
class ErrorCorrectionPair:
    episode_id: int
    step_index: int
    context: Context
    chosen: StepTarget
    rejected: StepTarget


@dataclass(frozen=True, slots=True)
class PostReflectionPair:
    episode_id: int
    step_index: int  # τ+1, the reflective step
    context: Context
    chosen: StepTarget
    rejected: StepTarget


@dataclass(frozen=True, slots=True)
class SftSample:
    episode_id: int
    step_index: int
    context: Context
    completion: StepTarget
    kind: SftKind


@dataclass(frozen=True, slots=True)
class CtSample:
    episode_id: int
    instruction: str
    platform: str
    outcome: str
    steps: tuple[HistoryTurn, ...]
    task_success: float | None = None


Sample = ErrorCorrectionPair | PostReflectionPair | SftSample | CtSample


@dataclass(frozen=True, slots=True)
class Filters:
    """Which episodes an export reads. Dates bound ``ended_at``: from inclusive, until exclusive."""

    project_id: int
    ended_from: datetime | None = None
    ended_until: datetime | None = None
    model_version: str | None = None
    review_status: ReviewStatus = "any"
    annotator_id: int | None = None
    # Leave out the held-out split (model_serving.evaluation.is_held_out): datasets meant for
    # fine-tuning must, so that offline evaluation scores steps the model never trained on.
    exclude_held_out: bool = False
    # Only episodes their task's evaluator scored at least this (unscored ones are left out).
    min_task_success: float | None = None
    # People's episodes, or rollouts routed by their validation (V=1: SFT, V=0: CT).
    source: Source = "interactive"
    # Leave out, as targets, steps whose action changed nothing it was meant to change
    # (``Step.no_visible_effect``); they stay in later steps' history, where they happened.
    drop_no_visible_effect: bool = False
    # Leave out episodes with demonstrated steps whose thoughts are not all a person's (written,
    # or a draft approved), or whose replay check did not find them replaying.
    require_approved_thoughts: bool = False
    require_replay: bool = False


@dataclass
class Tally:
    """What a run yielded and what it skipped, by record type and by reason."""

    yielded: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)


# --- reading -------------------------------------------------------------------------------


def iter_samples(
    filters: Filters,
    kind: str,
    include_accepted: bool = False,
    *,
    tally: Tally | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    on_episode: Callable[[int], None] | None = None,
) -> Iterator[Sample]:
    """Stream the records of one kind (``sft``, ``dpo`` or ``ct``) in episode and step order.

    ``dpo`` yields both error-correction and post-reflection pairs. ``tally``, when given, is
    filled as records are yielded and steps are skipped. ``on_episode``, when given, is called
    with each episode's id as it is read (before its records), even one that gives none.
    """
    if kind not in DatasetExport.Kind.values:
        raise ValueError(f"unknown dataset kind {kind!r}; one of {', '.join(DatasetExport.Kind)}")
    tally = tally if tally is not None else Tally()
    rows = _episodes(filters, kind).values_list(*_EPISODE_COLUMNS).iterator(chunk_size=chunk_size)
    while chunk := [_EpisodeRow(*row) for row in itertools.islice(rows, chunk_size)]:
        held_out = {e.id for e in chunk if filters.exclude_held_out and is_held_out(e.id)}
        finals = _read_finals(
            [e.id for e in chunk if e.id not in held_out],
            with_proposals=kind == DatasetExport.Kind.DPO,
        )
        for episode in chunk:
            if on_episode is not None:
                on_episode(episode.id)
            if episode.id in held_out:
                tally.skipped[HELD_OUT] += 1
                continue
            refused = _demonstration_refused(episode, finals[episode.id], filters)
            if refused:
                tally.skipped[refused] += 1
                continue
            if kind == DatasetExport.Kind.CT:
                if not finals[episode.id]:  # nothing was done: no trajectory to learn from
                    tally.skipped[NO_DECIDED_STEP] += 1
                    continue
                records: Iterable[Sample] = [_ct_sample(episode, finals[episode.id])]
            else:
                records = _step_records(episode, finals[episode.id], kind, include_accepted,
                                        filters, tally)  # fmt: skip
            for record in records:
                tally.yielded[type(record).__name__] += 1
                yield record


def count_episodes(filters: Filters, kind: str) -> int:
    """How many episodes ``iter_samples`` reads for these filters: the measure of its progress."""
    return _episodes(filters, kind).count()


def _episodes(filters: Filters, kind: str) -> QuerySet[Episode]:
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
    episodes = episodes.filter(mode=EpisodeMode.INTERACTIVE)
    if kind == DatasetExport.Kind.CT:
        episodes = episodes.filter(
            Q(review_verdict=Review.Verdict.REJECTED) | Q(outcome=EpisodeOutcome.ABANDONED)
        )
    return episodes.order_by("id")


# Rows are read as plain values, not model instances: building Step and Proposal objects was
# most of the reading time, and the records only need these columns.
_EPISODE_COLUMNS = (
    "pk",
    "task__instruction",
    "task__project__platform",
    "outcome",
    "review_verdict",
    "review_first_wrong_step",
    "task_success",
    "replay_check",
)
_STEP_COLUMNS = (
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


class _AnyOf(Lookup):  # type: ignore[type-arg]
    """``column = ANY(array)``: the values as one array parameter. ``__in`` sends one parameter
    per value, and preparing a chunk's thousand step ids that way cost more than the query."""

    lookup_name = "any_of"

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} = ANY({rhs})", (*lhs_params, *rhs_params)


@dataclass(frozen=True, slots=True)
class _EpisodeRow:
    id: int
    instruction: str
    platform: str
    outcome: str
    review_verdict: str | None
    review_first_wrong_step: int | None
    task_success: float | None
    replay_check: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _ProposalRow:
    id: int
    thought: str
    action_json: dict[str, Any] | None
    invalid_reason: str

    @property
    def is_valid(self) -> bool:
        return not self.invalid_reason


@dataclass(frozen=True, slots=True)
class _Final:
    """A decided step as it finally was (its latest revision applied), with its proposals."""

    turn: HistoryTurn
    chosen_proposal_id: int | None
    proposals: list[_ProposalRow]  # by rank; read for pairs only
    no_visible_effect: bool = False
    drafted: bool = False  # its thought is a model's draft no person approved yet

    def target(self) -> StepTarget:
        return StepTarget(self.turn.thought, self.turn.action_json, self.turn.action_text)


def _read_finals(ids: list[int], with_proposals: bool) -> dict[int, list[_Final]]:
    """The finals of a chunk of episodes, by episode id, in step order: their decided steps,
    then those steps' revisions and (for pairs) proposals, in one query each."""
    steps = list(
        Step.objects.filter(episode_id__in=ids, decided_at__isnull=False)
        .order_by("episode_id", "index")
        .values_list(*_STEP_COLUMNS)
    )
    # Revisions and proposals are looked up by step id, as a prefetch would: an index scan
    # whatever the size of the tables.
    of_steps = _AnyOf(F("step_id"), Value([step[0] for step in steps]))
    latest_revision = {
        step_id: (decision, thought, action, drafted_by)  # by number: the last read is latest
        for step_id, decision, thought, action, drafted_by in StepRevision.objects.filter(of_steps)
        .order_by("step_id", "number")
        .values_list("step_id", "decision", "final_thought", "final_action", "drafted_by")
    }
    proposals: dict[int, list[_ProposalRow]] = defaultdict(list)
    if with_proposals:
        for step_id, proposal_id, thought, action, invalid_reason in (
            Proposal.objects.filter(of_steps, superseded=False)  # made for a replaced screen
            .order_by("step_id", "rank")
            .values_list("step_id", "pk", "thought", "action", "invalid_reason")
        ):
            proposals[step_id].append(_ProposalRow(proposal_id, thought, action, invalid_reason))
    finals: dict[int, list[_Final]] = {episode_id: [] for episode_id in ids}
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
            _Final(turn, chosen, proposals.get(step_id, []), inert, bool(drafted_by))
        )
    return finals


# --- building ------------------------------------------------------------------------------


def _context(episode: _EpisodeRow, turns: list[HistoryTurn], at: int) -> Context:
    """The context of the step at position ``at``: ``turns[:at]`` as history, ``turns[at]``'s
    observation as oτ."""
    window = turns[max(0, at + 1 - IMAGE_WINDOW) : at + 1]
    return Context(
        instruction=episode.instruction,
        platform=episode.platform,
        history=tuple(turns[:at]),
        screenshots=tuple(t.screenshot for t in window),
        screen_sizes=tuple(t.screen for t in window),
        task_success=episode.task_success,
    )


def _model_proposal(final: _Final) -> _ProposalRow | None:
    picked = next((p for p in final.proposals if p.id == final.chosen_proposal_id), None)
    if picked is not None and picked.is_valid:
        return picked
    if final.turn.decision == Decision.DEMONSTRATED:
        return None  # only the proposal on screen when the person took over is its rejected
    return next((p for p in final.proposals if p.is_valid), None)


def _demonstration_refused(episode: _EpisodeRow, finals: list[_Final], filters: Filters) -> str:
    """Why an episode with demonstrated steps is left out under the filters, if it is."""
    shown = [f for f in finals if f.turn.decision == Decision.DEMONSTRATED]
    if not shown:
        return ""
    if filters.require_approved_thoughts and any(
        f.drafted or not f.turn.thought.strip() for f in shown
    ):
        return THOUGHTS_NOT_APPROVED
    if filters.require_replay and (episode.replay_check or {}).get("status") != "replays":
        return NOT_REPLAYED
    return ""


def _usable_steps(episode: _EpisodeRow, finals: list[_Final], tally: Tally) -> int:
    """How many of the episode's finals may be targets, after its latest review."""
    if episode.review_verdict != Review.Verdict.REJECTED:
        return len(finals)
    if episode.review_first_wrong_step is None:
        tally.skipped[REJECTED_WITHOUT_PREFIX] += 1
        return 0
    return sum(1 for f in finals if f.turn.step_index < episode.review_first_wrong_step)


def _step_records(
    episode: _EpisodeRow,
    finals: list[_Final],
    kind: str,
    include_accepted: bool,
    filters: Filters,
    tally: Tally,
) -> Iterator[Sample]:
    source = filters.source
    usable = _usable_steps(episode, finals, tally)
    turns = [f.turn for f in finals]
    for at, final in enumerate(finals[:usable]):
        decision = final.turn.decision
        if final.no_visible_effect and filters.drop_no_visible_effect:
            tally.skipped[NO_VISIBLE_EFFECT] += 1
            continue
        after_error = at > 0 and turns[at - 1].decision == Decision.ERROR_KEPT
        if decision == Decision.ERROR_KEPT:
            if at + 1 >= usable:
                tally.skipped[NO_REFLECTIVE_STEP] += 1
            if after_error:
                tally.skipped[REFLECTION_IS_ERROR_KEPT] += 1
            continue
        if kind == DatasetExport.Kind.SFT:
            sft_kind = _sft_kind(decision, after_error, include_accepted, source)
            if sft_kind is not None:
                context = _context(episode, turns, at)
                step_index = final.turn.step_index
                yield SftSample(episode.id, step_index, context, final.target(), sft_kind)
        elif after_error or decision == Decision.CORRECTED or _took_over(final):
            pair = _pair(episode, turns, at, final, after_error, tally)
            if pair is not None:
                yield pair


def _took_over(final: _Final) -> bool:
    """A demonstrated step the person began over the model's proposal (a take over)."""
    return final.turn.decision == Decision.DEMONSTRATED and final.chosen_proposal_id is not None


def _sft_kind(
    decision: str, after_error: bool, include_accepted: bool, source: Source
) -> SftKind | None:
    if decision == Decision.AUTO:
        # A validated rollout's step is rejection-sampling data; a branch's replayed step is
        # history for the people's steps after it (the rollout itself gives it as data).
        return "rollout" if source == "rollout" else None
    if after_error:
        return "reflection"
    if decision == Decision.CORRECTED:
        return "corrected"
    if decision == Decision.DEMONSTRATED:
        return "demonstrated"
    return "accepted" if include_accepted else None


def _pair(
    episode: _EpisodeRow,
    turns: list[HistoryTurn],
    at: int,
    final: _Final,
    reflection: bool,
    tally: Tally,
) -> ErrorCorrectionPair | PostReflectionPair | None:
    proposal = _model_proposal(final)
    if proposal is None:
        tally.skipped[REFLECTION_NO_VALID_PROPOSAL if reflection else NO_VALID_PROPOSAL] += 1
        return None
    assert proposal.action_json is not None  # valid proposals always have one
    if same_step(
        proposal.thought, proposal.action_json, final.turn.thought, final.turn.action_json
    ):
        tally.skipped[REFLECTION_EQUALS_PROPOSAL if reflection else CORRECTION_EQUALS_PROPOSAL] += 1
        return None
    context = _context(episode, turns, at)
    action_text = Action.from_json(proposal.action_json).to_text()
    rejected = StepTarget(proposal.thought, proposal.action_json, action_text)
    record = PostReflectionPair if reflection else ErrorCorrectionPair
    return record(episode.id, final.turn.step_index, context, final.target(), rejected)


def _ct_sample(episode: _EpisodeRow, finals: list[_Final]) -> CtSample:
    return CtSample(
        episode_id=episode.id,
        instruction=episode.instruction,
        platform=episode.platform,
        outcome=episode.outcome,
        steps=tuple(f.turn for f in finals),
        task_success=episode.task_success,
    )
