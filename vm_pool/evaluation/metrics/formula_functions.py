"""The Excel functions conditional-formatting formulas use, as ``formulas`` computes them.

Each takes its evaluated arguments (a range is a list of its cells' values) and returns a value;
a call with the wrong number of arguments is outside what the evaluation computes (LimitHit).
"""

import datetime
import math
import re
from collections.abc import Callable, Sequence

from vm_pool.evaluation.metrics.formula_values import (
    DIV_ERROR,
    NUM_ERROR,
    VALUE_ERROR,
    Value,
    XlError,
    to_logical,
    to_number,
    to_scalar,
    to_text,
    unsupported,
)


def _numbers(args: Sequence[Value]) -> list[float] | XlError:
    """Numbers as Excel's MAX/SUM take them: in a range only numbers count; a single value is
    converted (text that is no number is #VALUE!). A reference bound to one cell's value is a
    single value, as ``formulas`` binds it."""
    numbers: list[float] = []
    for arg in args:
        if isinstance(arg, list):
            for value in arg:
                if isinstance(value, XlError):
                    return value
                if isinstance(value, float | int) and not isinstance(value, bool):
                    numbers.append(float(value))
            continue
        number = to_number(arg)
        if isinstance(number, XlError):
            return number
        numbers.append(number)
    return numbers


def _aggregate(reduce: Callable[[list[float]], Value], empty: Value) -> Callable[..., Value]:
    def function(args: list[Value]) -> Value:
        numbers = _numbers(args)
        if isinstance(numbers, XlError):
            return numbers
        return reduce(numbers) if numbers else empty

    return function


def _logical_all(combine: Callable[[list[bool]], bool]) -> Callable[..., Value]:
    def function(args: list[Value]) -> Value:
        flags: list[bool] = []
        for arg in args:
            for value in arg if isinstance(arg, list) else [arg]:
                if isinstance(value, XlError):
                    return value
                if value is None or isinstance(value, str):
                    continue
                flag = to_logical(value)
                if isinstance(flag, XlError):
                    return flag
                flags.append(flag)
        return combine(flags) if flags else VALUE_ERROR

    return function


def _nth(largest: bool) -> Callable[..., Value]:
    def function(args: list[Value]) -> Value:
        _arity(args, 2, 2)
        numbers = _numbers(args[:1])
        k = to_number(args[1])
        if isinstance(numbers, XlError):
            return numbers
        if isinstance(k, XlError):
            return k
        index = math.ceil(k)
        if not 1 <= index <= len(numbers):
            return NUM_ERROR
        return sorted(numbers, reverse=largest)[index - 1]

    return function


def _arity(args: Sequence[Value], low: int, high: int) -> None:
    if not low <= len(args) <= high:
        raise unsupported(f"a call with {len(args)} arguments")


def _weekday(args: list[Value]) -> Value:
    _arity(args, 1, 2)
    serial = to_number(args[0])
    kind = to_number(args[1]) if len(args) > 1 else 1.0
    if isinstance(serial, XlError):
        return serial
    if isinstance(kind, XlError):
        return kind
    first_day = {1: 7, 2: 1, 3: 1, 11: 1, 12: 2, 13: 3, 14: 4, 15: 5, 16: 6, 17: 7}.get(int(kind))
    if serial < 0 or first_day is None:
        return NUM_ERROR
    # Serial 1 (1900-01-01 in Excel's count) is a Sunday; days are Monday=1 .. Sunday=7 here.
    day = (math.floor(serial) + 5) % 7 + 1
    number = (day - first_day) % 7
    return float(number if int(kind) == 3 else number + 1)


def _date_parts(serial: Value) -> tuple[int, int, int] | XlError:
    """Year, month and day of an Excel serial date (1900 system, with its 1900-02-29)."""
    number = to_number(serial)
    if isinstance(number, XlError):
        return number
    if number < 0 or number > 2958465:
        return NUM_ERROR
    days = math.floor(number)
    if days in {0, 60}:  # Excel's 1900-01-00 and 1900-02-29, days that never were
        return (1900, 1, 0) if days == 0 else (1900, 2, 29)
    start = datetime.date(1899, 12, 31) if days < 60 else datetime.date(1899, 12, 30)
    date = start + datetime.timedelta(days=days)
    return (date.year, date.month, date.day)


def _date_part(index: int) -> Callable[..., Value]:
    def function(args: list[Value]) -> Value:
        _arity(args, 1, 1)
        parts = _date_parts(args[0])
        return parts if isinstance(parts, XlError) else float(parts[index])

    return function


def _text_function(transform: Callable[[str], Value]) -> Callable[..., Value]:
    def function(args: list[Value]) -> Value:
        _arity(args, 1, 1)
        text = to_text(args[0])
        return text if isinstance(text, XlError) else transform(text)

    return function


def _slice(from_left: bool) -> Callable[..., Value]:
    def function(args: list[Value]) -> Value:
        _arity(args, 1, 2)
        text = to_text(args[0])
        count = to_number(args[1]) if len(args) > 1 else 1.0
        if isinstance(text, XlError):
            return text
        if isinstance(count, XlError):
            return count
        if count < 0:
            return VALUE_ERROR
        length = int(count)
        return text[:length] if from_left else (text[-length:] if length else "")

    return function


def _find(case_blind: bool) -> Callable[..., Value]:
    def function(args: list[Value]) -> Value:
        _arity(args, 2, 3)
        needle, haystack = to_text(args[0]), to_text(args[1])
        start = to_number(args[2]) if len(args) > 2 else 1.0
        for value in (needle, haystack, start):
            if isinstance(value, XlError):
                return value
        if not isinstance(needle, str) or not isinstance(haystack, str):
            return VALUE_ERROR
        begin = int(start) - 1  # type: ignore[arg-type]
        if begin < 0 or begin > len(haystack):
            return VALUE_ERROR
        if case_blind:  # SEARCH; ``formulas`` reads no wildcards in it, and neither do we
            needle, haystack = needle.casefold(), haystack.casefold()
        index = haystack.find(needle, begin)
        return float(index + 1) if index >= 0 else VALUE_ERROR

    return function


# TEXT's format codes that name the day or the month of a date (English, any case)
_NAME_CODES = {"ddd": "%a", "dddd": "%A", "mmm": "%b", "mmmm": "%B"}
# words ``formulas`` reads as a date when TEXT is given them as text
_MONTH_WORDS = re.compile(
    r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec|january|february|march|april"
    r"|june|july|august|september|october|november|december)\b",
    re.IGNORECASE,
)


def _text(args: list[Value]) -> Value:
    """TEXT(value, code) for the codes that name a date's day or month ("ddd" Sat, "dddd"
    Saturday, "mmm" Mar, "mmmm" March), as ``formulas`` computes it: the real calendar from
    1899-12-31 (serial 1 is a Monday; 0 and 60, days that never were, are #VALUE!, as is a time
    that rounds to midnight), TRUE and FALSE as words, a number written as text read as one, and
    other text returned as it is. Other codes, and text ``formulas`` would read as a date (a
    digit, a month's name), are outside what the evaluation computes."""
    _arity(args, 2, 2)
    value, code = to_scalar(args[0]), to_scalar(args[1])
    pattern = _NAME_CODES.get(code.lower()) if isinstance(code, str) else None
    if pattern is None:
        raise unsupported(f"TEXT with the format {code!r}")
    if isinstance(value, XlError | bool):
        return value if isinstance(value, XlError) else ("TRUE" if value else "FALSE")
    number = to_number(value)
    if isinstance(value, str) and isinstance(number, XlError):
        if any(c.isdigit() for c in value) or _MONTH_WORDS.search(value):
            raise unsupported(f"TEXT of the text {value!r}")
        return value
    if isinstance(number, XlError) or number < 0 or number > 2958465:
        return NUM_ERROR
    if number in (0, 60):
        return VALUE_ERROR
    # formulas' time of day: seconds rounded, and a 60th second is no valid time
    minutes = ((number + 1 / 864e8) * 24 % 1) * 60
    if round((minutes - math.floor(minutes)) * 60 - 1.1e-6) == 60:
        return VALUE_ERROR
    day = datetime.date(1899, 12, 31) + datetime.timedelta(days=math.floor(number - (number > 60)))
    return day.strftime(pattern)


def _if(args: list[Value]) -> Value:
    _arity(args, 1, 3)
    condition = to_logical(args[0])
    if isinstance(condition, XlError):
        return condition
    if condition:
        return args[1] if len(args) > 1 else True
    return args[2] if len(args) > 2 else False


def _not(args: list[Value]) -> Value:
    _arity(args, 1, 1)
    flag = to_logical(args[0])
    return flag if isinstance(flag, XlError) else not flag


def _mod(args: list[Value]) -> Value:
    _arity(args, 2, 2)
    number, divisor = to_number(args[0]), to_number(args[1])
    if isinstance(number, XlError):
        return number
    if isinstance(divisor, XlError):
        return divisor
    return DIV_ERROR if divisor == 0 else number - divisor * math.floor(number / divisor)


def _one_number(compute: Callable[[float], Value]) -> Callable[..., Value]:
    def function(args: list[Value]) -> Value:
        _arity(args, 1, 1)
        number = to_number(args[0])
        return number if isinstance(number, XlError) else compute(number)

    return function


def _is(test: Callable[[Value], bool]) -> Callable[..., Value]:
    def function(args: list[Value]) -> Value:
        _arity(args, 1, 1)
        return test(to_scalar(args[0]))

    return function


def _is_number(value: Value) -> bool:
    """Numbers, and text that reads as one (``formulas`` counts "12" as a number)."""
    if isinstance(value, str):
        return not isinstance(to_number(value), XlError)
    return isinstance(value, float | int) and not isinstance(value, bool)


def _exact(args: list[Value]) -> Value:
    _arity(args, 2, 2)
    first, second = to_text(args[0]), to_text(args[1])
    if isinstance(first, XlError):
        return first
    return second if isinstance(second, XlError) else first == second


def _constant(value: bool) -> Callable[..., Value]:
    def function(args: list[Value]) -> Value:
        _arity(args, 0, 0)
        return value

    return function


FUNCTIONS: dict[str, Callable[[list[Value]], Value]] = {
    "ABS": _one_number(abs),
    "AND": _logical_all(all),
    "AVERAGE": _aggregate(lambda numbers: sum(numbers) / len(numbers), DIV_ERROR),
    "DAY": _date_part(2),
    "EXACT": _exact,
    "FALSE": _constant(False),
    "FIND": _find(case_blind=False),
    "IF": _if,
    "INT": _one_number(lambda number: float(math.floor(number))),
    "ISBLANK": _is(lambda value: value is None),
    "ISERROR": _is(lambda value: isinstance(value, XlError)),
    "ISNUMBER": _is(_is_number),
    "ISTEXT": _is(lambda value: isinstance(value, str)),
    "LARGE": _nth(largest=True),
    "LEFT": _slice(from_left=True),
    "LEN": _text_function(lambda text: float(len(text))),
    "LOWER": _text_function(str.lower),
    "MAX": _aggregate(max, 0.0),
    "MIN": _aggregate(min, 0.0),
    "MOD": _mod,
    "MONTH": _date_part(1),
    "NOT": _not,
    "OR": _logical_all(any),
    "RIGHT": _slice(from_left=False),
    "SEARCH": _find(case_blind=True),
    "SMALL": _nth(largest=False),
    "SUM": _aggregate(sum, 0.0),
    "TEXT": _text,
    "TRIM": _text_function(lambda text: text.strip(" ")),
    "TRUE": _constant(True),
    "UPPER": _text_function(str.upper),
    "WEEKDAY": _weekday,
    "YEAR": _date_part(0),
}
