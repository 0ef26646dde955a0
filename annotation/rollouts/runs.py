"""One rollout's run, on the host of its desktop: the live loop without a person.

Setup, observe, ask the model, record its proposals, take the first valid one as the step's
decision (``auto``), execute it, settle, observe, and again; after every answer the stop rules
(``annotation.rollouts.rules``) may end it. An invalid answer stays with its step and the model is
asked again on the same screen. The run beats the rollout's heartbeat and renews its desktop
lease at every step, and stops at its next step when the batch is cancelled. How attempts are
taken and lost is ``annotation.rollouts.batches``'s rule (``take_attempt``).
"""

import asyncio
import logging
from dataclasses import replace
from typing import Any

from django.db import connection
from django.utils import timezone

from annotation.episodes import observations, proposals
from annotation.episodes.leases import end_episode
from annotation.episodes.ownership import DESKTOP_LOST, owns_desktop
from annotation.episodes.requests import proposal_request
from annotation.episodes.setup import SETUP_ERRORS, keep_setup_log, set_up
from annotation.episodes.steps import decide_auto, open_step
from annotation.job_names import DISPATCH_ROLLOUTS, QUEUES, VALIDATE_ROLLOUT
from annotation.models import (
    BatchStatus,
    Episode,
    EpisodeOutcome,
    Rollout,
    RolloutBatch,
    RolloutStatus,
    Step,
)
from annotation.rollouts import rules as rollout_rules
from annotation.rollouts.batches import (
    DESKTOP_LEASE_S,
    counted,
    stale_seconds,
    take_attempt,
)
from backend.celery import send_after_commit
from backend.heartbeats import Heartbeat
from model_serving.proposers.base import ModelUnavailable
from model_serving.registry import ProposerMisconfigured, get_proposer
from model_serving.versions import proposer_settings
from vm_pool import pool
from vm_pool.actions import Action, InvalidAction
from vm_pool.desktop import Observation
from vm_pool.screen.compare import same_screen
from vm_pool.screen.screenshots import store_screenshot

logger = logging.getLogger(__name__)


def run_rollout(rollout_id: int, attempt: int) -> str:
    """On the desktop's host: run one rollout to its end; the stop reason."""
    rollout = take_attempt(rollout_id, attempt)
    if rollout is None:
        return "not this job's"
    run = Run(rollout)
    beating = Rollout.objects.filter(
        pk=rollout.pk, attempt=rollout.attempt, status=RolloutStatus.RUNNING
    )
    try:
        with Heartbeat(beating, stale_seconds() / 4):
            reason = run.loop()
    finally:
        send_after_commit(DISPATCH_ROLLOUTS, [rollout.batch_id], QUEUES[DISPATCH_ROLLOUTS])
    return reason


class Run:
    """The state of one rollout's run: its episode, desktop, rules and the records so far."""

    def __init__(self, rollout: Rollout) -> None:
        self.rollout = rollout
        self.batch = rollout.batch
        assert rollout.episode is not None and rollout.episode.desktop is not None
        self.episode: Episode = rollout.episode
        self.rules = rollout_rules.StopRules.from_json(self.batch.stop_rules)
        self.records: list[rollout_rules.StepRecord] = []
        # The screen the rules see: its identity (a screenshot's sha256) and the PNG that gave
        # it. A later screenshot within the tolerance (a blinking caret, the clock) keeps it, so
        # that small changes never add up unseen.
        self.screen: tuple[str, bytes] = ("", b"")
        self.tokens = 0
        self.proposer = get_proposer(self._settings())

    def _settings(self) -> dict[str, Any]:
        project = self.batch.project
        version = self.episode.served_version
        assert version is not None
        return {**proposer_settings(project.model_settings, version), **self.batch.sampling}

    def loop(self) -> str:
        episode = self.episode
        assert episode.desktop is not None
        # No database connection is held while the desktop works (setup, settling): the
        # host's jobs and heartbeats share the process's small pool.
        connection.close()
        try:
            done = set_up(episode)
        except SETUP_ERRORS as error:
            return self.end(EpisodeOutcome.ENV_FAILED, "setup_failed", f"setup failed: {error}")
        keep_setup_log(episode, done)
        control, observation = done.control, done.observation
        self.see(observation)
        index = 1
        while True:
            if (why := self.beat()) == "cancelled":
                return self.end(EpisodeOutcome.STOPPED, why, "the batch was cancelled")
            if why:
                return self.end(EpisodeOutcome.ENV_FAILED, why, DESKTOP_LOST)
            step = open_step(
                episode, index, store_screenshot(observation.png), observation.waited_ms
            )
            # An invalid answer is kept with the step, and the model is asked again on the same
            # screen, until a valid one or the stop rules' limit.
            action, stop = None, None
            while action is None and stop is None:
                action = self.propose(step)
                stop = rollout_rules.stop_reason(self.records, self.rules)
            if action is None:
                assert stop is not None
                return self.end(EpisodeOutcome.STOPPED, stop, f"stopped: {stop}")
            if stop in (rollout_rules.StopReason.FINISHED, rollout_rules.StopReason.CALL_USER):
                outcome = EpisodeOutcome(stop.value)
                return self.end(outcome, stop, f"the model answered {stop.value}")
            if stop is not None and stop != rollout_rules.StopReason.MAX_STEPS:
                # A loop is seen on the screen the step was decided on: it is not run again.
                return self.end(EpisodeOutcome.STOPPED, stop, f"stopped: {stop}")
            connection.close()  # not held while the desktop acts and settles
            try:
                control.execute(action)
                after = observations.after_an_unattended_action(control).observation
            except (pool.DesktopError, InvalidAction) as error:
                return self.end(EpisodeOutcome.ENV_FAILED, "env_failed", f"step {index}: {error}")
            if not owns_desktop(episode):
                return self.end(EpisodeOutcome.ENV_FAILED, "desktop_lost", DESKTOP_LOST)
            self.records[-1] = replace(self.records[-1], screen_after=self.see(after))
            stop = stop or rollout_rules.stop_reason(self.records, self.rules)
            if stop == rollout_rules.StopReason.MAX_STEPS:
                store_screenshot(after.png)
                return self.end(EpisodeOutcome.MAX_STEPS, stop, f"reached {index} steps")
            if stop is not None:
                store_screenshot(after.png)
                return self.end(EpisodeOutcome.STOPPED, stop, f"stopped: {stop}")
            observation = after
            index += 1

    def beat(self) -> str:
        """Renew the desktop's lease; why the run must end now ("" when it goes on)."""
        episode = self.episode
        assert episode.desktop_id is not None
        try:
            pool.renew_desktop_lease(
                episode.desktop_id,
                episode.annotator_id,
                DESKTOP_LEASE_S,
                episode.desktop_generation,
            )
        except pool.DesktopLeaseLost:
            return "desktop_lost"
        status = RolloutBatch.objects.values_list("status", flat=True).get(pk=self.batch.pk)
        return "cancelled" if status == BatchStatus.CANCELLED else ""

    def propose(self, step: Step) -> Action | None:
        """Ask the model; record its answer; decide the step with the first valid candidate."""
        try:
            request = proposal_request(step)
            connection.close()  # not held while the model answers
            result = asyncio.run(self.proposer.propose(request))
        except (ModelUnavailable, ProposerMisconfigured) as error:
            proposals.record_model_unavailable(step.pk, str(error))
            self.records.append(
                rollout_rules.StepRecord(
                    step.index, None, f"model unavailable: {error}", self.screen[0], None
                )
            )
            return None
        answered = proposals.record_proposals(step.pk, result)
        self.tokens += (result.prompt_tokens or 0) + (result.completion_tokens or 0)
        chosen = next((p for p in answered if p.action is not None), None)
        if chosen is None:
            reason = answered[0].invalid_reason if answered else "no answer"
            self.records.append(
                rollout_rules.StepRecord(step.index, None, reason, self.screen[0], None)
            )
            return None
        decide_auto(step, chosen, chosen.thought, chosen.action)
        self.records.append(
            rollout_rules.StepRecord(step.index, chosen.action, "", self.screen[0], None)
        )
        return Action.from_json(chosen.action)

    def see(self, observation: Observation) -> str:
        """The identity of the screen now, for the rules."""
        png = self.screen[1]
        if not png or not same_screen(png, observation.png):
            self.screen = (store_screenshot(observation.png).pk, observation.png)
        return self.screen[0]

    def end(self, outcome: str, stop: str, reason: str) -> str:
        status = RolloutStatus.CANCELLED if stop == "cancelled" else RolloutStatus.ENDED
        steps = Step.objects.filter(episode=self.episode, decided_at__isnull=False).count()
        # The episode and the rollout end in one transaction: the episode's evaluation, sent as
        # it ends, never finds the rollout still running, whenever this worker dies. Rows are
        # locked batch, rollout, episode, as everywhere. Only the attempt this run is: one queued
        # again meanwhile (its worker was taken for lost) is the next attempt's. The batch's
        # counts change with it.
        with counted(self.batch.pk):
            ours = Rollout.objects.select_for_update().filter(
                pk=self.rollout.pk,
                attempt=self.rollout.attempt,
                episode=self.episode,
                status=RolloutStatus.RUNNING,
            )
            mine = bool(list(ours.values_list("pk", flat=True)))  # locked, as counted locks
            end_episode(self.episode.pk, outcome, reason)
            if mine:
                ours.update(
                    status=status,
                    stop_reason=str(stop),
                    ended_at=timezone.now(),
                    tokens=self.tokens,
                    steps=steps,
                    records=[record.as_json() for record in self.records],
                )
        if mine and status == RolloutStatus.ENDED:
            send_after_commit(VALIDATE_ROLLOUT, [self.rollout.pk], QUEUES[VALIDATE_ROLLOUT])
        return str(stop)
