"""The evaluation jail's cost: ``evaluation_overhead_ms``.

One ordinary evaluation, as the getters leave it: an .xlsx compared by ``compare_table``'s
``sheet_data`` rule and a .docx by ``compare_docx_files`` (the two document kinds OSWorld's
office tasks read most), scored over the same gathered files by ``scoring.score`` in this process
(a long-lived worker, its libraries already imported) and by ``jail.run`` (a fresh process in
bubblewrap as the jail's user, which imports what its metrics need each time). The overhead is the
difference of the medians; both medians are reported beside it.
"""

import io
import statistics
import tempfile
import time
from pathlib import Path

import openpyxl
from docx import Document

from vm_pool.evaluation import jail, scoring

WARMUP = 2
REPETITIONS = 15

GOALS = {"evaluation_overhead_ms": "report (small)"}


def _files(folder: Path) -> dict:
    book = openpyxl.Workbook()
    for row in range(1, 201):
        book.active.append([f"item {row}", row, row * 1.5])
    book.save(folder / "book.xlsx")
    document = Document()
    for index in range(50):
        document.add_paragraph(f"Paragraph {index} of the quarterly report.")
    out = io.BytesIO()
    document.save(out)
    (folder / "report.docx").write_bytes(out.getvalue())

    def file(name: str) -> dict:
        return {"kind": "files", "files": [name], "single": True}

    table = {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}
    return {
        "conjunction": "and",
        "metrics": [
            {"func": "compare_table", "options": table, "result": file("book.xlsx"),
             "expected": file("book.xlsx")},
            {"func": "compare_docx_files", "options": {}, "result": file("report.docx"),
             "expected": file("report.docx")},
        ],
    }  # fmt: skip


def _median_ms(action) -> float:
    for _ in range(WARMUP):
        action()
    times = []
    for _ in range(REPETITIONS):
        started = time.perf_counter()
        verdict = action()
        times.append((time.perf_counter() - started) * 1000)
        assert verdict["scored"] and verdict["value"] == 1.0, verdict
    return statistics.median(times)


def run() -> dict[str, float]:
    limits = jail.limits_from_settings()
    with tempfile.TemporaryDirectory(prefix="tandem-bench-evaluation-") as name:
        folder = Path(name)
        request = _files(folder)
        in_process = _median_ms(lambda: scoring.score(request, folder))
        jailed = _median_ms(lambda: jail.run(request, folder, limits))
    return {
        "evaluation_overhead_ms": round(jailed - in_process, 1),
        "evaluation_jail_ms": round(jailed, 1),
        "evaluation_in_process_ms": round(in_process, 1),
    }
