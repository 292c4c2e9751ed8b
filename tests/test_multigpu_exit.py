"""Processes that used two GPUs exit cleanly (issue 45): each test runs its work in a child process
and asserts the child's exit code and that nothing of a crash was printed.

The cause was a CUlibrary with two owners: numba-cuda hands its one cached ObjectCode of a kernel to
every device's ``create_module_image``, so a ``@cuda.jit`` kernel run on two GPUs gave two contexts'
modules one library, and each context's deallocation queue unloaded it (SIGSEGV, or glibc's "double
free", inside ``weakref._exitfunc`` -> ``module_unload`` once both queues flushed). lazykern now gives
each context its own copy (``lazykern._numba.internals.one_owner_per_library``) and, at exit, leaves
a library still shared from before to one module (``detach_shared_unloads``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CRASH_MARKS = ("double free", "corrupted size", "Fatal Python error", "Segmentation fault", "free(): invalid")

pytestmark = pytest.mark.gpu


def _need_two_gpus() -> None:
    from numba import cuda

    found = len(cuda.gpus) if cuda.is_available() else 0
    if found < 2:
        pytest.skip(f"needs 2 GPUs, found {found}")


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, **extra)


def _assert_clean(proc: subprocess.CompletedProcess[str]) -> None:
    tail = (proc.stdout[-3000:], proc.stderr[-3000:])
    assert proc.returncode == 0, tail
    assert not [m for m in CRASH_MARKS if m in proc.stderr], tail


@pytest.mark.parametrize("case", ["lazykern_first", "numba_first"])
def test_a_numba_kernel_on_two_gpus_is_unloaded_once_per_library(case):
    """NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=0 makes every queued unload run at once, so a library
    unloaded twice shows on every run. lazykern_first: the kernel's second device gets its own
    library (none shared); numba_first: shared before lazykern ran, unloaded once at exit."""
    _need_two_gpus()
    script = ROOT / "benchmarks" / "shared_library_probe.py"
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", str(script), "--child", case],
        capture_output=True,
        text=True,
        env=_env(NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT="0"),
        timeout=300,
    )
    _assert_clean(proc)
    child = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    if case == "lazykern_first":
        assert child["shared"] == 0, child
    assert all(child["libraries"][d] for d in ("0", "1")), child


def test_the_whole_multigpu_selection_exits_clean_in_one_process():
    """The multi-GPU tests in one pytest process, as a user or CI runs them (issue 45: 0 of 5 clean)."""
    _need_two_gpus()
    files = ["tests/test_multigpu_devices.py", "tests/test_multigpu.py"]
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", *files],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=900,
    )
    _assert_clean(proc)
    assert " passed" in proc.stdout and " failed" not in proc.stdout, proc.stdout[-3000:]
