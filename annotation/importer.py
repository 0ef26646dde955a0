"""Task import from JSON and JSONL, OSWorld task files included.

Accepted shapes: a JSON array of task objects, a single task object (an OSWorld task file as
it is), an object ``{"tasks": [...]}``, or JSONL (one task object per line). A task object has
an ``instruction`` and may have ``id``, ``config`` (OSWorld's setup steps; ``setup`` is the
same thing), ``evaluator``, ``related_apps``, ``max_steps`` and ``priority``; every other field
is kept unchanged in the task's ``source``.

The rule for bad input: **a file is imported whole or not at all.** If any row is invalid,
nothing is written and the error lists every bad row with its number (array position or line,
counting from 1). A half-imported file would leave a manager guessing which tasks exist.

Re-importing a task id never duplicates it: identical content is reported ``unchanged``;
changed content updates a task that nobody has started yet; changing a started task is an
error for that row.
"""

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from annotation.models import Project, Task, TaskEvent, TaskStatus
from backend.accounts.models import User
from backend.errors import DomainError

MAX_ROWS = 100_000
MAX_STEPS_LIMIT = 500
# The fields that make up a task's content; a re-import is "unchanged" when they are equal.
CONTENT_FIELDS = ("instruction", "setup", "evaluator", "related_apps", "max_steps", "priority")


class ImportRejected(DomainError):
    status_code = 400
    code = "import_rejected"


@dataclass(frozen=True)
class RowError:
    row: int
    field: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"row": self.row, "field": self.field, "message": self.message}


@dataclass
class ImportReport:
    rows: int = 0
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "created": len(self.created),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "task_ids": {
                "created": self.created,
                "updated": self.updated,
                "unchanged": self.unchanged,
            },
        }


def _reject(message: str, errors: list[RowError]) -> ImportRejected:
    return ImportRejected(
        message + " Nothing was imported.",
        details={"errors": [e.as_dict() for e in errors], "error_count": len(errors)},
    )


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads(text: str) -> Any:
    """Strict JSON: no NaN/Infinity (PostgreSQL refuses them), no nesting deep enough to crash."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as error:
        if isinstance(error, json.JSONDecodeError):
            raise
        message = str(error) if isinstance(error, ValueError) else "nested too deeply"
        raise json.JSONDecodeError(message, text, 0) from error


def _parses(line: str) -> bool:
    try:
        _loads(line)
    except json.JSONDecodeError:
        return False
    return True


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    return False


def parse_rows(data: bytes, filename: str = "") -> list[tuple[int, Any]]:
    """Split an upload into (row number, decoded value) pairs, or reject the file."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise _reject("The file is not UTF-8 text.", [RowError(0, "", str(error))]) from error
    stripped = text.strip()
    if not stripped:
        raise _reject("The file is empty.", [RowError(0, "", "no tasks in the file")])

    jsonl = filename.lower().endswith((".jsonl", ".ndjson"))
    if not jsonl and stripped[0] in "[{":
        try:
            value = _loads(stripped)
        except json.JSONDecodeError as error:
            if stripped[0] == "[" or not _parses(stripped.splitlines()[0]):
                raise _reject(
                    "The file is not valid JSON.",
                    [RowError(0, "", f"{error.msg} at line {error.lineno}, column {error.colno}")],
                ) from error
        else:
            if isinstance(value, list):
                return list(enumerate(value, start=1))
            if isinstance(value, dict) and isinstance(value.get("tasks"), list):
                return list(enumerate(value["tasks"], start=1))
            return [(1, value)]

    rows: list[tuple[int, Any]] = []
    errors: list[RowError] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, _loads(line)))
        except json.JSONDecodeError as error:
            errors.append(
                RowError(number, "", f"not valid JSON: {error.msg} at column {error.colno}")
            )
    if errors:
        raise _reject(f"{len(errors)} line(s) are not valid JSON.", errors)
    return rows


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
        elif not isinstance(step.get("parameters", {}), dict):
            errors.append(RowError(row, f"{where}.parameters", "must be an object"))
    return errors


def validate_row(
    row: int, value: Any, project: Project
) -> tuple[dict[str, Any] | None, list[RowError]]:
    """Turn one decoded row into task fields, or say everything wrong with it."""
    if not isinstance(value, dict):
        return None, [RowError(row, "", f"a task is a JSON object, not {type(value).__name__}")]
    errors: list[RowError] = [
        RowError(row, str(name), "must not contain the NUL character (\\u0000)")
        for name, field_value in value.items()
        if _has_nul(name) or _has_nul(field_value)
    ]
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
    return fields, []


def import_tasks(project: Project, data: bytes, filename: str, actor: User) -> ImportReport:
    """Validate every row, then write all of them in one transaction, or none."""
    rows = parse_rows(data, filename)
    if len(rows) > MAX_ROWS:
        raise _reject(
            f"The file has {len(rows)} tasks; at most {MAX_ROWS} per file.",
            [RowError(MAX_ROWS + 1, "", "too many rows")],
        )
    errors: list[RowError] = []
    valid: list[tuple[int, dict[str, Any]]] = []
    first_row_of: dict[str, int] = {}
    for number, value in rows:
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

    report = ImportReport(rows=len(rows))
    with transaction.atomic():
        existing = {
            t.external_id: t
            for t in Task.objects.select_for_update().filter(
                project=project, external_id__in=list(first_row_of)
            )
        }
        to_create: list[Task] = []
        to_update: list[Task] = []
        for number, fields in valid:
            task = existing.get(fields["external_id"])
            if task is None:
                to_create.append(Task(project=project, **fields))
            elif all(getattr(task, name) == fields[name] for name in CONTENT_FIELDS):
                report.unchanged.append(task.external_id)
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
                for name in (*CONTENT_FIELDS, "source"):
                    setattr(task, name, fields[name])
                to_update.append(task)
        if errors:
            errors.sort(key=lambda e: e.row)
            raise _reject(
                f"{len({e.row for e in errors})} of {len(rows)} rows are invalid.", errors
            )

        created = Task.objects.bulk_create(to_create, batch_size=1000)
        Task.objects.bulk_update(to_update, [*CONTENT_FIELDS, "source"], batch_size=1000)
        TaskEvent.objects.bulk_create(
            [TaskEvent(task=t, kind=TaskEvent.Kind.IMPORTED, actor=actor) for t in created]
            + [TaskEvent(task=t, kind=TaskEvent.Kind.UPDATED, actor=actor) for t in to_update],
            batch_size=1000,
        )
        report.created = [t.external_id for t in created]
        report.updated = [t.external_id for t in to_update]
    return report
