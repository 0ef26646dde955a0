"""LLaMA-Factory files from the pair builder's records (design §5): sharegpt JSON, a
``dataset_info.json`` entry and a manifest.

Layout of ``out_dir``:

- ``data.json``: a JSON array, one sample per line, written one record at a time.
- ``dataset_info.json``: one entry naming ``data.json`` (``"formatting": "sharegpt"``;
  ``"ranking": true`` for DPO), with its ``columns`` and ``tags``.
- ``manifest.json``: schema version, kind, format, coordinate style, the filters given, counts
  and the sha256 of the two files above.

A sample follows UI-TARS-1.5's messages (``annotation.datasets.formats.conversation``): the
system prompt; a human turn with the prompt; for each earlier step a human turn, holding
``<image>`` when that step's screenshot is among the last ``IMAGE_WINDOW`` ones, and a gpt turn
with the step's final ``Thought: …\\nAction: …``; then a human turn with ``<image>`` for oτ.
Sharegpt needs human and gpt turns to alternate, so the prompt shares the first human turn (the
prompt, then the first image), and an earlier step whose screenshot is no longer sent has an
empty human turn where UI-TARS would send no turn at all. SFT samples end with the gpt turn of
the completion; DPO samples end with the human turn of oτ and carry ``chosen`` and
``rejected`` gpt turns. Actions are written in the model's coordinate convention with box
tokens, as the model writes them.

Every ``<image>`` tag has one entry in ``images``, in order: the context's screenshots, oτ last,
each given by ``image_path(sha256)`` (screenshots are stored once, content-addressed; this
writer only refers to them).

Output is a function of the records alone: JSON with sorted keys and fixed separators, no
timestamps, so the same records give byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any, Literal

from annotation.datasets.formats.conversation import Renderer
from annotation.datasets.records import (
    Context,
    ErrorCorrectionPair,
    PostReflectionPair,
    Sample,
    SftSample,
    StepTarget,
)
from model_serving.uitars import SYSTEM_PROMPT, CoordinateStyle
from vm_pool.actions import ScreenSize

SCHEMA_VERSION = 1
FORMAT = "llama_factory_sharegpt"
DATA_FILE = "data.json"
DATASET_INFO_FILE = "dataset_info.json"
MANIFEST_FILE = "manifest.json"

IMAGE_TAG = "<image>"
ROLE_TAG, CONTENT_TAG = "from", "value"
USER_TAG, ASSISTANT_TAG = "human", "gpt"

Kind = Literal["sft", "dpo"]


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _turn(role: str, value: str) -> dict[str, str]:
    return {ROLE_TAG: role, CONTENT_TAG: value}


def _text(text: str) -> str:
    """Text from a task or a step, refused if it holds an image tag of its own: LLaMA-Factory
    would count it as an image."""
    if IMAGE_TAG in text:
        raise ValueError(f"text holding {IMAGE_TAG!r} cannot be written: {text[:200]!r}")
    return text


def _gpt_text(target: StepTarget, screen: ScreenSize, renderer: Renderer) -> str:
    return _text(renderer.answer_text(target, screen))


def _prompt(context: Context, renderer: Renderer) -> list[dict[str, str]]:
    """The conversation up to and including the human turn of oτ: UI-TARS's turns
    (``conversation.Renderer.prompt_turns``) folded into alternating human and gpt turns, each
    screenshot an ``<image>`` tag in the human turn it belongs to."""
    sharegpt: list[dict[str, str]] = []
    human = ""
    for turn in renderer.prompt_turns(context):
        if turn.role == "assistant":
            sharegpt.append(_turn(USER_TAG, human))
            sharegpt.append(_turn(ASSISTANT_TAG, _text(turn.text)))
            human = ""
        elif turn.role == "user":
            human += IMAGE_TAG if turn.screenshot is not None else _text(turn.text)
    sharegpt.append(_turn(USER_TAG, human))
    return sharegpt


def sample_for(
    record: Sample, kind: Kind, image_path: Callable[[str], str], renderer: Renderer
) -> dict[str, Any]:
    """One record as a sharegpt sample (see the module docstring)."""
    if kind == "sft":
        if not isinstance(record, SftSample):
            raise TypeError(f"an SFT export takes SftSample records, not {type(record).__name__}")
        context = record.context
        screen = context.screen_sizes[-1]
        conversation = _prompt(context, renderer)
        conversation.append(_turn(ASSISTANT_TAG, _gpt_text(record.completion, screen, renderer)))
        sample: dict[str, Any] = {"conversations": conversation}
    elif kind == "dpo":
        if not isinstance(record, ErrorCorrectionPair | PostReflectionPair):
            raise TypeError(f"a DPO export takes pairs, not {type(record).__name__}")
        context = record.context
        screen = context.screen_sizes[-1]
        sample = {
            "conversations": _prompt(context, renderer),
            "chosen": _turn(ASSISTANT_TAG, _gpt_text(record.chosen, screen, renderer)),
            "rejected": _turn(ASSISTANT_TAG, _gpt_text(record.rejected, screen, renderer)),
        }
    else:
        raise ValueError(f"unknown LLaMA-Factory kind {kind!r}; one of sft, dpo")
    sample["system"] = SYSTEM_PROMPT
    sample["images"] = [image_path(sha) for sha in context.screenshots]
    if context.task_success is not None:  # provenance, not a column of dataset_info
        sample["task_success"] = context.task_success
    return sample


def dataset_info(kind: Kind, name: str) -> dict[str, Any]:
    """The ``dataset_info.json`` entry, as LLaMA-Factory's data README defines it."""
    columns = {"messages": "conversations", "system": "system", "images": "images"}
    if kind == "dpo":
        columns |= {"chosen": "chosen", "rejected": "rejected"}
    return {
        name: {
            "file_name": DATA_FILE,
            "formatting": "sharegpt",
            "ranking": kind == "dpo",
            "columns": columns,
            "tags": {
                "role_tag": ROLE_TAG,
                "content_tag": CONTENT_TAG,
                "user_tag": USER_TAG,
                "assistant_tag": ASSISTANT_TAG,
            },
        }
    }


class _HashingWriter:
    """Writes UTF-8 text to a binary file and hashes exactly the bytes written."""

    def __init__(self, stream: IO[bytes], sha256: Any) -> None:
        self.stream, self.sha256 = stream, sha256

    def write(self, text: str) -> None:
        data = text.encode("utf-8")
        self.sha256.update(data)
        self.stream.write(data)


def _write_file(path: Path, text: str) -> str:
    data = text.encode("utf-8")
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def write_llama_factory(
    records: Iterable[Sample],
    kind: Kind,
    out_dir: Path,
    image_path: Callable[[str], str],
    *,
    style: str = CoordinateStyle.UITARS15,
    name: str | None = None,
    filters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``records`` (consumed lazily, one at a time) as a LLaMA-Factory dataset in
    ``out_dir`` and return the manifest, which is also written to ``manifest.json``.

    ``image_path`` maps a screenshot's sha256 to the path written in ``images``; ``filters``
    (JSON-serialisable) is recorded in the manifest as given.
    """
    if kind not in ("sft", "dpo"):
        raise ValueError(f"unknown LLaMA-Factory kind {kind!r}; one of sft, dpo")
    style = str(CoordinateStyle(style))
    renderer = Renderer(style)
    name = name if name is not None else f"tandem_{kind}"
    out_dir.mkdir(parents=True, exist_ok=True)
    by_type: Counter[str] = Counter()
    images = 0
    partial = out_dir / f".{DATA_FILE}.partial"
    data_sha = hashlib.sha256()
    try:
        with partial.open("wb") as stream:
            out = _HashingWriter(stream, data_sha)
            out.write("[")
            for record in records:
                sample = sample_for(record, kind, image_path, renderer)
                out.write(("\n" if not by_type else ",\n") + _dumps(sample))
                by_type[type(record).__name__] += 1
                images += len(sample["images"])
            out.write("\n]\n")
        os.replace(partial, out_dir / DATA_FILE)
    finally:
        partial.unlink(missing_ok=True)
    info_sha = _write_file(out_dir / DATASET_INFO_FILE, _dumps(dataset_info(kind, name)) + "\n")
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "format": FORMAT,
        "kind": kind,
        "dataset_name": name,
        "coordinate_style": style,
        "filters": dict(filters) if filters is not None else {},
        "counts": {
            "samples": sum(by_type.values()),
            "by_record_type": dict(sorted(by_type.items())),
            "images": images,
        },
        "files": {
            DATA_FILE: {"sha256": data_sha.hexdigest()},
            DATASET_INFO_FILE: {"sha256": info_sha},
        },
    }
    _write_file(out_dir / MANIFEST_FILE, json.dumps(manifest, sort_keys=True, indent=2) + "\n")
    return manifest
