"""The observation of an episode's open step: stored once the screen settles after the last
action, then watched until the step is decided (``vm_pool.screen_watch``). When the screen
changes meanwhile, the newer screen replaces the stored observation, the proposals made for the
older one are superseded, the browser is told and the model is asked again: a decision answers
the screen the annotator saw. A desktop that went to someone else is never observed for the
episode.
"""

import time
from typing import Any

from django.db import connection, transaction

from annotation import rollout_rules
from annotation.episode_leases import owns_desktop, tell
from annotation.models import Episode, Step
from backend.celery import send_after_commit
from vm_pool import screen_watch
from vm_pool.providers.base import Observation
from vm_pool.screenshots import store_screenshot
from vm_pool.x11_capture import frame_of_png


def store(
    episode_id: int, index: int, observation: Observation, control: Any = None
) -> Step | None:
    screenshot = store_screenshot(observation.png)
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id)
        if episode.ended_at is not None or episode.steps.filter(index=index).exists():
            return None
        step = Step.objects.create(
            episode=episode,
            index=index,
            observation=screenshot,
            settle_ms=round(observation.waited_ms),
        )
        if control is not None and hasattr(control, "grab_frame"):
            transaction.on_commit(lambda: _watch(step.pk, control, observation))
        _observed(step)
    return step


def _watch(step_id: int, control: Any, observation: Observation) -> None:
    """Watch the desktop until the step is decided (``vm_pool.screen_watch``)."""

    def on_change(png: bytes, waited_ms: float) -> bool:
        try:
            return reobserve(step_id, png, waited_ms)
        finally:
            connection.close()  # the watcher thread holds no connection between changes

    def still_open() -> bool:
        try:
            return Step.objects.filter(
                pk=step_id, decided_at__isnull=True, episode__ended_at__isnull=True
            ).exists()
        finally:
            connection.close()  # the watcher thread holds no connection between checks

    # The frame the observation was encoded from; a decoded PNG where there is none.
    baseline = observation.frame or frame_of_png(observation.png)
    screen_watch.watcher.watch(
        screen_watch.Watch(step_id, control.grab_frame, baseline, on_change, still_open)
    )


def reobserve(step_id: int, png: bytes, waited_ms: float) -> bool:
    """The screen of an undecided step changed: its newer observation replaces the stored one,
    the browser is told and the model is asked again. Answers whether to go on watching."""
    screenshot = store_screenshot(png)
    with transaction.atomic():
        episode_id = Step.objects.values_list("episode_id", flat=True).get(pk=step_id)
        episode = Episode.objects.select_for_update().get(pk=episode_id)
        step = Step.objects.get(pk=step_id)
        latest = episode.steps.order_by("-index").values_list("index", flat=True).first()
        if episode.ended_at is not None or step.decided_at is not None or latest != step.index:
            return False  # decided meanwhile: the change is its action's, not this step's
        if not owns_desktop(episode):
            return False  # the desktop is someone else's now: their screen is not this step's
        if step.observation_id == screenshot.pk:
            return True
        step.observation = screenshot
        step.reobserved += 1
        step.settle_ms = round(waited_ms)
        step.save(update_fields=["observation", "reobserved", "settle_ms"])
        step.proposals.update(superseded=True)
        _observed(step)
    return True


def _observed(step: Step) -> None:
    """Within the transaction that stored the step's observation: ask the model, tell the
    browser."""
    send_after_commit("annotation.jobs.propose_step", [step.pk], "model")
    screenshot = step.observation
    tell(
        step.episode_id,
        "observation",
        {
            "step": step.index,
            "screenshot": screenshot.pk,
            "screen": [screenshot.width, screenshot.height],
            "reobserved": step.reobserved,
        },
    )


def settled_quietly(control: Any, quiet_ms: float, limit_s: float = 5.0) -> Observation:
    """The settled screen, once it also stayed the same (give or take a blinking caret) for
    ``quiet_ms``, at most ``limit_s`` in all. A program that reacts late (a dialog closing, and
    its file written, half a second after the key that confirmed it) changes the screen after a
    settle alone would have ended: a run without a person (a rollout, a branch's replay) and an
    evaluation that reads the desktop after the last step wait it out."""
    observation = control.observe(settle=True)
    deadline = time.monotonic() + limit_s
    while quiet_ms > 0 and time.monotonic() < deadline:
        time.sleep(quiet_ms / 1000)
        # A glance, not a settle: a screen still the same is the answer at once (a settle
        # would wait its minimum again); one that changed is settled before it is watched.
        again = control.observe(settle=False)
        if rollout_rules.same_screen(observation.png, again.png):
            return observation
        observation = control.observe(settle=True)
    return observation
