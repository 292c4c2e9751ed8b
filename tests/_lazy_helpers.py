"""Device functions and kernels for tests/test_decorator.py: the "device function in another module" case."""

from __future__ import annotations

from numba import cuda

OFFSET = 0.5


@cuda.jit(device=True)
def shift(v):
    return v + OFFSET
