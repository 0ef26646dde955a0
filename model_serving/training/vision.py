"""The vision tower during LoRA training: frozen, outside autograd, each screenshot encoded once.

LoRA adapters touch the language model only (``trainer.language_model_modules``), so the
vision tower never learns. Four rules follow, measured on a 7B on an H200:

- **Frozen**: no parameter of the tower requires a gradient.
- **Outside autograd**: its forward runs under ``torch.no_grad()``. Gradient checkpointing
  makes transformers and TRL hook every input embedding to require a gradient, the tower's
  patch embedding included; without ``no_grad`` the whole tower's activations are kept for a
  backward pass that changes nothing (SFT 12.5 s at 30 GiB against 4.1 s at 26 GiB).
- **Windows batched**: the tower's window attention takes each window size in one call
  (``window_attention``) rather than one call a window.
- **Each screenshot encoded once while it is cached**: a screenshot recurs in up to five rows
  (the history window) and, in a DPO step, in the policy's and the reference's forward. The
  tower's output for an image depends on its pixels only and the tower never changes, so an
  output stays valid for the whole job: it is kept in a cache of ``cache_bytes`` (the
  ``vision_cache_gib`` setting) across optimizer steps and evicted least recently used first;
  what the current step uses is never evicted, so a budget of 0 keeps each step's images and
  nothing longer. On a 7B, one 1080p screenshot's output is 2,691 × 3,584 bf16 values,
  18.4 MiB. ``episode_pools`` orders the rows so that an episode's screenshots meet while
  they are cached.

Images are matched by their patch grid, dtype and two keyed hashes of their pixels' bit
patterns: for each hash, random 64-bit weights drawn from a seed of this process's own
(``secrets``; nothing a row can see or choose), the pixels' integer bits times the weights,
summed with wrap-around on the device. Two different images give the same pair of sums with
probability at most 2⁻⁶² (each hash: at most 2⁻³¹, since two pixels' bits differ by less than
2³²), so a recorded screenshot can neither find nor be made to find another's output, and the
cache keeps no copy of the pixels.
"""

import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers.modeling_outputs import BaseModelOutputWithPooling

from model_serving.training import window_attention

HASHES = 2
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32}  # a pixel's bits, by element size


@dataclass
class _Encoded:
    embeds: torch.Tensor
    step: int  # the last step that used it

    @property
    def bytes(self) -> int:
        return self.embeds.numel() * self.embeds.element_size()


@dataclass
class VisionCounts:
    """Images asked of the tower and images it really encoded, since training began."""

    asked: int = 0
    encoded: int = 0


@dataclass
class FrozenVisionTower:
    """Wraps a Qwen2.5-VL vision tower's forward (see the module docstring)."""

    tower: Any
    encode: Any  # the tower's own forward
    cache_bytes: int = 0
    counts: VisionCounts = field(default_factory=VisionCounts)
    windows: window_attention.WindowGroups = field(default_factory=window_attention.WindowGroups)
    _cache: "OrderedDict[tuple[Any, ...], _Encoded]" = field(default_factory=OrderedDict)
    _cached_bytes: int = 0
    _step: int = 0
    _seed: int = field(default_factory=lambda: secrets.randbits(63))
    _drawn: torch.Tensor | None = None  # the hashes' weights for the last image size

    @classmethod
    def install(cls, model: Any, cache_bytes: int = 0) -> "FrozenVisionTower":
        """Freeze ``model``'s vision tower and route its forward through the wrapper."""
        return cls.wrap(vision_tower(model), cache_bytes)

    @classmethod
    def wrap(cls, tower: Any, cache_bytes: int = 0) -> "FrozenVisionTower":
        """The same on a vision tower itself."""
        tower.requires_grad_(False)
        wrapper = cls(tower=tower, encode=tower.forward, cache_bytes=cache_bytes)
        tower.forward = wrapper.forward
        window_attention.install(tower, wrapper.windows)
        return wrapper

    def new_step(self) -> None:
        """An optimizer step begins: what earlier steps cached may now be evicted."""
        self._step += 1
        self._evict()

    @property
    def cached_bytes(self) -> int:
        return self._cached_bytes

    def forward(
        self, hidden_states: torch.Tensor, grid_thw: torch.Tensor, **kwargs: Any
    ) -> BaseModelOutputWithPooling:
        merge = self.tower.spatial_merge_size**2
        grids = [tuple(int(n) for n in row) for row in grid_thw.tolist()]
        pixel_rows = [t * h * w for t, h, w in grids]
        images = torch.split(hidden_states, pixel_rows)
        keys = self._keys(grids, images)
        distinct: dict[tuple[Any, ...], int] = {}  # key → its first image, for those to encode
        for i, key in enumerate(keys):
            if key in self._cache:
                self._cache.move_to_end(key)
                self._cache[key].step = self._step
            else:
                distinct.setdefault(key, i)
        self.counts.asked += len(grids)
        self.counts.encoded += len(distinct)
        if distinct:
            first = list(distinct.values())
            self.windows.clear()
            # Named in profiles (bench-gpu --profile): the tower's share of a step.
            with torch.no_grad(), torch.profiler.record_function("tandem.vision_tower"):
                out = self.encode(torch.cat([images[i] for i in first]), grid_thw[first], **kwargs)
            self.windows.clear()
            merged = torch.split(out.pooler_output, [pixel_rows[i] // merge for i in first])
            for key, embeds in zip(distinct, merged, strict=True):
                entry = _Encoded(embeds=embeds, step=self._step)
                self._cache[key] = entry
                self._cached_bytes += entry.bytes
        pooled = torch.cat([self._cache[key].embeds for key in keys])
        self._evict()
        return BaseModelOutputWithPooling(last_hidden_state=None, pooler_output=pooled)

    def _evict(self) -> None:
        """Least recently used first, down to the budget; never what this step used."""
        while self._cached_bytes > self.cache_bytes and self._cache:
            key, oldest = next(iter(self._cache.items()))
            if oldest.step == self._step:
                return  # every entry left was used by this step
            del self._cache[key]
            self._cached_bytes -= oldest.bytes

    def _keys(self, grids: list[tuple[int, ...]], images: tuple[torch.Tensor, ...]) -> list[Any]:
        """Each image's grid, dtype and keyed hashes (the module docstring), in one sync."""
        sums = []
        for pixels in images:
            bits = pixels.contiguous().view(_BITS[pixels.element_size()]).reshape(-1)
            weights = self._weights(bits.numel(), bits.device)
            sums.append((weights * bits.to(torch.int64)).sum(dim=1))
        hashes = torch.stack(sums).tolist() if sums else []
        return [
            (grid, str(pixels.dtype), *hashed)
            for grid, pixels, hashed in zip(grids, images, hashes, strict=True)
        ]

    def _weights(self, count: int, device: torch.device) -> torch.Tensor:
        """The hashes' weights for ``count`` pixel values: drawn from the seed alone, so the
        same for every image of that size, and kept for the last size asked (an export's
        screenshots are mostly one size; 2 × 8 bytes a value, 0.2 GB for a 1080p one)."""
        drawn = self._drawn
        if drawn is None or drawn.shape[1] != count or drawn.device != device:
            generator = torch.Generator(device=device).manual_seed(self._seed)
            drawn = torch.randint(0, 2**62, (HASHES, count), generator=generator, device=device)
            self._drawn = drawn
        return drawn


def screenshot_bytes(model: Any, visual_tokens: int) -> int:
    """What the tower's output for an image of ``visual_tokens`` tokens takes in the cache."""
    tower = vision_tower(model)
    config = tower.config
    width = getattr(config, "out_hidden_size", None) or config.hidden_size
    return visual_tokens * int(width) * next(tower.parameters()).element_size()


def vision_tower(model: Any) -> Any:
    """The vision tower of a Qwen2.5-VL model, wrapped by PEFT or not."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    tower = getattr(getattr(inner, "model", None), "visual", None)
    if tower is None:
        raise TypeError(f"{type(inner).__name__} has no vision tower at .model.visual")
    return tower
