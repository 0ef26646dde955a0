"""Which decoder layers gradient checkpointing recomputes.

Checkpointing keeps each decoder layer's input only and runs the layer a second time in the
backward pass, so a step costs one more forward pass of every checkpointed layer. What it saves
is the activations a layer keeps for backward, which grow with the row: a Qwen2.5-VL-7B layer
keeps about 324 KB a token (``cost.LAYER_BYTES_PER_TOKEN``), 4.6 GiB for a row of five 1080p
screenshots. All 28 layers' would not fit a card; a few usually do, since with every layer
checkpointed a 7B step peaks near 27 GiB.

``uncheckpointed_layers`` = N leaves the last N decoder layers out of checkpointing: they keep
their activations and are not recomputed. Which N layers makes no difference to the peak (every
layer's activations are held at the end of the forward pass) or to the result (the same
arithmetic either way); the job's estimate (``cost``) adds their memory. The vision tower's
blocks are not decoder layers: the tower runs outside autograd (``vision``).

``keep_attention`` (on by default) keeps one thing of each checkpointed layer: its attention
kernel's output (and the log-sum-exp its backward needs). The backward pass recomputes the rest
of the layer as before, but not attention, whose cost grows with the square of the row: on a
7B row of 15,302 tokens the attention kernels are about a fifth of the forward's arithmetic.
It keeps 7,168 + 112 bytes a token a layer on a 7B (``cost.ATTENTION_BYTES_PER_TOKEN``), about
3 GiB for 28 layers, and computes the same numbers (PyTorch's selective activation
checkpointing: the recomputation is handed the kept output instead of running the kernel).
"""

from functools import partial
from typing import Any

import torch
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

# The attention kernels F.scaled_dot_product_attention dispatches to, and flash-attention's.
ATTENTION_KERNELS = tuple(
    getattr(namespace, name).default
    for namespace, name in (
        (torch.ops.aten, "_scaled_dot_product_flash_attention"),
        (torch.ops.aten, "_scaled_dot_product_efficient_attention"),
        (torch.ops.aten, "_scaled_dot_product_cudnn_attention"),
        (torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu"),
    )
    if hasattr(namespace, name)
)


class TooManyLayers(ValueError):
    """More layers left out of checkpointing than the model has."""


def decoder_layers(model: Any) -> list[Any]:
    """The language model's checkpointable layers, in order (PEFT-wrapped or not)."""
    from transformers.modeling_layers import (  # weight: transformers, train workers only
        GradientCheckpointingLayer,
    )

    return [
        module
        for name, module in model.named_modules()
        if isinstance(module, GradientCheckpointingLayer) and ".visual." not in f".{name}."
    ]


def leave_out(model: Any, layers: int) -> int:
    """Leave the last ``layers`` decoder layers out of checkpointing (call after the trainer
    turned it on); the number of layers still checkpointed."""
    decoder = decoder_layers(model)
    if layers > len(decoder):
        raise TooManyLayers(
            f"uncheckpointed_layers is {layers}, but the model has {len(decoder)} decoder layers"
        )
    for layer in decoder[len(decoder) - layers :]:
        layer.gradient_checkpointing = False
    return sum(bool(layer.gradient_checkpointing) for layer in decoder)


def _policy(context: Any, operator: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    if operator in ATTENTION_KERNELS or "flash_attn" in str(operator):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def keep_attention(model: Any) -> int:
    """Keep each checkpointed decoder layer's attention output for backward (the module
    docstring; call after the trainer turned checkpointing on); the layers it applies to."""
    kept = 0
    for layer in decoder_layers(model):
        if layer.gradient_checkpointing:
            layer._gradient_checkpointing_func = partial(
                layer._gradient_checkpointing_func,
                context_fn=partial(create_selective_checkpoint_contexts, _policy),
            )
            kept += 1
    return kept
