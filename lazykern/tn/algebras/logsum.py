"""Sum-product in log space: the partition function Z = sum over configurations of exp(beta * size).

An entry is log w (``-inf`` for a weight 0); the sum is ``logaddexp``, the product ``+``. A step
C = log sum_k exp(A_ik + B_kj) runs as one real matrix product of scaled weights: with a_i = max_k A_ik
and b_j = max_k B_kj, exp(A - a) and exp(B - b) lie in [0, 1] with a 1 in every row and column, so
C = a + b + log(exp(A - a) @ exp(B - b)) neither overflows nor loses precision (a sum of nonnegative
terms). It can underflow only where every k pairs a small A with a small B (a sum below 1e-280,
beta times a size gap of more than ~640); those steps are redone entry by entry as a streaming
log-sum-exp, exact at any beta.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._contract import Algebra

TINY = 1e-280  # a scaled sum below this may have underflowed: that step is redone without scaling
CHUNK_ELEMENTS = 1 << 22


class LogSumAlgebra(Algebra):
    """log-weights (float64), summed by logaddexp, multiplied by addition."""

    strided = False

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        return (self.be.full(like[0], shape, 0.0),)

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("the partition function keeps no argmax")
        ops = Ops(self.be)
        a, b = A[0], B[0]
        ra, rb = ops.finite_max(a, 2), ops.finite_max(b, 1)  # (b, M, 1), (b, 1, N)
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            s = ops.matmul(ops.exp(a - ra), ops.exp(b - rb))
            small = s < TINY
            if bool(ops.any(small)) and self.underflowed(ops, a, b, small):
                return (self.streamed(ops, a, b),), None
            return (ops.contiguous(ra + rb + ops.log(s)),), None

    def underflowed(self, ops: Ops, a: Any, b: Any, small: Any) -> bool:
        """Whether a small scaled sum stands for a weight above 0 (its max-plus product is finite): a sum
        of weights that are all 0 (forbidden entries) is 0 exactly, and log 0 = -inf is its answer."""
        (m,), _ = Algebra("maxplus", self.be).bmm((a,), (b,), False)
        return bool(ops.any(small & ops.isfinite(m)))

    def streamed(self, ops: Ops, a: Any, b: Any) -> Any:
        """log sum_k exp(a_ik + b_kj) by chunks of k, each chunk's maximum taken out first."""
        batch = max(int(a.shape[0]), int(b.shape[0]))
        shape = (batch, int(a.shape[1]), int(a.shape[2]), int(b.shape[2]))
        return stream(ops, a, shape, lambda k0, k1: a[:, :, k0:k1, None] + b[:, None, k0:k1, :])

    def rows(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any]) -> tuple[Any, ...]:
        raise NotImplementedError("log-space steps take the batched product (strided = False)")

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.be.xp.logaddexp(X[0], Y[0]),)


def stream(ops: Ops, like: Any, shape: tuple[int, int, int, int], terms: Callable[[int, int], Any]) -> Any:
    """log sum_k exp(terms) over k for (batch, M, K, N) = ``shape``, ``terms(k0, k1)`` the exponents of
    k0 <= k < k1 as (batch, M, k1 - k0, N): by chunks of k, each chunk's maximum taken out first, so
    nothing overflows or underflows that need not."""
    batch, M, K, N = shape
    step = max(1, min(K, CHUNK_ELEMENTS // max(batch * M * N, 1)))
    m = ops.be.full(like, (batch, M, N), -math.inf)
    s = ops.be.full(like, (batch, M, N), 0.0)
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        for k0 in range(0, K, step):
            p = terms(k0, min(K, k0 + step))
            top = ops.maximum(m, ops.amax(p, 2))
            safe = ops.where(top == -math.inf, 0.0, top)
            s = s * ops.exp(m - safe) + ops.sum(ops.exp(p - safe[:, :, None, :]), 2)
            m = top
        return ops.where(m == -math.inf, -math.inf, m + ops.log(s))


class Ops:
    """The array operations of the log-space product, for NumPy, CuPy and torch."""

    def __init__(self, be: Any) -> None:
        self.be = be
        self.xp = be.xp
        self.torch = be.name == "torch"

    def finite_max(self, x: Any, axis: int) -> Any:
        """The maximum along ``axis`` (kept), 0 where it is -inf (an all-zero-weight row scales by 1)."""
        top = self.xp.amax(x, dim=axis, keepdim=True) if self.torch else x.max(axis=axis, keepdims=True)
        return self.where(top == -math.inf, 0.0, top)

    def amax(self, x: Any, axis: int) -> Any:
        return self.xp.amax(x, dim=axis) if self.torch else x.max(axis=axis)

    def sum(self, x: Any, axis: int) -> Any:
        return self.xp.sum(x, dim=axis) if self.torch else x.sum(axis=axis)

    def maximum(self, a: Any, b: Any) -> Any:
        return self.xp.maximum(a, b)

    def matmul(self, a: Any, b: Any) -> Any:
        return self.xp.matmul(a, b)

    def exp(self, x: Any) -> Any:
        return self.xp.exp(x)

    def log(self, x: Any) -> Any:
        return self.xp.log(x)

    def isfinite(self, x: Any) -> Any:
        return self.xp.isfinite(x)

    def any(self, x: Any) -> Any:
        return self.xp.any(x)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        if self.torch:
            like = a if hasattr(a, "dtype") else b
            a, b = (x if hasattr(x, "dtype") else self.xp.full_like(like, x) for x in (a, b))
        return self.xp.where(cond, a, b)

    def contiguous(self, x: Any) -> Any:
        return self.be.contiguous(x)
