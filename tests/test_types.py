"""The type checker passes on lazykern/ (mypy, configured in pyproject.toml's [tool.mypy])."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mypy_passes_on_the_package(tmp_path_factory):
    import mypy  # noqa: F401  (mypy is in the test extra; a missing type checker fails the test)

    cache = tmp_path_factory.getbasetemp() / "mypy-cache"  # per run: no stale results, no repo litter
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "lazykern"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Success: no issues found" in proc.stdout
