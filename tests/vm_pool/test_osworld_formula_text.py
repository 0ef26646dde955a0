"""TEXT in a conditional format's formula (a calendar's weekends as ``TEXT(A2,"ddd")="Sat"``)
gives what OSWorld's ``formulas`` package gives, for the day- and month-name codes Tandem
computes; other codes and date-like text are refused (LimitHit), never guessed."""

import warnings

import pytest

from vm_pool.evaluation.bounds import LimitHit
from vm_pool.evaluation.metrics.formula import parse
from vm_pool.evaluation.metrics.formula_values import XlError

with warnings.catch_warnings():  # formulas' dependencies warn on import
    warnings.simplefilter("ignore")
    import formulas

SERIALS = [1, 2, 31, 59, 59.5, 60, 60.5, 61, 366, 0.25, 0, -1, 2958465, 2958466,
           45000, 45000.7, 45000.999999, 45351, 45352, 45353, "45000", " 45000 ", "12.",
           True, False, "Date", "Plan", "", "Octopus"]  # fmt: skip
CODES = ["ddd", "dddd", "mmm", "mmmm", "DDD", "Dddd"]


def _formulas_text(value: object, code: str) -> object:
    compiled = formulas.Parser().ast(f'=TEXT(A2,"{code}")')[1].compile()
    result = compiled(value)
    return str(result) if not isinstance(result, str) else result


@pytest.mark.parametrize("code", CODES)
def test_text_names_days_and_months_as_formulas_does(code: str) -> None:
    tandem = parse(f'TEXT(A2,"{code}")').evaluator("A2", {})
    for value in SERIALS:
        result = tandem(value)  # type: ignore[arg-type]
        shown = result.code if isinstance(result, XlError) else result
        assert shown == _formulas_text(value, code), (value, code)


def test_weekend_rule_with_text_selects_saturday_and_sunday() -> None:
    weekend = parse('OR(TEXT(A2,"ddd")="Sat",TEXT(A2,"ddd")="Sun")').evaluator("A2", {})
    # 2024-03-01 (serial 45352) is a Friday
    assert [weekend(45352.0 + day) for day in range(4)] == [False, True, True, False]


@pytest.mark.parametrize(
    ("formula", "value"),
    [('TEXT(A2,"yyyy-mm-dd")', 45000.0), ('TEXT(A2,"0.00")', 1.5), ('TEXT(A2,"ddd")', "March"),
     ('TEXT(A2,"ddd")', "2024-03-01")],
)  # fmt: skip
def test_text_outside_the_computed_codes_is_refused(formula: str, value: object) -> None:
    with pytest.raises(LimitHit):
        parse(formula).evaluator("A2", {})(value)  # type: ignore[arg-type]
