"""The thoughts of demonstrated steps: written by the person after the recording, or drafted by
a model endpoint and then approved or edited by the person.

A demonstrated step is decided when its input is reduced, with no thought; a decided step is
frozen, so each thought is a ``StepRevision`` of the step (its decision and action unchanged):

- The person's thought: a revision by them, ``drafted_by`` empty. Writing the same text again
  over a draft approves the draft.
- A draft: a revision ``drafted_by`` the model that wrote it (for the person who asked), asked
  of the episode's model endpoint for each step still without a thought, one at a time, on the
  model's queue (``ask_for_drafts``; the demo endpoint drafts scripted text). It is nobody's
  thought until a later revision of the person approves or replaces it, and exports that
  require approved thoughts leave its episode out (``annotation.datasets``).
"""

from dataclasses import dataclass

from django.db import transaction

from annotation.episodes.ownership import NotTheAnnotator
from annotation.job_names import DRAFT_THOUGHTS, QUEUES
from annotation.models import Decision, Episode, Step, StepRevision
from backend.accounts.models import User
from backend.celery import send_after_commit
from backend.errors import DomainError

MAX_THOUGHT_CHARS = 4000


class ThoughtRefused(DomainError):
    status_code = 400
    code = "thought_refused"


@dataclass(frozen=True)
class Thought:
    text: str
    drafted_by: str  # the model of an unapproved draft; empty for a person's thought

    @property
    def approved(self) -> bool:
        return bool(self.text.strip()) and not self.drafted_by


def thought_of(step: Step) -> Thought:
    """The step's thought as it stands: its latest revision's, else its own."""
    latest = step.revisions.order_by("-number").first()
    if latest is None:
        return Thought(step.final_thought, "")
    return Thought(latest.final_thought, latest.drafted_by)


def write(episode_id: int, user: User, index: int, text: str, drafted_by: str = "") -> Thought:
    """The thought of demonstrated step ``index``: the annotator's own (or their approval of a
    draft: the same text), or a model's draft for them (``drafted_by``). A draft is only ever
    a step's first thought: one that comes once the step has a thought (the person wrote it
    while the model drafted, or another draft came first) is dropped, and the thought as it
    stands returned."""
    text = text.strip()
    if not text:
        raise ThoughtRefused("A thought says why the step was taken: it cannot be empty.")
    if len(text) > MAX_THOUGHT_CHARS:
        raise ThoughtRefused(f"A thought is at most {MAX_THOUGHT_CHARS} characters.")
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id)
        if episode.annotator_id != user.pk:
            raise NotTheAnnotator(
                "Only the person who demonstrated the steps writes their thoughts."
            )
        step = episode.steps.filter(index=index).first()
        if step is None or step.decision != Decision.DEMONSTRATED:
            raise ThoughtRefused(f"Step {index} is not a demonstrated step of this episode.")
        current = thought_of(step)
        if current.text == text and current.drafted_by == drafted_by:
            return current  # written already (a retry)
        if drafted_by and current.text.strip():
            return current  # a draft never replaces a thought
        last = step.revisions.order_by("-number").first()
        StepRevision.objects.create(
            step=step,
            number=(last.number if last else 0) + 1,
            decision=step.decision,
            final_thought=text,
            final_action=last.final_action if last else step.final_action,
            author=user,
            note="thought drafted" if drafted_by else "thought written",
            drafted_by=drafted_by,
        )
    return Thought(text, drafted_by)


def waiting_for_a_thought(episode: Episode) -> list[Step]:
    """The demonstrated steps with no thought yet, neither a person's nor a draft."""
    steps = (
        episode.steps.filter(decision=Decision.DEMONSTRATED)
        .select_related("observation", "episode__task__project")
        .order_by("index")
    )
    return [step for step in steps if not thought_of(step).text.strip()]


def ask_for_drafts(episode_id: int, user: User) -> int:
    """Queue the drafting of the thoughts still missing (by the episode's model endpoint, for
    ``user`` to check); how many steps wait for one."""
    with transaction.atomic():
        episode = Episode.objects.select_for_update().get(pk=episode_id)
        if episode.annotator_id != user.pk:
            raise NotTheAnnotator("Only the person who demonstrated the steps drafts the thoughts.")
        waiting = len(waiting_for_a_thought(episode))
        if waiting:
            send_after_commit(DRAFT_THOUGHTS, [episode.pk, user.pk], QUEUES[DRAFT_THOUGHTS])
    return waiting
