"""Tandem's OSWorld metrics against OSWorld's own functions, on generated inputs.

The rule, in order:
1. A metric is compared when both sides have it: Tandem's ``METRICS`` and a function of the same
   name in the vendored OSWorld code (``tests.osworld_reference``). Each compared metric has a
   case maker (``core.MAKERS``) that builds seeded, deterministic inputs in the option
   combinations published tasks use, or a reason in ``NOT_COMPARABLE``.
2. Both sides run on each case. They agree when both return numbers within the tolerance (1e-6,
   or the metric's own in ``TOLERANCE``), or when OSWorld raises and Tandem scores 0 (a crash
   in OSWorld's evaluator records no success for the task), or when both raise.
3. A case marked with a deliberate difference (``DIFFERENCES``, the table of
   vm_pool/evaluation/DIFFERENCES.md) runs and is reported, but does not count.
4. A metric's agreement is its share of agreeing cases; the figure is the mean over compared
   metrics weighted by how many published tasks use each (``TASKS_USING``; a metric no published
   task uses weighs 1).
"""

import contextlib
import io
import logging
import math
import random
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.osworld_reference import reference_metrics
from tests.osworld_reference.absent import AbsentLibrary
from tests.support.osworld_differential import (  # noqa: F401 (each registers its makers)
    browser,
    documents,
    files,
    impress,
    office,
    pictures,
    texts,
    values,
    writer,
)
from tests.support.osworld_differential.core import MAKERS, Case
from vm_pool.evaluation.metrics import METRICS

GOAL = 0.99

# Published tasks (evaluation_examples/test_all.json at OSWorld 27b8e04) whose evaluator calls
# each metric; a task calling one metric twice counts once.
TASKS_USING: dict[str, int] = {
    "compare_table": 60, "compare_pptx_files": 38, "check_include_exclude": 20,
    "check_direct_json_object": 17, "exact_match": 15, "compare_docx_files": 14,
    "compare_pdfs": 10, "is_expected_url_pattern_match": 10, "compare_images": 7,
    "check_list": 7, "check_json_settings": 7, "compare_text_file": 6,
    "is_extension_installed": 6, "is_expected_tabs": 4, "is_expected_active_tab": 4,
    "check_config_status": 4, "compare_csv": 4, "compare_docx_tables": 4,
    "check_thunderbird_prefs": 4, "is_expected_bookmarks": 3, "check_structure_sim": 3,
    "compare_config": 3, "compare_archive": 3, "check_json": 3, "check_accessibility_tree": 3,
    "match_in_list": 2, "is_in_list": 2, "check_brightness_decrease_and_structure_sim": 2,
    "check_image_size": 2, "compare_line_spacing": 2, "compare_image_list": 2,
    "check_thunderbird_folder": 2, "diff_text_file": 2, "file_contains": 2,
    "check_thunderbird_filter": 2, "is_vlc_playing": 2, "check_json_keybindings": 2,
    "compare_docx_images": 2,
}  # fmt: skip

# metric -> why its verdicts cannot be compared on this machine
NOT_COMPARABLE: dict[str, str] = {}


@dataclass(frozen=True)
class Difference:
    """A deliberate difference: what OSWorld does on the input, what Tandem does, and why."""

    metric: str
    osworld: str
    tandem: str
    why: str


DIFFERENCES: dict[str, Difference] = {
    "font size not written": Difference(
        "check_font_size",
        "raises KeyError (Chromium left default_font_size out of webkit.webprefs)",
        "Chromium's default size, 16, against the rule",
        "Chromium writes no default_font_size when only another font setting changed",
    ),
    "gimprc blank line": Difference(
        "check_config_status",
        "raises IndexError on a line of blanks",
        "skips the line and reads the rest",
        "a line of blanks holds no setting; GIMP's files and hand edits have them",
    ),
    "a11y text without exact": Difference(
        "check_accessibility_tree",
        "raises KeyError for a rule with text and no exact",
        "exact match, the default its docstring states",
        "the rule is well formed by OSWorld's own documentation",
    ),
    "pptx theme background not examined": Difference(
        "compare_pptx_files",
        "raises AttributeError reading a theme-coloured background, even with "
        "examine_background_color false",
        "reads backgrounds only when examine_background_color is true",
        "the option says not to look at the background",
    ),
    "green background wide": Difference(
        "check_green_background",
        "raises IndexError (reads pixels as [x, y], past the rows of a picture that is not square)",
        "1 when every background pixel is green",
        "GIMP keeps the picture's own size; most pictures are not square",
    ),
    "green background palette": Difference(
        "check_green_background",
        "raises IndexError (a palette picture's pixels are indices, not RGB triples)",
        "reads the picture's colours (converted to RGB)",
        "GIMP exports an indexed PNG when the image is in indexed mode",
    ),
    "epub chapters in a sub-folder": Difference(
        "compare_epub",
        "raises FileNotFoundError (writes each .html part into a folder it never made)",
        "compares the parts as it does any others",
        "e-book makers commonly keep the chapters in a folder (Sigil's OEBPS/Text, "
        "pandoc's EPUB/text)",
    ),
}

# metric -> its own tolerance, where it has one
TOLERANCE: dict[str, float] = {}


@dataclass(frozen=True)
class Outcome:
    metric: str
    case: Case
    tandem: float | str
    osworld: float | str

    @property
    def agrees(self) -> bool:
        tolerance = TOLERANCE.get(self.metric, 1e-6)
        if isinstance(self.tandem, float) and isinstance(self.osworld, float):
            return math.isclose(self.tandem, self.osworld, rel_tol=0, abs_tol=tolerance)
        if isinstance(self.osworld, str):
            return self.tandem == 0.0 or isinstance(self.tandem, str)
        return False

    def describe(self) -> str:
        return (
            f"{self.metric} [{self.case.label}] options={dict(self.case.options)}: "
            f"Tandem {self.tandem!r}, OSWorld {self.osworld!r}"
        )


@dataclass(frozen=True)
class MetricAgreement:
    metric: str
    weight: int
    outcomes: list[Outcome]

    @property
    def counted(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.case.difference is None]

    @property
    def share(self) -> float:
        counted = self.counted
        return sum(o.agrees for o in counted) / len(counted) if counted else 1.0


def compared_metrics() -> list[str]:
    """The metrics both sides have, in Tandem's registry order."""
    reference = reference_metrics()
    return [name for name in METRICS if name in reference]


def _verdict(function: Callable[..., Any], case: Case) -> float | str:
    # OSWorld's functions print and log as they go: keep that out of the output.
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            value = function(*case.args, **case.options)
    except AbsentLibrary:
        raise
    except Exception as error:
        return f"raises {type(error).__name__}"
    finally:
        logging.disable(logging.NOTSET)
    if isinstance(value, bool | int | float):
        return float(value)
    return f"returns {type(value).__name__}"


def cases_for(metric: str, folder: Path) -> list[Case]:
    """The metric's cases, made with a random seeded by its name (the same every run)."""
    rng = random.Random(zlib.crc32(metric.encode()))
    metric_folder = folder / metric
    metric_folder.mkdir()
    return list(MAKERS[metric](rng, metric_folder))


def measure_case(metric: str, case: Case) -> Outcome:
    """Both verdicts on one case: Tandem's first, then OSWorld's."""
    tandem = _verdict(METRICS[metric], case)
    return Outcome(metric, case, tandem, _verdict(reference_metrics()[metric], case))


def measure(metric: str, folder: Path) -> MetricAgreement:
    outcomes = [measure_case(metric, case) for case in cases_for(metric, folder)]
    return MetricAgreement(metric, TASKS_USING.get(metric, 1), outcomes)


def measure_all() -> list[MetricAgreement]:
    """Every compared metric that has a case maker, measured in a scratch folder."""
    with tempfile.TemporaryDirectory(prefix="tandem-osworld-differential-") as name:
        return [measure(metric, Path(name)) for metric in compared_metrics() if metric in MAKERS]


def weighted_agreement(results: list[MetricAgreement]) -> float:
    total = sum(r.weight for r in results)
    return sum(r.weight * r.share for r in results) / total if total else 1.0


def table(results: list[MetricAgreement]) -> str:
    """The per-metric table: agreement, counted cases, weight; then the uncovered metrics."""
    width = max([len(r.metric) for r in results] + [6])
    lines = [f"{'metric':<{width}}  agree  cases  tasks"]
    for r in sorted(results, key=lambda r: (r.share, -r.weight)):
        lines.append(f"{r.metric:<{width}}  {r.share:5.3f}  {len(r.counted):5d}  {r.weight:5d}")
    lines.append(f"osworld_metric_agreement (weighted): {weighted_agreement(results):.4f}")
    for r in results:
        for o in r.outcomes:
            if o.case.difference is not None:
                lines.append(f"deliberate difference, not counted: {o.describe()}")
    for metric in compared_metrics():
        if metric in NOT_COMPARABLE:
            lines.append(f"not compared: {metric}: {NOT_COMPARABLE[metric]}")
        elif metric not in MAKERS:
            lines.append(f"not compared: {metric}: no case maker yet")
    return "\n".join(lines)
