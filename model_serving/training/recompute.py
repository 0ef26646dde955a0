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
"""

from typing import Any


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
