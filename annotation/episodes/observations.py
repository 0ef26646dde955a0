"""The observation of an episode's open step: stored once the screen settles after the last
action, then watched until the step is decided (``vm_pool.screen.watch``). When the screen
changes meanwhile, the newer screen replaces the stored observation, the proposals made for the
older one are superseded, the browser is told and the model is asked again: a decision answers
the screen the annotator saw. A desktop that went to someone else is never observed for the
episode.

Bounded, so that a screen that never stops changing cannot storm the model: a screen that only
goes back to a picture already seen for the step (a blinking border, a spinner) replaces
nothing (the watch's rule); a step's observation is replaced at most ``MAX_REOBSERVED`` times,
after which the watch ends and the last one stands; and one proposal at most is in flight per
step: a replaced observation is proposed for at once only when the model had answered the one it
replaces; otherwise the answer still coming is stored as superseded and asks for the newer
screen itself (``proposals.record_proposals``).

A step's observation is also the screen after the step before: when it is that step's own
screen although its action was meant to change it (``vm_pool.actions.meant_to_change_screen``: not
a wait, a copy or an ending), that step is flagged ``no_visible_effect`` (keys swallowed by a
window manager or a lost focus record an action that did nothing).
"""

import dataclasses
import time
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from annotation.episodes.events import tell
from annotation.episodes.ownership import owns_desktop
from annotation.episodes.steps import open_step
from annotation.job_names import PROPOSE_STEP, QUEUES
from annotation.models import Demonstration, Episode, Proposal, Step
from backend.celery import send_after_commit
from vm_pool.actions import meant_to_change_screen
from vm_pool.desktop import Observation
from vm_pool.models import Screenshot
from vm_pool.sandbox import activity as activity_rules
from vm_pool.sandbox.activity import DesktopActivity, activity_of
from vm_pool.screen import watch as screen_watch
from vm_pool.screen.capture import frame_of_png
from vm_pool.screen.compare import same_screen
from vm_pool.screen.damage import DamageLost, DamageReports
from vm_pool.screen.screenshots import screenshot_png, store_screenshot

MAX_REOBSERVED = 3


def store(
    episode_id: int,
    index: int,
    observation: Observation,
    control: Any = None,
    after: Step | None = None,
) -> Step | None:
    """Open step ``index`` of the episode on ``observation`` (unless the episode ended or the
    step is open already); ``after`` is the decided step whose action led to this screen, where
    the caller has read it (it is read here otherwise)."""
    screenshot = store_screenshot(observation.png)
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id)
        if episode.ended_at is not None or episode.steps.filter(index=index).exists():
            return None
        step = open_step(episode, index, screenshot, observation.waited_ms)
        announce(step)
        # After the next proposal is asked for: off the model's critical path. The watch
        # starts from the observation's frame, so what changes meanwhile is still a change.
        if control is not None and hasattr(control, "grab_frame"):
            transaction.on_commit(lambda: _watch(step.pk, control, observation))
        transaction.on_commit(
            lambda: _flag_no_effect(episode, index - 1, screenshot, observation.png, after)
        )
    return step


def _flag_no_effect(
    episode: Episode, index: int, screenshot: Screenshot, png_after: bytes, before: Step | None
) -> None:
    """Flag the step before when its action left its screen as it was (see the module)."""
    if before is None and index >= 1:
        decided = episode.steps.filter(index=index, decided_at__isnull=False)
        before = decided.select_related("observation").first()
    if before is None or not before.final_action or not meant_to_change_screen(before.final_action):
        return
    # The same bytes are the same screen (screenshots are stored by their digest).
    if before.observation_id == screenshot.pk or same_screen(
        screenshot_png(before.observation), png_after
    ):
        Step.objects.filter(pk=before.pk).update(no_visible_effect=True)


def _watch(step_id: int, control: Any, observation: Observation) -> None:
    """Watch the desktop until the step is decided (``vm_pool.screen.watch``)."""

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
    reports = _damage_reports(control)
    screen_watch.watcher.watch(
        screen_watch.Watch(
            step_id, control.grab_frame, baseline, on_change, still_open, reports=reports
        )
    )


def _nothing_drawn(reports: DamageReports) -> bool:
    """Whether the server reports nothing drawn since the last frame grabbed; False where its
    reports are lost (a look at the screen answers then)."""
    try:
        reports.read(sync=True)
    except DamageLost:
        return False
    return reports.take_box() is None


def _damage_reports(control: Any) -> DamageReports | None:
    """The desktop's damage reports, where its control has them (``vm_pool.screen.damage``)."""
    reports = getattr(control, "damage_reports", None)
    return reports() if reports is not None else None


def reobserve(step_id: int, png: bytes, waited_ms: float) -> bool:
    """The screen of an undecided step changed to a picture not seen before: its newer
    observation replaces the stored one, the browser is told and the model is asked again (see
    the module's rules). Answers whether to go on watching."""
    screenshot = store_screenshot(png)  # content-addressed: stored once, outside the lock
    with transaction.atomic():
        episode_id = Step.objects.values_list("episode_id", flat=True).get(pk=step_id)
        episode = Episode.objects.select_for_update().get(pk=episode_id)
        step = Step.objects.get(pk=step_id)
        latest = episode.steps.order_by("-index").values_list("index", flat=True).first()
        if episode.ended_at is not None or step.decided_at is not None or latest != step.index:
            return False  # decided meanwhile: the change is its action's, not this step's
        if not owns_desktop(episode):
            return False  # someone else's desktop now: their screen is not this step's
        if Demonstration.objects.filter(episode=episode, ended_at__isnull=True).exists():
            return False  # the person drives: their input is the step (``demonstrations``)
        if step.reobserved >= MAX_REOBSERVED:
            return False
        if step.observation_id == screenshot.pk:
            return True
        answered = Proposal.objects.filter(step=step, superseded=False).exists()
        step.observation = screenshot
        step.reobserved += 1
        step.settle_ms = round(waited_ms)
        step.save(update_fields=["observation", "reobserved", "settle_ms"])
        step.proposals.update(superseded=True)
        announce(step, ask=answered)
    return step.reobserved < MAX_REOBSERVED


def reobserve_now(step_id: int, observation: Observation, control: Any = None) -> None:
    """The open step's screen stored again after a person drove the desktop and made no step
    (``demonstrations``): the proposals made before are superseded and the model asked again."""
    screenshot = store_screenshot(observation.png)
    with transaction.atomic():
        step = Step.objects.select_for_update().get(pk=step_id)
        if step.decided_at is not None:
            return
        step.observation = screenshot
        step.save(update_fields=["observation"])
        step.proposals.update(superseded=True)
        announce(step)
        if control is not None and hasattr(control, "grab_frame"):
            transaction.on_commit(lambda: _watch(step.pk, control, observation))


def announce(step: Step, ask: bool = True) -> None:
    """Within the transaction that stored the step's observation: ask the model (unless an
    answer is still coming, see the module), tell the browser."""
    if ask:
        ask_model(step.pk)
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


def ask_model(step_id: int) -> None:
    """Queue the step's proposal job once the transaction commits."""
    send_after_commit(PROPOSE_STEP, [step_id], QUEUES[PROPOSE_STEP])


@dataclasses.dataclass(frozen=True)
class QuietScreen:
    """A screen observed once it stayed quiet, and what ended the wait for it: ``"quiet"`` (it
    stayed the same for the quiet period), ``"idle"`` (nothing drawn, and nothing on the desktop
    at work to draw a reaction), ``"limit"`` (still changing at the time limit), ``""`` (no wait
    was asked for)."""

    observation: Observation
    ended: str


def settled_quietly(
    control: Any,
    quiet_ms: float,
    limit_s: float = 5.0,
    reaction_ms: float | None = None,
    until_idle: bool = False,
) -> QuietScreen:
    """The settled screen, once it also stayed the same (give or take a blinking caret) for
    ``quiet_ms``, at most ``limit_s`` in all. A program that reacts late (a dialog closing, and
    its file written, half a second after the key that confirmed it) changes the screen after a
    settle alone would have ended: a run without a person (a rollout, a branch's replay) and an
    evaluation that reads the desktop after the last step wait it out. Where the server reports
    damage, the quiet period counts from the last drawing larger than a caret, and a screen on
    which none was drawn since the call waits up to ``reaction_ms`` (at least ``quiet_ms``) from
    the call for a first one, woken by it (a program slow to start its reaction under load);
    with ``until_idle``, where the kernel accounts the desktop's work
    (``vm_pool.sandbox.activity``), that wait lasts while the desktop's programs are at work, up
    to ``limit_s``, and ends as soon as nothing on the desktop has worked for a while: no
    program is preparing a drawing (an evaluation keeps its whole quiet period: its score is a
    label, and a program's own timer is not seen as work). A screen on which
    nothing was drawn since its frame is the same without a look at it. Elsewhere the quiet
    period counts from the settled frame, and lasts until ``reaction_ms`` after the call at
    least. What ended the wait comes with the screen (``QuietScreen``)."""
    reaction_ms = quiet_ms if reaction_ms is None else max(quiet_ms, reaction_ms)
    activity = activity_of(control) if until_idle else None
    if activity is not None:
        activity.start()
    called = started = time.monotonic()
    observation = control.observe(settle=True)
    deadline = started + limit_s
    # Where the desktop's work is seen, a program at work on a reaction is waited for as long
    # as it works (up to the limit): on a loaded machine its first drawing may come seconds
    # late, and a step recorded as having changed nothing is wrong training data.
    first_drawing_by = (
        deadline if activity is not None else min(called + reaction_ms / 1000, deadline)
    )
    while quiet_ms > 0 and time.monotonic() < deadline:
        reports = _damage_reports(control)
        if reports is None:
            until = max(time.monotonic() + quiet_ms / 1000, first_drawing_by)
        else:
            if (
                reports.drawn_at <= called
                and _idle_before_a_drawing(reports, first_drawing_by, activity)
                and _nothing_drawn(reports)
            ):
                return QuietScreen(observation, "idle")  # nothing drawn, nothing at work to draw
            until = max(started, reports.drawn_at) + quiet_ms / 1000
        time.sleep(max(0.0, min(until, deadline) - time.monotonic()))
        if reports is not None and _nothing_drawn(reports):
            return QuietScreen(observation, "quiet")
        # A glance, not a settle: a screen still the same is the answer at once (a settle
        # would wait its minimum again); one that changed is settled before it is watched.
        again = control.observe(settle=False)
        if same_screen(observation.png, again.png):
            return QuietScreen(observation, "quiet")
        started = time.monotonic()
        observation = control.observe(settle=True)
    return QuietScreen(observation, "limit" if quiet_ms > 0 else "")


def after_an_unattended_action(control: Any) -> QuietScreen:
    """The screen a run without a person (a rollout, a replay) takes after an action: settled
    quietly with the rollouts' quiet period and reaction time (``TANDEM_ROLLOUT_QUIET_MS``,
    ``TANDEM_ROLLOUT_REACTION_MS``), the wait for a reaction ending once the desktop is idle."""
    return settled_quietly(
        control,
        settings.TANDEM_ROLLOUT_QUIET_MS,
        reaction_ms=settings.TANDEM_ROLLOUT_REACTION_MS,
        until_idle=True,
    )


def _idle_before_a_drawing(
    reports: DamageReports, until: float, activity: DesktopActivity | None
) -> bool:
    """Wait until the server reports a drawing larger than a caret, until ``until`` (a
    monotonic time), or until ``activity`` finds the desktop idle: whether that was the end."""
    drawn_at = reports.drawn_at
    try:
        while reports.drawn_at == drawn_at and time.monotonic() < until:
            if activity is not None and activity.idle():
                return True
            timeout = until - time.monotonic()
            if activity is not None:
                timeout = min(timeout, activity_rules.SAMPLE_MS / 1000)
            reports.wait(timeout)
    except DamageLost:  # a look at the screen answers then
        pass
    return False
