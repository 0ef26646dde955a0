"""Reading a task file into rows, for the import (``annotation.projects.importer``).

Accepted shapes: a JSON array of task objects, a single task object, an object
``{"tasks": [...]}``, or JSONL (one task object per line). Each row is decoded on its own:
JSONL line by line, a JSON array element by element, so that every row that cannot be read is
reported with its position while the others are read and checked, all in one pass. Only a break
that leaves an array's strings or brackets open stops the reading there, since the rows after
it can no longer be told apart. Rows are numbered from 1 (array position or line); row 0 is the
file as a whole.
"""

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend.errors import DomainError

MAX_ROWS = 100_000
# How deep a task row may nest, the row itself being level 1: far more than real tasks need
# (OSWorld's nest about 5 levels), and shallow enough for every recursive reader downstream
# (json.dumps, jsonb, the API's renderers).
MAX_DEPTH = 64

_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")
# What bounds an array element: a string (JSON strings never span lines), a lone quote (a
# string left open on its line), a run of opening or closing brackets, a comma.
_STRUCTURE = re.compile(r'"(?:[^"\\\n]|\\.)*"|"|[\[{]+|[\]}]+|,')
# A file that opens as {"tasks": [...]}: its rows can be told apart like an array's.
_TASKS_WRAPPER = re.compile(r'\{[ \t\n\r]*"tasks"[ \t\n\r]*:[ \t\n\r]*(?=\[)')


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


def reject(message: str, errors: list[RowError]) -> ImportRejected:
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
    return reject(
        f"The file has more than {MAX_ROWS} tasks; at most {MAX_ROWS} per file.",
        [RowError(MAX_ROWS + 1, "", "too many rows")],
    )


def printable(text: str, limit: int = 80) -> str:
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
        raise reject("The file is not UTF-8 text.", [RowError(0, "", str(error))]) from error
    if not text.strip():
        raise reject("The file is empty.", [RowError(0, "", "no tasks in the file")])

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
