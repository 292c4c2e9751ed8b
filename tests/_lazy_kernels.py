"""Kernels shared by the simulator subprocess, the GPU tests and the fresh-process checks."""

from __future__ import annotations

from numba import cuda

from lazykern.jit.decorator import lazy_kernel
from tests import _lazy_helpers


@lazy_kernel
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@lazy_kernel
def add2d(a, b, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = a[i, j] + 2 * b[i, j]


@lazy_kernel(fastmath=True)
def shifted(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _lazy_helpers.shift(x[i])


@lazy_kernel
def mixed(n, scale, flag, offset, out):
    i = cuda.grid(1)
    if i < n:
        v = out[i] * scale + offset
        out[i] = v if flag else -v
