"""Demonstrations (design §12): the annotator drives the desktop and the recording becomes steps.

    interactive:   … propose ─▶ take over ─▶ the person drives ─▶ hand back ─▶ observe ─▶ propose …
    demonstration: setup ─▶ 1st screen ─▶ the person drives ───────────▶ finish ─▶ end ─▶ evaluate

Rules:

- **Two ways in.** An episode of a task (or project) marked ``demonstrate`` is driven from its
  first step (``Episode.demonstration``: no model proposes). In an interactive episode the
  annotator *takes over* the open step: proposals stop counting, the person drives, then hands
  back and the model proposes for the screen as the person left it. Either way, a
  ``Demonstration`` holds a ``vm_pool`` ``Recording``: only while it is open, and only to the
  episode's annotator who holds the desktop's lease, is a control stream issued
  (``vm_pool.streaming.open_control_stream``), and every input passes the recording gate.
- **While driving** no decision is taken, a changing screen does not re-observe the open step,
  and a stalled step is not proposed for again: the person's input is the step.
- **Ending.** Hand back or finish ends the recording first (from then on the gate passes
  nothing more), then a job on the desktop's host reduces the recorded input
  (``vm_pool.recording.reduce``) to steps from ``from_step`` on: each step's observation is the
  frame the gate grabbed just before its first input, its decision ``demonstrated``, its action
  the reduced one, its thought empty until written (``thoughts``). Then the job observes the
  desktop: a hand back opens the next step for the model (or observes the open step again when
  nothing was demonstrated); a finish writes a ``finished`` step on that screen and ends the
  episode, which is evaluated as any other and then replayed (``replay_check``).
- **Pairs.** A take over that begins while a valid proposal is on screen keeps it
  (``over_proposal``) on the step the person demonstrated first (its ``chosen_proposal``) when
  the person acted on the screen it answered: that proposal is the rejected side of an
  error-correction pair. Steps the person drove afterwards have no proposal,
  and no pair is invented for them.
- An episode that ends otherwise (abandoned, its desktop lost) ends its open demonstration's
  recording with it (``leases.end_episode``); the raw input stays for audit, nothing is reduced.
"""

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.episodes.events import tell
from annotation.episodes.leases import end_episode, refuse_without_desktop
from annotation.episodes.observations import announce, reobserve_now, store
from annotation.episodes.ownership import (
    DESKTOP_LOST,
    EpisodeError,
    NotTheAnnotator,
    owns_desktop,
)
from annotation.episodes.steps import open_step
from annotation.job_names import CHECK_REPLAY, DEMONSTRATION_ENDED
from annotation.models import Decision, Demonstration, Episode, EpisodeMode, EpisodeOutcome, Step
from backend.accounts.models import User
from backend.celery import send_after_commit
from backend.errors import DomainError
from vm_pool import pool
from vm_pool.actions import Action, ActionType, InvalidAction, ScreenSize
from vm_pool.desktop import Observation
from vm_pool.models import Desktop, RecordedInput, Recording, Screenshot, host_queue
from vm_pool.recording.gate import end_recording, recorded_events
from vm_pool.recording.reduce import reduce_events
from vm_pool.screen.compare import same_screen
from vm_pool.screen.screenshots import screenshot_png, store_screenshot
from vm_pool.streaming import open_control_stream


class DemonstrationRefused(DomainError):
    status_code = 409
    code = "demonstration_refused"


def open_demonstration(episode: Episode) -> Demonstration | None:
    return Demonstration.objects.filter(episode=episode, ended_at__isnull=True).first()


def is_driving(episode_id: int) -> bool:
    return Demonstration.objects.filter(episode_id=episode_id, ended_at__isnull=True).exists()


# --- in ------------------------------------------------------------------------------------


def begin(episode: Episode, observation: Observation) -> Step:
    """A demonstration episode's start (on its host, after the setup): the first step on the
    first screen, with no proposal asked for, and the person driving from it."""
    screenshot = store_screenshot(observation.png)
    with transaction.atomic():
        locked = (
            Episode.objects.select_for_update(of=("self",))
            .select_related("desktop")
            .get(pk=episode.pk)
        )
        step = open_step(locked, 1, screenshot, observation.waited_ms)
        _open(locked, step)
        announce(step, ask=False)  # no model proposes in a demonstration
    return step


def take_over(episode_id: int, user: User) -> Demonstration:
    """The annotator takes the open step over from the model (see the module's rules)."""
    refuse_without_desktop(episode_id)
    with transaction.atomic():
        episode = _locked(episode_id, user)
        if episode.mode != EpisodeMode.INTERACTIVE:
            raise DemonstrationRefused("A rollout runs as its model proposes; nobody drives it.")
        if open_demonstration(episode) is not None:
            raise DemonstrationRefused("You are driving this desktop already.")
        step = episode.steps.order_by("-index").first()
        if step is None or step.decided_at is not None:
            raise DemonstrationRefused(
                "There is no open step to take over yet: wait for the screen after the last one."
            )
        return _open(episode, step)


def _open(episode: Episode, step: Step) -> Demonstration:
    desktop = episode.desktop
    if desktop is None or episode.desktop_generation is None or not owns_desktop(episode):
        raise EpisodeError(f"Cannot drive: {DESKTOP_LOST}.")
    recording = Recording.objects.create(
        desktop=desktop,
        user_id=episode.annotator_id,
        generation=episode.desktop_generation,
        lease_ref=desktop.lease_ref,
    )
    over = None
    if not episode.demonstration:
        over = next((p for p in step.proposals.filter(superseded=False) if p.is_valid), None)
    demonstration = Demonstration.objects.create(
        episode=episode, recording=recording, from_step=step.index, over_proposal=over
    )
    tell(episode.pk, "driving", driving_json(demonstration))
    return demonstration


def control_stream(episode_id: int, user: User) -> dict[str, Any]:
    """The control stream of the annotator's open demonstration."""
    episode = Episode.objects.get(pk=episode_id)
    if episode.annotator_id != user.pk:
        raise NotTheAnnotator("Only the episode's annotator drives its desktop.")
    demonstration = open_demonstration(episode)
    if demonstration is None or episode.ended_at is not None:
        raise DemonstrationRefused("Take over first: the desktop is driven only while recorded.")
    stream = open_control_stream(demonstration.recording)
    refusals = demonstration.recording.refusals
    # Why the gate closed the last control stream, if it did: the workspace shows it.
    stream["last_refusal"] = refusals[-1]["reason"] if refusals else None
    return stream


# --- out -----------------------------------------------------------------------------------


def end(episode_id: int, user: User, finish: bool) -> Demonstration:
    """Hand back (``finish`` False) or finish the episode: the recording ends now, and a job on
    the desktop's host turns it into steps (see the module's rules)."""
    with transaction.atomic():
        episode = _locked(episode_id, user)
        demonstration = open_demonstration(episode)
        if demonstration is None:
            raise DemonstrationRefused("You are not driving this desktop.")
        if not finish and episode.demonstration:
            raise DemonstrationRefused("A demonstration has no model to hand back to: finish it.")
        end_recording(demonstration.recording_id)
        demonstration.ended_at = timezone.now()
        demonstration.save(update_fields=["ended_at"])
        assert episode.desktop is not None  # refused by _locked otherwise
        queue = host_queue(episode.desktop.host)
        send_after_commit(DEMONSTRATION_ENDED, [demonstration.pk, finish], queue)
        tell(episode.pk, "handed_back" if not finish else "finishing", driving_json(demonstration))
    return demonstration


def demonstration_ended(demonstration_id: int, finish: bool) -> None:
    """On the desktop's host: the ended demonstration's steps, then the next screen."""
    demonstration = Demonstration.objects.select_related("episode__task__project").get(
        pk=demonstration_id
    )
    episode = demonstration.episode
    if demonstration.steps_made is None:
        write_steps(demonstration)
    if episode.ended_at is not None or episode.desktop_id is None:
        return
    if not owns_desktop(episode):
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, DESKTOP_LOST)
        return
    assert demonstration.steps_made is not None
    index = demonstration.from_step + demonstration.steps_made
    desktop = Desktop.objects.get(pk=episode.desktop_id)
    try:
        control = pool.control_for(desktop)
        observation = control.observe(settle=True)
    except pool.DesktopError as error:
        end_episode(episode.pk, EpisodeOutcome.ENV_FAILED, f"after the demonstration: {error}")
        return
    left_open = episode.steps.filter(index=index, decided_at__isnull=True).first()
    if finish:
        _finished_step(episode, index, observation, left_open)
        end_episode(episode.pk, EpisodeOutcome.FINISHED, f"demonstrated, finished at step {index}")
        # Replayed on a fresh desktop of this host (this one is kept for the task's evaluator).
        send_after_commit(CHECK_REPLAY, [episode.pk], host_queue(desktop.host))
    elif left_open is not None:  # nothing was demonstrated: the model looks again
        reobserve_now(left_open.pk, observation, control)
    else:
        store(episode.pk, index, observation, control)


@dataclass(frozen=True)
class _Made:
    action: Action
    frame_id: str | None
    at: float  # when its first input came, seconds into the recording


def write_steps(demonstration: Demonstration) -> int:
    """The demonstration's recorded input reduced to decided steps (see the module's rules);
    how many. Once per demonstration: a second call writes nothing."""
    episode = demonstration.episode
    indexed = recorded_events(demonstration.recording)
    reduced = reduce_events([event for _, event in indexed])
    frames = dict(
        RecordedInput.objects.filter(
            recording=demonstration.recording, frame__isnull=False
        ).values_list("index", "frame_id")
    )
    platform = episode.task.project.platform
    first = episode.steps.select_related("observation").get(index=demonstration.from_step)
    screen = ScreenSize(first.observation.width, first.observation.height)
    made: list[_Made] = []
    skipped = list(reduced.skipped)
    for step in reduced.steps:
        row = indexed[step.first_event][0]
        frame = frames.get(row) or next(
            (frames[i] for i in sorted(frames, reverse=True) if i < row), None
        )
        try:
            action = Action.from_json(step.action.to_json(), platform=platform, screen=screen)
        except InvalidAction as error:
            skipped.append(f"{step.action.type} at input {row}: {error}")
            continue
        made.append(_Made(action, frame, indexed[step.first_event][1].at))
    with transaction.atomic():
        locked = Demonstration.objects.select_for_update().get(pk=demonstration.pk)
        if locked.steps_made is not None:
            demonstration.steps_made = locked.steps_made
            return locked.steps_made
        now = timezone.now()
        for offset, step_made in enumerate(made):
            _demonstrated(episode, demonstration, demonstration.from_step + offset, step_made, now)
        locked.steps_made, locked.skipped = len(made), skipped
        locked.starts = [round(m.at, 3) for m in made]
        locked.save(update_fields=["steps_made", "skipped", "starts"])
        demonstration.steps_made, demonstration.skipped = len(made), skipped
        tell(episode.pk, "demonstrated", {"from_step": demonstration.from_step,
                                          "steps": len(made), "skipped": skipped})  # fmt: skip
    return len(made)


def _demonstrated(
    episode: Episode, demonstration: Demonstration, index: int, made: _Made, now: Any
) -> None:
    decided = {
        "decision": Decision.DEMONSTRATED,
        "final_action": made.action.to_json(),
        "final_thought": "",
        "decided_by_id": episode.annotator_id,
        "decided_at": now,
    }
    open_row = episode.steps.filter(index=index, decided_at__isnull=True).first()
    if open_row is not None:
        # The step taken over: decided in one statement (a decided step is frozen), on the
        # screen the person acted on.
        frame = made.frame_id or open_row.observation_id
        Step.objects.filter(pk=open_row.pk).update(
            observation_id=frame,
            chosen_proposal=_rejected(demonstration, open_row, frame),
            **decided,
        )
        return
    first_frame = made.frame_id
    if first_frame is None:  # no frame before the first input: the screen the step began on
        first_frame = episode.steps.get(index=demonstration.from_step).observation_id
    Step.objects.create(episode=episode, index=index, observation_id=first_frame, **decided)


def _rejected(demonstration: Demonstration, step: Step, frame: str) -> Any:
    """The proposal the take over rejected, when it answered the screen the person acted on
    (a proposal for another screen is no counterpart of their action)."""
    over = demonstration.over_proposal
    if over is None or frame == step.observation_id:
        return over
    acted_on = Screenshot.objects.get(pk=frame)
    if same_screen(screenshot_png(step.observation), screenshot_png(acted_on)):
        return over
    return None


def _finished_step(episode: Episode, index: int, observation: Observation, left_open: Any) -> None:
    screenshot = store_screenshot(observation.png)
    finished = {
        "decision": Decision.DEMONSTRATED,
        "final_action": Action(ActionType.FINISHED).to_json(),
        "final_thought": "",
        "decided_by_id": episode.annotator_id,
        "decided_at": timezone.now(),
    }
    if left_open is not None:
        Step.objects.filter(pk=left_open.pk).update(observation=screenshot, **finished)
    else:
        Step.objects.create(episode=episode, index=index, observation=screenshot, **finished)


# --- helpers -------------------------------------------------------------------------------


def _locked(episode_id: int, user: User) -> Episode:
    episode = (
        Episode.objects.select_for_update(of=("self",)).select_related("desktop").get(pk=episode_id)
    )
    if episode.annotator_id != user.pk:
        raise NotTheAnnotator("Only the episode's annotator drives its desktop.")
    if episode.ended_at is not None:
        raise DemonstrationRefused(f"Episode {episode.pk} has ended ({episode.outcome}).")
    if episode.desktop is None:
        raise EpisodeError(f"Cannot drive: {DESKTOP_LOST}.")
    return episode


def driving_json(demonstration: Demonstration) -> dict[str, Any]:
    return {
        "from_step": demonstration.from_step,
        "over_proposal": demonstration.over_proposal.rank if demonstration.over_proposal else None,
        "ended": demonstration.ended_at is not None,
    }
