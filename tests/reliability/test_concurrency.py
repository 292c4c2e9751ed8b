"""8 processes x 4 threads warm one family into one empty cache directory at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from lazykern import KernelCache

from ._families import make_family

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_warm_worker.py")
ROOT = os.path.dirname(os.path.dirname(HERE))

FAMILIES = [
    pytest.param("synthetic", marks=pytest.mark.slow),
    # the real target; skipped until lazykern/tropical exists, and slow on a CPU machine (31 NVRTC compiles)
    pytest.param("tropical", marks=pytest.mark.slow),
]


def _warm_concurrently(directory, kind: str, processes: int, threads: int) -> list[dict]:
    go = directory.parent / f"go-{kind}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, WORKER, str(directory), kind, str(threads), str(go)]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(processes)
    ]
    time.sleep(1.0)  # let every worker import and block on the start signal
    go.write_text("go")
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, f"worker failed:\n{err}"
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


@pytest.mark.parametrize("kind", FAMILIES)
def test_processes_and_threads_warm_one_family(tmp_path, kind, record_property):
    if kind == "tropical":
        tropical = pytest.importorskip("lazykern.tropical")
        if not hasattr(tropical, "family"):
            pytest.skip("lazykern.tropical.family does not exist yet")
    names = make_family(kind, KernelCache(tmp_path / "probe", enabled=False)).names()
    directory = tmp_path / "cache"
    results = _warm_concurrently(directory, kind, processes=8, threads=4)

    for name in names:
        digests = {d for r in results for d in r["digests"][name]}
        assert len(digests) == 1, f"{name}: processes got different bytes {digests}"
    per_process = [r["compiles"] for r in results]
    assert all(n <= 1 for c in per_process for n in c.values()), f"a key compiled twice in one process: {per_process}"
    total = sum(sum(c.values()) for c in per_process)
    record_property("compiles_total", total)
    record_property("keys", len(names))
    print(f"\n{kind}: {len(names)} keys, {total} compiles over 8 processes x 4 threads")
    assert len(names) <= total <= len(names) + 2, f"{total} compiles for {len(names)} keys"

    fresh = KernelCache(directory)
    assert fresh.check()["ok"]
    assert {e["kernel"] for e in fresh.entries()} == set(names)
