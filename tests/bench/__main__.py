"""Run every benchmark, print a table and write ``bench-results.json`` at the repository root.

Benchmarks report, they never fail: a benchmark that raises prints its error and its keys are
left out. The exit status is non-zero only when nothing at all could be measured.

``python -m tests.bench claim step`` (``make bench ONLY="claim step"``) runs only the benchmarks
named (their modules' last names) and prints their table; ``bench-results.json`` is left as it
was, the record of a whole run.
"""

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path

from tests.bench import BENCHMARKS, setup_django

RESULTS_PATH = Path(__file__).resolve().parents[2] / "bench-results.json"

Figure = float | int


def chosen(names: list[str]) -> tuple[str, ...]:
    """The registered benchmarks named by their modules' last names; all of them for none."""
    known = {name.rsplit(".", 1)[-1]: name for name in BENCHMARKS}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"no benchmark named {', '.join(unknown)}; the names: {', '.join(known)}")
    return tuple(known[name] for name in names) or BENCHMARKS


def run_all(benchmarks: tuple[str, ...] = BENCHMARKS) -> tuple[dict[str, Figure], dict[str, str]]:
    """Run each benchmark; return the merged figures and the goals of their keys."""
    figures: dict[str, Figure] = {}
    goals: dict[str, str] = {}
    for name in benchmarks:
        print(f"{name}: running", file=sys.stderr, flush=True)
        started = time.perf_counter()
        try:
            module = importlib.import_module(name)
            measured = module.run()
        except Exception:
            print(f"{name}: failed, its figures are left out", file=sys.stderr)
            traceback.print_exc()
            continue
        print(f"{name}: done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        figures.update(measured)
        goals.update(getattr(module, "GOALS", {}))
    return figures, goals


def format_table(figures: dict[str, Figure], goals: dict[str, str]) -> str:
    rows = [("key", "value", "goal")]
    for key, value in figures.items():
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        rows.append((key, shown, goals.get(key, "")))
    key_width = max(len(row[0]) for row in rows)
    value_width = max(len(row[1]) for row in rows)
    lines = [f"{k:<{key_width}}  {v:>{value_width}}  {g}".rstrip() for k, v, g in rows]
    lines.insert(1, "-" * max(len(line) for line in lines))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all of them)")
    args = parser.parse_args(argv)
    try:
        benchmarks = chosen(args.names)
    except ValueError as error:
        parser.error(str(error))
    setup_django()
    figures, goals = run_all(benchmarks)
    if not figures:
        print("No benchmark could be measured.", file=sys.stderr)
        return 1
    print(format_table(figures, goals))
    if benchmarks != BENCHMARKS:
        print(f"\n{RESULTS_PATH.name} is left as it was: it holds a whole run's figures")
        return 0
    rounded = {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}
    RESULTS_PATH.write_text(json.dumps(rounded, indent=2) + "\n")
    print(f"\nWritten to {RESULTS_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
