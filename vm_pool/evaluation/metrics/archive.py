"""compare_archive: unpack two archives and score their files pairwise with another metric.

``file_type`` (default ``text``) picks the metric: text, pdf, docx, ppt, image, csv or table;
``file_path`` is a folder inside the archives; other options go to that metric. The score is
the mean over the file pairs, 0 when the two archives do not hold the same file names.
OSWorld also offers audio and video, which need libraries we do not install.
"""

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from vm_pool.evaluation.metrics.docs import compare_docx_files
from vm_pool.evaluation.metrics.errors import MetricError
from vm_pool.evaluation.metrics.general import compare_text_file
from vm_pool.evaluation.metrics.images import compare_images
from vm_pool.evaluation.metrics.pdf import compare_pdfs
from vm_pool.evaluation.metrics.slides import compare_pptx_files
from vm_pool.evaluation.metrics.table import compare_csv, compare_table

_BY_FILE_TYPE: dict[str, Callable[..., float]] = {
    "text": compare_text_file,
    "pdf": compare_pdfs,
    "docx": compare_docx_files,
    "ppt": compare_pptx_files,
    "image": compare_images,
    "csv": compare_csv,
    "table": compare_table,
}


def compare_archive(result: str | None, expected: str, **options: Any) -> float:
    file_path: str = options.pop("file_path", "")
    file_type: str = options.pop("file_type", "text")
    if file_type not in _BY_FILE_TYPE:
        raise MetricError(f"compare_archive file_type {file_type!r} is not supported")
    if not result:
        return 0.0
    compare = _BY_FILE_TYPE[file_type]
    with tempfile.TemporaryDirectory() as workdir:
        result_dir = os.path.join(workdir, "result")
        expected_dir = os.path.join(workdir, "expected")
        try:
            shutil.unpack_archive(result, result_dir)
            result_files = sorted(os.listdir(os.path.join(result_dir, file_path)))
        except (shutil.ReadError, ValueError, OSError):
            return 0.0
        shutil.unpack_archive(expected, expected_dir)
        expected_files = sorted(os.listdir(os.path.join(expected_dir, file_path)))
        if not result_files or result_files != expected_files:
            return 0.0
        score = sum(
            compare(
                os.path.join(result_dir, file_path, name),
                os.path.join(expected_dir, file_path, name),
                **options,
            )
            for name in result_files
        )
    return score / len(result_files)
