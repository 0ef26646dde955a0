"""``make bench ONLY=…`` runs the benchmarks it names, and a name that is none is refused."""

import subprocess

import pytest

from tests.bench import BENCHMARKS
from tests.bench.__main__ import RESULTS_PATH, chosen, main
from tests.support.services import BIN, child_env


def _results() -> bytes | None:
    return RESULTS_PATH.read_bytes() if RESULTS_PATH.exists() else None


def test_benchmarks_are_named_by_their_modules_last_names():
    assert chosen(["step", "claim"]) == ("tests.bench.step", "tests.bench.claim")
    assert chosen([]) == BENCHMARKS


def test_a_name_that_is_no_benchmark_is_refused_before_anything_runs(capsys):
    before = _results()

    with pytest.raises(SystemExit) as stopped:
        main(["claim", "clam"])

    assert stopped.value.code == 2
    assert "no benchmark named clam; the names: claim, desktops" in capsys.readouterr().err
    assert _results() == before


def test_a_partial_run_prints_its_table_and_leaves_the_whole_runs_figures():
    before = _results()

    # A process of its own: the benchmarks point Django at their own database as they start.
    done = subprocess.run(
        [str(BIN / "python"), "-m", "tests.bench", "prompt"],
        cwd=RESULTS_PATH.parent,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert "prompt_build_ms" in done.stdout and "≤ 30" in done.stdout
    assert "bench-results.json is left as it was" in done.stdout
    assert _results() == before
