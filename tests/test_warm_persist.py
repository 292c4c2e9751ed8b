"""``lazykern warm`` says where the binaries went and exits 1 when they could not be persisted.

Run as a user types it (a subprocess, stderr not a terminal), for each way the store can fail
to keep what warm compiles: the cache turned off, a size limit too small, a directory that
cannot be a store.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARM = ["-m", "lazykern", "warm", "--family", "tests.liveness._family:family", "--arch", "sm_90"]


def _warm(cache_dir: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=ROOT, LAZYKERN_CACHE_DIR=cache_dir, LIVENESS_KERNELS="2", COLUMNS="200")
    env.update(extra)
    return subprocess.run(
        [sys.executable, *WARM, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_stored_warm_names_the_directory(tmp_path):
    done = _warm(str(tmp_path), "-j", "1")
    assert done.returncode == 0, done.stderr
    assert str(tmp_path) in done.stdout and "not stored" not in done.stdout


@pytest.mark.parametrize(
    ("case", "jobs", "extra", "says"),
    [
        ("cache off, in workers", "2", {"LAZYKERN_CACHE": "0"}, "went nowhere"),
        ("cache off, in process", "1", {"LAZYKERN_CACHE": "0"}, "went nowhere"),
        ("size limit 0", "1", {"LAZYKERN_CACHE_SIZE": "0"}, "were not stored in"),
        ("directory is a file", "1", {}, "went nowhere"),
    ],
)
def test_warm_that_persists_nothing_says_so_and_exits_1(tmp_path, case, jobs, extra, says):
    directory = str(tmp_path)
    if case == "directory is a file":
        (tmp_path / "file").write_text("")
        directory = str(tmp_path / "file" / "cache")
    done = _warm(directory, "-j", jobs, **extra)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "not stored" in done.stdout  # the table's "binaries in" column
    assert says in done.stderr and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    if case == "size limit 0":
        assert "LAZYKERN_CACHE_SIZE" in errors[0]
    else:
        assert "LAZYKERN_CACHE_DIR" in errors[0]
