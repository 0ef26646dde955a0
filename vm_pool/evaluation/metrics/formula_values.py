"""Excel's values as a formula computes with them: numbers, text, booleans, blanks, errors.

Conversions and operators follow Excel as the ``formulas`` package has them (OSWorld computes
conditional formats with it): text that reads as a number is one in arithmetic, text is never a
boolean, a blank is 0 or "" or FALSE beside a number, text or boolean, errors propagate, and
comparisons order numbers before text before booleans, text without case.
"""

import math
from dataclasses import dataclass
from typing import Any, TypeAlias

from vm_pool.evaluation.bounds import LimitHit

COMPARISONS = {"=", "<>", "<", "<=", ">", ">="}


@dataclass(frozen=True)
class XlError:
    """An Excel error value; truthy, and never ordered against another value."""

    code: str


Scalar: TypeAlias = float | str | bool | XlError | None
Value: TypeAlias = Scalar | list[Any]  # a range is the list of its cells' values

VALUE_ERROR = XlError("#VALUE!")
DIV_ERROR = XlError("#DIV/0!")
NUM_ERROR = XlError("#NUM!")


def unsupported(detail: str) -> LimitHit:
    return LimitHit("formula", f"{detail}: outside what the evaluation computes")


def to_scalar(value: Value) -> Scalar:
    if isinstance(value, list):
        raise unsupported("an array where one value is expected")
    return value


def to_number(value: Value) -> float | XlError:
    value = to_scalar(value)
    if isinstance(value, XlError):
        return value
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if value is None:
        return 0.0
    if isinstance(value, str):
        try:
            parsed = float(value.strip())
        except ValueError:
            return VALUE_ERROR
        return parsed if math.isfinite(parsed) else VALUE_ERROR
    return float(value)


def to_text(value: Value) -> str | XlError:
    value = to_scalar(value)
    if isinstance(value, XlError | str):
        return value
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if value is None:
        return ""
    return f"{value:.0f}" if value.is_integer() else f"{value:.15g}".upper()


def to_logical(value: Value) -> bool | XlError:
    value = to_scalar(value)
    if isinstance(value, XlError | bool):
        return value
    if isinstance(value, str):
        return VALUE_ERROR
    return bool(value)


def truthy(value: Value) -> bool:
    """Whether a formula's result switches a conditional format on: errors do (as in OSWorld)."""
    value = to_scalar(value)
    return True if isinstance(value, XlError) else bool(value)


def _rank(value: Value) -> int:
    return 2 if isinstance(value, bool) else 1 if isinstance(value, str) else 0


def _blank_like(other: Value) -> Value:
    return False if isinstance(other, bool) else "" if isinstance(other, str) else 0.0


def compare(op: str, left: Value, right: Value) -> Value:
    left, right = to_scalar(left), to_scalar(right)
    for side in (left, right):
        if isinstance(side, XlError):
            return side
    if left is None:
        left = _blank_like(right)
    if right is None:
        right = _blank_like(left)
    key_left: Any = (_rank(left), left.casefold() if isinstance(left, str) else left)
    key_right: Any = (_rank(right), right.casefold() if isinstance(right, str) else right)
    order = (key_left > key_right) - (key_left < key_right)
    tests = {"=": order == 0, "<>": order != 0, "<": order < 0, "<=": order <= 0}
    return tests.get(op, order > 0 if op == ">" else order >= 0)


def binary(op: str, left: Value, right: Value) -> Value:
    if op in COMPARISONS:
        return compare(op, left, right)
    if op == "&":
        first, second = to_text(left), to_text(right)
        if isinstance(first, XlError):
            return first
        return second if isinstance(second, XlError) else first + second
    a, b = to_number(left), to_number(right)
    if isinstance(a, XlError):
        return a
    if isinstance(b, XlError):
        return b
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return DIV_ERROR if b == 0 else a / b
    if a == 0 and b < 0:
        return DIV_ERROR
    if (a == 0 and b == 0) or (a < 0 and b != int(b)):
        return NUM_ERROR
    try:
        return float(a**b)
    except OverflowError:
        return NUM_ERROR
