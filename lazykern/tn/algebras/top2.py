"""Top-two numbers: the best integer size of a set and the counts of it and of one below it.

An entry is (v, c0, c1): the polynomial sum_s count(s) x^s of its configurations cut to its two
highest powers, c0 x^v + c1 x^(v - 1) (GenericTensorNetworks' ``TruncatedPoly`` of order 2). Where every
size is an integer (in the problem's units) the cut commutes with sums and products of polynomials:
a sum keeps the larger v, the counts of equal powers added; a product has v = va + vb, c0 = ca0 cb0,
c1 = ca0 cb1 + ca1 cb0. So a network's result is its whole polynomial's top two coefficients.

That answers ``CountingMax(2)`` wherever a size one below the best occurs (c1 > 0): the two best
distinct sizes are then v and v - 1. Where c1 = 0 the second best lies lower and the k-best algebra
(:mod:`.kbest`) answers instead. Its product does fewer operations than the k-best one and moves three
arrays an entry, not four: on a GPU a large step is the tropical GEMM's max-plus product of the values
(each output's v), then one kernel that adds the counts of the terms reaching v or v - 1
(:mod:`._top2_kernels`); a 2^35 multiply-add step of a 3-regular 200-vertex graph's CountingMax(2) took 27
ms so against the k-best kernel's 36 (session 78). Other steps take one pass of one thread per output.

Counts are floats (``floats`` 4 or 8 bytes), exact below :data:`.kbest.FLOAT_EXACT` for the reason the
k-best float counts are (every operation on nonnegative integers is monotone, rounding too). Parts:
values, counts of v, counts of v - 1.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._backend import Backend
from .._contract import Algebra
from . import _top2_kernels, kbest

CHUNK_ELEMENTS = 1 << 22  # a host step's terms materialized at once


class Top2Algebra(Algebra):
    """The best value and the float counts of it and of one below (parts: values, c0, c1)."""

    plan_rank = "kbest"  # its steps bind on instructions as the k-best kernels' do (its order theirs)
    nparts = 3
    floats = 4
    strided = False

    @classmethod
    def prepare(cls, be: Backend, parts: tuple[Any, ...], position: int) -> tuple[Any, ...]:
        """A plain operand (values, counts) as top-two parts, nothing one below; an operand of all three
        parts (a step computed on the host) as it is."""
        if len(parts) == 3:
            return tuple(parts)
        if len(parts) != 2:
            raise ValueError(f"top-two operand {position} must be 2 arrays: values and counts")
        values, counts = parts
        if be.dtype(counts) != np.dtype(f"f{cls.floats}"):
            raise TypeError(f"top-two operand {position}: counts must be float{8 * cls.floats}, not {be.dtype(counts)}")
        return values, counts, kbest.constant(be, counts, tuple(int(n) for n in counts.shape), 0)

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        return self.be.full(like[0], shape, 0.0), self.be.full(like[1], shape, 1), self.be.full(like[1], shape, 0)

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("top-two contractions keep no argmax; a configuration comes from the tropical algebra")
        if not self.be.on_host and self.be.xp is not np:
            if not _top2_kernels.tile(A, B):  # one pass finds the best values as it counts
                return _top2_kernels.launch(self.be, A, B), None
            a, b = A[0], B[0]
            if int(a.shape[0]) != int(b.shape[0]):  # the tropical GEMM shares a 2-D operand with every batch
                a, b = (x[0] if int(x.shape[0]) == 1 else x for x in (a, b))
            (T,), _ = Algebra("maxplus", self.be).bmm((a,), (b,), False)
            return _top2_kernels.launch(self.be, A, B, self.be.contiguous(T)), None
        batch = (max(int(A[0].shape[0]), int(B[0].shape[0])),)  # the reference product takes equal batches
        a, b = (np.broadcast_to(x, batch + x.shape[1:]) for x in (A[0], B[0]))
        (T,), _ = Algebra("maxplus", self.be).bmm((a,), (b,), False)
        return _host_bmm(A, B, T), None

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        """Two slices' results: the larger value, the counts of equal powers added (on a device by the
        merge kernel, :func:`._top2_kernels.add`)."""
        on_device = _top2_kernels.add(self.be, (X[0], X[1], X[2]), (Y[0], Y[1], Y[2]))
        if on_device is not None:
            return on_device
        xp = self.be.xp
        T = xp.maximum(X[0], Y[0])
        c0 = _at(xp, X[0] == T, X[1]) + _at(xp, Y[0] == T, Y[1])
        c1 = (_at(xp, X[0] == T, X[2]) + _at(xp, X[0] == T - 1, X[1]) + _at(xp, Y[0] == T, Y[2])
              + _at(xp, Y[0] == T - 1, Y[1]))  # fmt: skip
        return T, c0, c1


def _at(xp: Any, where: Any, counts: Any) -> Any:
    """``counts`` where ``where`` holds, else 0."""
    return xp.where(where, counts, xp.zeros_like(counts))


def _host_bmm(A: tuple[Any, ...], B: tuple[Any, ...], T: np.ndarray) -> tuple[np.ndarray, ...]:
    """The counts of a NumPy step, given its best values ``T``: the terms in chunks of rows."""
    av, a0, a1 = A
    bv, b0, b1 = B
    batch, M, N = T.shape
    K = int(av.shape[2])
    c0 = np.zeros((batch, M, N), dtype=a0.dtype)
    c1 = np.zeros_like(c0)
    rows = max(1, min(M, CHUNK_ELEMENTS // max(batch * K * N, 1)))
    for m0 in range(0, M, rows):
        m1 = min(M, m0 + rows)
        with np.errstate(invalid="ignore"):  # -inf - -inf: NaN, equal to nothing
            d = (T[:, m0:m1, None, :] - av[:, m0:m1, :, None]) - bv[:, None, :, :]  # (batch, rows, K, N)
        p0 = a0[:, m0:m1, :, None] * b0[:, None, :, :]
        p1 = a0[:, m0:m1, :, None] * b1[:, None, :, :] + a1[:, m0:m1, :, None] * b0[:, None, :, :]
        c0[:, m0:m1] = np.where(d == 0, p0, 0).sum(axis=2)
        c1[:, m0:m1] = (np.where(d == 0, p1, 0) + np.where(d == 1, p0, 0)).sum(axis=2)
    return T, c0, c1


def host_product(
    operands: list[tuple[np.ndarray, ...]], at: list[tuple[Any, ...]], union: list[Any], kept: tuple[Any, ...]
) -> tuple[np.ndarray, ...]:
    """One step of several operands over the union of their labels on the host (:mod:`.._host_steps`):
    values added, c0 the product of the c0s, c1 the sum over operands of its c1 times the others' c0;
    then over the labels not kept the best value and the counts of the terms at it and one below."""
    from .._eliminate import alignment

    values, firsts, seconds = [], [], []
    for parts, labs in zip(operands, at):  # one axis order a operand, its three parts alike
        order, shape = alignment(np.shape(parts[0]), labs, union)
        v, c, d = (np.transpose(x, order).reshape(shape) for x in parts)
        values.append(v)
        firsts.append(c)
        seconds.append(d)
    if len(operands) == 2:  # nearly every step: a pair
        s = values[0] + values[1]
        c0 = firsts[0] * firsts[1]
        c1 = seconds[0] * firsts[1] + firsts[0] * seconds[1]
    else:
        s, c0, c1 = values[0], firsts[0], None
        for v, c in zip(values[1:], firsts[1:]):
            s, c0 = s + v, c0 * c
        for i, second in enumerate(seconds):
            term = second
            for j, c in enumerate(firsts):
                term = term * c if j != i else term
            c1 = term if c1 is None else c1 + term
    assert c1 is not None
    full = s.shape if s.shape == c0.shape == c1.shape else np.broadcast_shapes(s.shape, c0.shape, c1.shape)
    summed = tuple(i for i, x in enumerate(union) if x not in kept)
    if not summed:
        return tuple(np.array(np.broadcast_to(x, full), order="C") for x in (s, c0, c1))  # a 0-d result stays 0-d
    s = s if s.shape == full else np.broadcast_to(s, full)
    best = s.max(axis=summed, keepdims=True)
    top = np.where(best == -np.inf, np.nan, best)  # no term is at an infeasible best (nor one below it)
    at0 = s == top
    first = np.where(at0, c0, 0).sum(axis=summed)
    second = (np.where(at0, c1, 0) + np.where(s == top - 1, c0, 0)).sum(axis=summed)
    out = ((np.squeeze(best, axis=summed), s.dtype), (first, c0.dtype), (second, c0.dtype))
    return tuple(np.asarray(x, dtype=d, order="C") for x, d in out)  # no copy where it is one; 0-d stays 0-d


_algebras: dict[int, type[Top2Algebra]] = {}


def algebra(floats: int = 4) -> type[Top2Algebra]:
    """The top-two algebra with float counts of ``floats`` bytes (4 or 8)."""
    if floats not in kbest.FLOAT_EXACT or isinstance(floats, bool):
        raise ValueError(f"top-two counts take floats=4 or 8, got {floats!r}")
    found = _algebras.get(floats)
    if found is None:
        found = _algebras[floats] = type(f"Top2Floats{floats}", (Top2Algebra,), {"floats": int(floats)})
    return found


def answer(values: float, first: float, second: float, floats: int) -> list[tuple[float, int]] | None:
    """CountingMax(2)'s (size, count) pairs from a top-two result, best first; None where it does not
    answer: a size one below the best does not occur (c1 = 0: the second best lies lower), or a count
    reached the floats' exact line (:data:`.kbest.FLOAT_EXACT`)."""
    if not math.isfinite(values):
        return []
    exact = kbest.FLOAT_EXACT[floats]
    if second <= 0 or first >= exact or second >= exact:
        return None
    return [(values, int(first)), (values - 1, int(second))]
