"""Run every benchmark, print a table and write ``bench-results.json`` at the repository root.

Benchmarks report, they never fail: a benchmark that raises prints its error and its keys are
left out. The exit status is non-zero only when nothing at all could be measured.
"""

import importlib
import json
import sys
import time
import traceback
from pathlib import Path

from tests.bench import BENCHMARKS, setup_django

RESULTS_PATH = Path(__file__).resolve().parents[2] / "bench-results.json"

Figure = float | int


def run_all() -> tuple[dict[str, Figure], dict[str, str]]:
    """Run each registered benchmark; return the merged figures and the goals of their keys."""
    figures: dict[str, Figure] = {}
    goals: dict[str, str] = {}
    for name in BENCHMARKS:
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


def main() -> int:
    setup_django()
    figures, goals = run_all()
    if not figures:
        print("No benchmark could be measured.", file=sys.stderr)
        return 1
    print(format_table(figures, goals))
    rounded = {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}
    RESULTS_PATH.write_text(json.dumps(rounded, indent=2) + "\n")
    print(f"\nWritten to {RESULTS_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
