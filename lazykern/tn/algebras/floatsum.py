"""Sum-product in float64, and the proven upper bound on an exact count it gives.

A count of feasible configurations bounds every coefficient of a graph polynomial, so it says how
many primes the polynomial's exact reconstruction needs (:mod:`.polynomial`). Counting exactly
costs a pass of residues (:func:`lazykern.tn.solver._modular_count`: several primes, several
launches a step); here the same network runs as one float64 matrix product a step (BLAS, cuBLAS),
and the rounding is bounded instead of avoided. Every entry is a nonnegative integer (the tables
are 0/1 masks), so nothing underflows or cancels: each addition or multiplication rounds its
result by a factor within (1 - u, 1 + u) (u = 2^-53; 2u allowed here, for a library that rounds
faithfully rather than to nearest), whatever order the library sums a dot product in. A leaf's
value reaches the result through at most ``d`` such operations: in each pair step one multiplication
and fewer additions than the step's sum length (both at most its multiply-adds), in each reduction
of a label one operand alone carries fewer additions than that operand's entries (a leaf's, or a
step result's, at most that step's multiply-adds), and one addition per slice summed. So ``d`` is
at most 3 x the plan's multiply-adds + the leaves' entries + the slices (taken as 4 x, 2 x, 1 x
here), and the exact count is at most the computed one times (1 - 2u)^-d <= 1 + 4 d u (for
d u <= 1/16). A result that overflowed is ``inf`` or NaN (inf times 0): no bound then.

:class:`SizeAndCountAlgebra` carries the largest size (max-plus) beside that float count, so the
polynomial's two questions before its evaluations (its degree, its primes) take one pass: a network
of hundreds of small steps is bound by each pass's launches and bookkeeping, not its arithmetic.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from .._contract import Algebra

UNIT_ROUNDOFF = Fraction(1, 1 << 53)  # float64's unit roundoff
ROUNDINGS_MAX = 1 << 49  # d u <= 1/16 (and d * 4u <= 1/4): past this no bound is claimed


class FloatSumAlgebra(Algebra):
    """Nonnegative float64 numbers, summed and multiplied as reals: one matrix product a step."""

    strided = False

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        return (self.be.full(like[0], shape, 1.0),)

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("float sum-products keep no argmax")
        return (self.be.contiguous(self.be.xp.matmul(A[0], B[0])),), None

    def rows(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any]) -> tuple[Any, ...]:
        raise NotImplementedError("float sum-product steps take the batched product (strided = False)")

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        return (X[0] + Y[0],)


class SizeAndCountAlgebra(Algebra):
    """Two parts: the largest size (max-plus, the tropical products and their value dtype) and the
    float64 number of configurations (the real matrix product), contracted in one pass."""

    nparts = 2
    strided = False

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        return (self.be.full(like[0], shape, 0), self.be.full(like[1], shape, 1.0))

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("float sum-products keep no argmax")
        (top,), _ = Algebra.bmm(self, A[:1], B[:1], False)
        return (top, self.be.contiguous(self.be.xp.matmul(A[1], B[1]))), None

    def rows(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any]) -> tuple[Any, ...]:
        raise NotImplementedError("size-and-count steps take the batched product (strided = False)")

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.be.fmax(X[0], Y[0], False), X[1] + Y[1])


def upper_bound(computed: float, flops: int, leaf_entries: int, nslices: int) -> int | None:
    """An integer at least the exact value that a float64 sum-product of nonnegative integers computed
    as ``computed`` (``flops``: the plan's multiply-adds; ``leaf_entries``: entries of its inputs;
    ``nslices``: slices summed), or None when ``computed`` overflowed or the rounding bound does not hold.

    >>> upper_bound(1000.0, 10**6, 100, 1) >= 1000, upper_bound(math.inf, 10, 1, 1)
    (True, None)
    """
    if not math.isfinite(computed) or computed < 0:
        return None
    roundings = 4 * int(flops) + 2 * int(leaf_entries) + int(nslices) + 64
    if roundings > ROUNDINGS_MAX:
        return None
    bound = Fraction(computed) * (1 + 4 * roundings * UNIT_ROUNDOFF)
    return math.floor(bound) + 1
