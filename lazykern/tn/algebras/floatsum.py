"""Sum-product in float64, and the proven upper bound on an exact count it gives.

A count of feasible configurations bounds every coefficient of a graph polynomial, so it says how
many primes the polynomial's exact reconstruction needs (:mod:`.polynomial`). Counting exactly
costs a pass of residues (:func:`lazykern.tn.solving.graph_poly._modular_count`: several primes, several
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
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

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


def path_roundings(sums: Sequence[int], operands: Sequence[int], leaves: int, nslices: int) -> int:
    """How many roundings can reach one result entry of a float64 sum-product of nonnegative numbers,
    compounded (their relative errors multiply), for a plan whose steps sum ``sums`` terms an entry
    (multiply-adds per result entry: the summed labels' sizes) over ``operands`` operands each.

    A step's entry is a sum of at most K nonnegative products: each product rounds once and reaches the
    sum through fewer than K additions, whatever order (tiles, parts, a tree) the kernel adds them in, so
    each term carries at most K roundings of its own, besides its operands' entries' errors; a sum of
    nonnegative terms whose ratios to their exact values all lie in [a, b] has its ratio in [a, b] too.
    The errors of a step's operands compound with its own: over the plan, every step's K once and each
    leaf's conversion once (one more a step per operand past two, for a step taken pairwise), and one
    addition per slice summed, plus a margin."""
    steps = sum(int(k) + max(int(n) - 1, 1) for k, n in zip(sums, operands, strict=True))
    return steps + int(leaves) + int(nslices) + 64


def interval(computed: Any, roundings: int) -> tuple[Any, int] | None:
    """Where each exact value lies, from ``computed`` (a host float64 array of nonnegative sum-products of
    integers, ``roundings`` of :func:`path_roundings` compounded on each entry): (lower, span), every exact
    value in [lower, lower + span] (``lower``: Python ints, an object array of ``computed``'s shape), or
    None where an entry overflowed or the rounding bound does not hold.

    Each rounding multiplies by a factor within [1 - 2u, 1 + 2u] (u = 2^-53; 2u for a library that rounds
    faithfully), so computed / exact lies in [(1 - 2u)^d, (1 + 2u)^d] and, for d u <= 1/16, the exact value
    in [computed (1 - 2 d u), computed (1 + 4 d u)] (Bernoulli's inequality). Every float64 sum-product of
    integers is itself an integer (the floats past 2^53 all are), and so is the exact value: its interval
    is [c - floor(2 c d u), c + floor(4 c d u)] for c = computed. A computed value below 2^53 is exact: each
    term it sums is a product of nonzero counts (each at least 1) and rounding is monotone, so no number
    that reached it, leaf or partial sum, passed 2^53 (exactly or as computed), where every integer is a
    float64 and nothing rounds.

    >>> lower, span = interval(np.array([3.0, 2.0**60]), 1000)  # 3 exact; 2^60 within 2^-41 of it
    >>> list(lower), span
    ([3, 1152921504606590976], 768000)
    """
    d = int(roundings)
    if d > ROUNDINGS_MAX:
        return None
    flat = np.asarray(computed, dtype=np.float64).ravel()
    if flat.size and not (np.isfinite(flat).all() and flat.min() >= 0 and (flat == np.floor(flat)).all()):
        return None
    c = np.array([int(v) for v in flat.tolist()], dtype=object)
    rounded = flat >= 2.0**53  # below it, exact
    below = np.where(rounded, (c * (2 * d)) >> 53, 0)  # floor(2 c d u)
    above = np.where(rounded, (c * (4 * d)) >> 53, 0)  # floor(4 c d u)
    span = int(max((below + above).tolist(), default=0))
    return (c - below).reshape(np.shape(computed)), span
