"""What fine-tuning tests train on: a tiny Qwen2.5-VL saved as a local base model, and dataset
exports built by the real export job (``annotation.exports.build_export``) in this process."""

from pathlib import Path
from typing import Any

from annotation import exports
from annotation.models import DatasetExport, Project
from backend.accounts.models import User
from tests.tiny_vlm import tiny_model, tiny_processor

# Small enough to train in about a second a stage on the CPU.
LORA = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
STEPS = {"max_steps": 2, "batch_size": 1, "gradient_accumulation_steps": 1}


def save_tiny_base(folder: Path) -> Path:
    """A checkpoint folder as a deployment would have one: weights, tokenizer, processor."""
    processor = tiny_processor()
    tiny_model(processor).save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def built_export(
    project: Project, user: User, kind: str, fmt: str = "trl", **filters: Any
) -> DatasetExport:
    """An export row built and published by the export job's own function; held-out episodes
    are left out unless the filters say otherwise."""
    filters.setdefault("exclude_held_out", True)
    export = DatasetExport.objects.create(
        project=project,
        kind=kind,
        format=fmt,
        filters=exports.ExportFilters(**filters).as_json(),
        created_by=user,
    )
    exports.build_export(export.pk)
    export.refresh_from_db()
    assert export.status == DatasetExport.Status.SUCCEEDED, export.error
    return export
