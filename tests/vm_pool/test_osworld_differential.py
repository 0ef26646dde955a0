"""Tandem's OSWorld metrics give OSWorld's own verdicts (the vendored reference in
tests/osworld_reference) on generated inputs in the option combinations published tasks use.

The rule and the figure are in ``tests.support.osworld_differential``; the weighted agreement
and the per-metric table are printed at the end of the run. Deliberate differences are listed
in vm_pool/evaluation/DIFFERENCES.md, each pinned here by its own test.
"""

import socket
from pathlib import Path
from typing import Any

import pytest
from pptx import Presentation
from pptx.enum.text import MSO_UNDERLINE
from pptx.util import Inches, Pt

from tests.osworld_reference import offline_suffix_list, reference_metrics
from tests.support import osworld_differential as differential
from tests.support.osworld_differential.core import MAKERS
from vm_pool.evaluation.metrics import METRICS


class _Summary:
    """Prints the figure and the table in pytest's terminal summary."""

    def __init__(self, text: str) -> None:
        self.text = text

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.section("OSWorld metric agreement")
        terminalreporter.write_line(self.text)


@pytest.fixture(scope="module")
def agreement(request: pytest.FixtureRequest) -> list[differential.MetricAgreement]:
    results = differential.measure_all()
    request.config.pluginmanager.register(_Summary(differential.table(results)))
    return results


def test_tandem_agrees_with_osworld_on_generated_inputs(
    agreement: list[differential.MetricAgreement],
) -> None:
    figure = differential.weighted_agreement(agreement)
    disagreements = [
        outcome.describe()
        for result in agreement
        for outcome in result.counted
        if not outcome.agrees
    ]
    assert figure >= differential.GOAL, (
        f"weighted agreement {figure:.4f} < {differential.GOAL}:\n" + "\n".join(disagreements)
    )


def test_every_metric_both_sides_have_is_compared_or_says_why_not() -> None:
    uncovered = [
        name
        for name in differential.compared_metrics()
        if name not in MAKERS and name not in differential.NOT_COMPARABLE
    ]
    assert not uncovered, f"no case maker and no reason for: {uncovered}"


def test_the_lists_name_only_metrics_both_sides_have() -> None:
    shared = set(differential.compared_metrics())
    listed = set(differential.NOT_COMPARABLE) | set(differential.TOLERANCE)
    listed |= {difference.metric for difference in differential.DIFFERENCES.values()}
    assert listed <= shared, listed - shared
    assert set(MAKERS).isdisjoint(differential.NOT_COMPARABLE)


def test_reference_splits_hosts_from_the_bundled_suffix_list_without_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OSWorld's compare_urls (tldextract) gives its verdicts here with every connection
    refused: the extractor reads the public-suffix snapshot tldextract ships, and nothing else."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("no network in tests")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    offline_suffix_list()  # a fresh extractor: its list is loaded below, with no network
    compare_urls = reference_metrics()["compare_urls"]
    assert compare_urls("https://www.airbnb.com/", "https://airbnb.com.sg")  # one suffix
    assert compare_urls("https://bbc.co.uk/news", "https://www.bbc.com/news")
    assert not compare_urls("https://scholar.google.com/", "https://www.google.com/")
    assert not compare_urls("http://intranet.corp.internal", "http://corp.internal")
    assert attempts == []


def test_cases_are_the_same_on_every_run(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = differential.cases_for("check_direct_json_object", tmp_path / "a")
    second = differential.cases_for("check_direct_json_object", tmp_path / "b")
    assert first == second


def test_a_reference_crash_agrees_only_with_a_failing_verdict() -> None:
    case = differential.Case("crash", ("{not json", {"expected": {"a": 1}}))
    assert differential.Outcome("check_direct_json_object", case, 0.0, "raises X").agrees
    assert not differential.Outcome("check_direct_json_object", case, 1.0, "raises X").agrees
    assert not differential.Outcome("check_direct_json_object", case, 0.0, 1.0).agrees


# each deliberate difference -> (Tandem's verdict, OSWorld's) on the case that shows it
PINNED = {
    "font size not written": (1.0, "raises KeyError"),
    "gimprc blank line": (1.0, "raises IndexError"),
    "a11y text without exact": (1.0, "raises KeyError"),
    "pptx theme background not examined": (1.0, "raises AttributeError"),
    "epub chapters in a sub-folder": (1.0, "raises FileNotFoundError"),
    "green background wide": (1.0, "raises IndexError"),
    "green background palette": (1.0, "raises IndexError"),
}


def test_every_deliberate_difference_is_pinned() -> None:
    assert set(PINNED) == set(differential.DIFFERENCES)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_deliberate_difference_gives_both_verdicts(name: str, tmp_path: Path) -> None:
    difference = differential.DIFFERENCES[name]
    cases = differential.cases_for(difference.metric, tmp_path)
    [case] = [case for case in cases if case.difference == name]
    outcome = differential.measure_case(difference.metric, case)
    assert (outcome.tandem, outcome.osworld) == PINNED[name]


def _deck(path: Path, underline: Any) -> str:
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    run = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1))
    run = run.text_frame.paragraphs[0].add_run()
    run.text = "Quarterly results"
    run.font.size = Pt(18)
    run.font.underline = underline
    deck.save(str(path))
    return str(path)


@pytest.mark.parametrize(
    ("underline", "expected"),
    [(MSO_UNDERLINE.WORDS, 1.0), (True, 0.0), (MSO_UNDERLINE.DOUBLE_LINE, 1.0)],
)
def test_pptx_underline_against_none_is_osworld_verdict(
    tmp_path: Path, underline: Any, expected: float
) -> None:
    """OSWorld fails an underline against none only when one side is ``True`` itself (an
    identity test): python-pptx's WORDS equals True but is not it, so it passes, as any other
    kind does. Tandem gives the same verdicts, so this is not a difference."""
    result = _deck(tmp_path / "result.pptx", underline)
    gold = _deck(tmp_path / "gold.pptx", None)
    osworld = reference_metrics()["compare_pptx_files"](result, gold)
    assert METRICS["compare_pptx_files"](result, gold) == osworld == expected
