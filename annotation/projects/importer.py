"""Task import from JSON and JSONL, OSWorld task files included.

Accepted shapes: a JSON array of task objects, a single task object (an OSWorld task file as
it is), an object ``{"tasks": [...]}``, or JSONL (one task object per line). A task object has
an ``instruction`` and may have ``id``, ``config`` (OSWorld's setup steps; ``setup`` is the
same thing), ``evaluator``, ``related_apps``, ``max_steps`` and ``priority``; every other field
is kept unchanged in the task's ``source``.

The rule for bad input: **a file is imported whole or not at all.** Every row is read and
checked before anything is written; if any row is bad, nothing is written and the refusal
lists every problem of every bad row at once, broken JSON and invalid fields alike, each with
its row number (array position or line, counting from 1; 0 for the file as a whole). A
half-imported file would leave a manager guessing which tasks exist, and a list that shows
the next bad row only on the next try would have her fix a file one row at a time.

Reading the file into rows, each decoded on its own, is ``annotation.projects.rows``.

A row is also refused, naming its field, for what PostgreSQL's ``jsonb`` cannot store (the NUL
character, a lone surrogate such as ``"\\ud800"``, a number that is not finite: ``NaN``,
``Infinity``, ``1e400``), for nesting deeper than ``MAX_DEPTH``, and for a setup step (in the
setup or the evaluator's ``postconfig``) of a type nobody knows: neither one the desktops run
(``vm_pool.setup.runner.RUNNERS``) nor one they cannot run on principle (``NOT_RUNNABLE``).
A task that uses one of the latter, or an evaluator getter that needs a third-party account, is
imported with the reason in ``cannot_run`` and is never claimed (``annotation.projects.support``);
the report lists those tasks. It also lists, before anyone works them, the tasks that start
programs the project's desktop lacks (with a desktop template that would run the file's OSWorld
tasks, when the project's is a local one) and those whose evaluator cannot score here (a getter
or a metric not supported: the coverage command's verdict, per task). Each task's evaluator is
then checked on an untouched desktop in the background (``annotation.projects.evaluator_checks``):
the report counts the checks by status, and the board shows each task's.

Re-importing a task id never duplicates it: identical content is reported ``unchanged``;
changed content updates a task that nobody has started yet; changing a started task is an
error for that row. ``cannot_run`` is derived, not content: every import sets it afresh from the
content, so a task whose step the desktops have learned to run becomes claimable by importing it
again, and reports ``unchanged``.
"""

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.models import Project, Task, TaskEvent, TaskStatus
from annotation.projects import evaluator_checks
from annotation.projects.rows import (
    MAX_DEPTH,
    RowError,
    parse_rows,
    printable,
    reject,
)
from annotation.projects.support import cannot_run_reason, missing_programs
from backend.accounts.models import User
from vm_pool.evaluation.evaluator import EvaluationFailed
from vm_pool.evaluation.evaluator import check as check_evaluator
from vm_pool.models import DesktopTemplate
from vm_pool.setup.runner import NOT_RUNNABLE, RUNNERS

MAX_STEPS_LIMIT = 500
# The fields that make up a task's content; a re-import is "unchanged" when they are equal.
CONTENT_FIELDS = ("instruction", "setup", "evaluator", "related_apps", "max_steps", "priority")

# Characters jsonb cannot store. JSON's "\ud800" escapes can yield surrogates; a valid pair
# decodes to one character outside this range, so any surrogate left is a lone one.
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


@dataclass
class ImportReport:
    rows: int = 0
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    # (task id, reason) of every task of the file that is kept but cannot run here
    cannot_run: list[tuple[str, str]] = field(default_factory=list)
    # (task id, programs) of the tasks that start programs the project's desktop lacks
    not_on_desktop: list[tuple[str, list[str]]] = field(default_factory=list)
    # (task id, reason) of the tasks whose evaluator cannot score here (a getter or a metric
    # not supported): they run, but end unscored
    not_scored: list[tuple[str, str]] = field(default_factory=list)
    # A desktop template that would run the file's OSWorld tasks, when the project's does not
    suggested_template: str | None = None
    # The file's tasks' evaluator self-checks by status as the import left them: those to run are
    # queued (``annotation.projects.evaluator_checks``)
    evaluator_checks: dict[str, int] = field(default_factory=dict)
    # when they were requested: the checks API lists them with ``?requested_from=``
    evaluator_checks_from: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "created": len(self.created),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "cannot_run": len(self.cannot_run),
            "task_ids": {
                "created": self.created,
                "updated": self.updated,
                "unchanged": self.unchanged,
            },
            "cannot_run_tasks": [{"id": i, "reason": reason} for i, reason in self.cannot_run],
            "not_on_desktop_tasks": [{"id": i, "programs": p} for i, p in self.not_on_desktop],
            "not_scored_tasks": [{"id": i, "reason": reason} for i, reason in self.not_scored],
            "suggested_template": self.suggested_template,
            "evaluator_checks": self.evaluator_checks,
            "evaluator_checks_from": self.evaluator_checks_from,
        }


def _invalid_rows(bad: int, total: int) -> str:
    """``3 of 5 rows are invalid.``, with the plurals right for one row."""
    rows = "row" if total == 1 else "rows"
    return f"{bad} of {total} {rows} {'is' if bad == 1 else 'are'} invalid."


def _json_path(path: tuple[str | int, ...]) -> str:
    return "".join(
        f"[{key}]" if isinstance(key, int) else f".{printable(key, 40)}" for key in path
    ).lstrip(".")


def _string_problem(text: str) -> str | None:
    match = _UNSTORABLE.search(text)
    if match is None:
        return None
    if match.group() == "\x00":
        return "holds the NUL character (\\u0000), which cannot be stored"
    return f"holds a lone surrogate ({printable(match.group())}), which is not a character"


def _value_problem(value: Any) -> str | None:
    if isinstance(value, str):
        return _string_problem(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "holds a number that is not finite (NaN, Infinity, or too large, like 1e400)"
    return None


def _unstorable(name: str, value: Any) -> str | None:
    """The first thing in a task field that cannot be stored or nests too deep, or None.

    Iterative, so that no nesting can exhaust the stack; it goes no deeper than MAX_DEPTH."""
    problem = _string_problem(name)
    if problem is not None:
        return f"the field name {problem}"
    pending: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 2, (name,))]
    while pending:
        item, depth, path = pending.pop()
        problem = _value_problem(item)
        if problem is not None:
            return problem if len(path) == 1 else f"{problem}, at {_json_path(path)}"
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_DEPTH:
            return f"is nested deeper than {MAX_DEPTH} levels, under {_json_path(path[:3])}…"
        children = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in children:
            key_problem = _string_problem(key) if isinstance(key, str) else None
            if key_problem is not None:
                return f"a key in {_json_path(path)} {key_problem}"
            pending.append((child, depth + 1, (*path, key)))
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _setup_errors(row: int, name: str, setup: Any) -> list[RowError]:
    if not isinstance(setup, list):
        return [RowError(row, name, "must be a list of setup steps")]
    errors = []
    for i, step in enumerate(setup):
        where = f"{name}[{i}]"
        if not isinstance(step, dict) or not isinstance(step.get("type"), str) or not step["type"]:
            errors.append(RowError(row, where, "a setup step is an object with a 'type' string"))
        elif step["type"] not in RUNNERS and step["type"] not in NOT_RUNNABLE:
            errors.append(
                RowError(
                    row,
                    where,
                    f"{printable(step['type'])!r} is not a setup step the desktops run; "
                    f"they run: {', '.join(sorted(RUNNERS))}",
                )
            )
        elif not isinstance(step.get("parameters", {}), dict):
            errors.append(RowError(row, f"{where}.parameters", "must be an object"))
    return errors


def validate_row(
    row: int, value: Any, project: Project
) -> tuple[dict[str, Any] | None, list[RowError]]:
    """Turn one decoded row into task fields, or say everything wrong with it."""
    if not isinstance(value, dict):
        return None, [RowError(row, "", f"a task is a JSON object, not {type(value).__name__}")]
    errors: list[RowError] = []
    for name, field_value in value.items():
        problem = _unstorable(name, field_value)
        if problem is not None:
            errors.append(RowError(row, printable(name), problem))
    instruction = value.get("instruction")
    if instruction is None:
        errors.append(RowError(row, "instruction", "is required"))
    elif not isinstance(instruction, str) or not instruction.strip():
        errors.append(RowError(row, "instruction", "must be a non-empty string"))

    task_id = value.get("id")
    if task_id is not None and not (
        isinstance(task_id, str) and task_id.strip() or _is_int(task_id)
    ):
        errors.append(RowError(row, "id", "must be a non-empty string or an integer"))
    elif task_id is not None and len(str(task_id)) > 200:
        errors.append(RowError(row, "id", "must be at most 200 characters"))

    if "config" in value and "setup" in value:
        errors.append(RowError(row, "setup", "give either 'config' (OSWorld) or 'setup', not both"))
    setup_name = "config" if "config" in value else "setup"
    setup = value.get(setup_name, [])
    errors += _setup_errors(row, setup_name, setup)

    evaluator = value.get("evaluator", {})
    if not isinstance(evaluator, dict):
        errors.append(RowError(row, "evaluator", "must be an object"))
    elif "postconfig" in evaluator:
        errors += _setup_errors(row, "evaluator.postconfig", evaluator["postconfig"])
    related_apps = value.get("related_apps", [])
    if not isinstance(related_apps, list) or not all(isinstance(a, str) for a in related_apps):
        errors.append(RowError(row, "related_apps", "must be a list of strings"))
    max_steps = value.get("max_steps", project.default_max_steps)
    if not _is_int(max_steps) or not 1 <= max_steps <= MAX_STEPS_LIMIT:
        errors.append(RowError(row, "max_steps", f"must be an integer from 1 to {MAX_STEPS_LIMIT}"))
    priority = value.get("priority", 0)
    if not _is_int(priority) or not -1_000_000 <= priority <= 1_000_000:
        errors.append(RowError(row, "priority", "must be an integer from -1000000 to 1000000"))
    if errors or not isinstance(instruction, str):
        return None, errors

    fields = {
        "instruction": instruction.strip(),
        "setup": setup,
        "evaluator": evaluator,
        "related_apps": related_apps,
        "max_steps": max_steps,
        "priority": priority,
    }
    if task_id is None:
        # No id: the content names the task, so importing the same row twice is still one task.
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        task_id = f"sha256-{digest[:16]}"
    fields["external_id"] = str(task_id).strip()
    fields["source"] = value
    fields["cannot_run"] = cannot_run_reason(setup, evaluator)
    return fields, []


def import_tasks(project: Project, data: bytes, filename: str, actor: User) -> ImportReport:
    """Check every row, then write all of them in one transaction, or none."""
    parsed = parse_rows(data, filename)
    errors = list(parsed.errors)
    valid: list[tuple[int, dict[str, Any]]] = []
    first_row_of: dict[str, int] = {}
    for number, value in parsed.rows:
        fields, row_errors = validate_row(number, value, project)
        errors += row_errors
        if fields is None:
            continue
        earlier = first_row_of.setdefault(fields["external_id"], number)
        if earlier != number:
            errors.append(
                RowError(
                    number,
                    "id",
                    f"duplicate id {fields['external_id']!r}; first seen on row {earlier}",
                )
            )
            continue
        valid.append((number, fields))

    report = ImportReport(rows=parsed.row_count)
    with transaction.atomic():
        # Imports into one project take turns: two that bring the same new ids (a double
        # click) would otherwise both insert them, and the second fail on the unique index.
        Project.objects.select_for_update().filter(pk=project.pk).values_list("pk").get()
        existing = {
            t.external_id: t
            for t in Task.objects.select_for_update().filter(
                project=project, external_id__in=list(first_row_of)
            )
        }
        to_create: list[Task] = []
        to_update: list[Task] = []
        to_rederive: list[Task] = []  # unchanged content, but the registries changed its verdict
        for number, fields in valid:
            task = existing.get(fields["external_id"])
            if task is None:
                to_create.append(Task(project=project, **fields))
            elif all(getattr(task, name) == fields[name] for name in CONTENT_FIELDS):
                report.unchanged.append(task.external_id)
                if task.cannot_run != fields["cannot_run"]:
                    task.cannot_run = fields["cannot_run"]
                    to_rederive.append(task)
            elif task.status not in (TaskStatus.QUEUED, TaskStatus.ASSIGNED):
                errors.append(
                    RowError(
                        number,
                        "id",
                        f"task {task.external_id!r} is {task.status}; "
                        "a started task cannot be changed",
                    )
                )
            else:
                for name in (*CONTENT_FIELDS, "source", "cannot_run"):
                    setattr(task, name, fields[name])
                to_update.append(task)
        if errors:
            bad_rows = len({e.row for e in errors if e.row > 0})
            summary = (
                _invalid_rows(bad_rows, parsed.row_count)
                if bad_rows
                else "The file is not valid JSON."
            )
            raise reject(summary, errors)

        created = Task.objects.bulk_create(to_create, batch_size=1000)
        Task.objects.bulk_update(
            to_update, [*CONTENT_FIELDS, "source", "cannot_run"], batch_size=1000
        )
        Task.objects.bulk_update(to_rederive, ["cannot_run"], batch_size=1000)
        TaskEvent.objects.bulk_create(
            [TaskEvent(task=t, kind=TaskEvent.Kind.IMPORTED, actor=actor) for t in created]
            + [TaskEvent(task=t, kind=TaskEvent.Kind.UPDATED, actor=actor) for t in to_update],
            batch_size=1000,
        )
        report.created = [t.external_id for t in created]
        report.updated = [t.external_id for t in to_update]
        unchanged = [existing[external_id] for external_id in report.unchanged]
        report.evaluator_checks_from = timezone.now()
        checks = evaluator_checks.request(
            project, [*created, *to_update, *unchanged], actor, only_stale=True
        )
        report.evaluator_checks = dict(checks)
        report.cannot_run = [
            (fields["external_id"], fields["cannot_run"])
            for _, fields in valid
            if fields["cannot_run"]
        ]
    _advise(report, project, [fields for _, fields in valid])
    return report


def _advise(report: ImportReport, project: Project, rows: list[dict[str, Any]]) -> None:
    """What the manager should know before anyone works the imported tasks: programs the
    project's desktop lacks (and a desktop that has them), evaluators that cannot score here."""
    template = DesktopTemplate.objects.filter(name=project.environment_template).first()
    for fields in rows:
        missing = missing_programs(fields["setup"], fields["evaluator"], template)
        if missing:
            report.not_on_desktop.append((fields["external_id"], missing))
        if fields["evaluator"].get("func"):
            try:
                check_evaluator(fields["evaluator"])
            except EvaluationFailed as error:
                report.not_scored.append((fields["external_id"], str(error)))
    osworld = any("config" in fields["source"] for fields in rows)
    if (report.not_on_desktop or osworld) and (template is None or template.provider == "local"):
        image = DesktopTemplate.objects.exclude(provider="local").exclude(image="").order_by("name")
        report.suggested_template = image.values_list("name", flat=True).first()
