"""Proven bounds on every |count| before a count's passes run: from the operands alone
(:func:`count_bound`), or tighter from one pass of float64 counts whose rounding is bounded
(:func:`float_counts`, :func:`proven`, :func:`plan_roundings`): these set how many primes rebuild the counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _crt
from .._backend import Backend
from ..algebras import floatsum
from ..einsum import plan_steps
from .arrays import max_abs, min_value, to_dtype, to_host

INTERVAL_ENTRIES_MAX = 1 << 20  # past this, a float64 pass reads its largest count alone (not each count's interval)


def count_bound(
    be: Backend, counts: Sequence[Any], labels: Sequence[Sequence[Any]], output: Sequence[Any], sizes: dict[Any, int]
) -> int:
    """An upper bound on every |count| of the result: each is a sum over the assignments of the
    summed labels of a product of one count per operand (``counts``: the operands' counts that
    are not all 1)."""
    bound = math.prod(sizes[lab] for lab in {x for t in labels for x in t} - set(output))
    for c in counts:
        bound *= int(max_abs(be, c))
    return bound


def proven(
    be: Backend, operands: Sequence[Any], values: Any, counts: Any, roundings: int, same: bool
) -> _crt.Known | None:
    """What a float64 pass (``values``, ``counts``: its results, ``roundings``: :func:`plan_roundings` of its
    plan) of ``operands`` (their counts' magnitudes, :func:`float_counts`) proves about the exact counts:
    every |count| at most the top of its interval (:func:`..algebras.floatsum.interval`), and, where every
    operand's counts are nonnegative and the pass ran the prime passes' plan (``same``), each count's own
    interval (read for up to INTERVAL_ENTRIES_MAX entries; past that, the largest count's alone)."""
    whole = same and math.prod(int(n) for n in counts.shape) <= INTERVAL_ENTRIES_MAX
    computed = to_host(be, counts) if whole else np.asarray(float(max_abs(be, counts)))
    found = floatsum.interval(computed, roundings)
    if found is None:
        return None
    lower, span = found
    top = int(max(lower.ravel().tolist(), default=0)) + span
    signed = any(min_value(be, op[1]) < 0 for op in operands if isinstance(op, tuple))
    known = whole and not signed
    return _crt.Known(top, (lower if lower.ndim else lower[()]) if known else None, span, values, counts)


def plan_roundings(inputs: Sequence[Sequence[Any]], output: Sequence[Any], sizes: dict[Any, int], plan: Any) -> int:
    """:func:`..algebras.floatsum.path_roundings` of ``plan`` priced on this network's own labels and sizes (as
    :func:`~lazykern.tn.einsum.plan_flops`: a plan's own figures may be another network's): each step's sum
    length is its multiply-adds per result entry, the product of the labels it sums out; a plan of no steps
    sums the labels that are not in ``output`` at once."""
    steps = plan_steps(inputs, output, sizes, plan.path, dict(plan.sliced))
    sums = [-(-int(s.flops) // max(int(s.result), 1)) for s in steps]
    if not steps:
        sums = [math.prod(sizes[x] for x in {x for t in inputs for x in t} - set(output))]
    operands = [len(s.operands) for s in steps] or [len(inputs)]
    return floatsum.path_roundings(sums, operands, len(inputs), plan.nslices)


def float_counts(be: Backend, operands: Sequence[Any], magnitudes: bool = True) -> list[tuple[Any, Any]]:
    """``operands`` with float64 counts, 1 where an operand gives none; ``magnitudes``: each count's |count|.

    With magnitudes, their contraction (the same values, so the same optimal terms) sums products of these
    magnitudes, at least each exact |count| (the triangle inequality), in nonnegative float64 arithmetic
    whose rounding :func:`..algebras.floatsum.upper_bound` bounds: a proven upper bound on every |count| from
    one pass. Without, it is the float route's one pass (every operand's counts in one dtype: a product of
    int64 and float64 counts is taken in neither)."""
    out: list[tuple[Any, Any]] = []
    for op in operands:
        if isinstance(op, tuple):
            values, counts = op
            counts = to_dtype(be, counts, "float64")  # cast first: abs(-2^63) wraps in int64
            out.append((values, be.xp.abs(counts) if magnitudes else counts))
        else:
            out.append((op, be.full(op, tuple(op.shape), 1.0, be.xp.float64)))
    return out
