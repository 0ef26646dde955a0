"""Where an interrupted run picks up, and the store its checkpoints go to (plain data: the
worker's storage implements the store, ``model_serving.checkpoints``)."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass
class ResumePoint:
    """An interrupted run's finished stages' records, the adapter they left, and the trainer
    checkpoint of the stage in progress (``None``: that stage starts from its beginning)."""

    finished: list[dict[str, Any]] = field(default_factory=list)
    adapter: Path | None = None
    checkpoint: Path | None = None
    step: int = 0  # the checkpoint's step within the stage in progress


class Checkpoints(Protocol):
    def save_step(self, stage: int, folder: Path, step: int) -> None: ...

    def save_stage(self, stage: int, adapter: Path, record: dict[str, Any]) -> None: ...
