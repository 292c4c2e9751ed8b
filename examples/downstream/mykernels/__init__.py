"""A downstream package: one @lazy_kernel, one KernelFamily fragment with a Numba twin, a tropical call."""

from __future__ import annotations

import numpy as np
from numba import cuda

from lazykern import KernelFamily, lazy_kernel, tropical


@lazy_kernel
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def _clamp_twin(a, lo, hi, n):
    """The Numba-Python twin of the C++ fragment below: same parameters, arrays for pointers."""
    i = cuda.grid(1)
    if i < n:
        a[i] = min(max(a[i], lo), hi)


family = KernelFamily("mykernels", "#define CLAMP(x, lo, hi) fminf(fmaxf((x), (lo)), (hi))\n")
family.add(
    "clamp",
    'extern "C" __global__ void clamp(float *a, float lo, float hi, int n) {'
    " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = CLAMP(a[i], lo, hi); }",
    signature=["ptr", "float32", "float32", "int32"],
    twin=_clamp_twin,
)


def clamp(a, lo: float, hi: float) -> None:
    """Clamp the device array ``a`` (float32) in place."""
    n = a.size
    family["clamp"][(n + 127) // 128, 128](a, np.float32(lo), np.float32(hi), np.int32(n))


def shortest_paths(dist: np.ndarray) -> np.ndarray:
    """All-pairs shortest paths by repeated min-plus squaring (a tropical product per step)."""
    d = np.array(dist, dtype=np.float64)
    steps = 1
    while steps < d.shape[0]:
        d = tropical.matmul(d, d, semiring="minplus")
        steps *= 2
    return d
