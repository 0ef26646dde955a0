"""Branch tasks on the loop's side: a rollout handed to people from its first wrong step
(reflection tuning on online traces, as UI-TARS does it), marked by a reviewer
(``annotation.rollouts.branching``).

**Replaying.** When an annotator starts a branch task, its desktop runs the task's setup and then
``replay``: the screen after the setup must be the rollout's first observation; each step before
τ runs the rollout's final action, waits for the screen to settle and stay quiet (as the rollout
did, ``observations.settled_quietly``) and must show the rollout's recorded observation of the
next step. The measure is the share of pixels that differ (``vm_pool.screen.compare``),
recorded for every step on the episode (``Episode.replay``) and shown to the annotator. Above
``TANDEM_BRANCH_REPLAY_TOLERANCE`` the replay has diverged: the episode ends (``env_failed``)
saying at which step and by how much, and the task is marked as one that cannot run, so that
nobody is handed a desktop that is not the rollout's state.

**Handing over.** A replay that matched gives the episode the rollout's steps before τ as its own
(decision ``auto``: nobody decided them; their observations are the replay's own screenshots)
and opens step τ on the replayed screen with the rollout's proposals at τ: the model's original
step, shown to the annotator. From there the episode is an interactive one, and the same pair
builder and exports as for every episode apply (``annotation.datasets.pairs``):

- a correction at τ is an error-correction pair whose rejected side is the rollout's a_τ;
- *keep error & reflect* executes a_τ. When the screen after it matches the rollout's
  observation at τ+1 (same tolerance), the rollout's proposals at τ+1 are offered there
  (``offer_recorded``) rather than asking the model again, so that the post-reflection pair's
  rejected side is the rollout's own next step too. When it does not match, the model is asked,
  as at any step.

The replayed ``auto`` steps are history in a people's export, never targets.
"""

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.episodes import observations
from annotation.episodes.events import tell
from annotation.episodes.leases import end_episode
from annotation.episodes.ownership import DESKTOP_LOST, owns_desktop
from annotation.episodes.proposals import copy_proposals, offer_recorded_proposals
from annotation.episodes.steps import decide_auto, open_step
from annotation.models import (
    Decision,
    Episode,
    EpisodeOutcome,
    Step,
    Task,
)
from vm_pool import pool
from vm_pool.actions import Action, InvalidAction
from vm_pool.desktop import Observation
from vm_pool.screen.compare import screen_difference
from vm_pool.screen.screenshots import screenshot_png, store_screenshot

logger = logging.getLogger(__name__)


def tolerance() -> float:
    """The share of pixels a replayed screen may differ by from the recorded one."""
    return float(settings.TANDEM_BRANCH_REPLAY_TOLERANCE)


# --- replaying -----------------------------------------------------------------------------


def replay(episode: Episode, control: Any, observation: Observation) -> None:
    """On the desktop's host, after the branch task's setup: replay the rollout's steps before
    τ, then open step τ with the rollout's proposals, or end the episode where it diverged."""
    task = episode.task
    assert task.branch_of_id is not None and task.branch_step is not None
    recorded = list(
        Step.objects.filter(episode_id=task.branch_of_id, index__lte=task.branch_step)
        .select_related("observation", "chosen_proposal")
        .order_by("index")
    )
    allowed = tolerance()
    record: dict[str, Any] = {
        "episode": task.branch_of_id,
        "step": task.branch_step,
        "tolerance": allowed,
        "steps": [],
    }
    screens: list[Observation] = []
    for position, step in enumerate(recorded):
        if position > 0:
            try:
                control.execute(Action.from_json(recorded[position - 1].final_action))
                observation = observations.after_an_unattended_action(control).observation
            except (pool.DesktopError, InvalidAction) as error:
                reason = f"the replay failed at step {recorded[position - 1].index}: {error}"
                end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, reason)
                return
        difference = screen_difference(observation.png, screenshot_png(step.observation))
        record["steps"].append({"step": step.index, "difference": difference})
        screens.append(observation)
        if difference > allowed:
            _diverged(episode, record, step.index, difference)
            return
    if not owns_desktop(episode):  # reset while replaying: that screen is not ours
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, DESKTOP_LOST)
        return
    _hand_over(episode, recorded, screens, record, control)


def _diverged(episode: Episode, record: dict[str, Any], index: int, difference: float) -> None:
    what = "the screen after the setup" if index == 1 else f"the screen before step {index}"
    reason = (
        f"the replay diverged: {what} differs from the rollout's by {difference:.2%} of its "
        f"pixels (tolerance {record['tolerance']:.2%})"
    )
    record["diverged_at"] = index
    with transaction.atomic():
        Episode.objects.filter(pk=episode.pk).update(replay=record)
        _told(episode, record)
        # Replaying again would diverge again: nobody is handed this task.
        Task.objects.filter(pk=episode.task_id).update(cannot_run=reason[:300])
    end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, reason)


def _hand_over(
    episode: Episode,
    recorded: list[Step],
    screens: list[Observation],
    record: dict[str, Any],
    control: Any,
) -> None:
    """Store the replayed steps as the episode's own and open step τ on the replayed screen."""
    with transaction.atomic():
        locked = Episode.objects.select_for_update().get(pk=episode.pk)
        if locked.ended_at is not None or locked.steps.exists():
            return
        Episode.objects.filter(pk=episode.pk).update(replay=record)
        _told(episode, record)
        now = timezone.now()
        for original, seen in zip(recorded[:-1], screens[:-1], strict=True):
            step = open_step(episode, original.index, store_screenshot(seen.png), seen.waited_ms)
            copies = copy_proposals(original, step)
            chosen = next((c for c in copies if c.rank == _chosen_rank(original)), None)
            decide_auto(step, chosen, original.final_thought, original.final_action, now)
        opened = observations.store(episode.pk, recorded[-1].index, screens[-1], control)
        if opened is not None:
            offer_recorded_proposals(recorded[-1], opened)


def _chosen_rank(step: Step) -> int | None:
    """The rank of the recorded step's decision (read with the step)."""
    return step.chosen_proposal.rank if step.chosen_proposal is not None else None


# --- after a kept error --------------------------------------------------------------------


def offer_recorded(step: Step) -> bool:
    """At τ+1 of a branch whose annotator kept the rollout's error at τ: offer the rollout's
    own proposals when the screen is the one the rollout saw there. Whether it did."""
    task = step.episode.task
    if task.branch_of_id is None or task.branch_step is None:
        return False
    if step.index != task.branch_step + 1:
        return False
    kept = Step.objects.filter(episode_id=step.episode_id, index=task.branch_step).first()
    original = Step.objects.filter(episode_id=task.branch_of_id, index=task.branch_step).first()
    if kept is None or original is None or kept.decision != Decision.ERROR_KEPT:
        return False
    if kept.final_action != original.final_action:
        return False  # they kept another proposal than the rollout's step
    then = (
        Step.objects.filter(episode_id=task.branch_of_id, index=step.index)
        .select_related("observation")
        .first()
    )
    if then is None:
        return False  # the rollout ended at τ
    difference = screen_difference(
        screenshot_png(step.observation), screenshot_png(then.observation)
    )
    offered = difference <= tolerance()
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=step.episode_id)
        episode.replay = {**episode.replay, "after_kept_error": {
            "step": step.index, "difference": difference, "offered": offered,
        }}  # fmt: skip
        episode.save(update_fields=["replay"])
        if offered and not step.proposals.filter(superseded=False).exists():
            offer_recorded_proposals(then, step)
    return offered


def _told(episode: Episode, record: dict[str, Any]) -> None:
    """The workspace is told how the replay went (its ``episode`` is the rollout's)."""
    task = episode.task
    tell(episode.pk, "replayed", {"episode": task.branch_of_id, "step": task.branch_step,
                                  "replay": record})  # fmt: skip


def state(episode: Episode) -> dict[str, Any] | None:
    """What a workspace shows of a branch: the rollout, the step handed over, the replay."""
    task = episode.task
    if task.branch_of_id is None:
        return None
    return {"episode": task.branch_of_id, "step": task.branch_step, "replay": episode.replay}
