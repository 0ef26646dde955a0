"""Thunderbird's metrics, as OSWorld scores them: its settings (``prefs.js``), its message
filters (``msgFilterRules.dat``) and its mail folders (mbox files).

Value rules (``{"method": ..., "ref": ...}``) are OSWorld's (``metrics.rules``); a filter
matches a pattern when it has every key of the pattern with that value (``records``).
"""

import json
import re
from typing import Any

from vm_pool.evaluation.bounds import check_size
from vm_pool.evaluation.metrics.records import match_record
from vm_pool.evaluation.metrics.rules import match_value_to_rule

# One setting of prefs.js: user_pref("mail.identity.id1.auto_quote", false);
_PREF = re.compile(r'^user_pref\("(?P<key>(?:[^"]|\\")+)\", (?P<val>.+)\);$')
# One condition of a filter: AND (subject,contains,discount), or ALL.
_CONDITION = re.compile(
    r"\b(?:AND|OR) \((?:[\w ]+),(?:[\w " + "'" + r']+),(?:"(?:(?:[^"]|\")+)"|(?:[^)]+))\)|\bALL\b'
)
# What each line of a filter starts with, and the filter's key for its quoted value.
_FILTER_KEYS = {
    "enabled=": "enabled",
    "type=": "type",
    "action=": "action",
    "actionValue=": "actionValue",
}
_DELETED = re.compile(r"X-Mozilla-Status: 000[89]")


def _text(path: str) -> str:
    check_size(path)
    with open(path, encoding="utf-8") as f:
        return f.read()


def _lines(path: str) -> list[str]:
    """The file's lines as Python reads a text file, each with its newline."""
    check_size(path)
    with open(path, encoding="utf-8") as f:
        return f.readlines()


def check_thunderbird_prefs(result: str | None, rule: dict[str, dict[str, Any]]) -> float:
    """1 when every ``expect`` setting is in prefs.js and matches its value rule, and no
    ``unexpect`` setting present matches its rule. A setting's value is read as JSON (prefs.js
    writes strings, numbers and booleans so); a key in both lists is checked as expected."""
    if result is None:
        return 0.0
    expect, unexpect = rule.get("expect", {}), rule.get("unexpect", {})
    found = {key: False for key in expect}
    clean = True
    for line in _lines(result):
        pref = _PREF.match(line.strip())
        if pref is None:
            continue
        key, value = pref.group("key"), json.loads(pref.group("val"))
        if key in expect:
            found[key] = match_value_to_rule(value, expect[key])
        elif key in unexpect:
            clean = clean and not match_value_to_rule(value, unexpect[key])
    return float(all(found.values()) and clean)


def _unquoted(line: str, key: str) -> str:
    """A filter line's value: ``key="value"`` without its quotes (and the line's end), with
    ``\\"`` and ``\\\\`` unescaped."""
    return line[len(key) + 1 : -2].replace('\\"', '"').replace("\\\\", "\\")


def _filters(path: str) -> list[dict[str, Any]] | None:
    """The filters of msgFilterRules.dat, each once its ``condition`` line is read (a line after
    it still adds to that filter); None when a filter's line comes before any ``name``."""
    filters: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in _lines(path):
        if line.startswith("name="):
            current = {"name": _unquoted(line, "name=")}
            continue
        starts = next((s for s in (*_FILTER_KEYS, "condition=") if line.startswith(s)), None)
        if starts is None:
            continue
        if current is None:  # OSWorld fails on such a file: it scores 0
            return None
        if starts == "condition=":
            current["condition"] = _CONDITION.findall(_unquoted(line, starts))
            filters.append(current)
        else:
            current[_FILTER_KEYS[starts]] = _unquoted(line, starts)
    return filters


def check_thunderbird_filter(result: str | None, rules: dict[str, list[dict[str, Any]]]) -> float:
    """1 when every ``expect`` pattern matches some filter and no ``unexpect`` pattern matches
    any. A filter is ``{name, enabled, type, action, actionValue, condition}``, its condition a
    list such as ``["AND (subject,contains,discount)"]`` or ``["ALL"]``."""
    if result is None:
        return 0.0
    filters = _filters(result)
    if filters is None:
        return 0.0
    expect, unexpect = rules.get("expect", []), rules.get("unexpect", [])
    found = [any(match_record(pattern, f) for f in filters) for pattern in expect]
    clean = not any(match_record(pattern, f) for f in filters for pattern in unexpect)
    return float(all(found) and clean)


def _folder(path: str, options: dict[str, Any]) -> str:
    """OSWorld's reading of a mail folder: the file split on ``FROM - ``, each message without
    its status (``ignore_status``) or keys (``ignore_keys``), deleted ones dropped
    (``remove_deleted``, default on), duplicates dropped (``remove_duplicate``, default on),
    sorted and joined.

    OSWorld skips every piece that is not blank (``if mail.strip(): continue``), and
    Thunderbird starts each message with ``From - ``, which the case-sensitive split never
    meets: so what is compared is only how many blank pieces there are (none for any folder
    Thunderbird writes). Kept as OSWorld scores it.
    """
    messages = []
    for mail in _text(path).strip().split("FROM - "):
        if mail.strip():
            continue
        if options.get("remove_deleted", True) and _DELETED.search(mail):
            continue
        messages.append("FROM - " + _normalized(mail, options))
    if options.get("remove_duplicate", True):
        messages = list(set(messages))
    return "\n".join(sorted(messages))


def _normalized(mail: str, options: dict[str, Any]) -> str:
    if options.get("ignore_status", False):
        mail = re.sub(r"X-Mozilla-Status\d?:[\s\d]+", "", mail)
    if options.get("ignore_keys", False):
        mail = re.sub(r"(X-Mozilla-Keys:[^\n]*?)\n(MIME-Version)", r"\2", mail)
    return mail.strip()


def check_thunderbird_folder(result: Any, reference: Any, **options: Any) -> float:
    """1 when each result folder (a path, or a list of them with a list of references) reads
    as its reference folder (see ``_folder``); a missing result scores 0."""
    if not isinstance(reference, list):
        result, reference = [result], [reference]
    for found, gold in zip(result, reference, strict=False):
        if found is None:
            return 0.0
        if _folder(found, options) != _folder(gold, options):
            return 0.0
    return 1.0
