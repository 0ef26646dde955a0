"""LoRA's inputs stay in the compute dtype (bf16) instead of being copied to fp32.

PEFT keeps a LoRA adapter's weights in fp32 over a bf16 base (its ``autocast_adapter_dtype``),
which is right: the optimizer's small updates need fp32. But its forward also casts each
adapted module's input to the weights' dtype, and under bf16 autocast (how the trainer runs in
bf16) that is waste: the fp32 copy goes through dropout in fp32 and autocast casts it back to
bf16 for the product, which therefore runs in bf16 either way. For a 7B row of 15k tokens the
seven adapted projections of a decoder layer copy about 600 M activations that way, in the
forward pass, in checkpointing's recompute and again in the backward pass, and the fp32 copies
are what backward keeps: one 7B decoder layer under bf16 autocast keeps 405 KB a token with
the cast and 324 KB without (measured on the CPU with saved-tensor hooks).

Without the cast the adapter computes the same product from the same bf16 values; with LoRA
dropout off, the loss and every gradient are bit-identical (a test checks this). With dropout
on, the dropout masks are drawn on bf16 instead of fp32 tensors, so they differ as two seeds
would.

The switch applies only where the input and the weights differ in dtype: in fp32 training
(the CPU) there is no cast to skip.
"""

from typing import Any


def keep_lora_inputs(model: Any) -> int:
    """Stop every PEFT layer of ``model`` casting its input to its weights' dtype; the number
    of layers switched."""
    from peft.tuners.tuners_utils import BaseTunerLayer  # weight: peft, train workers only

    layers: list[Any] = [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
    for layer in layers:
        layer.cast_input_dtype_enabled = False
    return len(layers)
