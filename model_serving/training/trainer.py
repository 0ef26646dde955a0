"""Runs a fine-tuning spec with TRL: ``SFTTrainer`` and ``DPOTrainer`` on one LoRA adapter.

The base model is loaded once; the first stage wraps it with the LoRA adapter (or continues a
parent version's adapter), later stages train the same adapter further. Every stage uses
``max_length=None``: truncation would cut image tokens out of a prompt and break it.

A ``Reporter`` hears about progress and every logged loss, and is asked between steps whether
the run was cancelled; a cancelled run stops after the step in progress and raises
``TrainingCancelled``, so its adapter is never saved. Saving writes the adapter alone (not the
frozen ``ref`` copy DPO adds), the training arguments of each stage, and the versions of the
libraries used, so that a run can be reproduced.

Processor. transformers 5.x builds Qwen2.5-VL's processor with a video processor, which needs
torchvision. Where torchvision is not installed (a CPU machine) the processor is built from the
checkpoint's tokenizer and PIL image processor without the video part; screenshots are images,
so training sees exactly the same inputs.
"""

import json
import logging
import re
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

from model_serving.training.spec import Hyperparameters, LoraSettings, TrainingSpec

logger = logging.getLogger(__name__)

LIBRARIES = ("torch", "transformers", "trl", "peft", "datasets", "accelerate")
ADAPTER = "default"


class TrainingCancelled(Exception):
    """Somebody cancelled the run; it stopped between two steps."""


class TrainingFailed(Exception):
    """The run could not train; the message says why."""


class Reporter(Protocol):
    def progress(self, fraction: float) -> None: ...

    def loss(self, stage: int, kind: str, step: int, logs: dict[str, float]) -> None: ...

    def log(self, line: str) -> None: ...

    def cancelled(self) -> bool: ...


@dataclass
class TrainingOutcome:
    adapter_dir: Path
    stages: list[dict[str, Any]] = field(default_factory=list)
    libraries: dict[str, str] = field(default_factory=dict)


def library_versions() -> dict[str, str]:
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def load_processor(path: str) -> Any:
    """The checkpoint's processor (see the module docstring for the case without torchvision)."""
    from transformers import AutoProcessor, AutoTokenizer, ProcessorMixin

    try:
        processor = AutoProcessor.from_pretrained(path)
    except (OSError, ImportError, ValueError) as error:
        logger.info("full processor unavailable (%s); building an image-only one", error)
        processor = None
    if isinstance(processor, ProcessorMixin):
        return processor
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessorPil

    class ImageOnlyProcessor(Qwen2_5_VLProcessor):
        @classmethod
        def get_attributes(cls) -> list[str]:
            return ["image_processor", "tokenizer"]

    tokenizer = AutoTokenizer.from_pretrained(path)
    image_processor = Qwen2VLImageProcessorPil.from_pretrained(path)
    return ImageOnlyProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=tokenizer.chat_template,
    )


def _callback(reporter: Reporter, stage: int, kind: str, stages: int) -> Any:
    from transformers import TrainerCallback

    class JobCallback(TrainerCallback):
        """Reports losses and progress, and stops the trainer once the run is cancelled."""

        stopped = False

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
            numbers = {k: float(v) for k, v in (logs or {}).items() if isinstance(v, int | float)}
            if "loss" in numbers:
                reporter.loss(stage, kind, state.global_step, numbers)

        def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            done = state.global_step / max(state.max_steps, 1)
            reporter.progress(min((stage + done) / stages, 1.0))
            if reporter.cancelled():
                self.stopped = True
                control.should_training_stop = True

    return JobCallback()


def language_model_modules(names: tuple[str, ...]) -> str:
    """A PEFT target pattern: modules with these names in the language model only. The vision
    tower has ``gate_proj``/``up_proj``/``down_proj`` too, but vLLM serves LoRA adapters of the
    language model only, so an adapter must not touch it."""
    alternatives = "|".join(re.escape(name) for name in names)
    return rf"^(?!.*\bvisual\b).*\.(?:{alternatives})$"


def _lora_config(lora: LoraSettings) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=language_model_modules(lora.target_modules),
        task_type="CAUSAL_LM",
    )


def _bf16(hp: Hyperparameters) -> bool:
    """bf16 as asked; by default wherever the GPU supports it (never on the CPU)."""
    if hp.bf16 is not None:
        return hp.bf16
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def _arguments(kind: str, hp: Hyperparameters, output_dir: Path) -> Any:
    from trl import DPOConfig, SFTConfig

    common: dict[str, Any] = {
        "output_dir": str(output_dir),
        "learning_rate": hp.learning_rate,
        "num_train_epochs": hp.epochs,
        "max_steps": hp.max_steps,
        "per_device_train_batch_size": hp.batch_size,
        "gradient_accumulation_steps": hp.gradient_accumulation_steps,
        "seed": hp.seed,
        "bf16": _bf16(hp),
        "gradient_checkpointing": hp.gradient_checkpointing,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "max_length": None,
        "disable_tqdm": True,
    }
    if kind == "dpo":
        return DPOConfig(beta=hp.beta, **common)
    return SFTConfig(**common)


def train(
    spec: TrainingSpec, tables: list[Any], workdir: Path, reporter: Reporter
) -> TrainingOutcome:
    """Run every stage of ``spec`` on its loaded dataset (``tables``, in stage order)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText
    from trl import DPOTrainer, SFTTrainer

    spec.validate()
    reporter.log(f"loading {spec.base_model_path}")
    try:
        processor = load_processor(spec.base_model_path)
        dtype = torch.bfloat16 if _bf16(spec.hyperparameters) else torch.float32
        model: Any = AutoModelForImageTextToText.from_pretrained(spec.base_model_path, dtype=dtype)
    except (OSError, ValueError) as error:
        raise TrainingFailed(
            f"cannot load the base model {spec.base_model_path}: {error}"
        ) from error
    if spec.parent_adapter:
        model = PeftModel.from_pretrained(model, spec.parent_adapter, is_trainable=True)
    outcome = TrainingOutcome(adapter_dir=workdir / "adapter", libraries=library_versions())
    for index, (stage, table) in enumerate(zip(spec.stages, tables, strict=True)):
        if reporter.cancelled():
            raise TrainingCancelled(f"cancelled before stage {index + 1}")
        reporter.log(
            f"stage {index + 1}/{len(spec.stages)}: {stage.kind} on export "
            f"{stage.dataset.export_id} ({table.num_rows} rows)"
        )
        arguments = _arguments(stage.kind, spec.hyperparameters, workdir / f"stage-{index + 1}")
        callback = _callback(reporter, index, stage.kind, len(spec.stages))
        trainer_class = DPOTrainer if stage.kind == "dpo" else SFTTrainer
        wrapped = isinstance(model, PeftModel)
        started = time.monotonic()
        try:
            trainer = trainer_class(
                model=model,
                args=arguments,
                train_dataset=table,
                processing_class=processor,
                peft_config=None if wrapped else _lora_config(spec.lora),
                callbacks=[callback],
            )
            result = trainer.train()
        except (ValueError, KeyError, TypeError, RuntimeError) as error:
            raise TrainingFailed(
                f"stage {index + 1} ({stage.kind} on export {stage.dataset.export_id}) "
                f"failed: {type(error).__name__}: {error}"
            ) from error
        if callback.stopped:
            raise TrainingCancelled(f"cancelled during stage {index + 1}")
        model = trainer.model
        outcome.stages.append(
            {
                "kind": stage.kind,
                "export_id": stage.dataset.export_id,
                "rows": table.num_rows,
                "steps": trainer.state.global_step,
                "train_loss": result.training_loss,
                "seconds": round(time.monotonic() - started, 3),
                "arguments": json.loads(arguments.to_json_string()),
            }
        )
    model.save_pretrained(str(outcome.adapter_dir), selected_adapters=[ADAPTER])
    (outcome.adapter_dir / "tandem_training.json").write_text(
        json.dumps(
            {
                "base_model_path": spec.base_model_path,
                "parent_adapter": spec.parent_adapter,
                "stages": outcome.stages,
                "datasets": [stage.dataset.to_json() for stage in spec.stages],
                "lora": asdict(spec.lora),
                "hyperparameters": asdict(spec.hyperparameters),
                "libraries": outcome.libraries,
            },
            indent=2,
        )
    )
    reporter.progress(1.0)
    return outcome
