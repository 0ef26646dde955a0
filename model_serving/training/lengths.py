"""How many tokens a dataset row becomes for a Qwen2.5-VL base: visual and text, per row.

A row's length decides its memory and time on the GPU, and a row longer than the job's
``max_length`` cannot be trained (truncating it would cut image tokens out of its prompt). The
same count serves the API (the cost shown before a job is created, the over-length refusal)
and the worker (checked again on the exact files before the first step).

- **Visual tokens** follow Qwen2.5-VL's image processor exactly: the screenshot is resized to
  multiples of ``patch_size × merge_size`` within ``min_pixels``/``max_pixels``
  (``smart_resize``), and every ``merge_size²`` patches make one token. Only the PNG header is
  read (its width and height), never the pixels.
- **Text tokens**: the row's messages rendered as Qwen2.5-VL's chat template renders them
  (the default system turn, ``<|im_start|>role`` … ``<|im_end|>``, one
  ``<|vision_start|><|image_pad|><|vision_end|>`` per image), counted by the base's own
  tokenizer (``tokenizer.json``). Where the base's files are not readable (the web server may
  not see the GPU hosts' disks) the text is estimated at ``BYTES_PER_TOKEN`` UTF-8 bytes a
  token and the limits are UI-TARS-1.5's, and the estimate says so.
- A row's length is its prompt with its completion (SFT), or with the longer of chosen and
  rejected (DPO: each is a sequence of its own).
"""

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow.parquet as pq
from tokenizers import Tokenizer

from vm_pool.screen.png import png_size

SYSTEM_TURN = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
IMAGE_TURN = "<|vision_start|><|image_pad|><|vision_end|>"
BYTES_PER_TOKEN = 3.0  # Qwen2.5's BPE on English UI-TARS prompts: about 4; kept on the safe side


class RowTooLong(ValueError):
    """A row's tokens exceed the job's ``max_length``; the message names the row."""


@dataclass(frozen=True)
class ImageLimits:
    """Qwen2.5-VL's image processor settings that decide a screenshot's visual tokens."""

    patch_size: int = 14
    merge_size: int = 2
    # UI-TARS-1.5's published limits: a 1920×1080 screenshot is 2,691 tokens.
    min_pixels: int = 3136
    max_pixels: int = 16384 * 28 * 28

    @classmethod
    def of_processor_config(cls, config: dict[str, Any]) -> "ImageLimits":
        size = config.get("size") or {}
        return cls(
            patch_size=int(config.get("patch_size", cls.patch_size)),
            merge_size=int(config.get("merge_size", cls.merge_size)),
            min_pixels=int(config.get("min_pixels") or size.get("shortest_edge") or cls.min_pixels),
            max_pixels=int(config.get("max_pixels") or size.get("longest_edge") or cls.max_pixels),
        )

    def visual_tokens(self, width: int, height: int) -> int:
        """Qwen2-VL's ``smart_resize``, then one token per ``merge_size²`` patches."""
        factor = self.patch_size * self.merge_size
        h_bar = max(factor, round(height / factor) * factor)
        w_bar = max(factor, round(width / factor) * factor)
        if h_bar * w_bar > self.max_pixels:
            beta = math.sqrt(height * width / self.max_pixels)
            h_bar = max(factor, math.floor(height / beta / factor) * factor)
            w_bar = max(factor, math.floor(width / beta / factor) * factor)
        elif h_bar * w_bar < self.min_pixels:
            beta = math.sqrt(self.min_pixels / (height * width))
            h_bar = math.ceil(height * beta / factor) * factor
            w_bar = math.ceil(width * beta / factor) * factor
        return (h_bar // factor) * (w_bar // factor)


@dataclass(frozen=True)
class TokenCounter:
    """Counts a row's tokens for one base model (see the module docstring)."""

    limits: ImageLimits
    count_text: Callable[[str], int]
    exact: bool  # False: the base's tokenizer was not readable, text is estimated

    @classmethod
    def for_base(cls, base_model_path: str) -> "TokenCounter":
        folder = Path(base_model_path)
        try:
            config = _image_processor_config(folder)
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception:  # noqa: BLE001 - a missing file, bad JSON, the tokenizer's own errors
            return cls(ImageLimits(), _estimated_text_tokens, exact=False)
        return cls(
            ImageLimits.of_processor_config(config),
            lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids),
            exact=True,
        )

    def row_tokens(self, row: dict[str, Any], kind: str) -> int:
        images = [png_size(image["bytes"]) for image in row["images"]]
        visual = sum(self.limits.visual_tokens(w, h) - 1 for w, h in images)  # the pad counted
        prompt = row["prompt"]
        if kind == "dpo":
            text = max(
                self.count_text(render(prompt + row["chosen"])),
                self.count_text(render(prompt + row["rejected"])),
            )
        else:
            text = self.count_text(render(prompt + row["completion"]))
        return visual + text


@dataclass(frozen=True)
class RowLength:
    """One row's tokens, and what names it: its place in the export and its episode step."""

    row: int
    episode_id: int | None
    step_index: int | None
    tokens: int

    def name(self, export_id: int) -> str:
        where = f"export {export_id} row {self.row}"
        if self.episode_id is not None:
            where += f" (episode {self.episode_id}, step {self.step_index})"
        return where


def row_lengths(
    shards: Iterable[IO[bytes] | Path], kind: str, counter: TokenCounter
) -> list[RowLength]:
    """Every row's length, in order, reading the Parquet shards a row group at a time."""
    wanted = ["prompt", "chosen", "rejected"] if kind == "dpo" else ["prompt", "completion"]
    lengths: list[RowLength] = []
    for shard in shards:
        parquet = pq.ParquetFile(shard)
        names = set(parquet.schema_arrow.names)
        columns = wanted + ["images"] + [c for c in ("episode_id", "step_index") if c in names]
        for batch in parquet.iter_batches(batch_size=64, columns=columns):
            for row in batch.to_pylist():
                lengths.append(
                    RowLength(
                        row=len(lengths),
                        episode_id=row.get("episode_id"),
                        step_index=row.get("step_index"),
                        tokens=counter.row_tokens(row, kind),
                    )
                )
    return lengths


def refuse_too_long(lengths: list[RowLength], max_length: int, export_id: int) -> None:
    """Raise ``RowTooLong`` naming the longest row past ``max_length``, with how many are."""
    over = [length for length in lengths if length.tokens > max_length]
    if not over:
        return
    longest = max(over, key=lambda length: length.tokens)
    others = f" and {len(over) - 1} more rows" if len(over) > 1 else ""
    raise RowTooLong(
        f"{longest.name(export_id)} is {longest.tokens} tokens, longer than max_length "
        f"{max_length}{others}; raise max_length (it costs GPU memory) or export shorter "
        "histories"
    )


def render(messages: Iterable[dict[str, Any]]) -> str:
    """The messages as Qwen2.5-VL's chat template writes them, one pad token per image."""
    messages = list(messages)
    parts = [] if messages and messages[0]["role"] == "system" else [SYSTEM_TURN]
    for message in messages:
        content = "".join(
            IMAGE_TURN if part["type"] == "image" else (part.get("text") or "")
            for part in message["content"]
        )
        parts.append(f"<|im_start|>{message['role']}\n{content}<|im_end|>\n")
    return "".join(parts)


def _image_processor_config(folder: Path) -> dict[str, Any]:
    """Its own file in older checkpoints; inside ``processor_config.json`` in transformers 5's."""
    older = folder / "preprocessor_config.json"
    if older.exists():
        return dict(json.loads(older.read_text()))
    return dict(json.loads((folder / "processor_config.json").read_text())["image_processor"])


def _estimated_text_tokens(text: str) -> int:
    return math.ceil(len(text.encode()) / BYTES_PER_TOKEN)
