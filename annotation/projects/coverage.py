"""How much of an OSWorld task set Tandem runs and scores, and what stands in the way.

For each task file: are all its setup steps (``config`` and the evaluator's ``postconfig``) of a
type the desktops run (``vm_pool.setup.runner.RUNNERS``); are all its evaluator getters
(``result`` and ``expected``) ones Tandem reads (``vm_pool.evaluation.getters.GETTERS``); are
all its metric functions ones Tandem scores with (``vm_pool.evaluation.metrics.METRICS``, plus
``infeasible``, which needs none); and does it need a third-party account
(``annotation.projects.support.cannot_run_reason``). A task is fully supported when all four say
yes. The report counts that per domain, then lists each unsupported type with the number of
tasks it blocks, most blocking first: the to-do list for running all of OSWorld.

Task files come from OSWorld's ``evaluation_examples`` folder (the published set that
``test_all.json`` lists, or every file under ``examples/``), or from any folder of ``*.json``
task files, the domain being each file's folder. ``manage.py osworld_coverage`` prints it.
"""

import json
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotation.projects.support import NOT_RUNNABLE_GETTERS, cannot_run_reason
from vm_pool.evaluation.unsupported import UNSUPPORTED_GETTERS, UNSUPPORTED_METRICS
from vm_pool.setup.runner import NOT_RUNNABLE, RUNNERS
from vm_pool.task_files.urls import evaluator_getters, task_steps

PUBLISHED_INDEX = "test_all.json"
INFEASIBLE = "infeasible"  # OSWorld's metric for tasks that cannot be done: nothing to score


class CoverageError(Exception):
    """The folder holds no task set that can be read."""


@dataclass(frozen=True)
class Registries:
    """What Tandem supports: setup step types, getter types, metric names."""

    runners: Collection[str]
    getters: Collection[str]
    metrics: Collection[str]
    not_runnable: dict[str, str] = field(default_factory=dict)  # setup type → why never
    table_rules: Collection[str] = ()  # the rule types compare_table checks


def installed_registries() -> Registries:
    """The registries as the code holds them now, imported only when a report is made: the
    metrics' modules bring the document and spreadsheet libraries with them (weight)."""
    from vm_pool.evaluation.getters import GETTERS  # weight: the getters' desktop toolkit
    from vm_pool.evaluation.metrics import METRICS  # weight: the metrics' registry
    from vm_pool.evaluation.metrics.table import TABLE_RULE_TYPES  # weight: pandas

    return Registries(
        set(RUNNERS), set(GETTERS), set(METRICS), dict(NOT_RUNNABLE), TABLE_RULE_TYPES
    )


@dataclass(frozen=True)
class TaskPath:
    domain: str
    path: Path


@dataclass
class Verdict:
    """One task's support: what it uses that Tandem lacks."""

    domain: str
    task_id: str
    setup_gaps: set[str]
    getter_gaps: set[str]
    metric_gaps: set[str]
    cannot_run: str

    @property
    def fully_supported(self) -> bool:
        return not (self.setup_gaps or self.getter_gaps or self.metric_gaps or self.cannot_run)


@dataclass
class DomainRow:
    domain: str
    tasks: int = 0
    setup_runs: int = 0
    getters_supported: int = 0
    metrics_supported: int = 0
    cannot_run: int = 0
    fully_supported: int = 0

    def add(self, verdict: Verdict) -> None:
        self.tasks += 1
        self.setup_runs += not verdict.setup_gaps
        self.getters_supported += not verdict.getter_gaps
        self.metrics_supported += not verdict.metric_gaps
        self.cannot_run += bool(verdict.cannot_run)
        self.fully_supported += verdict.fully_supported


@dataclass(frozen=True)
class Gap:
    kind: str  # "setup", "getter" or "metric"
    name: str
    tasks: int  # how many tasks it blocks
    note: str


@dataclass
class Coverage:
    source: str
    domains: list[DomainRow]
    total: DomainRow
    gaps: list[Gap]
    skipped: list[str]  # files that are not task files, or listed tasks with no file


# --- finding and reading task files --------------------------------------------------------


def find_task_files(
    folder: Path, every_file: bool = False
) -> tuple[list[TaskPath], list[str], str]:
    """The task files of ``folder``, what was listed but is missing, and how they were chosen."""
    if not folder.is_dir():
        raise CoverageError(f"{folder} is not a folder")
    index = folder / PUBLISHED_INDEX
    examples = folder / "examples"
    if index.is_file() and examples.is_dir():
        if every_file:
            found = sorted(examples.glob("*/*.json"))
            return [TaskPath(p.parent.name, p) for p in found], [], "every file under examples/"
        try:
            listed = json.loads(index.read_text())
        except (OSError, ValueError) as exc:
            raise CoverageError(f"{index} is not readable JSON: {exc}") from None
        if not isinstance(listed, dict):
            raise CoverageError(f"{index} is not an object {{domain: [task ids]}}")
        files, missing = [], []
        for domain, ids in listed.items():
            for task_id in ids if isinstance(ids, list) else []:
                path = examples / str(domain) / f"{task_id}.json"
                if path.is_file():
                    files.append(TaskPath(str(domain), path))
                else:
                    missing.append(f"{domain}/{task_id}: listed in {PUBLISHED_INDEX}, no file")
        return files, missing, f"the published set ({PUBLISHED_INDEX})"
    found = sorted(folder.rglob("*.json"))
    return [TaskPath(p.parent.name, p) for p in found], [], "every *.json file"


def _read(task_file: TaskPath) -> dict[str, Any] | None:
    try:
        task = json.loads(task_file.path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(task, dict) or not ({"config", "evaluator", "instruction"} & task.keys()):
        return None
    return task


# --- judging -------------------------------------------------------------------------------


def metric_names(evaluator: Any) -> list[str]:
    func = evaluator.get("func") if isinstance(evaluator, dict) else None
    names = func if isinstance(func, list) else [func] if func is not None else []
    return [str(name) for name in names]


def table_rule_types(evaluator: Any) -> set[str]:
    """The ``compare_table`` rule types an evaluator uses (its options follow its metrics)."""
    if not isinstance(evaluator, dict):
        return set()
    names = metric_names(evaluator)
    options = evaluator.get("options")
    per_metric = options if isinstance(options, list) else [options] * len(names)
    found = set()
    for name, option in zip(names, per_metric, strict=False):
        if name == "compare_table" and isinstance(option, dict):
            rules = option.get("rules") or []
            found |= {str(r.get("type")) for r in rules if isinstance(r, dict)}
    return found


def judge(domain: str, task: dict[str, Any], registries: Registries) -> Verdict:
    setup = task.get("config", task.get("setup", []))
    evaluator = task.get("evaluator", {})
    return Verdict(
        domain=domain,
        task_id=str(task.get("id", "")),
        setup_gaps={
            step.type
            for step in task_steps(setup, evaluator)
            if step.type not in registries.runners
        },
        getter_gaps={
            getter.type
            for getter in evaluator_getters(evaluator)
            if getter.type not in registries.getters
        },
        metric_gaps={
            name
            for name in metric_names(evaluator)
            if name != INFEASIBLE and name not in registries.metrics
        }
        | {
            f"compare_table rule {rule}"
            for rule in table_rule_types(evaluator)
            if registries.table_rules and rule not in registries.table_rules
        },
        cannot_run=cannot_run_reason(setup, evaluator),
    )


def summarise(source: str, verdicts: Iterable[Verdict], registries: Registries) -> Coverage:
    rows: dict[str, DomainRow] = {}
    total = DomainRow("total")
    blocked: Counter[tuple[str, str]] = Counter()
    for verdict in verdicts:
        rows.setdefault(verdict.domain, DomainRow(verdict.domain)).add(verdict)
        total.add(verdict)
        for kind, names in (
            ("setup", verdict.setup_gaps),
            ("getter", verdict.getter_gaps),
            ("metric", verdict.metric_gaps),
        ):
            blocked.update((kind, name) for name in names)
    gaps = [
        Gap(kind, name, count, _note(kind, name, registries))
        for (kind, name), count in sorted(blocked.items(), key=lambda item: (-item[1], item[0]))
    ]
    return Coverage(source, sorted(rows.values(), key=lambda r: r.domain), total, gaps, [])


def _note(kind: str, name: str, registries: Registries) -> str:
    if kind == "setup" and name in registries.not_runnable:
        return f"never runs here: {registries.not_runnable[name]}"
    if kind == "getter" and name in NOT_RUNNABLE_GETTERS:
        return f"never runs here: {NOT_RUNNABLE_GETTERS[name]}"
    if kind == "getter" and name in UNSUPPORTED_GETTERS:
        return f"left out: {UNSUPPORTED_GETTERS[name]}"
    if kind == "metric" and name in UNSUPPORTED_METRICS:
        return f"left out: {UNSUPPORTED_METRICS[name]}"
    return "not implemented yet"


def coverage(
    folder: Path, every_file: bool = False, registries: Registries | None = None
) -> Coverage:
    """The coverage report of the task files in ``folder`` (see the module's docstring)."""
    registries = registries or installed_registries()
    files, missing, chosen = find_task_files(folder, every_file)
    verdicts, skipped = [], list(missing)
    for task_file in files:
        task = _read(task_file)
        if task is None:
            skipped.append(f"{task_file.path}: not a task file")
        else:
            verdicts.append(judge(task_file.domain, task, registries))
    if not verdicts:
        raise CoverageError(f"no task files in {folder}")
    report = summarise(f"{folder}, {chosen}", verdicts, registries)
    report.skipped = skipped
    return report


# --- output --------------------------------------------------------------------------------

COLUMNS = [
    ("domain", "domain"),
    ("tasks", "tasks"),
    ("setup_runs", "setup runs"),
    ("getters_supported", "getters supported"),
    ("metrics_supported", "metrics supported"),
    ("cannot_run", "cannot run"),
    ("fully_supported", "fully supported"),
]
GAP_COLUMNS = ["kind", "name", "tasks blocked", "note"]


def _cells(row: DomainRow) -> list[str]:
    cells = [row.domain, str(row.tasks)]
    for key, _ in COLUMNS[2:]:
        count = getattr(row, key)
        share = f"{100 * count / row.tasks:.0f}%" if row.tasks else "-"
        cells.append(f"{count} ({share})")
    return cells


def _gap_cells(gap: Gap) -> list[str]:
    return [gap.kind, gap.name, str(gap.tasks), gap.note]


def _text_table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(row) for row in rows)]


def _markdown_table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    rule = ["---:" if i in right else "---" for i in range(len(header))]
    return [line(header), line(rule), *(line(row) for row in rows)]


def render(report: Coverage, output_format: str = "text") -> str:
    if output_format == "json":
        return json.dumps(as_dict(report), indent=2)
    table = _markdown_table if output_format == "markdown" else _text_table
    header = [title for _, title in COLUMNS]
    rows = [_cells(row) for row in report.domains]
    total = _cells(report.total)
    if output_format == "markdown":
        total = [f"**{cell}**" for cell in total]
    lines = [
        f"OSWorld coverage: {report.total.tasks} tasks from {report.source}",
        "",
        *table(header, [*rows, total], set(range(1, len(header)))),
        "",
    ]
    if report.gaps:
        lines += [
            "What blocks the most tasks first:",
            "",
            *table(GAP_COLUMNS, [_gap_cells(gap) for gap in report.gaps], {2}),
        ]
    else:
        lines.append("Nothing is missing: every task is fully supported.")
    if report.skipped:
        lines += ["", f"Skipped {len(report.skipped)}:", *(f"  {s}" for s in report.skipped)]
    return "\n".join(lines) + "\n"


def as_dict(report: Coverage) -> dict[str, Any]:
    def row(r: DomainRow) -> dict[str, Any]:
        return {key: getattr(r, key) for key, _ in COLUMNS}

    return {
        "source": report.source,
        "domains": [row(r) for r in report.domains],
        "total": row(report.total),
        "gaps": [
            {"kind": g.kind, "name": g.name, "tasks_blocked": g.tasks, "note": g.note}
            for g in report.gaps
        ],
        "skipped": report.skipped,
    }
