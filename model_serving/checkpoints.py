"""A fine-tuning job's checkpoints in Django's storage, where the job's next attempt finds them.

Layout under ``finetune/job-<id>/checkpoints/`` (the job's, not an attempt's: a later attempt
resumes what an earlier one left):

- ``stage-<k>/step/…``: the last trainer checkpoint of stage ``k`` (adapter, optimizer,
  scheduler, random states, trainer state), and ``stage-<k>/step.json`` saying its step.
  The pointer is written after the files and the older checkpoint is removed after the
  pointer, so a worker that dies while uploading leaves the previous checkpoint usable.
- ``stage-<k>/adapter/…`` and ``stage-<k>/record.json``: the adapter a finished stage left
  and its record; the record is written last and marks the stage finished.

The folder is removed when the job ends (succeeded, failed or cancelled); only a worker that
died leaves it, for the attempt that takes over.
"""

import json
from pathlib import Path
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from model_serving.artifacts import delete_folder, download_folder, upload_folder
from model_serving.training.resume import ResumePoint


class StoredCheckpoints:
    """The ``trainer.Checkpoints`` store of one job."""

    def __init__(self, job_id: int) -> None:
        self.prefix = f"finetune/job-{job_id}/checkpoints"

    def save_step(self, stage: int, folder: Path, step: int) -> None:
        base = f"{self.prefix}/stage-{stage + 1}"
        previous = self._read(f"{base}/step.json")
        target = f"{base}/step-{step}"
        delete_folder(target)  # a half-written upload of the same step, from a dead attempt
        upload_folder(folder, target)
        self._write(f"{base}/step.json", {"step": step, "folder": f"step-{step}"})
        if previous is not None and previous["folder"] != f"step-{step}":
            delete_folder(f"{base}/{previous['folder']}")

    def save_stage(self, stage: int, adapter: Path, record: dict[str, Any]) -> None:
        base = f"{self.prefix}/stage-{stage + 1}"
        delete_folder(f"{base}/adapter")
        upload_folder(adapter, f"{base}/adapter")
        self._write(f"{base}/record.json", record)

    def resume_point(self, into: Path) -> ResumePoint:
        """What earlier attempts left: finished stages, then the next stage's checkpoint."""
        point = ResumePoint()
        stage = 1
        while (record := self._read(f"{self.prefix}/stage-{stage}/record.json")) is not None:
            point.finished.append(record)
            stage += 1
        if point.finished:
            point.adapter = into / f"stage-{stage - 1}-adapter"
            download_folder(f"{self.prefix}/stage-{stage - 1}/adapter", point.adapter)
        pointer = self._read(f"{self.prefix}/stage-{stage}/step.json")
        if pointer is not None:
            point.checkpoint = into / pointer["folder"]
            point.step = int(pointer["step"])
            download_folder(f"{self.prefix}/stage-{stage}/{pointer['folder']}", point.checkpoint)
        return point

    def remove(self) -> None:
        delete_folder(self.prefix)

    def _read(self, name: str) -> Any:
        if not default_storage.exists(name):
            return None
        with default_storage.open(name, "rb") as f:
            return json.load(f)

    def _write(self, name: str, data: Any) -> None:
        if default_storage.exists(name):
            default_storage.delete(name)
        default_storage.save(name, ContentFile(json.dumps(data).encode()))
