"""What a fine-tuning job will cost before it starts: GPU memory and GPU hours, from measurements.

``MEASURED`` is the one place the measured figures live. They come from Tandem's own trainer on
rows from Tandem's own exporter (five 1920×1080 screenshots at UI-TARS-1.5's image limits), a
random-weight Qwen2.5-VL-7B in bf16, with the defaults this trainer uses (gradient checkpointing
on and non-reentrant, the vision tower frozen, outside autograd and attending a window size a
call), as ``make bench-gpu`` measures them (``tests/bench/gpu.py``); run it again on the card
you train on and put its figures here.

A job's estimate scales them to the job's rows, under three stated assumptions:

- time grows with a row's tokens and with the model's parameters (the matrix products
  dominate; attention's quadratic part is small at these lengths);
- memory is the bf16 weights plus activations that grow with the longest row's tokens, the
  batch size and the parameters;
- a base of another size in the same family (3B) is scaled by its parameters and says so;
- the vision cache (``vision_cache_gib``) adds its budget, or less where the rows are fewer:
  at most a row's tokens a row, each of the model's output width in bf16 (a bound: a row brings
  one new screenshot, a fifth of its visual tokens);
- a checkpointed layer that keeps its attention output (``keep_attention``) adds that output
  (``ATTENTION_BYTES_PER_TOKEN``) for the longest row;
- a decoder layer left out of checkpointing (all of them, with checkpointing off) adds what
  it keeps for backward (``LAYER_BYTES_PER_TOKEN``) for the longest row; the time is not
  lowered for it until it is measured on a card.

A base whose architecture has no figures (the demo's tiny model) gets rows and tokens, and no
GPU estimate, with the reason.
"""

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_serving.training.spec import Hyperparameters, SpecError

GIB = 1024**3


@dataclass(frozen=True)
class Measurement:
    architecture: str
    parameters: float
    card: str
    tokens_per_row: int
    sft_s_per_row: float
    sft_peak_gib: float
    dpo_s_per_pair: float  # the prompt once a pair (``shared_prompt``, the default)
    dpo_peak_gib: float
    dpo_unshared_s_per_pair: float  # TRL's two sequences a pair (``dpo_shared_prompt`` off)
    dpo_unshared_peak_gib: float
    source: str


MEASURED = Measurement(
    architecture="qwen2.5-vl-7b",
    parameters=8.29e9,
    card="NVIDIA H200",
    tokens_per_row=15_302,
    sft_s_per_row=2.635,
    sft_peak_gib=26.96,
    dpo_s_per_pair=3.155,
    dpo_peak_gib=25.97,
    dpo_unshared_s_per_pair=8.908,
    dpo_unshared_peak_gib=36.14,
    source="make bench-gpu, 2026-11-27, NVIDIA H200: torch 2.11, transformers 5.24, TRL 1.16, "
    "SDPA attention, the trainer's defaults of that day (before the vision cache across "
    "steps, attention kept through checkpointing, LoRA's inputs in bf16 and its update fused: "
    "an upper bound for today's trainer)",
)

# Qwen2.5-VL sizes by the language model's hidden size, with their parameter counts.
ARCHITECTURES = {3584: ("qwen2.5-vl-7b", 8.29e9), 2048: ("qwen2.5-vl-3b", 3.75e9)}
# The language model's hidden size, which is also the width of a visual token: the vision
# tower's output takes the place of image tokens' embeddings.
HIDDEN_SIZE = {name: hidden for hidden, (name, _) in ARCHITECTURES.items()}
DECODER_LAYERS = {"qwen2.5-vl-7b": 28, "qwen2.5-vl-3b": 36}
# What one decoder layer keeps for its backward pass, a token: bf16 autocast, LoRA on every
# projection with dropout, inputs kept in bf16 (``precision``), SDPA. Measured with saved-tensor
# hooks on one layer of each architecture, on the CPU (the slope between 512 and 1024 tokens):
# what a layer left out of checkpointing (``recompute``) adds to the peak.
LAYER_BYTES_PER_TOKEN = {"qwen2.5-vl-7b": 321_368, "qwen2.5-vl-3b": 185_640}
# What a checkpointed layer keeps of its attention kernel (``recompute.keep_attention``), a
# token: the output in bf16 (the hidden size) and a float32 log-sum-exp a head.
ATTENTION_HEADS = {"qwen2.5-vl-7b": 28, "qwen2.5-vl-3b": 16}
ATTENTION_BYTES_PER_TOKEN = {
    name: HIDDEN_SIZE[name] * 2 + heads * 4 for name, heads in ATTENTION_HEADS.items()
}


def _text_config(base_model_path: str) -> dict[str, Any] | None:
    """The language model's part of the base's ``config.json``; None where unreadable."""
    try:
        config = json.loads((Path(base_model_path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    text = config.get("text_config") or config
    return text if isinstance(text, dict) else None


def architecture(base_model_path: str, base_model: str) -> tuple[str, float] | None:
    """The base's Qwen2.5-VL size: from its ``config.json`` where readable, else its name."""
    config = _text_config(base_model_path)
    if config is not None:
        hidden = config.get("hidden_size")
        return ARCHITECTURES.get(int(hidden)) if hidden else None
    name = base_model.lower()
    for known, parameters in ARCHITECTURES.values():
        if known.rsplit("-", 1)[1] in name.replace("_", "-").split("-"):
            return known, parameters
    return None


def refuse_layers(hp: Hyperparameters, base_model_path: str) -> None:
    """``uncheckpointed_layers`` past the base's decoder layers (where its config says how
    many) is refused before a job exists; the trainer refuses it again on the model itself."""
    layers = (_text_config(base_model_path) or {}).get("num_hidden_layers")
    if isinstance(layers, int) and hp.uncheckpointed_layers > layers:
        raise SpecError(
            f"uncheckpointed_layers is {hp.uncheckpointed_layers}, but the base has {layers} "
            "decoder layers"
        )


def estimate(
    kind_tokens: list[tuple[str, list[int]]],
    hp: Hyperparameters,
    arch: tuple[str, float] | None,
) -> dict[str, Any]:
    """The job's cost: per stage (its kind and its rows' tokens) and in all."""
    stages = []
    for kind, tokens in kind_tokens:
        rows = len(tokens)
        trained = (
            hp.max_steps * hp.batch_size * hp.gradient_accumulation_steps
            if hp.max_steps > 0
            else rows * hp.epochs
        )
        stage: dict[str, Any] = {
            "kind": kind,
            "rows": rows,
            "rows_trained": round(trained, 1),
            "tokens_per_row": {
                "min": min(tokens, default=0),
                "median": round(statistics.median(tokens)) if tokens else 0,
                "max": max(tokens, default=0),
            },
        }
        if arch is not None and tokens:
            stage |= _gpu(kind, tokens, trained, hp, arch)
        stages.append(stage)
    total: dict[str, Any] = {"stages": stages, "card": MEASURED.card, "source": MEASURED.source}
    if arch is None:
        total["gpu"] = None
        total["reason"] = "no measured figures for this base's architecture"
        return total
    total["architecture"] = arch[0]
    total["scaled_from"] = None if arch[0] == MEASURED.architecture else MEASURED.architecture
    total["gpu_hours"] = round(sum(s.get("gpu_hours", 0.0) for s in stages), 3)
    total["gpu_memory_gib"] = max((s.get("gpu_memory_gib", 0.0) for s in stages), default=0.0)
    return total


def _gpu(
    kind: str, tokens: list[int], trained: float, hp: Hyperparameters, arch: tuple[str, float]
) -> dict:
    m = MEASURED
    name, parameters = arch
    if kind == "sft":
        seconds, peak = m.sft_s_per_row, m.sft_peak_gib
    elif hp.dpo_shared_prompt:
        seconds, peak = m.dpo_s_per_pair, m.dpo_peak_gib
    else:
        seconds, peak = m.dpo_unshared_s_per_pair, m.dpo_unshared_peak_gib
    batch = hp.batch_size
    size = parameters / m.parameters
    weights = 2 * m.parameters / GIB  # bf16
    per_token_s = seconds / m.tokens_per_row * size
    per_token_gib = (peak - weights) / m.tokens_per_row * size
    mean_tokens = sum(tokens) / len(tokens)
    kept = hp.uncheckpointed_layers if hp.gradient_checkpointing else DECODER_LAYERS[name]
    kept_gib_per_token = kept * LAYER_BYTES_PER_TOKEN[name] / GIB
    if hp.gradient_checkpointing and hp.keep_attention:
        checkpointed = DECODER_LAYERS[name] - hp.uncheckpointed_layers
        kept_gib_per_token += checkpointed * ATTENTION_BYTES_PER_TOKEN[name] / GIB
    longest = max(tokens) * batch
    cache_gib = min(hp.vision_cache_gib, len(tokens) * max(tokens) * HIDDEN_SIZE[name] * 2 / GIB)
    return {
        "gpu_hours": round(per_token_s * mean_tokens * trained / 3600, 3),
        "gpu_memory_gib": round(
            2 * parameters / GIB + (per_token_gib + kept_gib_per_token) * longest + cache_gib, 1
        ),
        "vision_cache_gib": round(cache_gib, 2),
    }
