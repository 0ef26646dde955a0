"""Celery jobs of the annotation app.

``return_lapsed_leases`` runs on ``default`` (beat). The live loop's jobs run where their work
is: ``prepare_episode``, ``execute_step`` and ``evaluate_episode`` on the queue of the host that
owns the episode's desktop, ``propose_step`` on ``model``. ``build_export`` runs on ``exports``.
``check_evaluator`` (a task's evaluator self-check) on a desktop host's queue.
Rollouts (``annotation.rollouts.batches``): ``dispatch_rollouts`` and ``validate_rollout`` on
``default``, ``run_rollout`` on the host of its desktop.
"""

import asyncio
import logging
import time
from typing import Any

from celery import shared_task
from django.conf import settings

from annotation import job_names
from annotation.datasets import exports
from annotation.episodes import (
    demonstrations,
    evaluator_self_check,
    leases,
    proposals,
    replay,
    replay_check,
    thoughts,
)
from annotation.episodes import loop as episodes
from annotation.episodes import scoring as evaluations
from annotation.episodes.events import episode_group
from annotation.episodes.requests import proposal_request
from annotation.flywheel import model_versions
from annotation.models import Episode, Step
from annotation.projects import queue, versions
from annotation.quality import checks, honeypots
from annotation.rollouts import batches, validation
from annotation.rollouts import runs as rollout_runs
from backend.accounts.models import User
from backend.attempts import AttemptAlive
from backend.notifications import send_async, send_now
from model_serving.proposers.base import ModelUnavailable
from model_serving.proposers.given import given_first
from model_serving.registry import ProposerMisconfigured, get_proposer
from vm_pool.actions import Action

logger = logging.getLogger(__name__)


@shared_task(name=job_names.RETURN_LAPSED_LEASES)
def return_lapsed_leases() -> int:
    """Periodic (beat): running episodes whose lease lapsed are paused (or ended after their
    grace); other tasks whose lease lapsed go back to the pool; evaluations whose job was lost
    are taken up again."""
    leases.pause_lapsed_episodes()
    evaluations.recover_lost()
    return queue.return_lapsed_leases()


@shared_task(name=job_names.PREPARE_EPISODE, acks_late=True)
def prepare_episode(episode_id: int) -> None:
    episodes.prepare_episode(episode_id)


@shared_task(name=job_names.EXECUTE_STEP, acks_late=True)
def execute_step(step_id: int) -> None:
    episodes.execute_step(step_id)


@shared_task(name=job_names.DEMONSTRATION_ENDED, acks_late=True)
def demonstration_ended(demonstration_id: int, finish: bool) -> None:
    demonstrations.demonstration_ended(demonstration_id, finish)


@shared_task(name=job_names.CHECK_REPLAY, acks_late=True)
def check_replay(episode_id: int) -> None:
    replay_check.check(episode_id)


@shared_task(name=job_names.CHECK_EVALUATOR, bind=True, acks_late=True, max_retries=None)
def check_evaluator(self: Any, check_id: int, sha: str) -> str:
    """A task's evaluator on its untouched desktop (``annotation.episodes.evaluator_self_check``);
    sent again while no desktop is ready, up to its number of tries."""
    tries_left = evaluator_self_check.DESKTOP_TRIES - 1 - self.request.retries
    try:
        return evaluator_self_check.run(check_id, sha, tries_left)
    except evaluator_self_check.NoDesktopYet:
        raise self.retry(countdown=30) from None


@shared_task(name=job_names.CHECK_QUALITY, acks_late=True)
def check_quality(episode_id: int) -> None:
    checks.check_quality(episode_id)


# Where the worker's pool enforces Celery's time limits (prefork), they bound an evaluation and
# a validation; under threads the heartbeat's limit does (evaluations.py).
VALIDATION_LIMIT_S = 300  # the judge's attempts with their waits, and a review's lookups


@shared_task(
    name=job_names.EVALUATE_EPISODE,
    acks_late=True,
    soft_time_limit=evaluations.EVALUATION_LEASE_S,
    time_limit=evaluations.EVALUATION_LEASE_S + 60,
)
def evaluate_episode(episode_id: int, attempt: int | None = None) -> None:
    evaluations.evaluate_episode(episode_id, attempt)


@shared_task(
    name=job_names.BUILD_EXPORT,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,
)
def build_export(self: Any, export_id: int) -> None:
    """Build and publish a dataset export (``annotation.datasets.exports``). Delivered again when
    its worker dies; while another attempt is alive, it waits for that one instead."""
    try:
        exports.build_export(export_id)
    except AttemptAlive as alive:
        raise self.retry(countdown=alive.seconds) from None


@shared_task(name=job_names.PROPOSE_STEP, acks_late=True)
def propose_step(step_id: int) -> None:
    """Ask the project's proposer for a step, streaming its text to the episode's sockets."""
    step = Step.objects.select_related(
        "episode__task__project", "episode__served_version", "observation"
    ).get(pk=step_id)
    if step.episode.ended_at is not None or step.proposals.filter(superseded=False).exists():
        return
    if replay.offer_recorded(step):  # the rollout's own next step, after its kept error
        return
    group = episode_group(step.episode_id)
    pending: dict[int, str] = {}
    last_sent = [0.0]

    def deltas() -> list[dict[str, Any]]:
        """The text streamed since the last send, one notice per candidate."""
        where = {"episode": step.episode_id, "step": step.index}
        sent = [{**where, "candidate": c, "text": text} for c, text in pending.items()]
        pending.clear()
        last_sent[0] = time.monotonic()
        return sent

    def flush() -> None:
        for payload in deltas():
            send_now(group, "proposal_delta", payload)

    async def on_text(candidate: int, delta: str) -> None:
        # Batched per TANDEM_PROPOSAL_DELTA_MS, sent from the proposer's own event loop.
        pending[candidate] = pending.get(candidate, "") + delta
        if (time.monotonic() - last_sent[0]) * 1000 >= settings.TANDEM_PROPOSAL_DELTA_MS:
            for payload in deltas():
                await send_async(group, "proposal_delta", payload)

    given = honeypots.answer_for(step)  # a honeypot run's gold step shows gold's answer first
    try:
        proposer = get_proposer(versions.episode_model_settings(step.episode))
        request = proposal_request(step)
        if given is None:
            result = asyncio.run(proposer.propose(request, on_text))
        else:
            result = asyncio.run(given_first(proposer, request, given, on_text))
    except (ModelUnavailable, ProposerMisconfigured) as error:
        flush()
        proposals.record_model_unavailable(step_id, str(error), observation=step.observation_id)
        return
    flush()
    proposals.record_proposals(step_id, result, observation=step.observation_id)


@shared_task(name=job_names.DRAFT_THOUGHTS, acks_late=True)
def draft_thoughts(episode_id: int, user_id: int) -> int:
    """Draft, with the episode's model endpoint, the thoughts its demonstrated steps still lack;
    how many were drafted. A model that cannot answer leaves the rest without one."""
    episode = Episode.objects.select_related("task__project", "served_version").get(pk=episode_id)
    user = User.objects.get(pk=user_id)
    try:
        proposer = get_proposer(versions.episode_model_settings(episode))
    except ProposerMisconfigured:
        logger.exception("episode %s: no model endpoint to draft thoughts with", episode_id)
        return 0
    model = str(getattr(proposer, "model", "") or proposer.name)
    drafted = 0
    for step in thoughts.waiting_for_a_thought(episode):
        action = Action.from_json(step.final_action)
        try:
            text = asyncio.run(proposer.draft_thought(proposal_request(step), action))
        except ModelUnavailable:
            logger.exception("episode %s: the model drafted no thought for step %s", episode_id,
                             step.index)  # fmt: skip
            break
        try:
            written = thoughts.write(episode.pk, user, step.index, text, drafted_by=model)
        except thoughts.ThoughtRefused:  # an empty or over-long draft: the step waits for one
            logger.warning("episode %s: the model's draft for step %s was refused", episode_id,
                           step.index)  # fmt: skip
            continue
        drafted += written.drafted_by == model
    return drafted


@shared_task(name=job_names.EVALUATE_MODEL_VERSION, acks_late=True)
def evaluate_model_version(run_id: int) -> str:
    """Offline evaluation of a model version on a project's held-out steps (``exports``)."""
    return model_versions.run_evaluation(run_id)


@shared_task(name=job_names.DISPATCH_ROLLOUTS)
def dispatch_rollouts(batch_id: int | None = None) -> int:
    """Start what a batch (every active batch, periodically) may start now."""
    if batch_id is not None:
        return batches.dispatch(batch_id)
    batches.recover_stale()
    return sum(batches.dispatch(batch) for batch in batches.active_batches())


@shared_task(
    name=job_names.RUN_ROLLOUT,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,
)
def run_rollout(self: Any, rollout_id: int, attempt: int) -> str:
    """One rollout on its desktop's host, to its end. Delivered again when its worker dies."""
    try:
        return rollout_runs.run_rollout(rollout_id, attempt)
    except AttemptAlive:
        raise self.retry(countdown=batches.stale_seconds() / 4) from None


@shared_task(
    name=job_names.VALIDATE_ROLLOUT,
    bind=True,
    acks_late=True,
    max_retries=None,
    soft_time_limit=VALIDATION_LIMIT_S,
    time_limit=VALIDATION_LIMIT_S + 30,
)
def validate_rollout(self: Any, rollout_id: int) -> bool | None:
    """V(s) of an ended rollout, once its task's evaluator (if any) has scored it."""
    try:
        return validation.validate(rollout_id)
    except validation.EvaluationPending:
        raise self.retry(countdown=1) from None
