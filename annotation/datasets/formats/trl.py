"""TRL / Hugging Face datasets files from the pair builder's records (design §5): Parquet shards
that ``datasets.load_dataset("parquet", data_files=…)`` loads with their features, and a
manifest.

Layout of ``out_dir``:

- ``data/train-00000.parquet``, ``data/train-00001.parquet``…: shards of at most
  ``shard_bytes`` (one shard at least, so that an empty export still loads with its columns).
- ``manifest.json``: schema version, kind, format, coordinate style, the filters given, counts
  and the sha256 and size of every shard.

Columns, by kind (messages are those of ``annotation.datasets.formats.conversation``):

- ``sft``: ``prompt`` (the conversation up to oτ), ``completion`` (the assistant's final step)
  — TRL's conversational prompt-completion, loss on the completion only;
- ``dpo``: ``prompt``, ``chosen``, ``rejected`` (one assistant message each);
- ``ct``: ``messages``, the whole trajectory (TRL's conversational language modelling);

and in every kind ``images`` (the screenshots, in the order of their placeholders) and the
provenance columns ``episode_id`` plus ``step_index`` and ``sample_kind`` (SFT and DPO) or
``outcome`` (CT), and ``split_task``: the task the held-out split goes by
(``model_serving.evaluation``), which the trainer checks every row against.

What the consumers need, and this writer guarantees (design §5, "Facts about the consumers"):
``images`` has the Hugging Face ``Image`` feature, written as Arrow with the ``huggingface``
schema metadata of ``datasets.Features``, so TRL's vision collators get PIL images; every
message's content is a list of parts with only ``type`` and ``text`` (an image part is
``{"type": "image"}``, its ``text`` null); each screenshot turn holds exactly one image part,
so placeholders and images are equally many; nothing is plain-string content.

The images are embedded (TRL loads nothing from paths), read one by one through
``read_image(sha256)`` as rows are written. Rows go to the shard a row group at a time
(``ROWS_PER_GROUP`` rows, or fewer once ``GROUP_BYTES`` are buffered), so memory holds one row
group, never a shard. Output is a function of the records and the pyarrow version: fixed
writer settings, no timestamps.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features, Image, List, Value

from annotation.datasets.formats.conversation import Renderer, Turn, screenshots
from annotation.datasets.records import (
    CtSample,
    ErrorCorrectionPair,
    PostReflectionPair,
    Sample,
    SftSample,
)
from model_serving.uitars import CoordinateStyle

SCHEMA_VERSION = 1
FORMAT = "trl_parquet"
DATA_DIR = "data"
MANIFEST_FILE = "manifest.json"
ROWS_PER_GROUP = 64
GROUP_BYTES = 64 * 1024 * 1024
SHARD_BYTES = 512 * 1024 * 1024
# Fixed writer settings: the same rows give the same bytes.
PARQUET_SETTINGS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
    "write_statistics": True,
    "version": "2.6",
}

Kind = Literal["sft", "dpo", "ct"]

MESSAGES = List(
    {"role": Value("string"), "content": List({"type": Value("string"), "text": Value("string")})}
)
IMAGES = List(Image())
PAIR_KINDS = {"ErrorCorrectionPair": "error_correction", "PostReflectionPair": "post_reflection"}


def features(kind: Kind) -> Features:
    """The Hugging Face features of a kind's rows (column order as written)."""
    step = {
        "episode_id": Value("int64"),
        "step_index": Value("int64"),
        "task_success": Value("float64"),
        "split_task": Value("int64"),
    }
    if kind == "sft":
        columns = {"prompt": MESSAGES, "completion": MESSAGES, "images": IMAGES}
        return Features({**columns, **step, "sample_kind": Value("string")})
    if kind == "dpo":
        columns = {"prompt": MESSAGES, "chosen": MESSAGES, "rejected": MESSAGES, "images": IMAGES}
        return Features({**columns, **step, "sample_kind": Value("string")})
    if kind == "ct":
        return Features(
            {
                "messages": MESSAGES,
                "images": IMAGES,
                "episode_id": Value("int64"),
                "outcome": Value("string"),
                "task_success": Value("float64"),
                "split_task": Value("int64"),
            }
        )
    raise ValueError(f"unknown TRL kind {kind!r}; one of sft, dpo, ct")


# Rows share message dicts (they are written, never edited): a screenshot's message is always
# the same, and an episode's opening and earlier steps recur in every later row of it, so each
# of those messages is built once rather than per row.
_IMAGE_MESSAGE: dict[str, Any] = {"role": "user", "content": [{"type": "image", "text": None}]}


def _message(turn: Turn) -> dict[str, Any]:
    if turn.screenshot is not None:
        return _IMAGE_MESSAGE
    return _text_message(turn.role, turn.text)


@lru_cache(maxsize=1024)
def _text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def _assistant(text: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": [{"type": "text", "text": text}]}]


def row_for(record: Sample, kind: Kind, renderer: Renderer) -> tuple[dict[str, Any], list[str]]:
    """One record as a row, its ``images`` left out, and the sha256s of those images in order.
    Rows share their messages' dicts: they are for writing, not for editing."""
    if kind == "ct":
        if not isinstance(record, CtSample):
            raise TypeError(f"a CT export takes CtSample records, not {type(record).__name__}")
        turns = renderer.trajectory_turns(record)
        row = {
            "messages": [_message(t) for t in turns],
            "episode_id": record.episode_id,
            "outcome": record.outcome,
            "task_success": record.task_success,
            "split_task": record.split_task,
        }
        return row, screenshots(turns)
    if kind == "sft":
        if not isinstance(record, SftSample):
            raise TypeError(f"an SFT export takes SftSample records, not {type(record).__name__}")
        turns = renderer.prompt_turns(record.context)
        screen = record.context.screen_sizes[-1]
        row = {
            "prompt": [_message(t) for t in turns],
            "completion": _assistant(renderer.answer_text(record.completion, screen)),
            "sample_kind": record.kind,
        }
    elif kind == "dpo":
        if not isinstance(record, ErrorCorrectionPair | PostReflectionPair):
            raise TypeError(f"a DPO export takes pairs, not {type(record).__name__}")
        turns = renderer.prompt_turns(record.context)
        screen = record.context.screen_sizes[-1]
        row = {
            "prompt": [_message(t) for t in turns],
            "chosen": _assistant(renderer.answer_text(record.chosen, screen)),
            "rejected": _assistant(renderer.answer_text(record.rejected, screen)),
            "sample_kind": PAIR_KINDS[type(record).__name__],
        }
    else:
        raise ValueError(f"unknown TRL kind {kind!r}; one of sft, dpo, ct")
    row |= {
        "episode_id": record.episode_id,
        "step_index": record.step_index,
        "task_success": record.context.task_success,
        "split_task": record.context.split_task,
    }
    return row, screenshots(turns)


class _ShardWriter:
    """Writes row groups to numbered shards, starting a new shard past ``shard_bytes``."""

    def __init__(self, data_dir: Path, schema: pa.Schema, shard_bytes: int) -> None:
        self.data_dir, self.schema, self.shard_bytes = data_dir, schema, shard_bytes
        self.paths: list[Path] = []
        self.writer: pq.ParquetWriter | None = None
        self.written = 0

    def _open(self) -> pq.ParquetWriter:
        path = self.data_dir / f"train-{len(self.paths):05d}.parquet"
        self.paths.append(path)
        self.written = 0
        return pq.ParquetWriter(path, self.schema, **PARQUET_SETTINGS)

    def write(self, rows: list[dict[str, Any]], size: int) -> None:
        if self.writer is not None and self.written >= self.shard_bytes:
            self.writer.close()
            self.writer = None
        if self.writer is None:
            self.writer = self._open()
        self.writer.write_table(pa.Table.from_pylist(rows, schema=self.schema))
        self.written += size

    def close(self) -> list[Path]:
        if self.writer is None:  # no rows: one empty shard, so the columns are still there
            self.writer = self._open()
        self.writer.close()
        self.writer = None
        return self.paths


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def write_trl(
    records: Iterable[Sample],
    kind: Kind,
    out_dir: Path,
    read_image: Callable[[str], bytes],
    *,
    style: str = CoordinateStyle.UITARS15,
    filters: Mapping[str, Any] | None = None,
    rows_per_group: int = ROWS_PER_GROUP,
    shard_bytes: int = SHARD_BYTES,
) -> dict[str, Any]:
    """Write ``records`` (consumed lazily, one at a time) as Parquet shards in ``out_dir`` and
    return the manifest, which is also written to ``manifest.json``.

    ``read_image`` gives a screenshot's PNG bytes by its sha256; ``filters``
    (JSON-serialisable) is recorded in the manifest as given. On an error, no shard is left.
    """
    schema = features(kind).arrow_schema
    style = str(CoordinateStyle(style))
    renderer = Renderer(style)
    data_dir = out_dir / DATA_DIR
    data_dir.mkdir(parents=True, exist_ok=True)
    shards = _ShardWriter(data_dir, schema, shard_bytes)
    by_type: Counter[str] = Counter()
    images = 0
    group: list[dict[str, Any]] = []
    group_bytes = 0
    try:
        for record in records:
            row, shas = row_for(record, kind, renderer)
            pngs = [read_image(sha) for sha in shas]
            row["images"] = [{"bytes": png, "path": None} for png in pngs]
            group.append(row)
            group_bytes += sum(len(png) for png in pngs) + 4096
            by_type[type(record).__name__] += 1
            images += len(pngs)
            if len(group) >= rows_per_group or group_bytes >= GROUP_BYTES:
                shards.write(group, group_bytes)
                group, group_bytes = [], 0
        if group:
            shards.write(group, group_bytes)
        paths = shards.close()
    except BaseException:
        if shards.writer is not None:
            shards.writer.close()
        shutil.rmtree(data_dir, ignore_errors=True)
        raise
    files = {
        f"{DATA_DIR}/{path.name}": {"sha256": _sha256(path), "size": path.stat().st_size}
        for path in paths
    }
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "format": FORMAT,
        "kind": kind,
        "coordinate_style": style,
        "columns": list(schema.names),
        "filters": dict(filters) if filters is not None else {},
        "counts": {
            "samples": sum(by_type.values()),
            "by_record_type": dict(sorted(by_type.items())),
            "images": images,
        },
        "files": files,
    }
    text = json.dumps(manifest, sort_keys=True, indent=2) + "\n"
    (out_dir / MANIFEST_FILE).write_text(text, encoding="utf-8")
    return manifest
