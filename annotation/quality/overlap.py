"""Overlap: k annotators on one task, and how far their decisions agree.

Rules:

- A project's ``overlap`` k is 1 to 5 and at most its number of annotators (``check_overlap``:
  a larger k could never be met). Each task is then submitted by k different annotators, never
  twice by one (``annotation.projects.queue``).
- When a person's episode ends with its task submitted (finished, call user or out of steps;
  never a honeypot run), it is compared with every such episode of the same task by another
  annotator (``compare``). Steps are taken in order while both have a step decided by a person
  (on a proposal or demonstrated) and their screens are comparable: the first step always is,
  a later one when the two observations differ by at most the branch replay tolerance
  (``TANDEM_BRANCH_REPLAY_TOLERANCE``). Each compared pair of steps is one ``Agreement``: the
  final actions agree by ``rules.agree`` (the gold rule, with the default radius and
  ``whitespace`` text). The comparison stops at the first screen that is not comparable.
- A task's agreement is its agreeing pairs over its compared pairs; a pair of annotators' is
  the same over the tasks they share. A task with a disagreement goes first in the review
  queue.
"""

from django.conf import settings
from django.db import transaction
from django.db.models import Count, OuterRef, Subquery
from django.utils import timezone

from annotation.models import (
    Agreement,
    Decision,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    HoneypotRun,
    Membership,
    Project,
    Step,
    Task,
    TaskEvent,
    TaskStatus,
)
from annotation.quality.rules import agree
from backend.accounts.roles import Role
from backend.errors import DomainError
from vm_pool.screen.compare import screen_difference
from vm_pool.screen.screenshots import screenshot_png

MAX_OVERLAP = 5
SUBMITTED = (EpisodeOutcome.FINISHED, EpisodeOutcome.CALL_USER, EpisodeOutcome.MAX_STEPS)
PEOPLE = (Decision.ACCEPTED, Decision.CORRECTED, Decision.ERROR_KEPT, Decision.DEMONSTRATED)


class BadOverlap(DomainError):
    status_code = 400
    code = "bad_overlap"


def check_overlap(project: Project, k: object) -> int:
    """``k`` as a project's overlap, or ``BadOverlap`` saying why not."""
    if type(k) is not int or not 1 <= k <= MAX_OVERLAP:
        raise BadOverlap(f"Overlap is a whole number of annotators from 1 to {MAX_OVERLAP}.")
    annotators = Membership.objects.filter(project=project, role=Role.ANNOTATOR).count()
    if k > 1 and k > annotators:
        raise BadOverlap(
            f"Overlap {k} needs {k} annotators per task, and {project.name} has "
            f"{annotators}: add annotators first."
        )
    return k


def reopen_for_overlap(project: Project) -> int:
    """After k grew: put back in the pool the submitted tasks fewer than k annotators
    submitted; how many."""
    submitters = (
        TaskEvent.objects.filter(task=OuterRef("pk"), kind=TaskEvent.Kind.SUBMITTED)
        .values("task")
        .annotate(n=Count("actor", distinct=True))
        .values("n")
    )
    return (
        Task.objects.filter(project=project, status=TaskStatus.SUBMITTED, branch_of__isnull=True)
        .annotate(submitters=Subquery(submitters))
        .filter(submitters__lt=project.overlap)
        .update(status=TaskStatus.QUEUED, assignee=None, updated_at=timezone.now())
    )


def compared_episodes(episode: Episode) -> list[Episode]:
    """The other annotators' submitted episodes of ``episode``'s task (the module's rules)."""
    return list(
        Episode.objects.filter(
            task_id=episode.task_id,
            mode=EpisodeMode.INTERACTIVE,
            outcome__in=SUBMITTED,
            honeypot_run__isnull=True,
        )
        .exclude(annotator_id=episode.annotator_id)
        .exclude(pk=episode.pk)
    )


def compare(episode_id: int) -> list[Agreement]:
    """Compare an ended episode with its task's other annotators' (the module's rules)."""
    episode = Episode.objects.select_related("task").get(pk=episode_id)
    if (
        episode.mode != EpisodeMode.INTERACTIVE
        or episode.outcome not in SUBMITTED
        or HoneypotRun.objects.filter(episode=episode).exists()
    ):
        return []
    made: list[Agreement] = []
    mine = _people_steps(episode)
    for other in compared_episodes(episode):
        first, second = (episode, other) if episode.annotator_id < other.annotator_id else (
            other, episode)  # fmt: skip
        steps_a, steps_b = (mine, _people_steps(other)) if first is episode else (
            _people_steps(other), mine)  # fmt: skip
        at = max(e.ended_at for e in (first, second) if e.ended_at is not None)
        for index in sorted(set(steps_a) & set(steps_b)):
            a, b = steps_a[index], steps_b[index]
            if index > 1 and not _comparable(a, b):
                break
            made.append(
                Agreement(
                    task_id=episode.task_id,
                    step_a=a,
                    step_b=b,
                    annotator_a_id=first.annotator_id,
                    annotator_b_id=second.annotator_id,
                    agree=agree(a.final_action, b.final_action),
                    at=at,
                )
            )
    with transaction.atomic():
        Agreement.objects.bulk_create(made, ignore_conflicts=True)
    return made


def _people_steps(episode: Episode) -> dict[int, Step]:
    steps = Step.objects.filter(episode=episode, decision__in=PEOPLE, decided_at__isnull=False)
    return {s.index: s for s in steps.select_related("observation").order_by("index")}


def _comparable(a: Step, b: Step) -> bool:
    if a.observation_id == b.observation_id:
        return True
    difference = screen_difference(screenshot_png(a.observation), screenshot_png(b.observation))
    return difference <= settings.TANDEM_BRANCH_REPLAY_TOLERANCE
