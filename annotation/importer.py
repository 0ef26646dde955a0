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

So each row is decoded on its own: JSONL line by line, a JSON array element by element. Only
a break that leaves an array's strings or brackets open stops the reading there, since the
rows after it can no longer be told apart.

A row is also refused, naming its field, for what PostgreSQL's ``jsonb`` cannot store (the NUL
character, a lone surrogate such as ``"\\ud800"``, a number that is not finite: ``NaN``,
``Infinity``, ``1e400``), for nesting deeper than ``MAX_DEPTH``, and for a setup step of a type
the desktops do not run (``vm_pool.setup_runner.RUNNERS``).

Re-importing a task id never duplicates it: identical content is reported ``unchanged``;
changed content updates a task that nobody has started yet; changing a started task is an
error for that row.
"""

import hashlib
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from annotation.models import Project, Task, TaskEvent, TaskStatus
from backend.accounts.models import User
from backend.errors import DomainError
from vm_pool.setup_runner import RUNNERS

MAX_ROWS = 100_000
MAX_STEPS_LIMIT = 500
# How deep a task row may nest, the row itself being level 1: far more than real tasks need
# (OSWorld's nest about 5 levels), and shallow enough for every recursive reader downstream
# (json.dumps, jsonb, the API's renderers).
MAX_DEPTH = 64
# The fields that make up a task's content; a re-import is "unchanged" when they are equal.
CONTENT_FIELDS = ("instruction", "setup", "evaluator", "related_apps", "max_steps", "priority")

_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")
# What bounds an array element: a string (JSON strings never span lines), a lone quote (a
# string left open on its line), a run of opening or closing brackets, a comma.
_STRUCTURE = re.compile(r'"(?:[^"\\\n]|\\.)*"|"|[\[{]+|[\]}]+|,')
# A file that opens as {"tasks": [...]}: its rows can be told apart like an array's.
_TASKS_WRAPPER = re.compile(r'\{[ \t\n\r]*"tasks"[ \t\n\r]*:[ \t\n\r]*(?=\[)')
# Characters jsonb cannot store. JSON's "\ud800" escapes can yield surrogates; a valid pair
# decodes to one character outside this range, so any surrogate left is a lone one.
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


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
class ParsedFile:
    """A file's rows that decoded, and an error for each row (or the file) that did not."""

    rows: list[tuple[int, Any]] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)

    @property
    def row_count(self) -> int:
        # Decoding gives one error per unreadable row, and row 0 for the file as a whole.
        return len(self.rows) + len({e.row for e in self.errors if e.row > 0})


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
    errors = sorted(errors, key=lambda e: e.row)
    return ImportRejected(
        message + " Nothing was imported.",
        details={
            "errors": [e.as_dict() for e in errors],
            "error_count": len(errors),
            "bad_row_count": len({e.row for e in errors if e.row > 0}),
        },
    )


def _too_many_rows() -> ImportRejected:
    return _reject(
        f"The file has more than {MAX_ROWS} tasks; at most {MAX_ROWS} per file.",
        [RowError(MAX_ROWS + 1, "", "too many rows")],
    )


def _printable(text: str, limit: int = 80) -> str:
    """Text from the file as an error may quote it: lone surrogates would make the response
    itself unencodable, and a NUL would be invisible."""
    shown = text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\u0000")
    return shown if len(shown) <= limit else shown[:limit] + "…"


class _Positions:
    """Names places in a text by line and column, asked for in increasing order, so that naming
    every error of a long file takes one pass over it."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._counted_to = 0
        self._line = 1
        self._line_start = 0

    def __call__(self, position: int) -> str:
        newline = self._text.rfind("\n", self._counted_to, position)
        if newline >= 0:
            self._line += self._text.count("\n", self._counted_to, position)
            self._line_start = newline + 1
        self._counted_to = max(self._counted_to, position)
        return f"line {self._line}, column {position - self._line_start + 1}"


def _column(position: int) -> str:
    return f"column {position + 1}"


def _unreadable(error: Exception, where: Callable[[int], str], offset: int = 0) -> str:
    """Why a row did not decode, placing json's error (at ``offset`` in ``where``'s text).

    ``json`` raises RecursionError for nesting deeper than the stack allows."""
    if isinstance(error, RecursionError):
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(error, json.JSONDecodeError):
        # json's messages may end "... starting at": the position completes them.
        return f"not valid JSON: {error.msg.removesuffix(' at')} at {where(offset + error.pos)}"
    # The one other ValueError json raises: an integer with more digits than Python converts.
    return f"holds a number too long to read (over {sys.get_int_max_str_digits()} digits)"


def _skip_whitespace(text: str, position: int) -> int:
    match = _JSON_WHITESPACE.match(text, position)
    return match.end() if match else position


def _element_end(text: str, start: int) -> int | None:
    """Where the array element at ``start`` ends (after its closing bracket, or at the comma or
    bracket after a plain value), judged by strings and brackets alone; None when one of them
    is left open."""
    depth = 0
    for token in _STRUCTURE.finditer(text, start):
        lexeme = token.group()
        if lexeme == '"':
            return None
        if lexeme[0] in "[{":
            depth += len(lexeme)
        elif lexeme[0] in "]}":
            if len(lexeme) >= depth:
                return token.start() + depth
            depth -= len(lexeme)
        elif lexeme == "," and depth == 0:
            return token.start()
    return None


def _array_rows(text: str, start: int) -> tuple[ParsedFile, int | None]:
    """Decode the elements of the array opening at ``text[start]``, each from its own slice;
    return them and the position after the array, or None where the reading stopped.

    Slices, because json places an error by counting the lines before it in the text it was
    given: in the whole file, a file of bad rows would take time quadratic in its size."""
    parsed = ParsedFile()
    where = _Positions(text)
    position = _skip_whitespace(text, start + 1)
    if text.startswith("]", position):
        return parsed, position + 1
    number = 1
    while True:
        if number > MAX_ROWS:
            raise _too_many_rows()
        end = _element_end(text, position)
        try:
            parsed.rows.append((number, json.loads(text[position:end])))
        except (ValueError, RecursionError) as error:
            cut = "" if end is not None else "; the rows after it cannot be read"
            parsed.errors.append(RowError(number, "", _unreadable(error, where, position) + cut))
        else:
            if end is None:  # a plain value, then the end of the file
                unclosed = f"not valid JSON: the array is not closed at {where(len(text))}"
                parsed.errors.append(RowError(0, "", unclosed))
        if end is None:
            return parsed, None
        position = _skip_whitespace(text, end)
        if text.startswith("]", position):
            return parsed, position + 1
        if not text.startswith(",", position):
            message = f"not valid JSON after row {number}: expected ',' or ']' at {where(position)}"
            parsed.errors.append(RowError(0, "", f"{message}; the rows after it cannot be read"))
            return parsed, None
        comma = position
        position = _skip_whitespace(text, position + 1)
        if text.startswith("]", position):
            trailing = f"not valid JSON: a comma after the last row at {where(comma)}"
            parsed.errors.append(RowError(0, "", trailing))
            return parsed, position + 1
        number += 1


def _jsonl_rows(text: str) -> ParsedFile:
    parsed = ParsedFile()
    # JSONL separates lines by "\n" only: a JSON string may hold U+2028 and its kin.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        if len(parsed.rows) + len(parsed.errors) == MAX_ROWS:
            raise _too_many_rows()
        try:
            parsed.rows.append((number, json.loads(line)))
        except (ValueError, RecursionError) as error:
            parsed.errors.append(RowError(number, "", _unreadable(error, _column)))
    return parsed


def _decodes(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def parse_rows(data: bytes, filename: str = "") -> ParsedFile:
    """Split an upload into its rows, each decoded or with the reason it was not.

    Raises ImportRejected only for what is wrong with the file as a whole: it is empty, not
    UTF-8, or has more than MAX_ROWS rows (the rows past those are not read)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise _reject("The file is not UTF-8 text.", [RowError(0, "", str(error))]) from error
    if not text.strip():
        raise _reject("The file is empty.", [RowError(0, "", "no tasks in the file")])

    start = _skip_whitespace(text, 0)
    if filename.lower().endswith((".jsonl", ".ndjson")) or not text.startswith(("[", "{"), start):
        return _jsonl_rows(text)
    if text.startswith("[", start):
        parsed, end = _array_rows(text, start)
        after = len(text) if end is None else _skip_whitespace(text, end)
        if after < len(text):
            where = _Positions(text)(after)
            parsed.errors.append(
                RowError(0, "", f"not valid JSON: text after the array at {where}")
            )
        return parsed
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        wrapper = _TASKS_WRAPPER.match(text, start)
        if wrapper:
            parsed, _ = _array_rows(text, wrapper.end())
            if not parsed.errors:  # the rows are fine: the error is around them
                parsed.errors.append(RowError(0, "", _unreadable(error, _Positions(text))))
            return parsed
        if _decodes(text[start:].split("\n", 1)[0]):
            return _jsonl_rows(text)  # JSONL under a name that does not say so
        return ParsedFile(errors=[RowError(1, "", _unreadable(error, _Positions(text)))])
    if isinstance(value, dict) and isinstance(value.get("tasks"), list):
        if len(value["tasks"]) > MAX_ROWS:
            raise _too_many_rows()
        return ParsedFile(rows=list(enumerate(value["tasks"], start=1)))
    return ParsedFile(rows=[(1, value)])


def _json_path(path: tuple[str | int, ...]) -> str:
    return "".join(
        f"[{key}]" if isinstance(key, int) else f".{_printable(key, 40)}" for key in path
    ).lstrip(".")


def _string_problem(text: str) -> str | None:
    match = _UNSTORABLE.search(text)
    if match is None:
        return None
    if match.group() == "\x00":
        return "holds the NUL character (\\u0000), which cannot be stored"
    return f"holds a lone surrogate ({_printable(match.group())}), which is not a character"


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
        elif step["type"] not in RUNNERS:
            errors.append(
                RowError(
                    row,
                    where,
                    f"{_printable(step['type'])!r} is not a setup step the desktops run; "
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
            errors.append(RowError(row, _printable(name), problem))
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
            bad_rows = len({e.row for e in errors if e.row > 0})
            summary = (
                f"{bad_rows} of {parsed.row_count} rows are invalid."
                if bad_rows
                else "The file is not valid JSON."
            )
            raise _reject(summary, errors)

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
