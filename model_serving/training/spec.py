"""What a fine-tuning run is asked to do, as plain data: stages, datasets, LoRA, hyperparameters.

A run is one or more **stages** in order, each SFT or DPO on one dataset (a TRL Parquet export:
its files with their sha256s). Stages train one LoRA adapter in turn: an SFT stage then a DPO
stage on its result, as in the UI-TARS recipe. In a DPO stage that follows another stage the
reference model is the adapter as the previous stage left it (TRL copies it into a frozen
``ref`` adapter); a DPO stage that comes first is referenced against the base model.

Everything here is checked before a job is queued (``validate``), so a worker never starts a
run whose settings cannot work; unknown keys are refused, not ignored.
"""

import math
from dataclasses import asdict, dataclass, field, fields
from types import UnionType
from typing import Any, get_args, get_origin, get_type_hints

STAGE_KINDS = ("sft", "dpo")


class SpecError(ValueError):
    """The run's settings cannot work; the message says which one and why."""


@dataclass(frozen=True)
class DatasetFile:
    name: str  # path inside the export's location
    sha256: str
    size: int


@dataclass(frozen=True)
class DatasetRef:
    """One dataset export, pinned to its exact files."""

    export_id: int
    kind: str
    location: str  # storage folder of the export
    files: tuple[DatasetFile, ...]
    content_hash: str = ""
    # How its rows write coordinates (``model_serving.uitars.CoordinateStyle``): the model
    # trained on them answers in it.
    coordinate_style: str = "uitars15"

    @property
    def parquet_files(self) -> list[DatasetFile]:
        return [f for f in self.files if f.name.endswith(".parquet")]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "DatasetRef":
        files = tuple(DatasetFile(**f) for f in data["files"])
        return cls(
            export_id=int(data["export_id"]),
            kind=data["kind"],
            location=data["location"],
            files=files,
            content_hash=data.get("content_hash", ""),
            coordinate_style=data.get("coordinate_style", "uitars15"),
        )


@dataclass(frozen=True)
class Stage:
    kind: str
    dataset: DatasetRef

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "dataset": self.dataset.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Stage":
        return cls(kind=data["kind"], dataset=DatasetRef.from_json(data["dataset"]))


@dataclass(frozen=True)
class LoraSettings:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    # The language model's attention and MLP projections (only the language model's: the
    # trainer leaves the vision tower frozen, see trainer.language_model_modules).
    target_modules: tuple[str, ...] = (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )


@dataclass(frozen=True)
class Hyperparameters:
    learning_rate: float = 1e-4
    epochs: float = 1.0
    max_steps: int = -1  # > 0 overrides epochs
    batch_size: int = 1
    gradient_accumulation_steps: int = 8
    beta: float = 0.1  # DPO's
    seed: int = 42
    bf16: bool | None = None  # None: wherever the GPU supports it
    # On by default: without it a 7B row of five 1080p screenshots needs 124 GiB (on an H200);
    # always non-reentrant, so that frozen inputs need no gradient hooks.
    gradient_checkpointing: bool = True
    # The longest row (visual and text tokens) a job takes; a longer one is refused by name
    # before the job starts, since truncating it would cut image tokens out of its prompt.
    max_length: int = 16384
    # A checkpoint goes to storage every this many optimizer steps; a job whose worker died
    # resumes from the last one.
    checkpoint_steps: int = 50
    # Processes that build pixel values off the training process; None: 4 on a GPU, 0 on the
    # CPU (where forking them costs more than the tiny images do).
    dataloader_workers: int | None = None
    # The last this many decoder layers keep their activations instead of being recomputed in
    # the backward pass (``training.recompute``): faster, at about 4.6 GiB a layer for a 7B row
    # of five 1080p screenshots (the estimate adds it). 0: every layer is checkpointed.
    uncheckpointed_layers: int = 0
    # A checkpointed layer keeps its attention kernel's output, so the backward pass recomputes
    # the layer without attention (``training.recompute``): about 3 GiB for a 7B row of five
    # 1080p screenshots (the estimate adds it); false: attention is recomputed too.
    keep_attention: bool = True
    # GPU memory that keeps the frozen vision tower's outputs across steps, so that a
    # screenshot recurring in later rows is not encoded again (``training.vision``); rows are
    # shuffled within pools of episodes this holds (``training.episode_pools``). 8 GiB holds
    # about 440 1080p screenshots on a 7B; 0: each step's own screenshots only, rows shuffled
    # over the whole dataset.
    vision_cache_gib: float = 8.0
    # A DPO pair's prompt through the model once, the chosen and rejected completions packed
    # after it (``training.shared_prompt``); false: TRL's two sequences a pair.
    dpo_shared_prompt: bool = True


def _of_type(value: Any, hint: Any) -> bool:
    """Whether a setting given as JSON has the field's type (a bool is no number here)."""
    kinds = get_args(hint) if isinstance(hint, UnionType) else (hint,)
    for kind in kinds:
        if kind is type(None) and value is None:
            return True
        if kind is bool and isinstance(value, bool):
            return True
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
            return math.isfinite(value)
        if get_origin(kind) is tuple and isinstance(value, list | tuple):
            return all(isinstance(item, str) for item in value)
    return False


def _named(hint: Any) -> str:
    kinds = get_args(hint) if isinstance(hint, UnionType) else (hint,)
    names = {bool: "true or false", int: "a whole number", float: "a finite number"}
    return " or ".join(
        "null" if kind is type(None) else names.get(kind, "a list of names") for kind in kinds
    )


def _build(cls: type, data: dict[str, Any] | None, what: str) -> Any:
    if data is not None and not isinstance(data, dict):
        raise SpecError(f"{what} settings are an object of settings, not {type(data).__name__}")
    data = dict(data or {})
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError(f"unknown {what} settings: {', '.join(unknown)}; known: {sorted(known)}")
    hints = get_type_hints(cls)
    for name, value in data.items():
        if not _of_type(value, hints[name]):
            raise SpecError(f"{what} setting {name} must be {_named(hints[name])}, not {value!r}")
    if "target_modules" in data:
        data["target_modules"] = tuple(data["target_modules"])
    try:
        return cls(**data)
    except TypeError as error:
        raise SpecError(f"{what}: {error}") from None


def lora_settings(data: dict[str, Any] | None) -> LoraSettings:
    lora: LoraSettings = _build(LoraSettings, data, "LoRA")
    if lora.r < 1 or lora.alpha < 1 or not 0 <= lora.dropout < 1 or not lora.target_modules:
        raise SpecError("LoRA needs r ≥ 1, alpha ≥ 1, 0 ≤ dropout < 1 and target modules")
    return lora


def hyperparameters(data: dict[str, Any] | None) -> Hyperparameters:
    hp: Hyperparameters = _build(Hyperparameters, data, "hyperparameter")
    if hp.learning_rate <= 0 or hp.batch_size < 1 or hp.gradient_accumulation_steps < 1:
        raise SpecError("learning_rate must be > 0, batch_size and accumulation steps ≥ 1")
    if hp.max_steps <= 0 and hp.epochs <= 0:
        raise SpecError("give epochs > 0 or max_steps > 0")
    if hp.beta <= 0:
        raise SpecError("beta must be > 0")
    if hp.max_length < 1 or hp.checkpoint_steps < 1:
        raise SpecError("max_length and checkpoint_steps must be ≥ 1")
    # Each setting's type is checked with the others (``_build``); here, their ranges.
    if hp.uncheckpointed_layers < 0:
        raise SpecError("uncheckpointed_layers must be a whole number ≥ 0")
    if not 0 <= hp.vision_cache_gib < 1024:
        raise SpecError("vision_cache_gib must be a number of GiB, 0 or more (below 1024)")
    if hp.dataloader_workers is not None and hp.dataloader_workers < 0:
        raise SpecError("dataloader_workers must be ≥ 0 (or null: chosen by the device)")
    return hp


@dataclass(frozen=True)
class TrainingSpec:
    """A whole run: the base model's path, the stages, LoRA and hyperparameters."""

    base_model_path: str
    stages: tuple[Stage, ...]
    lora: LoraSettings = field(default_factory=LoraSettings)
    hyperparameters: Hyperparameters = field(default_factory=Hyperparameters)
    parent_adapter: str = ""  # a local folder: training continues this adapter

    def validate(self) -> None:
        if not self.stages:
            raise SpecError("a fine-tuning job needs at least one dataset")
        for stage in self.stages:
            if stage.kind not in STAGE_KINDS:
                raise SpecError(f"a stage is sft or dpo, not {stage.kind!r}")
            if stage.dataset.kind != stage.kind:
                raise SpecError(
                    f"export {stage.dataset.export_id} is a {stage.dataset.kind} dataset, "
                    f"not {stage.kind}"
                )
            if not stage.dataset.parquet_files:
                raise SpecError(f"export {stage.dataset.export_id} has no Parquet files")
