"""What fine-tuning tests train on: dataset exports built by the real export job
(``annotation.datasets.exports.build_export``) in this process, for the demo's tiny base model
(``model_serving.demo_model``)."""

from typing import Any

from annotation.datasets import exports
from annotation.models import DatasetExport, Project
from backend.accounts.models import User

# Small enough to train in about a second a stage on the CPU.
LORA = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
STEPS = {"max_steps": 2, "batch_size": 1, "gradient_accumulation_steps": 1}


def built_export(
    project: Project, user: User, kind: str, fmt: str = "trl", **filters: Any
) -> DatasetExport:
    """An export row built and published by the export job's own function; held-out episodes
    are left out unless the filters say otherwise."""
    filters.setdefault("exclude_held_out", True)
    export = exports.create_export(project, user, kind, fmt, exports.ExportFilters(**filters))
    exports.build_export(export.pk)
    export.refresh_from_db()
    assert export.status == DatasetExport.Status.SUCCEEDED, export.error
    return export


def job_body(exports: list[DatasetExport], base_model: Any, **hyperparameters: Any) -> dict:
    """A fine-tune request over the API: these exports, the small LoRA, a two-step run with
    ``hyperparameters`` on top."""
    return {
        "exports": [e.pk for e in exports],
        "base_model": str(base_model),
        "version_name": "ui-tars-ft-scale",
        "lora": LORA,
        "hyperparameters": {**STEPS, **hyperparameters},
    }
