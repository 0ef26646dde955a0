"""The web app's own unit tests (Vitest: the coordinate mapping, the episode state, the
reconnect rules) and its type check, run from pytest so that one test run covers both."""

import shutil
import subprocess
from pathlib import Path

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"


def npm(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("npm")
    assert binary, "npm is missing: run deploy/dev.sh install"
    assert (FRONTEND / "node_modules").is_dir(), (
        "frontend/node_modules is missing: run deploy/dev.sh install (npm ci in frontend/)"
    )
    return subprocess.run(
        [binary, *args], cwd=FRONTEND, capture_output=True, text=True, timeout=300, check=False
    )


def test_vitest_suite_passes():
    result = npm("test", "--silent")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert " passed" in output and "failed" not in output, output


def test_the_app_type_checks():
    result = npm("run", "typecheck", "--silent")
    assert result.returncode == 0, result.stdout + result.stderr
