"""LoRA's update added to the frozen projection inside the second LoRA product.

PEFT computes an adapted projection as ``base(x) + lora_B(lora_A(dropout(x))) * scaling``: the
rank-r update is written out at the projection's full width, scaled in a second pass and added
in a third. For the 7B's MLP that width is 18,944 a token, and the three passes come back in
checkpointing's recompute and (the scaling) in the backward pass: about 0.5 TB of memory
traffic a 15k-token SFT row that does no arithmetic worth the name (counted per operator on one
7B decoder layer; an H200 moves about 4 TB/s).

Here the last two steps are one ``torch.addmm(base(x), h, B.T, alpha=scaling)``: the product
accumulates onto the projection's output as it is written, and the backward pass scales the
rank-r gradient instead of the full-width one. The arithmetic is the same; in bf16 it rounds
once where PEFT rounds three times, so results agree within bf16's precision (in fp32 within
1e-6, a test checks both). Layers this does not cover (merged, disabled, DoRA or other
variants, a bias on B, extra arguments) run PEFT's own forward.
"""

import types
from typing import Any

import torch


def install(model: Any) -> int:
    """Route every PEFT LoRA ``Linear`` of ``model`` through the fused forward; the number of
    layers routed."""
    from peft.tuners.lora.layer import Linear  # weight: peft, train workers only

    layers: list[Any] = [module for module in model.modules() if isinstance(module, Linear)]
    for layer in layers:
        layer.forward = types.MethodType(_forward, layer)
    return len(layers)


def _forward(layer: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    adapters = [a for a in layer.active_adapters if a in layer.lora_A]
    mixed = any(
        layer.lora_A[a].weight.dtype != layer.base_layer.weight.dtype for a in adapters
    ) and not torch.is_autocast_enabled(x.device.type)
    if (
        args
        or kwargs
        or mixed  # fp32 adapter on a bf16 base outside autocast: PEFT's casts handle it
        or layer.disable_adapters
        or layer.merged
        or any(a in layer.lora_variant or layer.lora_bias.get(a) for a in adapters)
    ):
        return type(layer).forward(layer, x, *args, **kwargs)
    result = layer.base_layer(x)
    for adapter in adapters:
        lora_a = layer.lora_A[adapter]
        h = lora_a(layer.lora_dropout[adapter](layer._cast_input_dtype(x, lora_a.weight.dtype)))
        update = torch.addmm(
            result.reshape(-1, result.shape[-1]),
            h.reshape(-1, h.shape[-1]),
            layer.lora_B[adapter].weight.t(),
            alpha=layer.scaling[adapter],
        )
        result = update.view(result.shape)
    return result
