"""Runs a fine-tuning spec with TRL: ``SFTTrainer`` and ``DPOTrainer`` on one LoRA adapter.

The base model is loaded once; the first stage wraps it with the LoRA adapter (or continues a
parent version's adapter), later stages train the same adapter further. TRL is given
``max_length=None``: truncation would cut image tokens out of a prompt and break it; instead
every row is measured first (``lengths``) and a run with a row past ``max_length`` fails
before its first step, naming the row.

Defaults that fit one 80 GB card with a 7B base and five 1080p screenshots a row
(``make bench-gpu``): gradient checkpointing, non-reentrant; the vision tower frozen, outside
autograd, its outputs cached across steps so that each screenshot is encoded once while
cached (``vision``), and the rows shuffled within pools of episodes the cache holds
(``episode_pools``); a DPO pair's prompt through the model once, its two completions packed
after it (``shared_prompt``); bf16 where the GPU has it, LoRA's inputs kept in bf16
(``precision``) and its update added inside its second product (``fused_lora``);
flash-attention where it is installed, else PyTorch's SDPA; checkpointed layers keep their
attention outputs (``recompute``). ``uncheckpointed_layers`` trades memory for speed and is off
by default (``recompute``).

**Checkpoints.** Every ``checkpoint_steps`` steps the stage's trainer checkpoint (adapter,
optimizer, scheduler, random states) goes to a ``Checkpoints`` store, and each finished
stage leaves its adapter there. A run that finds a resume point there (its worker died)
skips the finished stages, continues from their adapter, and resumes the stage in progress
from its last checkpoint: the same data order, the same optimizer state.

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

import importlib.util
import json
import logging
import re
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

import torch

from model_serving.training import (
    cost,
    episode_pools,
    fused_lora,
    lengths,
    precision,
    recompute,
    shared_prompt,
)
from model_serving.training.resume import Checkpoints, ResumePoint
from model_serving.training.spec import Hyperparameters, LoraSettings, TrainingSpec
from model_serving.training.vision import FrozenVisionTower, screenshot_bytes
from vm_pool.screen.png import png_size

logger = logging.getLogger(__name__)

POOL_SAMPLE = 64  # rows whose screenshots' sizes decide how many a vision cache holds
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
    from transformers import (  # weight: transformers, train workers only
        AutoProcessor,
        AutoTokenizer,
        ProcessorMixin,
    )

    try:
        processor = AutoProcessor.from_pretrained(path)
    except (OSError, ImportError, ValueError) as error:
        logger.info("full processor unavailable (%s); building an image-only one", error)
        processor = None
    if isinstance(processor, ProcessorMixin):
        return processor
    from transformers import (  # weight: transformers, train workers only
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessorPil,
    )

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


def _callback(
    reporter: Reporter,
    stage: int,
    kind: str,
    stages: int,
    tower: FrozenVisionTower,
    checkpoints: Checkpoints,
    hp: Hyperparameters,
) -> Any:
    from transformers import TrainerCallback  # weight: transformers, train workers only

    class JobCallback(TrainerCallback):
        """Leaves layers out of checkpointing once the trainer has turned it on and keeps the
        others' attention outputs (``recompute``), reports
        losses and progress, tells the vision cache where each step begins, stores checkpoints,
        and stops the trainer once the run is cancelled."""

        stopped = False

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if args.gradient_checkpointing and hp.uncheckpointed_layers:
                recompute.leave_out(kwargs["model"], hp.uncheckpointed_layers)
            if args.gradient_checkpointing and hp.keep_attention:
                recompute.keep_attention(kwargs["model"])

        def on_step_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            tower.new_step()

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
                control.should_save = False  # a cancelled or superseded run stores nothing

        def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            checkpoints.save_step(stage, folder, state.global_step)

    return JobCallback()


def language_model_modules(names: tuple[str, ...]) -> str:
    """A PEFT target pattern: modules with these names in the language model only. The vision
    tower has ``gate_proj``/``up_proj``/``down_proj`` too, but vLLM serves LoRA adapters of the
    language model only, so an adapter must not touch it."""
    alternatives = "|".join(re.escape(name) for name in names)
    return rf"^(?!.*\bvisual\b).*\.(?:{alternatives})$"


def _lora_config(lora: LoraSettings) -> Any:
    from peft import LoraConfig  # weight: peft, train workers only

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
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def attention() -> str:
    """flash-attention where it is installed with a GPU (the ``train`` extra's ``flash``),
    PyTorch's SDPA everywhere else."""
    if torch.cuda.is_available() and importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    return "sdpa"


def _workers(hp: Hyperparameters) -> int:
    if hp.dataloader_workers is not None:
        return hp.dataloader_workers
    return 4 if torch.cuda.is_available() else 0


def _arguments(kind: str, hp: Hyperparameters, output_dir: Path) -> Any:
    from trl import DPOConfig, SFTConfig  # weight: TRL, train workers only

    common: dict[str, Any] = {
        "output_dir": str(output_dir),
        "learning_rate": hp.learning_rate,
        "num_train_epochs": hp.epochs,
        "max_steps": hp.max_steps,
        "per_device_train_batch_size": hp.batch_size,
        "gradient_accumulation_steps": hp.gradient_accumulation_steps,
        "seed": hp.seed,
        "bf16": _bf16(hp),
        "use_cpu": not torch.cuda.is_available(),  # else bf16 asked of a CPU is refused
        "gradient_checkpointing": hp.gradient_checkpointing,
        "gradient_checkpointing_kwargs": {"use_reentrant": False},
        "dataloader_num_workers": _workers(hp),
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": hp.checkpoint_steps,
        "save_total_limit": 1,  # the store keeps the last one; the local disk needs no more
        "report_to": [],
        "max_length": None,  # rows are measured against hp.max_length before training
        "disable_tqdm": True,
    }
    if kind == "dpo":
        return DPOConfig(beta=hp.beta, **common)
    return SFTConfig(**common)


def load_model(path: str, hp: Hyperparameters) -> Any:
    """The base model with the vision tower frozen (``vision``), in bf16 where it applies."""
    from transformers import AutoModelForImageTextToText  # weight: transformers

    dtype = torch.bfloat16 if _bf16(hp) else torch.float32
    return AutoModelForImageTextToText.from_pretrained(
        path, dtype=dtype, attn_implementation=attention()
    )


def _episode_pools(
    table: Any, model: Any, spec: TrainingSpec, cache_bytes: int
) -> episode_pools.EpisodePools | None:
    """The stage's rows pooled by episode (``episode_pools``), each pool as many rows as the
    vision cache holds screenshots of the largest size among ``POOL_SAMPLE`` rows; None where
    nothing is cached across steps or the rows do not name their episode."""
    if cache_bytes == 0 or table.num_rows == 0:
        return None
    limits = lengths.TokenCounter.for_base(spec.base_model_path).limits
    every = max(1, table.num_rows // POOL_SAMPLE)
    sample = table.select(range(0, table.num_rows, every)[:POOL_SAMPLE])
    sizes = [
        png_size(image["bytes"])
        for images in sample.data.column("images").to_pylist()
        for image in images
        if image and image.get("bytes")
    ]
    tokens = max((limits.visual_tokens(w, h) for w, h in sizes), default=1)
    rows = episode_pools.rows_per_pool(cache_bytes, screenshot_bytes(model, tokens))
    return episode_pools.EpisodePools.of(table, rows, spec.hyperparameters.seed)


def check_lengths(spec: TrainingSpec, shards: list[list[Path]]) -> None:
    """Fail before training when a row is longer than ``max_length`` (``lengths``)."""
    counter = lengths.TokenCounter.for_base(spec.base_model_path)
    for stage, paths in zip(spec.stages, shards, strict=True):
        measured = lengths.row_lengths(paths, stage.kind, counter)
        try:
            lengths.refuse_too_long(
                measured, spec.hyperparameters.max_length, stage.dataset.export_id
            )
        except lengths.RowTooLong as error:
            raise TrainingFailed(str(error)) from None


def train(
    spec: TrainingSpec,
    tables: list[Any],
    workdir: Path,
    reporter: Reporter,
    checkpoints: Checkpoints,
    resume: ResumePoint | None = None,
) -> TrainingOutcome:
    """Run every stage of ``spec`` on its loaded dataset (``tables``, in stage order) from
    ``resume`` (where an earlier attempt left off), storing ``checkpoints`` as it goes."""
    from peft import PeftModel  # weight: peft, train workers only
    from trl import SFTTrainer  # weight: TRL, train workers only

    spec.validate()
    reporter.log(f"loading {spec.base_model_path}")
    try:
        processor = load_processor(spec.base_model_path)
        model: Any = load_model(spec.base_model_path, spec.hyperparameters)
    except (OSError, ValueError) as error:
        raise TrainingFailed(
            f"cannot load the base model {spec.base_model_path}: {error}"
        ) from error
    cache_bytes = int(spec.hyperparameters.vision_cache_gib * cost.GIB)
    tower = FrozenVisionTower.install(model, cache_bytes)
    if spec.hyperparameters.dpo_shared_prompt and any(s.kind == "dpo" for s in spec.stages):
        shared_prompt.install(model)
    resume = resume or ResumePoint()
    adapter = resume.adapter or (Path(spec.parent_adapter) if spec.parent_adapter else None)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
    if resume.finished or resume.checkpoint:
        reporter.log(
            f"resuming after {len(resume.finished)} finished stages"
            + (f" from {resume.checkpoint.name}" if resume.checkpoint else "")
        )
    outcome = TrainingOutcome(adapter_dir=workdir / "adapter", libraries=library_versions())
    outcome.stages = list(resume.finished)
    for index, (stage, table) in enumerate(zip(spec.stages, tables, strict=True)):
        if index < len(resume.finished):
            continue
        if reporter.cancelled():
            raise TrainingCancelled(f"cancelled before stage {index + 1}")
        reporter.log(
            f"stage {index + 1}/{len(spec.stages)}: {stage.kind} on export "
            f"{stage.dataset.export_id} ({table.num_rows} rows)"
        )
        arguments = _arguments(stage.kind, spec.hyperparameters, workdir / f"stage-{index + 1}")
        callback = _callback(
            reporter,
            index,
            stage.kind,
            len(spec.stages),
            tower,
            checkpoints,
            spec.hyperparameters,
        )
        trainer_class = (
            shared_prompt.trainer_class(spec.hyperparameters.dpo_shared_prompt)
            if stage.kind == "dpo"
            else SFTTrainer
        )
        pools = _episode_pools(table, model, spec, cache_bytes)
        if pools is not None:
            trainer_class = episode_pools.trainer_class(trainer_class, pools)
        wrapped = isinstance(model, PeftModel)
        started = time.monotonic()
        from_checkpoint = resume.checkpoint if index == len(resume.finished) else None
        try:
            trainer = trainer_class(
                model=model,
                args=arguments,
                train_dataset=table,
                processing_class=processor,
                peft_config=None if wrapped else _lora_config(spec.lora),
                callbacks=[callback],
            )
            precision.keep_lora_inputs(trainer.model)
            fused_lora.install(trainer.model)
            result = trainer.train(
                resume_from_checkpoint=str(from_checkpoint) if from_checkpoint else None
            )
        except (ValueError, KeyError, TypeError, RuntimeError) as error:
            raise TrainingFailed(
                f"stage {index + 1} ({stage.kind} on export {stage.dataset.export_id}) "
                f"failed: {type(error).__name__}: {error}"
            ) from error
        if callback.stopped:
            raise TrainingCancelled(f"cancelled during stage {index + 1}")
        model = trainer.model
        record = {
            "kind": stage.kind,
            "export_id": stage.dataset.export_id,
            "rows": table.num_rows,
            "steps": trainer.state.global_step,
            "train_loss": result.training_loss,
            "seconds": round(time.monotonic() - started, 3),
            "arguments": json.loads(arguments.to_json_string()),
            "vision_tower": asdict(tower.counts),
        }
        outcome.stages.append(record)
        if index + 1 < len(spec.stages):
            stage_adapter = workdir / f"stage-{index + 1}-adapter"
            model.save_pretrained(str(stage_adapter), selected_adapters=[ADAPTER])
            checkpoints.save_stage(index, stage_adapter, record)
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
