"""What the GPU benchmark (``tests.bench.gpu``) trains: a random-weight Qwen2.5-VL of a named
architecture, built and saved locally, and SFT and DPO rows of 1920×1080 screenshots made by
Tandem's export job (``export_rows``, which needs the database) or read back from a folder an
earlier ``--prepare`` wrote (``saved_rows``, which does not).
"""

import json
import time
from pathlib import Path
from typing import Any

import torch

HISTORY = 5  # screenshots in a row: the exporter's history window

VISION = {
    "depth": 32,
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "fullatt_block_indexes": [7, 15, 23, 31],
    "window_size": 112,
}
TEXT = {
    "7b": {
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
    "3b": {
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
}


def build_base(arch: str, folder: Path) -> Path:
    """A checkpoint folder of the named architecture with random weights."""
    from transformers import (  # weight: transformers, only when the benchmark runs
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2VLImageProcessorPil,
    )

    from model_serving.demo_model import (  # weight: transformers, as above
        CHAT_TEMPLATE,
        SPECIAL_TOKENS,
        ImageOnlyQwen2_5_VLProcessor,
        save_demo_base,
        tiny_tokenizer,
    )

    if arch == "tiny":
        return save_demo_base(folder)
    tokenizer = tiny_tokenizer()
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    text = TEXT[arch] | {
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 1e6,
            "mrope_section": [16, 24, 24],
        },
        "max_position_embeddings": 128000,
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }
    config = Qwen2_5_VLConfig(
        text_config=text,
        vision_config=VISION | {"out_hidden_size": text["hidden_size"]},
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2_5_VLForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(folder)
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    limits = {"min_pixels": 3136, "max_pixels": 16384 * 28 * 28}  # UI-TARS-1.5's
    processor = ImageOnlyQwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessorPil(**limits),
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(folder)
    return folder


def export_rows(
    folder: Path, steps: int, episodes: int | None = None
) -> dict[str, tuple[Any, list[Path]]]:
    """SFT and DPO exports of ``episodes`` episodes (by default as many as ``steps`` rows need)
    of 1920×1080 screenshots, built by the export job and copied into ``folder`` as a train
    worker copies them: each kind's ``DatasetRef`` and the local paths of its Parquet files.
    Needs Django (set up by ``main`` first)."""
    from django.core.files.storage import default_storage  # Django: set up by main() first

    from annotation.datasets import exports  # Django: as above
    from annotation.models import DatasetExport, Membership, Project  # Django: as above
    from backend.accounts.models import User  # Django: as above
    from backend.accounts.roles import Role  # Django: as above
    from model_serving.training import data  # weight: pyarrow, only when the benchmark runs
    from model_serving.training.spec import DatasetFile, DatasetRef  # beside data, as above
    from tests.support.export_data import make_episodes  # Django: as above

    project = Project.objects.create(name=f"GPU benchmark {time.time_ns()}")
    annotator, _ = User.objects.get_or_create(username="bench-gpu-annotator")
    engineer, _ = User.objects.get_or_create(username="bench-gpu-engineer")
    Membership.objects.create(project=project, user=annotator, role=Role.ANNOTATOR)
    # A 16-step episode gives six SFT and six DPO rows with a full history window.
    episodes = episodes or max(2, -(-steps // 6))
    # Every step shows a screenshot of its own, as on a real desktop: rows share screenshots
    # only within their episode's history window.
    make_episodes(
        project,
        annotator,
        episodes,
        16,
        distinct_screens=16 * episodes,
        episode_offset=16,
        size=(1920, 1080),
    )
    rows = {}
    for kind in ("sft", "dpo"):
        filters = exports.ExportFilters(exclude_held_out=True)
        export = exports.create_export(project, engineer, kind, "trl", filters)
        exports.build_export(export.pk)
        export.refresh_from_db()
        if export.status != DatasetExport.Status.SUCCEEDED:
            raise RuntimeError(f"export {export.pk} {export.status}: {export.error}")
        ref = DatasetRef(
            export_id=export.pk,
            kind=kind,
            location=export.location,
            files=tuple(DatasetFile(f["name"], f["sha256"], int(f["size"])) for f in export.files),
        )
        paths = data.fetch(ref, lambda name: default_storage.open(name, "rb"), folder / kind)
        (folder / f"{kind}.json").write_text(json.dumps(ref.to_json()))
        rows[kind] = (ref, paths)
    return rows


def saved_rows(folder: Path) -> dict[str, tuple[Any, list[Path]]]:
    """Rows that ``--prepare`` wrote on another machine (no Django needed to read them)."""
    from model_serving.training.spec import DatasetRef  # beside run_architecture's imports

    rows = {}
    for kind in ("sft", "dpo"):
        ref = DatasetRef.from_json(json.loads((folder / f"{kind}.json").read_text()))
        paths = [folder / kind / f.name.replace("/", "__") for f in ref.parquet_files]
        rows[kind] = (ref, paths)
    return rows


def full_windows(table: Any) -> Any:
    """The rows whose history window is full (``HISTORY`` screenshots): an episode's first
    steps have fewer, and the figures are for rows as long as a long episode's."""
    import pyarrow.compute as pc  # weight: pyarrow, only when the benchmark runs

    counts = pc.list_value_length(table.data.column("images")).to_pylist()
    return table.select([i for i, n in enumerate(counts) if n == HISTORY])
