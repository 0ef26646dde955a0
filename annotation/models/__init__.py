"""The domain model of annotation (design §2): the tables, floor 0 of the app.

Every model is re-exported here, so ``from annotation.models import X`` names each one; the
package imports nothing else of the app. Steps are append-only: once a step is decided its row
is frozen (a PostgreSQL trigger refuses updates), and a review that changes it writes a
``StepRevision`` with its author.
"""

from annotation.models.episodes import (
    PEOPLE_DECISIONS,
    Decision,
    Demonstration,
    Episode,
    EpisodeMode,
    EpisodeOutcome,
    EvaluationStatus,
    Proposal,
    Review,
    Step,
    StepRevision,
)
from annotation.models.exports import DatasetExport
from annotation.models.projects import Membership, Platform, Project
from annotation.models.quality import (
    Agreement,
    GoldStep,
    GoldVerdict,
    Honeypot,
    HoneypotRun,
    QualityHold,
)
from annotation.models.rollouts import BatchStatus, Rollout, RolloutBatch, RolloutStatus
from annotation.models.tasks import (
    EvaluatorCheck,
    EvaluatorCheckStatus,
    Task,
    TaskEvent,
    TaskStatus,
)

__all__ = [
    "Agreement",
    "PEOPLE_DECISIONS",
    "BatchStatus",
    "DatasetExport",
    "Decision",
    "Demonstration",
    "Episode",
    "EvaluatorCheck",
    "EvaluatorCheckStatus",
    "EpisodeMode",
    "EpisodeOutcome",
    "EvaluationStatus",
    "GoldStep",
    "GoldVerdict",
    "Honeypot",
    "HoneypotRun",
    "Membership",
    "Platform",
    "Project",
    "Proposal",
    "QualityHold",
    "Review",
    "Rollout",
    "RolloutBatch",
    "RolloutStatus",
    "Step",
    "StepRevision",
    "Task",
    "TaskEvent",
    "TaskStatus",
]
