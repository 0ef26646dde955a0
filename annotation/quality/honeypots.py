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
  socket messages and timing. While every earlier step of the run was right (below), the
  proposal job serves step *i* from the gold episode's step *i* (``answer_for``): it streams
  the recorded text over the recorded latency and is stamped with the name and version the
  project's model answers with now. Off gold, or past its steps, the model is asked as usual.
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
from model_serving.proposers.baseline import MODEL_NAME as BASELINE_NAME
from model_serving.uitars import CoordinateStyle, assistant_text
from vm_pool.actions import Action, InvalidAction, ScreenSize
from vm_pool.screen.compare import screen_difference
from vm_pool.screen.screenshots import screenshot_png

MAX_LATENCY_MS = 30_000  # a recorded answer is streamed over at most this long


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
    """What a honeypot run's step shows: the raw text, thought and action, and the latency
    the answer took when it was recorded."""

    raw_text: str
    thought: str
    action: dict[str, Any]
    latency_ms: int
    prompt_tokens: int | None
    completion_tokens: int | None
    sampling: dict[str, Any]


def answer_for(step: Step) -> Recorded | None:
    """The recorded answer a honeypot run shows at ``step``; None where the model is asked
    (not a run, off gold, or past the gold steps)."""
    run = (
        HoneypotRun.objects.filter(episode_id=step.episode_id)
        .select_related("honeypot__task__project")
        .first()
    )
    if run is None:
        return None
    honeypot = run.honeypot
    gold = {
        g.step.index: g
        for g in GoldStep.objects.filter(step__episode_id=honeypot.gold_episode_id).select_related(
            "step__observation"
        )
    }
    if step.index not in gold:
        return None
    earlier = Step.objects.filter(episode_id=step.episode_id, index__lt=step.index)
    for done in earlier.order_by("index"):
        if done.index not in gold or not _right(done, gold[done.index], _shown(honeypot, gold[
                done.index].step)):  # fmt: skip
            return None
    shown = _shown(honeypot, gold[step.index].step)
    return shown


def _shown(honeypot: Honeypot, gold_step: Step) -> Recorded | None:
    """What the gold episode's step showed, or the manager's decoy for it."""
    recorded = (
        Proposal.objects.filter(step=gold_step, superseded=False, invalid_reason="")
        .order_by("rank")
        .first()
    )
    decoy = honeypot.decoys.get(str(gold_step.index))
    if decoy is not None:
        action = Action.from_json(decoy["action"])
        observation = gold_step.observation
        screen = ScreenSize(observation.width, observation.height)
        # The convention of the answers the project's model shows (its version A's).
        project = honeypot.task.project
        style = (
            project.model_version.coordinate_style
            if project.model_version is not None
            else project.model_settings.get("style", CoordinateStyle.UITARS15)
        )
        if recorded is not None and recorded.model_name == BASELINE_NAME:
            text = f"Thought: {decoy['thought']}\nAction: {action.to_text()}"  # screen pixels
        else:
            text = assistant_text(decoy["thought"], action, screen, style)
        if recorded is None:
            return Recorded(text, decoy["thought"], decoy["action"], 0, None, None, {})
        # The recorded answer's cost: the decoy answers the same screen and prompt.
        return Recorded(
            text,
            decoy["thought"],
            decoy["action"],
            recorded.latency_ms or 0,
            recorded.prompt_tokens,
            recorded.completion_tokens,
            recorded.sampling,
        )
    if recorded is None or recorded.action is None:
        return None
    return Recorded(
        recorded.raw_text,
        recorded.thought,
        recorded.action,
        recorded.latency_ms or 0,
        recorded.prompt_tokens,
        recorded.completion_tokens,
        recorded.sampling,
    )


def _right(step: Step, gold: GoldStep, shown: Recorded | None) -> bool:
    """The module's rule for one step: right by gold, and no right proposal corrected."""
    if not is_right(step.final_action, gold.answers):
        return False
    corrected = step.decision in (Decision.CORRECTED, Decision.DEMONSTRATED)
    return not (corrected and shown is not None and is_right(shown.action, gold.answers))


def stamp(project_id: int) -> tuple[str, str]:
    """The name and version the project's model answers with now: those of its latest
    answer outside honeypot runs."""
    latest = (
        Proposal.objects.filter(step__episode__task__project_id=project_id)
        .exclude(model_name="")
        .exclude(step__episode__honeypot_run__isnull=False)
        .order_by("-created_at", "-id")
        .values_list("model_name", "model_version")
        .first()
    )
    return latest if latest is not None else ("", "")


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
        gold = {
            g.step.index: g
            for g in GoldStep.objects.filter(
                step__episode_id=run.honeypot.gold_episode_id
            ).select_related("step__observation")
        }
        verdicts = []
        steps = Step.objects.filter(episode=episode, decided_at__isnull=False)
        for step in steps.select_related("observation").order_by("index"):
            if step.index not in gold:
                break
            expected = gold[step.index]
            difference = screen_difference(
                screenshot_png(step.observation), screenshot_png(expected.step.observation)
            )
            if difference > settings.TANDEM_BRANCH_REPLAY_TOLERANCE:
                break  # not the gold episode's state: nothing more can be scored
            shown = _shown(run.honeypot, expected.step)
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
