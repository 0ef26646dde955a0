"""Records a program keeps, as OSWorld scores them: the rows of a CSV file and the answer of a
query on an SQLite database.

A record matches a pattern (``{key: value}``) when it has every key with exactly that value.

The database came from the desktop: it is opened read-only and immutable (no journal, no lock,
nothing written beside it), and a progress handler stops a query past ``SQLITE_STEPS``
virtual-machine steps (a view or a query can be made to compute forever): the limit "sqlite
work", never a score.
"""

import csv
from typing import Any

from vm_pool.evaluation.bounds import check_size, read_only_sqlite


def match_record(pattern: dict[str, Any], item: dict[str, Any]) -> bool:
    return all(key in item and item[key] == value for key, value in pattern.items())


def check_csv(result: str | None, rules: dict[str, list[dict[str, str]]]) -> float:
    """1 when every ``expect`` pattern matches some row of the CSV file (read with its header)
    and no ``unexpect`` pattern matches any row."""
    if result is None:
        return 0.0
    expect, unexpect = rules.get("expect", []), rules.get("unexpect", [])
    found = [False] * len(expect)
    clean = True
    check_size(result)
    with open(result, encoding="utf-8") as f:
        for row in csv.DictReader(f):
            found = [hit or match_record(p, row) for hit, p in zip(found, expect, strict=True)]
            clean = clean and not any(match_record(p, row) for p in unexpect)
    return float(all(found) and clean)


def run_sqlite3(result: str | None, rules: dict[str, Any]) -> float:
    """The first column of the first row ``rules["sql"]`` gives on the database, as a number
    (None and no answer: 0)."""
    if result is None:
        return 0.0
    with read_only_sqlite(result) as db:
        row = db.execute(rules["sql"]).fetchone()
    if row is None:
        return 0.0
    return float(row[0] or 0)
