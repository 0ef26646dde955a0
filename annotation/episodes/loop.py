"""The live loop of an episode (design §3), as plain functions over the database.

    start ─▶ prepare (setup, 1st observation) ─▶ propose ─▶ decide ─▶ execute ─▶ observe ─▶ …
                                                          └─ finished / call_user / abandon /
                                                             max steps ─▶ end

Rules:

- A decision is committed to PostgreSQL before its action runs. Execution, observation and
  proposals run in Celery jobs (the desktop's host queue, the ``model`` queue), never in a web
  request or a socket consumer; whatever process dies, the database says where the episode is.
- Every decision names the step index it answers. The open step is the latest one, undecided.
  Sending the same decision again is acknowledged as a duplicate; a decision for any other step,
  or a different decision for a decided step, is refused as stale.
- ``accepted`` and ``error_kept`` take a valid proposal of the step (``error_kept`` executes the
  model's wrong action on purpose and marks it; the next step is the reflection); ``corrected``
  carries the annotator's own thought and action, checked against the screen and the platform.
  An invalid proposal can never be accepted, so it is never executed.
- ``finished`` and ``call_user`` end the episode once decided; so does the last allowed step
  (``max_steps``) once executed, and an abandon. Ending releases the desktop (its reset runs on
  its host) and submits the task, or gives it back to the pool when nothing was finished.
- An episode owns its desktop at the generation it leased, and an absent annotator's episode
  is paused, not lost: ``annotation.episodes.leases`` holds those rules and the ending.
- An open step's observation is the screen the annotator decides on:
  ``annotation.episodes.observations`` stores it and replaces it while the screen changes before the
  decision.
- One job at a time executes a step: the job takes the step (``executing_since``) before its
  action runs, and a second job for it (a retry, a reconnect's resume) leaves it alone. Only a
  job that held it past ``EXECUTION_EXPIRES`` (longer than any bounded action and its settle)
  died, and only then is the step run again: execution is at-least-once after a crash, because
  the loop cannot know whether the desktop saw the action, and never twice concurrently.
"""

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from annotation.episodes import decision_rules, demonstrations, observations, replay
from annotation.episodes.events import proposal_json, tell
from annotation.episodes.leases import end_episode, refuse_without_desktop, resume, unpause
from annotation.episodes.ownership import (
    DESKTOP_LOST,
    EpisodeError,
    desktop_lease_seconds,
    owned_when_read,
    owns_desktop,
)
from annotation.episodes.setup import SETUP_ERRORS, keep_setup_log, set_up
from annotation.job_names import EXECUTE_STEP, PREPARE_EPISODE, PROPOSE_STEP, QUEUES
from annotation.models import (
    PEOPLE_DECISIONS,
    Decision,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    Project,
    Proposal,
    Step,
)
from annotation.projects import queue, versions
from annotation.quality import honeypots
from backend.accounts.models import User
from backend.celery import send_after_commit
from backend.errors import DomainError
from vm_pool import pool
from vm_pool.actions import ACTION_TIMEOUT_S, Action, ActionType, InvalidAction, ScreenSize
from vm_pool.models import Desktop, host_queue
from vm_pool.screen import watch
from vm_pool.screen.screenshots import store_screenshot

logger = logging.getLogger(__name__)

# Work that has not moved for this long was dropped by a process that died.
STALL_AFTER = timedelta(seconds=15)
# A step's execution that has not ended after this long belongs to a job that died.
EXECUTION_EXPIRES = timedelta(seconds=ACTION_TIMEOUT_S + 30)

ENDING_ACTIONS = {
    ActionType.FINISHED: EpisodeOutcome.FINISHED,
    ActionType.CALL_USER: EpisodeOutcome.CALL_USER,
}


class StaleDecision(DomainError):
    status_code = 409
    code = "stale_decision"


class InvalidDecision(DomainError):
    status_code = 400
    code = "invalid_decision"


def _host_queue_of(episode: Episode) -> str:
    assert episode.desktop is not None
    return host_queue(episode.desktop.host)


# --- starting ------------------------------------------------------------------------------


def start_episode(user: User, projects: Any) -> Episode:
    """Claim (or resume) the user's task, lease a desktop for it and start preparing it.

    A running episode of the held task is returned as it is: reconnecting never starts twice.
    """
    claim = queue.claim_next_task(user, projects)
    task = claim.task
    running = Episode.objects.filter(
        task=task, ended_at__isnull=True, mode=EpisodeMode.INTERACTIVE
    ).first()
    if running is not None:
        resume(running)
        return running
    project = Project.objects.select_related("model_version", "version_b").get(pk=task.project_id)
    template = pool.template_named(project.environment_template)
    with transaction.atomic():
        desktop = pool.lease_desktop(template, user, f"task:{task.pk}", desktop_lease_seconds())
        episode = Episode.objects.create(
            task=task,
            annotator=user,
            desktop=desktop,
            desktop_generation=desktop.generation,
            demonstration=(task.demonstrate or project.demonstrate) and task.branch_of_id is None,
        )
        versions.assign_version(episode, project)
        honeypots.note_run(episode)
        send_after_commit(PREPARE_EPISODE, [episode.pk], host_queue(desktop.host))
    return episode


def prepare_episode(episode_id: int) -> None:
    """On the desktop's host: run the task's setup, take the first observation, then propose."""
    episode = Episode.objects.select_related("task", "desktop").get(pk=episode_id)
    if episode.ended_at is not None or episode.steps.exists():
        return
    if episode.desktop is None:
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, "the episode has no desktop")
        return
    if not owns_desktop(episode):
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, DESKTOP_LOST)
        return
    try:
        done = set_up(episode)
    except SETUP_ERRORS as error:
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, f"setup failed: {error}")
        return
    if not owns_desktop(episode):  # reset while the setup ran: that screen is not ours
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, DESKTOP_LOST)
        return
    keep_setup_log(episode, done)
    if episode.task.branch_of_id is not None:
        # a rollout's steps, up to its wrong one
        replay.replay(episode, done.control, done.observation)
        return
    if episode.demonstration:  # the person drives from the first screen; no model proposes
        demonstrations.begin(episode, done.observation)
        return
    observations.store(episode.pk, 1, done.observation, done.control)


# --- deciding ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecisionReceipt:
    step: int
    duplicate: bool
    ends_episode: bool


def decide(
    episode_id: int,
    user: User,
    step_index: int,
    decision: str,
    *,
    proposal_rank: int | None = None,
    thought: str = "",
    action: dict[str, Any] | None = None,
    decision_ms: int | None = None,
    observation: str | None = None,
) -> DecisionReceipt:
    """Commit the annotator's decision for the open step, then queue its execution."""
    if decision not in PEOPLE_DECISIONS:
        known = ", ".join(PEOPLE_DECISIONS)
        raise InvalidDecision(f"unknown decision {decision!r}; one of {known}")
    refuse_without_desktop(episode_id)
    with transaction.atomic():
        episode = (
            Episode.objects.select_for_update(of=("self",))
            .select_related("task__project", "desktop")
            .get(pk=episode_id)
        )
        if episode.annotator_id != user.pk:
            raise EpisodeError("Only the episode's annotator can decide its steps.")
        if episode.mode == EpisodeMode.AUTONOMOUS:
            raise EpisodeError("A rollout's steps run as its model proposes them; nobody decides.")
        if episode.paused_at is not None:  # the annotator is back
            unpause(episode)
        if demonstrations.open_demonstration(episode) is not None:
            raise EpisodeError("You are driving the desktop: hand back before deciding a step.")
        # The open step is the latest: one query reads it in the common case.
        last = episode.steps.select_related("observation").order_by("-index").first()
        latest = last.index if last is not None else None
        step = (
            last
            if latest == step_index
            else episode.steps.filter(index=step_index).select_related("observation").first()
        )
        final_thought, final_action, chosen = _final_step(
            episode, step, decision, proposal_rank, thought, action
        )
        # A correction that changes nothing is the model's step accepted: no error to learn from.
        decision = decision_rules.effective_decision(
            decision, final_thought, final_action.to_json(), chosen
        )
        if step is not None and step.decided_at is not None:
            same = (step.decision, step.final_action, step.final_thought) == (
                decision,
                final_action.to_json(),
                final_thought,
            )
            if same:
                return DecisionReceipt(step_index, True, episode.ended_at is not None)
            raise StaleDecision(f"Step {step_index} was already decided ({step.decision}).")
        if episode.ended_at is not None:
            raise StaleDecision(f"Episode {episode.pk} has ended ({episode.outcome}).")
        if step is None or step_index != latest:
            raise StaleDecision(
                f"Step {step_index} is not the open step (the open step is {latest})."
            )
        if observation is not None and observation != step.observation_id:
            raise StaleDecision(
                f"The screen of step {step_index} changed before this decision: decide on the "
                "newer observation."
            )
        step.decision = decision
        step.chosen_proposal = chosen
        step.final_thought = final_thought
        step.final_action = final_action.to_json()
        step.decided_by = user
        step.decided_at = timezone.now()
        step.decision_ms = decision_ms
        step.save(update_fields=["decision", "chosen_proposal", "final_thought", "final_action",
                                 "decided_by", "decided_at", "decision_ms"])  # fmt: skip
        ending = ENDING_ACTIONS.get(final_action.type)
        if ending is None:
            send_after_commit(EXECUTE_STEP, [step.pk], _host_queue_of(episode))
        tell(
            episode.pk,
            "decided",
            {"step": step_index, "decision": decision, "action": step.final_action},
        )
    if ending is not None:
        end_episode(episode.pk, ending, f"{final_action.type} at step {step_index}")
    return DecisionReceipt(step_index, False, ending is not None)


def _final_step(
    episode: Episode,
    step: Step | None,
    decision: str,
    proposal_rank: int | None,
    thought: str,
    action: dict[str, Any] | None,
) -> tuple[str, Action, Proposal | None]:
    if step is None:
        raise StaleDecision("There is no such step in this episode.")
    screen = ScreenSize(step.observation.width, step.observation.height)
    platform = episode.task.project.platform
    if decision == Decision.CORRECTED:
        if action is None:
            raise InvalidDecision("A correction needs the annotator's action.")
        if not thought.strip():
            raise InvalidDecision("A correction needs the annotator's own thought: why this step.")
        try:
            corrected = Action.from_json(action, platform=platform, screen=screen)
        except InvalidAction as error:
            raise InvalidDecision(f"The corrected action is not valid: {error}") from error
        chosen = (
            None
            if proposal_rank is None
            else step.proposals.filter(rank=proposal_rank, superseded=False).first()
        )
        return thought.strip(), corrected, chosen
    if proposal_rank is None:
        raise InvalidDecision(f"'{decision}' needs the rank of the proposal it takes.")
    chosen = step.proposals.filter(rank=proposal_rank).first()
    if chosen is None:
        raise InvalidDecision(f"Step {step.index} has no proposal {proposal_rank}.")
    if chosen.superseded:
        raise StaleDecision(
            f"Proposal {proposal_rank} was made for a screen that has changed since; "
            "decide on the newer proposal."
        )
    if not chosen.is_valid:
        raise InvalidDecision(
            f"Proposal {proposal_rank} is invalid ({chosen.invalid_reason}); correct it instead."
        )
    proposed = Action.from_json(chosen.action, platform=platform, screen=screen)
    if decision == Decision.ERROR_KEPT and proposed.type in ENDING_ACTIONS:
        # A kept error is executed and then reflected on; a wrong "finished" leaves no next step.
        raise InvalidDecision(f"A wrong {proposed.type} cannot be kept to reflect on; correct it.")
    return chosen.thought, proposed, chosen


# --- executing -----------------------------------------------------------------------------


def execute_step(step_id: int) -> None:
    """On the desktop's host: run a decided step's final action, observe, open the next step."""
    # The step is decided: what its action changes on the screen is no re-observation.
    watch.watcher.stop(step_id)
    # One statement reads the step, its episode, task and desktop, and whether the step after
    # it is open already.
    following = Step.objects.filter(episode=OuterRef("episode"), index=OuterRef("index") + 1)
    step = (
        Step.objects.select_related("episode__task", "episode__desktop")
        .annotate(done=Exists(following))
        .get(pk=step_id)
    )
    episode = step.episode
    if episode.ended_at is not None or step.done:
        return  # already done (a retried job) or over
    if episode.desktop is None or step.final_action is None:
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, f"step {step.index} cannot run")
        return
    if not owned_when_read(episode):  # never act on a desktop that may be someone else's now
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, DESKTOP_LOST)
        return
    if not _take_execution(step):
        return  # another job is running this step's action
    try:
        control = pool.control_for(episode.desktop)
        control.execute(Action.from_json(step.final_action))
        observation = control.observe(settle=True)
    except (pool.DesktopError, InvalidAction) as error:
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, f"step {step.index} failed: {error}")
        return
    if not owns_desktop(episode):  # reset meanwhile: that screen is not this episode's
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, DESKTOP_LOST)
        return
    if step.index >= episode.task.max_steps:
        store_screenshot(observation.png)
        end_episode(episode.pk, EpisodeOutcome.MAX_STEPS, f"reached {episode.task.max_steps} steps")
        return
    observations.store(episode.pk, step.index + 1, observation, control, after=step)


def _take_execution(step: Step) -> bool:
    """Take the step for this job, unless a live job has it (see the module's rules)."""
    now = timezone.now()
    free = Q(executing_since__isnull=True) | Q(executing_since__lt=now - EXECUTION_EXPIRES)
    return Step.objects.filter(free, pk=step.pk).update(executing_since=now) == 1


def resume_if_stalled(episode_id: int, now: Any = None) -> bool:
    """Queue again the work a dead process left: the first observation, an execution, a proposal.

    Only work that has waited longer than ``STALL_AFTER`` is queued again, so a client that
    connects while the work is simply running does not double it.
    """
    now = now or timezone.now()
    episode = Episode.objects.select_related("desktop").get(pk=episode_id)
    if episode.ended_at is not None or episode.desktop is None:
        return False
    last = episode.steps.order_by("-index").first()
    since = last.decided_at or last.created_at if last is not None else episode.started_at
    if now - since < STALL_AFTER:
        return False
    if last is None:
        send_after_commit(PREPARE_EPISODE, [episode.pk], _host_queue_of(episode))
        return True
    if episode.demonstration or demonstrations.is_driving(episode.pk):
        return False  # a person drives: nothing for the model to do
    if last.decided_at is not None and (last.final_action or {}).get("type") not in ENDING_ACTIONS:
        if last.executing_since and now - last.executing_since < EXECUTION_EXPIRES:
            return False  # its job is still running the action
        send_after_commit(EXECUTE_STEP, [last.pk], _host_queue_of(episode))
        return True
    if not last.proposals.filter(superseded=False).exists():
        send_after_commit(PROPOSE_STEP, [last.pk], QUEUES[PROPOSE_STEP])
        return True
    return False


# --- state for a (re)connecting client -----------------------------------------------------


def episode_state(episode: Episode) -> dict[str, Any]:
    """Everything a client needs to draw the episode, rebuilt from the database."""
    steps = []
    for step in (
        episode.steps.select_related("observation").prefetch_related("proposals").order_by("index")
    ):
        steps.append(
            {
                "step": step.index,
                "screenshot": step.observation_id,
                "screen": [step.observation.width, step.observation.height],
                "proposals": [proposal_json(p) for p in step.proposals.all() if not p.superseded],
                "reobserved": step.reobserved,
                "decision": step.decision or None,
                "final_thought": step.final_thought,
                "final_action": step.final_action,
            }
        )
    desktop = (
        Desktop.objects.filter(pk=episode.desktop_id).values("status", "broken_reason").first()
        if episode.desktop_id is not None
        else None
    )
    open_step = (
        steps[-1]["step"] if steps and not steps[-1]["decision"] and not episode.ended_at else None
    )
    driving = demonstrations.open_demonstration(episode)
    return {
        "episode": episode.pk,
        "task": {
            "id": episode.task_id,
            "instruction": episode.task.instruction,
            "max_steps": episode.task.max_steps,
        },
        "steps": steps,
        "open_step": open_step,
        "ended": episode.ended_at is not None,
        "paused": episode.paused_at is not None,
        "outcome": episode.outcome or None,
        "evaluation": {"status": episode.evaluation_status, "task_success": episode.task_success}
        if episode.evaluation_status
        else None,
        "desktop": desktop,
        "branch": replay.state(episode),
        "demonstration": episode.demonstration,
        "driving": demonstrations.driving_json(driving) if driving is not None else None,
    }
