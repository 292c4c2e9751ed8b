"""The type checker passes on lazykern/ (mypy, configured in pyproject.toml's [tool.mypy]): the modules
listed there as strict pass with mypy's strict checks, and `mypy --strict` on the whole package finds no
more errors than STRICT_CEILING (lower it as modules become strict; it never goes up)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


STRICT_CEILING = 71  # mypy --strict lazykern on this tree (241 before the folders and typing)


def _mypy(tmp_path_factory, *args: str) -> subprocess.CompletedProcess[str]:
    import mypy  # noqa: F401  (mypy is in the test extra; a missing type checker fails the test)

    cache = tmp_path_factory.getbasetemp() / "mypy-cache"  # per run: no stale results, no repo litter
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args, "lazykern"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_mypy_passes_on_the_package(tmp_path_factory):
    proc = _mypy(tmp_path_factory)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout


@pytest.mark.slow
def test_strict_errors_stay_under_the_ceiling(tmp_path_factory):
    proc = _mypy(tmp_path_factory, "--strict")
    found = re.search(r"Found (\d+) errors? in", proc.stdout)
    count = int(found.group(1)) if found else 0
    assert found or "Success: no issues found" in proc.stdout, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert count <= STRICT_CEILING, (
        f"mypy --strict: {count} errors, more than the ceiling {STRICT_CEILING}: type the new code\n"
        + proc.stdout[-4000:]
    )
