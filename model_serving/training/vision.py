"""The vision tower during LoRA training: frozen, outside autograd, each screenshot once a step.

LoRA adapters touch the language model only (``trainer.language_model_modules``), so the
vision tower never learns. Three rules follow, measured on a 7B on an H200:

- **Frozen**: no parameter of the tower requires a gradient.
- **Outside autograd**: its forward runs under ``torch.no_grad()``. Gradient checkpointing
  makes transformers and TRL hook every input embedding to require a gradient, the tower's
  patch embedding included; without ``no_grad`` the whole tower's activations are kept for a
  backward pass that changes nothing (SFT 12.5 s at 30 GiB against 4.1 s at 26 GiB).
- **Windows batched**: the tower's window attention takes each window size in one call
  (``window_attention``) rather than one call a window.
- **Once a step**: a screenshot recurs in up to five rows (the history window), and in a DPO
  step the same prompt's images go through the tower twice (policy and reference; four times
  where the pair is not packed, ``shared_prompt``). The tower's output for an image depends on
  its pixels only, so within one optimizer step each distinct image is encoded once: images
  are matched on their patch grid and their exact pixel values (``torch.equal``; a cheap
  fingerprint picks the candidates), and the step's cache is dropped when the next step
  begins.
"""

from dataclasses import dataclass, field
from typing import Any

import torch
from transformers.modeling_outputs import BaseModelOutputWithPooling

from model_serving.training import window_attention


@dataclass
class _Encoded:
    pixels: torch.Tensor
    embeds: torch.Tensor


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
    counts: VisionCounts = field(default_factory=VisionCounts)
    windows: window_attention.WindowGroups = field(default_factory=window_attention.WindowGroups)
    _cache: dict[tuple[Any, ...], list[_Encoded]] = field(default_factory=dict)

    @classmethod
    def install(cls, model: Any) -> "FrozenVisionTower":
        """Freeze ``model``'s vision tower and route its forward through the wrapper."""
        return cls.wrap(vision_tower(model))

    @classmethod
    def wrap(cls, tower: Any) -> "FrozenVisionTower":
        """The same on a vision tower itself."""
        tower.requires_grad_(False)
        wrapper = cls(tower=tower, encode=tower.forward)
        tower.forward = wrapper.forward
        window_attention.install(tower, wrapper.windows)
        return wrapper

    def new_step(self) -> None:
        self._cache.clear()

    def forward(
        self, hidden_states: torch.Tensor, grid_thw: torch.Tensor, **kwargs: Any
    ) -> BaseModelOutputWithPooling:
        merge = self.tower.spatial_merge_size**2
        grids = [tuple(int(n) for n in row) for row in grid_thw.tolist()]
        pixel_rows = [t * h * w for t, h, w in grids]
        images = torch.split(hidden_states, pixel_rows)
        keys = [_key(grid, pixels) for grid, pixels in zip(grids, images, strict=True)]
        found = [self._cached(key, pixels) for key, pixels in zip(keys, images, strict=True)]
        distinct: list[int] = []  # images to encode, each unlike the others
        twin_of: dict[int, int] = {}  # an image repeated in this call → its first occurrence
        for i, hit in enumerate(found):
            if hit is not None:
                continue
            twin = next(
                (j for j in distinct if keys[j] == keys[i] and torch.equal(images[j], images[i])),
                None,
            )
            if twin is None:
                distinct.append(i)
            else:
                twin_of[i] = twin
        self.counts.asked += len(grids)
        self.counts.encoded += len(distinct)
        if distinct:
            self.windows.clear()
            # Named in profiles (bench-gpu --profile): the tower's share of a step.
            with torch.no_grad(), torch.profiler.record_function("tandem.vision_tower"):
                out = self.encode(
                    torch.cat([images[i] for i in distinct]), grid_thw[distinct], **kwargs
                )
            self.windows.clear()
            merged = torch.split(out.pooler_output, [pixel_rows[i] // merge for i in distinct])
            for i, embeds in zip(distinct, merged, strict=True):
                encoded = _Encoded(pixels=images[i], embeds=embeds)
                self._cache.setdefault(keys[i], []).append(encoded)
                found[i] = encoded
            for i, twin in twin_of.items():
                found[i] = found[twin]
        pooled = torch.cat([hit.embeds for hit in found if hit is not None])
        return BaseModelOutputWithPooling(last_hidden_state=None, pooler_output=pooled)

    def _cached(self, key: tuple[Any, ...], pixels: torch.Tensor) -> _Encoded | None:
        for entry in self._cache.get(key, []):
            if torch.equal(entry.pixels, pixels):
                return entry
        return None


def _key(grid: tuple[int, ...], pixels: torch.Tensor) -> tuple[Any, ...]:
    """A fingerprint that picks candidates; equality is then checked on every pixel."""
    flat = pixels.reshape(-1)
    sample = flat[:: max(1, flat.numel() // 64)][:64]
    numbers = torch.cat([flat.sum().reshape(1), sample]).float().tolist()  # one device sync
    return (grid, *(round(n, 4) for n in numbers))


def vision_tower(model: Any) -> Any:
    """The vision tower of a Qwen2.5-VL model, wrapped by PEFT or not."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    tower = getattr(getattr(inner, "model", None), "visual", None)
    if tower is None:
        raise TypeError(f"{type(inner).__name__} has no vision tower at .model.visual")
    return tower
