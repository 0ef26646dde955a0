"""The quality report: every annotator's scorecard of a large project, computed in PostgreSQL.

A project of 200 annotators and 100,000 steps (10,000 episodes of 10 steps, a third reviewed,
half scored, a tenth demonstrated); a tenth of the episodes are honeypot runs with a scored
gold verdict per step (10,000), and half of the others were done by two annotators, their steps
compared (40,000 agreements). ``quality_report_ms`` is the median time of the whole report the
quality page reads (``scorecards``, ``pairs`` and ``timeline``) over the whole project, after
one warm-up; ``quality_report_rows`` is how many scorecards it gave (one per annotator). Steps
are never loaded into Python: a few aggregate queries.
"""

import random
import statistics
import time
from datetime import timedelta

ANNOTATORS = 200
EPISODES = 10_000
STEPS_PER_EPISODE = 10
REPEATS = 5

GOALS = {"quality_report_ms": "≤ 1000"}


def run() -> dict[str, float | int]:
    from tests.bench import fresh_database, setup_django

    setup_django()
    with fresh_database():
        project_id = _populate()
        from annotation.quality.scorecards import pairs, scorecards, timeline

        rows = len(scorecards(project_id))  # the warm-up
        times = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            scorecards(project_id)
            pairs(project_id)
            timeline(project_id)
            times.append((time.perf_counter() - started) * 1000)
        return {"quality_report_ms": statistics.median(times), "quality_report_rows": rows}


def _populate() -> int:
    from django.contrib.auth.hashers import make_password
    from django.db import connection
    from django.utils import timezone

    from annotation.models import Decision, Episode, Project, Review, Step, Task
    from backend.accounts.models import User
    from vm_pool.models import Screenshot

    rng = random.Random(0)
    project = Project.objects.create(name="Quality benchmark")
    unusable = make_password(None)
    people = User.objects.bulk_create(
        User(username=f"annotator-{i:03d}", password=unusable) for i in range(ANNOTATORS)
    )
    reviewer = User.objects.create(username="reviewer", password=unusable)
    screen = Screenshot.objects.create(
        sha256="0" * 64, width=1280, height=800, size_bytes=1, file="none.png"
    )
    tasks = Task.objects.bulk_create(
        (Task(project=project, external_id=f"q-{i:05d}", instruction="x") for i in range(EPISODES)),
        batch_size=2_000,
    )
    now = timezone.now()
    episodes = Episode.objects.bulk_create(
        (
            Episode(
                task=task,
                annotator=people[i % ANNOTATORS],
                started_at=now - timedelta(minutes=30),
                ended_at=now - timedelta(minutes=rng.randint(1, 29)),
                outcome="finished",
                evaluation_status="scored" if i % 2 else "",
                task_success=rng.choice((0.0, 1.0)) if i % 2 else None,
            )
            for i, task in enumerate(tasks)
        ),
        batch_size=2_000,
    )
    decisions = [Decision.ACCEPTED, Decision.CORRECTED, Decision.ERROR_KEPT]
    Step.objects.bulk_create(
        (
            Step(
                episode=episode,
                index=index,
                observation=screen,
                decision=Decision.DEMONSTRATED if i % 10 == 0 else rng.choice(decisions),
                final_action={"type": "wait"},
                decided_by_id=episode.annotator_id,
                decided_at=now,
                decision_ms=rng.randint(300, 20_000),
            )
            for i, episode in enumerate(episodes)
            for index in range(1, STEPS_PER_EPISODE + 1)
        ),
        batch_size=5_000,
    )
    Review.objects.bulk_create(
        (
            Review(
                episode=episode,
                reviewer=reviewer,
                verdict=rng.choice(("accepted", "rejected")),
                first_wrong_step=None,
            )
            for i, episode in enumerate(episodes)
            if i % 3 == 0
        ),
        batch_size=2_000,
    )
    _quality(project, episodes, people[0])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return project.pk


def _quality(project, episodes, manager) -> None:
    """Honeypot runs with their verdicts, and agreements between pairs of episodes."""
    from annotation.models import Agreement, GoldStep, GoldVerdict, Honeypot, HoneypotRun, Step

    rng = random.Random(1)
    sources = episodes[:20]
    gold = GoldStep.objects.bulk_create(
        GoldStep(step=step, answers=[{"type": "wait"}], source="review", created_by=manager)
        for step in Step.objects.filter(episode__in=sources).order_by("episode", "index")
    )
    by_episode = {}
    for g in gold:
        by_episode.setdefault(g.step.episode_id, []).append(g)
    honeypots = Honeypot.objects.bulk_create(
        Honeypot(task_id=e.task_id, gold_episode=e, created_by=manager) for e in sources
    )
    run_episodes = episodes[20:1020]
    runs = HoneypotRun.objects.bulk_create(
        HoneypotRun(episode=e, honeypot=honeypots[i % 20], scored_at=e.ended_at)
        for i, e in enumerate(run_episodes)
    )
    steps = Step.objects.filter(episode__in=run_episodes).order_by("episode", "index")
    run_of = {r.episode_id: r for r in runs}
    GoldVerdict.objects.bulk_create(
        (
            GoldVerdict(
                run=run_of[s.episode_id],
                step=s,
                gold=by_episode[sources[0].pk][0],
                annotator_id=s.decided_by_id,
                right=rng.random() < 0.8,
                shown_right=True,
                at=run_of[s.episode_id].scored_at,
            )
            for s in steps.select_related("episode")
        ),
        batch_size=5_000,
    )
    others = episodes[1020:]
    first_steps = {}
    for step in Step.objects.filter(episode__in=others).values("pk", "episode_id", "index"):
        first_steps[(step["episode_id"], step["index"])] = step["pk"]
    agreements = []
    for a, b in zip(others[0::2], others[1::2], strict=False):
        if a.annotator_id == b.annotator_id:
            continue
        low, high = sorted((a, b), key=lambda e: e.annotator_id)
        for index in range(1, STEPS_PER_EPISODE + 1):
            agreements.append(Agreement(
                task_id=low.task_id, step_a_id=first_steps[(low.pk, index)],
                step_b_id=first_steps[(high.pk, index)], annotator_a_id=low.annotator_id,
                annotator_b_id=high.annotator_id, agree=rng.random() < 0.7, at=high.ended_at,
            ))  # fmt: skip
    Agreement.objects.bulk_create(agreements, batch_size=5_000)
