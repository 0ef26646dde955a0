"""Patches the GPU benchmark's ``--variants`` run SFT under (``tests.bench.gpu``): kernels
that are candidates for the trainer, measured before any becomes a default. Each is a context
manager that applies its patch for the models run inside and undoes it after; one that cannot
run on this machine raises ``VariantUnavailable`` saying why."""

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


class VariantUnavailable(Exception):
    """A speed setting this machine cannot run; the message says why."""


@contextlib.contextmanager
def liger_kernels() -> Iterator[None]:
    """Liger's fused RMSNorm and SwiGLU (Triton kernels) in place of transformers' own in its
    Qwen2.5-VL module, for the models loaded inside; transformers' own again after. (Its M-RoPE
    kernel replaces a function transformers 5.2x no longer has: M-RoPE is folded into the
    rotary embedding's tables, so the attention applies ordinary RoPE.)"""
    if not torch.cuda.is_available():
        raise VariantUnavailable("Liger's kernels are Triton's: they need a GPU")
    try:
        from liger_kernel.transformers import (  # weight: liger-kernel, GPU machines only
            apply_liger_kernel_to_qwen2_5_vl,
        )
    except ImportError as error:
        raise VariantUnavailable(f"liger-kernel is not installed ({error})") from None
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as module  # weight: transformers

    names = ("Qwen2_5_VLRMSNorm", "Qwen2RMSNorm", "Qwen2MLP")
    saved = {name: getattr(module, name) for name in names if hasattr(module, name)}
    apply_liger_kernel_to_qwen2_5_vl(
        rope=False,
        rms_norm=True,
        swiglu=True,
        cross_entropy=False,
        fused_linear_cross_entropy=False,
    )
    try:
        yield
    finally:
        for name in names:
            if name in saved:
                setattr(module, name, saved[name])
            elif hasattr(module, name):
                delattr(module, name)


@contextlib.contextmanager
def fused_rms_norm() -> Iterator[None]:
    """Qwen2.5-VL's RMSNorm as PyTorch's own ``rms_norm`` outside autocast, for the models run
    inside: on CUDA one fused kernel (bf16 in and out, fp32 inside) where transformers' runs six
    element-wise ones through fp32 copies; on the CPU it decomposes (the same result, no gain)."""
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as module  # weight: transformers

    norm = module.Qwen2_5_VLRMSNorm
    own = norm.forward

    def forward(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
        with torch.autocast(hidden_states.device.type, enabled=False):
            return torch.nn.functional.rms_norm(
                hidden_states, self.weight.shape, self.weight, self.variance_epsilon
            )

    norm.forward = forward
    try:
        yield
    finally:
        norm.forward = own


@contextlib.contextmanager
def cudnn_attention() -> Iterator[None]:
    """PyTorch's SDPA tries cuDNN's attention kernel first (PyTorch ranks flash-attention 2
    first; cuDNN's is often faster on Hopper cards), for everything run inside."""
    if not torch.cuda.is_available():
        raise VariantUnavailable("cuDNN's attention kernel needs a GPU")
    from torch.nn.attention import SDPBackend, sdpa_kernel  # GPU machines only

    order = [
        SDPBackend.CUDNN_ATTENTION,
        SDPBackend.FLASH_ATTENTION,
        SDPBackend.EFFICIENT_ATTENTION,
        SDPBackend.MATH,
    ]
    with sdpa_kernel(order, set_priority=True):
        yield


VARIANT_PATCHES = {"_liger": liger_kernels, "_norm": fused_rms_norm, "_cudnn": cudnn_attention}
