"""The frozen vision tower's attention, one batched call per window size instead of one a window.

Qwen2.5-VL's vision tower attends within windows (112 px: 64 patches) in 28 of its 32 blocks.
With flash-attention the windows go to one variable-length kernel; with every other attention
(PyTorch's SDPA, the default where flash-attention is not installed) transformers splits the
sequence and calls attention once per window. A row of five 1080p screenshots has about 840
windows, so a forward is some 23,000 small attention calls and a host-device sync per block.
On an H200 (``make bench-gpu``) that took 1.72 s of a 7B's 4.04 s SFT step; the step barely
shrank with the language model (3.39 s on a 3B, the same vision tower).

Windows have few distinct lengths (full ones, and the cut ones at an image's right and bottom
edges), so here the windows of each length are gathered into one batch and attended in one SDPA
call: the same attention, a handful of calls a block. Measured the same way: the tower 0.47 s
a row, the 7B's SFT step 2.70 s, an unpacked DPO pair 9.0 s (from 10.5). The tower is frozen
and runs under ``torch.no_grad()`` (``vision``), so no backward pass goes through this code.
"""

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import apply_rotary_pos_emb_vision


@dataclass
class WindowGroups:
    """Per tower forward: each ``cu_seqlens`` tensor's windows, grouped by length (computed once
    for the 28 window blocks and once for the 4 full-attention blocks)."""

    _groups: dict[tuple[int, int], list[torch.Tensor]] = field(default_factory=dict)

    def clear(self) -> None:
        self._groups.clear()

    def of(self, cu_seqlens: torch.Tensor) -> list[torch.Tensor]:
        """Index tensors ``[windows, length]``, one per distinct window length."""
        key = (cu_seqlens.data_ptr(), cu_seqlens.numel())
        if key not in self._groups:
            starts, lengths = cu_seqlens[:-1], cu_seqlens[1:] - cu_seqlens[:-1]
            groups = []
            for length in torch.unique(lengths).tolist():
                if length > 0:
                    offsets = torch.arange(length, device=cu_seqlens.device)
                    groups.append(starts[lengths == length][:, None] + offsets)
            self._groups[key] = groups
        return self._groups[key]


def install(tower: Any, groups: WindowGroups) -> bool:
    """Route every block's attention of ``tower`` through ``grouped_attention``; not where the
    tower uses flash-attention, whose variable-length kernel already takes every window at once.
    Returns whether it was installed."""
    if "flash" in str(getattr(tower.config, "_attn_implementation", "")):
        return False
    for block in tower.blocks:
        attention = block.attn

        def forward(
            hidden_states: torch.Tensor,
            cu_seqlens: torch.Tensor,
            position_embeddings: tuple[torch.Tensor, torch.Tensor],
            _attention: Any = attention,
            **_: Any,
        ) -> torch.Tensor:
            return grouped_attention(
                _attention, hidden_states, cu_seqlens, position_embeddings, groups
            )

        attention.forward = forward
    return True


def grouped_attention(
    attention: Any,
    hidden_states: torch.Tensor,
    cu_seqlens: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor],
    groups: WindowGroups,
) -> torch.Tensor:
    """``Qwen2_5_VLVisionAttention.forward`` with the windows of each length in one call."""
    length = hidden_states.shape[0]
    qkv = attention.qkv(hidden_states).reshape(length, 3, attention.num_heads, -1)
    query, key, value = qkv.permute(1, 0, 2, 3).unbind(0)
    cos, sin = position_embeddings
    query, key = apply_rotary_pos_emb_vision(query, key, cos, sin)
    query, key, value = (t.transpose(0, 1) for t in (query, key, value))  # heads, seq, dim
    output = torch.empty_like(query)
    for index in groups.of(cu_seqlens):
        # [heads, windows, length, dim] → [windows, heads, length, dim] for SDPA
        q, k, v = (t[:, index].transpose(0, 1) for t in (query, key, value))
        attended = F.scaled_dot_product_attention(q, k, v, scale=attention.scaling)
        output[:, index] = attended.transpose(0, 1)
    return attention.proj(output.transpose(0, 1).reshape(length, -1))
