"""The replay check of a finished demonstration: does what the person did, run as its actions on
a fresh desktop with the same setup, lead through the same screens?

Rules:

- It runs once a demonstrated episode finished (``demonstrations``), as a job on the host of the
  episode's desktop: it leases a ready desktop of the project's template on that host (waiting
  up to ``WAIT_FOR_DESKTOP_S`` for one), runs the task's setup, and compares the screen after it
  with step 1's observation; then each step's action runs, the screen settles and stays quiet
  (as a branch task's replay does) and is compared with the next step's observation. The measure
  is the share of differing pixels; above ``replay.tolerance()`` the demonstration *diverges*
  there, and the check stops.
- ``Episode.replay_check`` keeps the verdict: ``replays``, ``diverges`` with
  ``first_divergent_step`` (the step whose screen differed: 1 is the screen after the setup),
  or ``failed`` with its reason (no desktop, a setup or an action that failed); and each step's
  difference. Reviewers see it; exports can require ``replays``.
- The leased desktop is released at the end, whatever happened: its reset runs as any other.
- A step's action is its final one (a reviewer's revision included); the thoughts play no part.
- The replay keeps the person's pace: a step's screen is looked at no sooner after the action
  before it than the person's was (up to ``MAX_PACE_S``), so that a program still busy then (a
  dialog saving a file) is seen as the person saw it.
"""

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from annotation.episodes import observations, replay
from annotation.models import Decision, Episode, Step
from vm_pool import pool
from vm_pool.actions import Action, ActionType, InvalidAction
from vm_pool.screen.compare import screen_difference
from vm_pool.screen.screenshots import screenshot_png
from vm_pool.setup.runner import SetupFailed, run_setup

WAIT_FOR_DESKTOP_S = 300.0
MAX_PACE_S = 5.0
LEASE_S = 900


def needs_check(episode: Episode) -> bool:
    """A finished episode with demonstrated steps, not checked yet."""
    return (
        episode.ended_at is not None
        and not episode.replay_check
        and episode.steps.filter(decision=Decision.DEMONSTRATED).exists()
    )


def check(episode_id: int) -> dict[str, Any]:
    """Replay the episode's steps on a fresh desktop of this host (see the module's rules)."""
    episode = Episode.objects.select_related("task__project", "annotator").get(pk=episode_id)
    Episode.objects.filter(pk=episode.pk).update(replay_check={"status": "pending"})
    template = pool.template_named(episode.task.project.environment_template)
    desktop = _lease(template, episode)
    if desktop is None:
        return _verdict(episode, {"status": "failed", "reason": "no fresh desktop was ready"})
    try:
        return _verdict(episode, _replay(episode, desktop))
    finally:
        pool.release_desktop(desktop.pk, episode.annotator, generation=desktop.generation)


def _lease(template: Any, episode: Episode) -> Any:
    deadline = time.monotonic() + WAIT_FOR_DESKTOP_S
    ref = f"replay-check:{episode.pk}"
    while True:
        try:
            return pool.lease_desktop(
                template, episode.annotator, ref, LEASE_S, host=settings.TANDEM_HOST
            )
        except pool.NoDesktopAvailable:
            if time.monotonic() > deadline:
                return None
            time.sleep(2.0)


def _replay(episode: Episode, desktop: Any) -> dict[str, Any]:
    paces = _paces(episode)
    steps = [
        Recorded(
            step.index,
            _final_action(step),
            screenshot_png(step.observation),
            paces.get(step.index, 0.0),
        )
        for step in Step.objects.filter(episode=episode, decided_at__isnull=False)
        .select_related("observation")
        .prefetch_related("revisions")
        .order_by("index")
    ]
    try:
        control = pool.control_for(desktop)
    except pool.DesktopError as error:
        return {"status": "failed", "reason": str(error)[:300], "steps": []}
    return replay_steps(control, episode.task.setup, steps)


@dataclass(frozen=True)
class Recorded:
    """A recorded step as the replay needs it: its action and the screen it was taken on."""

    index: int
    action: dict[str, Any]
    png: bytes
    # How long after the step before began its screen was taken (the person's next input, or
    # the end of their driving): the replay looks that long after running the step before
    # (up to ``MAX_PACE_S``), as a program still busy then (a dialog saving) needs.
    pace_s: float = 0.0


def _paces(episode: Episode) -> dict[int, float]:
    """By step index, how long after the step before began each step's screen was taken, for
    the steps a person drove and the one right after (whose screen was taken as they stopped)."""
    paces: dict[int, float] = {}
    for demonstration in episode.demonstrations.select_related("recording"):
        recording = demonstration.recording
        starts = list(demonstration.starts or [])
        if starts and recording.ended_at is not None:
            starts.append((recording.ended_at - recording.started_at).total_seconds())
        for offset in range(1, len(starts)):
            paces[demonstration.from_step + offset] = starts[offset] - starts[offset - 1]
    return paces


def replay_steps(
    control: Any, setup: list[dict[str, Any]], steps: list[Recorded]
) -> dict[str, Any]:
    """Run ``setup`` then ``steps`` on a fresh desktop's ``control``, comparing each screen with
    the recorded one (see the module's rules); the verdict, with each step's difference."""
    allowed = replay.tolerance()
    record: dict[str, Any] = {"tolerance": allowed, "steps": []}
    try:
        run_setup(control, setup)
        screen = observations.after_an_unattended_action(control).observation
        for position, step in enumerate(steps):
            if position > 0:
                began = time.monotonic()
                control.execute(Action.from_json(steps[position - 1].action))
                # The person's next screen was taken this long after the action began.
                pace = min(step.pace_s, MAX_PACE_S)
                time.sleep(max(0.0, pace - (time.monotonic() - began)))
                screen = observations.after_an_unattended_action(control).observation
            difference = screen_difference(screen.png, step.png)
            record["steps"].append({"step": step.index, "difference": round(difference, 6)})
            if difference > allowed:
                return {**record, "status": "diverges", "first_divergent_step": step.index}
            if step.action.get("type") in (ActionType.FINISHED, ActionType.CALL_USER):
                break
    except (SetupFailed, pool.DesktopError, InvalidAction) as error:
        return {**record, "status": "failed", "reason": str(error)[:300]}
    return {**record, "status": "replays", "first_divergent_step": None}


def _final_action(step: Step) -> dict[str, Any]:
    revisions = sorted(step.revisions.all(), key=lambda r: r.number)
    action = revisions[-1].final_action if revisions else step.final_action
    assert action is not None  # a decided step has one
    return action


def _verdict(episode: Episode, record: dict[str, Any]) -> dict[str, Any]:
    record["checked_at"] = timezone.now().isoformat()
    Episode.objects.filter(pk=episode.pk).update(replay_check=record)
    return record
