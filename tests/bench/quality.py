"""The quality report: every annotator's scorecard of a large project, computed in PostgreSQL.

A project of 200 annotators and 100,000 steps (10,000 episodes of 10 steps, a third reviewed,
half scored, a tenth demonstrated). ``quality_report_ms`` is the median time of
``scorecards.scorecards`` over the whole project, after one warm-up; ``quality_report_rows`` is
how many scorecards it gave (one per annotator). Steps are never loaded into Python: one
aggregate query for the episodes, one for the steps.
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
        from annotation.quality.scorecards import scorecards

        rows = len(scorecards(project_id))  # the warm-up
        times = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            scorecards(project_id)
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
            )  # fmt: skip
            for i, episode in enumerate(episodes)
            if i % 3 == 0
        ),
        batch_size=2_000,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return project.pk
