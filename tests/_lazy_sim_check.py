"""Run under NUMBA_ENABLE_CUDASIM=1 by tests/test_decorator.py; prints one JSON report."""

from __future__ import annotations

import json

import numpy as np
from numba import cuda

from lazykern import KernelFamily
from lazykern.errors import LaunchError
from tests._lazy_kernels import add2d, mixed, saxpy, shifted


def _neg_twin(a, n):
    i = cuda.grid(1)
    if i < n:
        a[i] = -a[i]


def main() -> None:
    out: dict = {}
    x = np.arange(100, dtype=np.float32)
    y = np.ones(100, np.float32)
    o = np.zeros(100, np.float32)
    saxpy[4, 32](np.float32(2), x, y, o)
    out["saxpy_host"] = bool(np.allclose(o, 2 * x + 1))
    do = cuda.device_array(100, np.float32)
    saxpy[4, 32](np.float32(2), cuda.to_device(x), cuda.to_device(y), do)
    saxpy[4, 32](np.float32(3), cuda.to_device(x), cuda.to_device(y), do)  # same signature again
    out["saxpy_device"] = bool(np.allclose(do.copy_to_host(), 3 * x + 1))
    xd = x.astype(np.float64)
    od = np.zeros(100, np.float64)
    saxpy[4, 32](2.0, xd, xd, od)  # new dtypes: a new signature
    out["saxpy_f64"] = bool(np.allclose(od, 3 * xd))
    out["saxpy_signatures"] = saxpy.signatures
    out["saxpy_stats"] = saxpy.stats()

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.ones((3, 4), np.float32)
    o2 = np.zeros((3, 4), np.float32)
    add2d[(1, 1), (4, 4)](a, b, o2)
    out["add2d"] = bool(np.allclose(o2, a + 2))

    o3 = np.zeros(100, np.float32)
    shifted[4, 32](x, o3)
    out["shifted"] = bool(np.allclose(o3, x + 0.5))

    o4 = np.arange(10, dtype=np.float64)
    mixed[1, 32](np.int32(8), np.float32(2), True, 1, o4)
    expect = np.arange(10, dtype=np.float64)
    expect[:8] = expect[:8] * 2 + 1
    o5 = np.arange(10, dtype=np.float64)
    mixed[1, 32](np.int64(10), 0.5, np.bool_(False), np.int16(0), o5)
    out["mixed"] = bool(np.allclose(o4, expect)) and bool(np.allclose(o5, -np.arange(10) * 0.5))
    out["mixed_signatures"] = mixed.signatures

    family = KernelFamily("mine")
    family.add("neg", 'extern "C" __global__ void neg(float *a, int n) { a[threadIdx.x] = -a[threadIdx.x]; }',
               signature=["ptr", "int32"], twin=_neg_twin)  # fmt: skip
    errors = {}
    for name, call in {
        "twin_count": lambda: family["neg"][1, 32](x),  # the user launched "neg", never `_neg_twin`
        "count": lambda: saxpy[1, 32](1.0, x),
        "type": lambda: saxpy[1, 32]("a", x, y, o),
        "config": lambda: saxpy(1.0, x, y, o),
        "grid": lambda: saxpy[0, 32](1.0, x, y, o),
    }.items():
        try:
            call()
            errors[name] = None
        except LaunchError as exc:
            errors[name] = str(exc)
    out["errors"] = errors
    print("JSON:" + json.dumps(out))


if __name__ == "__main__":
    main()
