"""Synthetic recorded episodes, inserted in bulk, for export tests and the export benchmark.

Every episode has the same shape, so the records it gives are known: ``steps`` decided steps
cycling through accepted, corrected (the model proposed a click, the annotator typed),
error_kept (the model's wrong click was executed on purpose) and the reflective step after it
(corrected, the model's proposal differs). Screenshots are real PNGs stored through
``store_screenshot`` (so in the configured storage), ``distinct_screens`` of them, reused
round-robin.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from annotation.models import (
    Decision,
    Episode,
    EpisodeOutcome,
    Project,
    Proposal,
    Step,
    Task,
)
from backend.accounts.models import User
from tests.support.pngs import solid_png
from vm_pool.screen.screenshots import store_screenshot

PATTERN = (Decision.ACCEPTED, Decision.CORRECTED, Decision.ERROR_KEPT, Decision.CORRECTED)
MODEL_CLICK = {"type": "click", "point": [640, 400]}
TYPED = {"type": "type", "content": "hello\n"}


@dataclass(frozen=True)
class Expected:
    """What ``make_episodes`` gives per episode, by kind (``include_accepted`` off)."""

    sft: int
    dpo: int


def expected(steps: int) -> Expected:
    """Per episode: an SFT sample for each corrected step; a pair for each corrected step
    (error-correction or post-reflection), since every one has a differing proposal."""
    corrected = sum(1 for i in range(steps) if PATTERN[i % 4] == Decision.CORRECTED)
    return Expected(sft=corrected, dpo=corrected)


def make_episodes(
    project: Project,
    annotator: User,
    episodes: int,
    steps: int,
    *,
    distinct_screens: int = 8,
    episode_offset: int = 1,
    size: tuple[int, int] = (64, 40),
    batch: int = 5_000,
    model_version: str = "ui-tars-1.5-7b",
) -> list[int]:
    """Insert ``episodes`` ended episodes of ``steps`` decided steps each; return their ids.
    Step i of episode n shows screenshot (n × ``episode_offset`` + i) of ``distinct_screens``."""
    screens = [
        store_screenshot(solid_png(*size, (i * 37 % 256, i * 91 % 256, 120)))
        for i in range(distinct_screens)
    ]
    now = timezone.now()
    tasks = Task.objects.bulk_create(
        [
            Task(
                project=project,
                external_id=f"synthetic-{now.timestamp()}-{i}",
                instruction=f"Do {i}",
            )
            for i in range(episodes)
        ],
        batch_size=batch,
    )
    rows = Episode.objects.bulk_create(
        [
            Episode(
                task=task,
                annotator=annotator,
                model_name="ui-tars-1.5-7b",
                model_version=model_version,
                started_at=now - timedelta(hours=1),
                ended_at=now - timedelta(minutes=30),
                outcome=EpisodeOutcome.FINISHED,
            )
            for task in tasks
        ],
        batch_size=batch,
    )
    pending: list[Step] = []
    for n, episode in enumerate(rows):
        for index in range(1, steps + 1):
            decision = PATTERN[(index - 1) % 4]
            kept_or_accepted = decision in (Decision.ACCEPTED, Decision.ERROR_KEPT)
            pending.append(
                Step(
                    episode=episode,
                    index=index,
                    observation=screens[(n * episode_offset + index) % distinct_screens],
                    decision=decision,
                    final_thought=f"Step {index}.",
                    final_action=MODEL_CLICK if kept_or_accepted else TYPED,
                    decided_by=annotator,
                    decided_at=now - timedelta(minutes=40),
                )
            )
        if len(pending) >= batch:
            _insert(pending, batch)
            pending = []
    _insert(pending, batch)
    return [episode.pk for episode in rows]


def _insert(steps: list[Step], batch: int) -> None:
    created = Step.objects.bulk_create(steps, batch_size=batch)
    Proposal.objects.bulk_create(
        [
            Proposal(
                step=step,
                rank=0,
                raw_text="Thought: Click.\nAction: click(start_box='(644,406)')",
                thought="Click.",
                action=MODEL_CLICK,
                model_name="ui-tars-1.5-7b",
            )
            for step in created
        ],
        batch_size=batch,
    )
