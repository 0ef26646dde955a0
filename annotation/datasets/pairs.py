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
from collections.abc import Callable, Iterable, Iterator

from annotation.datasets.finals import (
    EPISODE_COLUMNS,
    SPLIT_TASK,
    EpisodeRow,
    Final,
    ProposalRow,
    episodes_for,
    read_finals,
)
from annotation.datasets.records import (
    Context,
    CtSample,
    ErrorCorrectionPair,
    Filters,
    HistoryTurn,
    PostReflectionPair,
    Sample,
    SftKind,
    SftSample,
    Source,
    StepTarget,
    Tally,
)
from annotation.episodes.decision_rules import same_step
from annotation.models import DatasetExport, Decision, Review
from model_serving.evaluation import is_held_out
from model_serving.proposers.base import IMAGE_WINDOW
from vm_pool.actions import Action

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
    episodes = episodes_for(filters, kind).annotate(split_task=SPLIT_TASK)
    rows = episodes.values_list(*EPISODE_COLUMNS).iterator(chunk_size=chunk_size)
    while chunk := [EpisodeRow(*row) for row in itertools.islice(rows, chunk_size)]:
        held_out = {e.id for e in chunk if filters.exclude_held_out and is_held_out(e.split_task)}
        finals = read_finals(
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
    return episodes_for(filters, kind).count()


# --- building ------------------------------------------------------------------------------


def _context(episode: EpisodeRow, turns: list[HistoryTurn], at: int) -> Context:
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
        split_task=episode.split_task,
    )


def _model_proposal(final: Final) -> ProposalRow | None:
    picked = next((p for p in final.proposals if p.id == final.chosen_proposal_id), None)
    if picked is not None and picked.is_valid:
        return picked
    if final.turn.decision == Decision.DEMONSTRATED:
        return None  # only the proposal on screen when the person took over is its rejected
    return next((p for p in final.proposals if p.is_valid), None)


def _demonstration_refused(episode: EpisodeRow, finals: list[Final], filters: Filters) -> str:
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


def _usable_steps(episode: EpisodeRow, finals: list[Final], tally: Tally) -> int:
    """How many of the episode's finals may be targets, after its latest review."""
    if episode.review_verdict != Review.Verdict.REJECTED:
        return len(finals)
    if episode.review_first_wrong_step is None:
        tally.skipped[REJECTED_WITHOUT_PREFIX] += 1
        return 0
    return sum(1 for f in finals if f.turn.step_index < episode.review_first_wrong_step)


def _step_records(
    episode: EpisodeRow,
    finals: list[Final],
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


def _took_over(final: Final) -> bool:
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
    episode: EpisodeRow,
    turns: list[HistoryTurn],
    at: int,
    final: Final,
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


def _ct_sample(episode: EpisodeRow, finals: list[Final]) -> CtSample:
    return CtSample(
        episode_id=episode.id,
        instruction=episode.instruction,
        platform=episode.platform,
        outcome=episode.outcome,
        steps=tuple(f.turn for f in finals),
        task_success=episode.task_success,
        split_task=episode.split_task,
    )
