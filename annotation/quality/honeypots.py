"""Honeypots: gold tasks handed out again, with the gold episode's proposals, and scored.

Rules:

- **Making one.** A manager makes a honeypot of a task from one of its episodes that holds gold
  steps (``annotation.quality.gold``). At each gold step a run shows what that episode was
  shown: its first valid proposal there, unless the manager gave a *decoy* for the step (a
  thought and an action, deliberately wrong or not). Decoys name gold steps and are checked
  against the step's screen; one bad decoy refuses them all, and nothing is stored. The task
  leaves the pool: between runs its status is ``gold``.
- **Handing out** (``annotation.projects.queue``): at each claim, with the project's
  ``honeypot_rate`` as the chance, an active honeypot the annotator has not submitted before
  comes first; none comes right after another (so a queue with only gold left hands out no
  gold twice in a row), and none is ever claimed by the person whose episode gave its gold.
  The claim reads as any other pool claim.
- **Running.** A run is an ordinary interactive episode on the task: same desktop, setup,
  socket messages and timing, and the model is asked at every step as in any episode. While
  every earlier step of the run was right (below) and the screen is the gold step's (within
  the branch replay tolerance), the first answer shown at step *i* is what the gold episode was
  shown at its step *i* (``answer_for``), written as the run's model writes (its coordinate
  convention). It takes the place of the model's first answer as that streams
  (``model_serving.proposers.given``): it comes at the model's pace, under the model's name,
  version and latency, and fails when the model fails; the model's own answers follow it, as
  many as the project samples. Off gold, or past its steps, only the model's own are shown.
- **Scoring** (``score_run``, when the run ends): gold steps are scored in order, while every
  earlier one was right and the screen before the step is the gold episode's within the
  branch replay tolerance (``TANDEM_BRANCH_REPLAY_TOLERANCE``). A step is a **miss** when its
  final action is not right by the gold answers (``rules.is_right``): approving a wrong
  proposal is one; so is correcting a right proposal (the shown one was right and the person
  changed it, even to another right action). Scoring stops at the first miss.
- A run is never ordinary data: exports leave honeypot runs out. Nothing an annotator reads
  says a task is gold; only a miss told as immediate feedback (a project setting) reveals
  the task, after the run.
"""

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.models import (
    Decision,
    Episode,
    GoldStep,
    GoldVerdict,
    Honeypot,
    HoneypotRun,
    Proposal,
    Step,
    Task,
    TaskStatus,
)
from annotation.quality import feedback
from annotation.quality.gold import BadGold, GoldNotAllowed
from annotation.quality.rules import is_right
from backend.accounts.models import User
from model_serving.proposers.base import Candidate
from model_serving.proposers.baseline import Proposal as BaselineAnswer
from model_serving.registry import proposer_name
from model_serving.uitars import assistant_text, parse_response
from model_serving.versions import served_style
from vm_pool.actions import Action, InvalidAction, ScreenSize
from vm_pool.screen.compare import screen_difference
from vm_pool.screen.screenshots import screenshot_png

logger = logging.getLogger(__name__)


def make_honeypot(episode: Episode, user: User, decoys: dict[str, Any] | None = None) -> Honeypot:
    """A honeypot of ``episode``'s task from its gold steps (see the module's rules)."""
    gold = {
        g.step.index: g
        for g in GoldStep.objects.filter(step__episode=episode).select_related("step__observation")
    }
    if not gold:
        raise GoldNotAllowed(
            "A honeypot needs gold: mark the right answers of this episode's steps first."
        )
    checked = _checked_decoys(decoys or {}, gold)
    with transaction.atomic():
        task = Task.objects.select_for_update().get(pk=episode.task_id)
        if task.branch_of_id is not None:
            raise GoldNotAllowed("A branch task replays a rollout: it cannot be a honeypot.")
        if task.status in (TaskStatus.IN_PROGRESS, TaskStatus.ASSIGNED):
            raise GoldNotAllowed(
                f"Task {task.external_id} is {task.status}: make it a honeypot once it is free."
            )
        honeypot, _ = Honeypot.objects.update_or_create(
            task=task,
            defaults={"gold_episode": episode, "decoys": checked, "active": True,
                      "created_by": user},
        )  # fmt: skip
        Task.objects.filter(pk=task.pk).update(
            status=TaskStatus.GOLD, assignee=None, updated_at=timezone.now()
        )
    return honeypot


def retire(honeypot: Honeypot) -> None:
    """Hand the honeypot out no more; its task is submitted work again."""
    with transaction.atomic():
        Honeypot.objects.filter(pk=honeypot.pk).update(active=False)
        Task.objects.filter(pk=honeypot.task_id, status=TaskStatus.GOLD).update(
            status=TaskStatus.SUBMITTED, updated_at=timezone.now()
        )


def _checked_decoys(decoys: Any, gold: dict[int, GoldStep]) -> dict[str, Any]:
    if not isinstance(decoys, dict):
        raise BadGold("Decoys are an object of step number to {thought, action}.")
    checked: dict[str, Any] = {}
    for key, decoy in decoys.items():
        index = int(key) if str(key).isdigit() else None
        if index not in gold:
            raise BadGold(f"Decoy for step {key!r}: only a gold step can show a decoy.")
        if not isinstance(decoy, dict) or not isinstance(decoy.get("thought", ""), str):
            raise BadGold(f"Decoy for step {index}: give a thought and an action.")
        observation = gold[index].step.observation
        try:
            screen = ScreenSize(observation.width, observation.height)
            action = Action.from_json(decoy.get("action"), screen=screen)
        except (InvalidAction, TypeError, ValueError) as error:
            raise BadGold(f"Decoy for step {index}: {error}") from error
        checked[str(index)] = {"thought": decoy.get("thought", ""), "action": action.to_json()}
    return checked


# --- running -------------------------------------------------------------------------------


def note_run(episode: Episode) -> None:
    """Within the transaction that creates an episode: mark it a run when its task is an
    active honeypot."""
    honeypot = Honeypot.objects.filter(task_id=episode.task_id, active=True).first()
    if honeypot is not None:
        HoneypotRun.objects.create(episode=episode, honeypot=honeypot)


@dataclass(frozen=True)
class Recorded:
    """What the gold episode was shown at a step (its first valid proposal, or the manager's
    decoy for it): the thought and action, in screen pixels."""

    thought: str
    action: dict[str, Any]


def answer_for(step: Step) -> Candidate | None:
    """The answer a honeypot run shows first at ``step``, written as the run's model writes;
    None where only the model's own answers are shown: not a run, off gold (an earlier step not
    right), past the gold steps, on another screen than the gold step's, or where the gold
    episode's screenshot or answer can no longer be read (logged)."""
    try:
        return _answer_for(step)
    except (OSError, ValueError, InvalidAction) as error:  # a screenshot gone or damaged
        logger.warning("honeypot run step %s: gold not shown (%s)", step.pk, error)
        return None


def _answer_for(step: Step) -> Candidate | None:
    run = (
        HoneypotRun.objects.filter(episode_id=step.episode_id)
        .select_related("honeypot__task__project", "episode__served_version")
        .first()
    )
    if run is None:
        return None
    honeypot = run.honeypot
    gold = _gold_steps(honeypot)
    if step.index not in gold:
        return None
    shown = _shown(honeypot, gold)
    earlier = Step.objects.filter(episode_id=step.episode_id, index__lt=step.index)
    for done in earlier.order_by("index"):
        if done.index not in gold or not _right(done, gold[done.index], shown.get(done.index)):
            return None
    recorded = shown.get(step.index)
    if recorded is None or not _on_screen_of(step, gold[step.index]):
        return None
    action = Action.from_json(recorded.action)
    project, version = honeypot.task.project, run.episode.served_version
    if version is None and proposer_name(project.model_settings) == "baseline":
        written = BaselineAnswer(recorded.thought, action)  # in screen pixels, as it writes
        return Candidate(written.raw_text, written.thought, written.action)
    screen = ScreenSize(step.observation.width, step.observation.height)
    style = served_style(project.model_settings, version)
    # Read back as the model's own answers are, so that its action is what its text says.
    text = assistant_text(recorded.thought, action, screen, style)
    read = parse_response(text, screen, style, project.platform)
    return read if read.action is not None else None


def _gold_steps(honeypot: Honeypot) -> dict[int, GoldStep]:
    return {
        g.step.index: g
        for g in GoldStep.objects.filter(step__episode_id=honeypot.gold_episode_id).select_related(
            "step__observation"
        )
    }


def _shown(honeypot: Honeypot, gold: dict[int, GoldStep]) -> dict[int, Recorded]:
    """What the gold episode showed at each gold step (one query): the manager's decoy, else
    its first valid proposal there."""
    first: dict[int, Recorded] = {}
    proposals = Proposal.objects.filter(
        step_id__in=[g.step_id for g in gold.values()], superseded=False, invalid_reason=""
    )
    for index, thought, action in proposals.order_by("-rank").values_list(
        "step__index", "thought", "action"
    ):
        if action is not None:
            first[index] = Recorded(thought, action)  # the lowest rank is written last
    for key, decoy in honeypot.decoys.items():
        first[int(key)] = Recorded(decoy["thought"], decoy["action"])
    return first


def _on_screen_of(step: Step, gold: GoldStep) -> bool:
    """Whether the run's screen before ``step`` is the gold step's, within the branch replay
    tolerance: on any other screen the gold answer would be shown where it does not belong."""
    difference = screen_difference(
        screenshot_png(step.observation), screenshot_png(gold.step.observation)
    )
    return difference <= settings.TANDEM_BRANCH_REPLAY_TOLERANCE


def _right(step: Step, gold: GoldStep, shown: Recorded | None) -> bool:
    """The module's rule for one step: right by gold, and no right proposal corrected."""
    if not is_right(step.final_action, gold.answers):
        return False
    corrected = step.decision in (Decision.CORRECTED, Decision.DEMONSTRATED)
    return not (corrected and shown is not None and is_right(shown.action, gold.answers))


# --- scoring -------------------------------------------------------------------------------


def score_run(episode_id: int) -> list[GoldVerdict]:
    """Score an ended honeypot run against gold once (the module's rules); tell the annotator
    their misses when the project gives immediate feedback."""
    with transaction.atomic():
        run = (
            HoneypotRun.objects.select_for_update()
            .select_related("honeypot__task__project", "episode__task__project")
            .filter(episode_id=episode_id, scored_at__isnull=True, episode__ended_at__isnull=False)
            .first()
        )
        if run is None:
            return []
        episode = run.episode
        ended = episode.ended_at or timezone.now()  # ended: the query asked for that
        gold = _gold_steps(run.honeypot)
        verdicts = []
        answers = _shown(run.honeypot, gold)
        steps = Step.objects.filter(episode=episode, decided_at__isnull=False)
        for step in steps.select_related("observation").order_by("index"):
            if step.index not in gold:
                break
            expected = gold[step.index]
            if not _on_screen_of(step, expected):
                break  # not the gold episode's state: nothing more can be scored
            shown = answers.get(step.index)
            right = _right(step, expected, shown)
            verdicts.append(
                GoldVerdict(
                    run=run,
                    step=step,
                    gold=expected,
                    annotator_id=episode.annotator_id,
                    right=right,
                    shown_right=shown is not None and is_right(shown.action, expected.answers),
                    reason="" if right else _why(step, expected, shown),
                    at=ended,
                )
            )
            if not right:
                break
        GoldVerdict.objects.bulk_create(verdicts)
        run.scored_at = timezone.now()
        run.save(update_fields=["scored_at"])
        missed = [v for v in verdicts if not v.right]
        if missed and episode.task.project.immediate_feedback:
            transaction.on_commit(lambda: feedback.miss_told(missed[0]))  # scoring stops there
    return verdicts


def _why(step: Step, gold: GoldStep, shown: Recorded | None) -> str:
    if is_right(step.final_action, gold.answers):
        return "the proposal shown was right, and it was corrected"
    if step.decision == Decision.ACCEPTED:
        return "a wrong proposal was approved"
    return "the step's action is not one of the right answers"
