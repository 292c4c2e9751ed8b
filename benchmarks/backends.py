"""Stand-in backends for :func:`lazykern.multigpu.bmm_multi`: checks and benchmarks, not product."""

from __future__ import annotations

import math

from numba import cuda


def numba_maxplus_backend():
    """A plain Numba max-plus bmm backend for :func:`lazykern.multigpu.bmm_multi`: slow but
    compute-bound and independent of the tropical kernels, so the pipeline and its scaling can be
    checked alone."""

    @cuda.jit
    def maxplus_bmm(a, b, c):
        j, i, z = cuda.grid(3)
        if z < c.shape[0] and i < c.shape[1] and j < c.shape[2]:
            acc = -math.inf
            for k in range(a.shape[2]):
                acc = max(acc, a[z, i, k] + b[z, k, j])
            c[z, i, j] = acc

    def backend(a, b, *, semiring, stream, out):
        if semiring != "maxplus":
            raise ValueError(f"the Numba check backend does max-plus only, got {semiring!r}")
        batch, m, n = out.shape
        maxplus_bmm[((n + 15) // 16, (m + 15) // 16, batch), (16, 16, 1), stream](a, b, out)
        return out

    return backend
