"""Launching on a machine without a GPU driver (and without the simulator): one line saying so and the
two ways forward, not the driver loader's long traceback."""

from __future__ import annotations

import ctypes
import textwrap

import pytest

from lazykern import LaunchError
from lazykern.launch._device import NO_DRIVER, no_driver
from tests._cli_run import env_for, run


def _has_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


needs_no_driver = pytest.mark.skipif(_has_driver(), reason="this machine has a GPU driver: launches work")

SCRIPTS = {
    "KernelFamily": """\
        import numpy as np
        from lazykern import KernelFamily
        fam = KernelFamily("mine")
        fam.add("neg", 'extern "C" __global__ void neg(float *a, int n) { if (threadIdx.x < n) a[threadIdx.x] *= -1; }',
                signature=["ptr", "int32"])
        fam["neg"][1, 32](np.zeros(4, np.float32), np.int32(4))
        """,
    "lazy_kernel": """\
        import numpy as np
        from numba import cuda
        from lazykern import lazy_kernel
        @lazy_kernel
        def saxpy(a, x, y, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a * x[i] + y[i]
        x = np.ones(8, np.float32)
        saxpy[1, 32](np.float32(2), x, x, np.empty_like(x))
        """,
    "lazykern.launch.arrays": """\
        import numpy as np
        import lazykern.launch.arrays
        lazykern.launch.arrays.empty((4,), np.float32)
        """,
}


@needs_no_driver
@pytest.mark.parametrize("what", sorted(SCRIPTS))
def test_a_launch_without_a_driver_says_so_in_one_line(tmp_path, what):
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(SCRIPTS[what]))
    done = run([str(script)], env_for(tmp_path / "cache", NUMBA_ENABLE_CUDASIM="0"))
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"lazykern.errors.LaunchError: {NO_DRIVER}", done.stderr
    assert "NUMBA_ENABLE_CUDASIM=1" in last and "lazykern warm" in last
    frames = [ln for ln in done.stderr.splitlines() if ln.startswith('  File "')]
    assert all(str(script) in f or "/lazykern/" in f for f in frames), done.stderr  # not the driver loader's
    assert "DynamicLibNotFoundError" not in done.stderr and "During handling" not in done.stderr


def test_only_a_missing_driver_library_becomes_that_error():
    from cuda.pathfinder import DynamicLibNotFoundError

    assert isinstance(no_driver(DynamicLibNotFoundError("cuda")), LaunchError)
    assert isinstance(no_driver(OSError("libcuda.so.1: cannot open shared object file")), LaunchError)
    assert no_driver(RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS")) is None
    assert no_driver(OSError("disk full")) is None
