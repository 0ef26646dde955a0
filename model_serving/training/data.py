"""A run's dataset files: copied from storage to the worker's disk, checked, loaded.

Each file is streamed to a local folder while its sha256 is computed; a file whose hash is not
the one pinned when the job was created (the export changed, or was damaged) stops the run
before any training. The Parquet files are then loaded with ``datasets`` as one table (its
Arrow copy in the job's folder); a dataset without rows, without the columns its kind needs,
or with rows from held-out episodes (``model_serving.evaluation``), is refused with the reason.
"""

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from model_serving.training.spec import DatasetRef

CHUNK = 1024 * 1024
COLUMNS = {
    "sft": {"prompt", "completion", "images"},
    "dpo": {"prompt", "chosen", "rejected", "images"},
}


class DatasetUnusable(Exception):
    """A dataset cannot be trained on; the message names the export and the reason."""


def fetch(ref: DatasetRef, open_file: Callable[[str], IO[bytes]], into: Path) -> list[Path]:
    """Copy the export's Parquet files into ``into``, each checked against its sha256."""
    into.mkdir(parents=True, exist_ok=True)
    paths = []
    for file in ref.parquet_files:
        target = into / file.name.replace("/", "__")
        digest = hashlib.sha256()
        try:
            name = f"{ref.location.rstrip('/')}/{file.name}"
            with open_file(name) as source, target.open("wb") as sink:
                while chunk := source.read(CHUNK):
                    digest.update(chunk)
                    sink.write(chunk)
        except OSError as error:
            raise DatasetUnusable(
                f"export {ref.export_id}: cannot read {file.name}: {error}"
            ) from error
        if digest.hexdigest() != file.sha256:
            raise DatasetUnusable(
                f"export {ref.export_id}: {file.name} has sha256 {digest.hexdigest()}, "
                f"not {file.sha256} as when the job was created"
            )
        paths.append(target)
    return paths


def load(
    ref: DatasetRef, paths: list[Path], held_out: Callable[[int], bool], cache_dir: Path
) -> Any:
    """The rows of the export as one ``datasets.Dataset``; refused when a row comes from a
    task ``held_out`` says is kept for evaluation (the ``split_task`` column), or when its rows
    do not name it (an export built before they did). Its Arrow
    copy, and every table the trainers derive from it, go to ``cache_dir`` (the job's own
    folder, removed with it), never to the global Hugging Face cache."""
    import datasets  # weight: datasets, train workers only
    import pyarrow.parquet as pq  # weight: pyarrow, train workers only

    if not paths:
        raise DatasetUnusable(f"export {ref.export_id} has no Parquet files")
    try:
        rows = sum(pq.ParquetFile(path).metadata.num_rows for path in paths)
    except Exception as error:  # noqa: BLE001 - pyarrow raises many kinds
        raise DatasetUnusable(
            f"export {ref.export_id} is not a readable Parquet dataset: {error}"
        ) from error
    if rows == 0:
        # Checked first: datasets refuses to load a table without rows at all.
        raise DatasetUnusable(f"export {ref.export_id} ({ref.kind}) has no rows to train on")
    try:
        table = datasets.load_dataset(
            "parquet",
            data_files=[str(p) for p in paths],
            split="train",
            keep_in_memory=False,
            cache_dir=str(cache_dir),
        )
    except Exception as error:  # noqa: BLE001 - pyarrow and datasets raise many kinds
        raise DatasetUnusable(
            f"export {ref.export_id} is not a readable Parquet dataset: {error}"
        ) from error
    missing = COLUMNS[ref.kind] - set(table.column_names)
    if missing:
        raise DatasetUnusable(
            f"export {ref.export_id} lacks the {ref.kind} columns {sorted(missing)}"
        )
    if "split_task" not in table.column_names:
        raise DatasetUnusable(
            f"export {ref.export_id} does not name its rows' tasks (split_task), which the "
            "held-out split goes by; export it again"
        )
    tasks = table.unique("split_task")
    if None in tasks:
        raise DatasetUnusable(f"export {ref.export_id} has rows that name no task (split_task)")
    leaked = sorted(t for t in tasks if held_out(int(t)))
    if leaked:
        raise DatasetUnusable(
            f"export {ref.export_id} holds episodes of held-out tasks {leaked[:10]}; build the "
            "export with held-out episodes excluded, so evaluation stays fair"
        )
    return table
