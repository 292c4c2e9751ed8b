"""numba-cuda's own test kernels through ``@lazy_kernel`` (tests/_cudapy_corpus.py).

CPU: every kernel compiles for sm_80 and sm_90 and a second process is served every binary from the
store; under the simulator ``@lazy_kernel`` and ``@cuda.jit`` write the same bytes. GPU: both run
on the device, write the same bytes, and the host time of a launch of each is reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import _cudapy_corpus as corpus

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)


def _steps(*argvs: tuple[str, ...], **env: str) -> dict:
    """Run corpus steps in parallel child processes; their reports merged (rows by case name)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests._cudapy_corpus", *argv],
            env=_env(**env), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for argv in argvs
    ]  # fmt: skip
    merged: dict = {}
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-4000:]
        for name, row in json.loads(out.strip().splitlines()[-1]).items():
            merged.setdefault(name, {}).update(row)
    return merged


def _step(*argv: str, **env: str) -> dict:
    return _steps(argv, **env)


def test_corpus_covers_numba_cudas_test_kernels():
    """At least 120 kernels, each naming a file numba-cuda's test suite has (where the package ships it)."""
    assert len(corpus.CASES) >= 120
    assert len({c.name for c in corpus.CASES}) == len(corpus.CASES)
    import numba.cuda

    tests_dir = Path(numba.cuda.__file__).parent / "tests"
    origins = {c.origin for c in corpus.CASES}
    assert all(o.startswith("tests/cudapy/") for o in origins)
    if tests_dir.is_dir():
        missing = sorted(o for o in origins if not (tests_dir.parent / o).is_file())
        assert not missing, f"corpus origins not in numba-cuda's tests: {missing}"
    # Every kind of kernel the issue lists: float16 (intrinsics), records, enums, cooperative groups,
    # warp intrinsics, atomics, constant / local / shared memory, fastmath, complex, debug info.
    for name in (
        "intrinsics",
        "record_dtype",
        "enums",
        "cooperative_groups",
        "warp_ops",
        "atomics",
        "constmem",
        "localmem",
        "sync",
        "fastmath",
        "complex",
        "debuginfo",
        "device_func",
        "freevar",
        "array_args",
    ):
        assert f"tests/cudapy/test_{name}.py" in origins, name
    assert any(c.options.get("debug") for c in corpus.CASES) and any(c.options.get("extensions") for c in corpus.CASES)


@pytest.mark.slow
def test_corpus_compiles_for_sm80_and_sm90_and_a_new_process_is_served(tmp_path):
    per_arch = [("compile", str(tmp_path), arch) for arch in corpus.ARCHES]  # one process per arch, in parallel
    first = _steps(*per_arch)
    assert len(first) == len(corpus.CASES) + len(corpus.COMPILE_ONLY)
    failed = {
        name: row for name, row in first.items() if any(row[a] not in ("compiled", "served") for a in corpus.ARCHES)
    }
    assert not failed, failed
    second = _steps(*per_arch)
    recompiled = {name: row for name, row in second.items() if any(row[a] != "served" for a in corpus.ARCHES)}
    assert not recompiled, f"not served from the store in a new process: {recompiled}"


def test_corpus_runs_under_the_simulator_as_cuda_jit_does():
    report = _step("sim", NUMBA_ENABLE_CUDASIM="1")
    expected = [c.name for c in corpus.CASES if c.sim]
    assert sorted(report) == sorted(expected) and len(expected) >= 150
    different = {name: row for name, row in report.items() if not row["equal"]}
    assert not different, different


@pytest.mark.gpu
def test_corpus_on_the_gpu_matches_cuda_jit_and_times_launches(tmp_path, record_property):
    report = _step("gpu", "50", LAZYKERN_CACHE_DIR=str(tmp_path))
    assert len(report) == len(corpus.CASES)
    different = {name: row for name, row in report.items() if not row["equal"]}
    assert not different, different
    ratios = sorted(r["us_per_launch"]["lazy"] / r["us_per_launch"]["jit"] for r in report.values())
    median = ratios[len(ratios) // 2]
    record_property("lazy_over_jit_launch_time_median", median)
    print(
        f"\n{len(ratios)} kernels: lazy_kernel / cuda.jit host time per launch, median {median:.2f}, "
        f"range {ratios[0]:.2f}-{ratios[-1]:.2f}"
    )
