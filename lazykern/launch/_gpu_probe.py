"""How many CUDA GPUs this machine has, asked of the driver in a child process.

The pytest plugin decides whether to turn Numba's simulator on before anything
imports ``numba.cuda`` (which reads ``NUMBA_ENABLE_CUDASIM`` once, at import),
so this module imports neither Numba nor cuda-python. The driver is asked in a
child process because ``cuInit`` in the test process would make CUDA unusable
in any process it later forks.
``LAZYKERN_FAKE_GPUS=<n>`` replaces the answer (the plugin's own tests use it).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

FAKE_ENV = "LAZYKERN_FAKE_GPUS"

_PROBE = """
import ctypes
for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
    try:
        lib = ctypes.CDLL(name)
        break
    except OSError:
        pass
else:
    raise SystemExit(print(0))
n = ctypes.c_int(0)
ok = lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(n)) == 0
print(n.value if ok else 0)
"""


def gpu_count() -> int:
    """CUDA devices the driver reports (honours CUDA_VISIBLE_DEVICES); 0 without a driver."""
    fake = os.environ.get(FAKE_ENV, "").strip()
    if fake:
        try:
            return max(int(fake), 0)
        except ValueError:
            raise ValueError(f"{FAKE_ENV} must be a number of GPUs, got {fake!r}") from None
    return _driver_count()


@functools.cache
def _driver_count() -> int:
    try:
        done = subprocess.run([sys.executable, "-S", "-c", _PROBE], capture_output=True, text=True, timeout=60)
        return int(done.stdout.strip() or 0)
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0  # a driver that hangs or crashes is no usable GPU
