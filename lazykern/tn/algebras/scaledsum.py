"""The partition function with exact offsets: Z = sum over configurations of exp(c t), t an integer.

:mod:`.logsum` holds log Z's partial sums as floats: where sizes are large and cancel (a vertex of
weight -2^40 beside one of 2^40), its intermediates are near 2^40 and float64 keeps them to 1e-4, so
log Z = 0.31 came out as 0.3132 (a silent wrong answer). Here an entry is a pair (s, l) standing for
exp(c s + l): ``s`` the entry's best t, an exact integer (the max-plus contraction of t, float64 below
2^53), and ``l`` the log of the entry's weight relative to it, log sum exp(c (t - s)), between 0 and the
log of the number of configurations. Products add both parts; a sum keeps the larger s and rescales the
other l by exp(c (s' - s)), a whole number of units times c. No float ever holds a large t, so log Z =
c s + l comes out to float64's precision of the answer itself.

A step C = A (x) B: s_C is the max-plus product of the s (exact), and with a_i = max_k s_A[i, k] and
b_j = max_k s_B[k, j],
    l_C = log sum_k exp(l_A + c (s_A - a_i)) exp(l_B + c (s_B - b_j)) + c (a_i + b_j - s_C),
one real matrix product of scaled weights (as :mod:`.logsum`: each factor's row or column maximum taken
out, so nothing overflows). Where that sum underflows (the best k pairs entries far below their rows'
and columns' best) the entries are redone by a streaming log-sum-exp with their own s_C taken out,
exact at any scale.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._backend import Backend
from .._contract import Algebra
from . import _scaledsum_kernels
from .logsum import TINY, Ops, stream


class ScaledSumAlgebra(Algebra):
    """(s, l) pairs of float64 arrays: exp(scale * s + l), s an exact integer or -inf (weight 0)."""

    nparts = 2
    strided = False
    scale: float = 1.0  # c >= 0: the weight of one unit of t

    @classmethod
    def prepare(cls, be: Backend, parts: tuple[Any, ...], position: int) -> tuple[Any, ...]:
        if len(parts) != 2 or any(be.dtype(p) != np.float64 for p in parts):
            raise ValueError(f"scaled-sum operand {position}: two float64 arrays (best t, log of the weight)")
        return parts

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        zero = self.be.full(like[0], shape, 0.0)
        return (zero, zero)

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("the partition function keeps no argmax")
        ops, c = Ops(self.be), self.scale
        (sa, la), (sb, lb) = A, B
        (s,), _ = Algebra("maxplus", self.be).bmm((sa,), (sb,), False)  # exact: integers below 2^53
        if not self.be.on_host and self.be.xp is not np:
            return self._device(ops, A, B, self.be.contiguous(s)), None
        with np.errstate(divide="ignore", invalid="ignore", under="ignore", over="ignore"):
            a, b = ops.finite_max(sa, 2), ops.finite_max(sb, 1)  # (batch, M, 1), (batch, 1, N)
            x = ops.where(ops.isfinite(sa), la + c * (sa - a), -math.inf)
            y = ops.where(ops.isfinite(sb), lb + c * (sb - b), -math.inf)
            xa, yb = ops.finite_max(x, 2), ops.finite_max(y, 1)
            total = ops.matmul(ops.exp(x - xa), ops.exp(y - yb))
            found = ops.isfinite(s)
            small = (total < TINY) & found
            shift = ops.where(found, c * (a + b - s), 0.0)
            logw = xa + yb + ops.log(ops.where(small, 1.0, total)) + shift
            if bool(ops.any(small)):
                logw = ops.where(small, self.streamed(ops, A, B, s), logw)
            logw = ops.where(found, logw, -math.inf)
        return (ops.contiguous(s), ops.contiguous(logw)), None

    def _device(self, ops: Ops, A: tuple[Any, ...], B: tuple[Any, ...], s: Any) -> tuple[Any, Any]:
        """The step on a GPU, given the max-plus product ``s`` of the best t: each operand's rows scaled by
        one kernel, cuBLAS's product, each output's log weight by another (:mod:`._scaledsum_kernels`);
        entries whose scaled sum may have underflowed redone by :meth:`streamed`."""
        be, c = self.be, self.scale
        (EA, a, xa), call = _scaledsum_kernels.side_arguments(be, A[0], A[1], False, c)
        _scaledsum_kernels.launch(EA, call)
        (EB, b, yb), call = _scaledsum_kernels.side_arguments(be, B[0], B[1], True, c)
        _scaledsum_kernels.launch(EB, call)
        total = be.contiguous(ops.matmul(EA, EB))
        (logw, flag), call = _scaledsum_kernels.finish_arguments(be, s, total, a, xa, b, yb, c, TINY)
        _scaledsum_kernels.launch(logw, call)
        if int(be.item(flag, (0,))):
            small = (total < TINY) & ops.isfinite(s)
            logw = ops.contiguous(ops.where(small, self.streamed(ops, A, B, s), logw))
        return s, logw

    def streamed(self, ops: Ops, A: tuple[Any, ...], B: tuple[Any, ...], s: Any) -> Any:
        """log sum_k exp(l_A + l_B + c (s_A + s_B - s_C)) by chunks of k: every exponent a whole number of
        units below the entry's own best, so nothing cancels."""
        (sa, la), (sb, lb), c = A, B, self.scale
        shape = (max(int(sa.shape[0]), int(sb.shape[0])), int(sa.shape[1]), int(sa.shape[2]), int(sb.shape[2]))
        target = ops.where(ops.isfinite(s), s, 0.0)[:, :, None, :]

        def terms(k0: int, k1: int) -> Any:
            t = sa[:, :, k0:k1, None] + sb[:, None, k0:k1, :]
            logs = la[:, :, k0:k1, None] + lb[:, None, k0:k1, :]
            return ops.where(ops.isfinite(t), logs + c * (t - target), -math.inf)

        return stream(ops, sa, shape, terms)

    def rows(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any]) -> tuple[Any, ...]:
        raise NotImplementedError("scaled-sum steps take the batched product (strided = False)")

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        ops, c = Ops(self.be), self.scale
        s = ops.maximum(X[0], Y[0])
        with np.errstate(invalid="ignore"):
            lx = ops.where(ops.isfinite(X[0]), X[1] + c * (X[0] - s), -math.inf)
            ly = ops.where(ops.isfinite(Y[0]), Y[1] + c * (Y[0] - s), -math.inf)
        return (s, self.be.xp.logaddexp(lx, ly))


_algebras: dict[float, type[ScaledSumAlgebra]] = {}


def algebra(scale: float) -> type[ScaledSumAlgebra]:
    """The scaled sum with weight exp(``scale``) per unit of t (``scale`` >= 0, finite)."""
    scale = float(scale)
    if not (math.isfinite(scale) and scale >= 0):
        raise ValueError(f"scaled-sum algebra: a finite scale >= 0, got {scale}")
    found = _algebras.get(scale)
    if found is None:
        found = _algebras[scale] = type(f"ScaledSum{scale!r}", (ScaledSumAlgebra,), {"scale": scale})
    return found
