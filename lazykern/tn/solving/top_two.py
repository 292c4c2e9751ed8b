"""``CountingMax(2)`` / ``CountingMin(2)`` by the top-two algebra (:mod:`..algebras.top2`), where sizes move
in steps of one unit: the best size, its count and the count one step below, which are the two best
sizes whenever that one occurs.

A problem qualifies when every table's feasible sizes are a run without holes on one grid (step ``g``,
the greatest common divisor of every table's differences): independent sets, cuts, dominating sets,
±J spin glasses (steps of 2) and any problem of unit weights. Its sizes then move by g between
neighbouring configurations, and one step below the best nearly always occurs; where it does not (a
star's maximal independent sets: 1 and n - 1), the k-best passes answer after this one. A table with a
hole (weights 2 and 3: sizes 0, 2, 3) sends the problem to the k-best passes at once. The pass's values
are each table's sizes in steps above its least, so the sizes it compares are consecutive integers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _tables
from ..algebras import floatsum, kbest, top2
from ..einsum import plan_flops
from .context import Context
from .values import as_size, label_sizes, to_host

ROUTE = True  # CountingMax(2) of qualifying problems tries this first (False: the k-best passes alone)


def grid(tab: _tables.Tables) -> tuple[int, list[int]] | None:
    """(g, each table's least feasible size) where every table's feasible sizes are lo, lo + g, ..., hi with
    none missing, g the same for all; None otherwise (or for non-integer sizes, all sizes equal, or more
    steps in all than float64 holds exactly)."""
    found = _grid(tab)
    return None if found is None else found[:2]


def _grid(tab: _tables.Tables) -> tuple[int, list[int], int] | None:
    """:func:`grid`, and the steps of all tables' spans added (the largest sum of the pass's values)."""
    if not tab.integer:
        return None
    runs = []
    g = 0
    for m, s in zip(tab.mask, tab.size):
        found = sorted({int(x) for x in np.asarray(s)[np.asarray(m, dtype=bool)].tolist()})
        if not found:
            return None
        runs.append(found)
        for a, b in zip(found, found[1:]):
            g = math.gcd(g, b - a)
    if g == 0:
        return None
    for found in runs:
        if len(found) != (found[-1] - found[0]) // g + 1:  # a hole in the run
            return None
    steps = sum((found[-1] - found[0]) // g for found in runs)
    if steps >= kbest.FLOAT_EXACT[8]:
        return None
    return g, [found[0] for found in runs], steps


def steps_dtype(steps: int) -> np.dtype:
    """The dtype of a pass's values counted in steps above each table's least: float32 where every sum of
    them (at most ``steps``) is exact, else float64."""
    return np.dtype(np.float32 if steps < kbest.FLOAT_EXACT[4] else np.float64)


def pass_dtype(tab: _tables.Tables, values: np.dtype) -> np.dtype | None:
    """The dtype of the top-two pass's values where ``tab`` qualifies (None otherwise): ``values`` (the
    k-best passes' dtype) where the sizes are the steps already, else :func:`steps_dtype`."""
    found = _grid(tab)
    if found is None:
        return None
    g, lows, steps = found
    return steps_dtype(steps) if g != 1 or any(lows) else np.dtype(values)


def counting(
    tab: _tables.Tables, sign: int, values: list[Any], first_counts: list[Any], bound: int, ctx: Context
) -> tuple[list[tuple[Any, int]] | None, set[int], int]:
    """The top-two passes: float32 counts, then float64 where the bound allows counts past 2^24. Returns
    (answer or None, the float sizes whose k-best pass would fail as well, the bound): None for a problem
    that does not qualify (:func:`grid`), where no size one step below the best occurs (the k-best passes
    answer), or where the counts pass what float64 holds (the integer rings do; the float64 pass's rounding
    bounds them). ``values``: the k-best passes' (each table's sizes times ``sign``), taken as they are
    where they are the steps already (unit steps, every least size 0: independent sets)."""
    skip: set[int] = set()
    found_grid = _grid(tab)
    if found_grid is None:
        return None, skip, bound
    g, lows, steps = found_grid
    if g != 1 or any(lows):  # each table's steps above its least (:func:`steps_dtype`)
        dtype = steps_dtype(steps)
        values = ctx.put_all([np.where(m, sign * ((s - lo) // g), -np.inf).astype(dtype)
                              for m, s, lo in zip(tab.mask, tab.size, lows)])  # fmt: skip
    base = sum(lows)
    first = kbest.FLOAT_PASSES[0]
    for floats in kbest.FLOAT_PASSES:
        if floats != first and bound < kbest.FLOAT_EXACT[first]:
            break
        counts = first_counts if floats == first else ctx.put_all([m.astype(f"f{floats}") for m in tab.mask])
        alg = top2.algebra(floats)
        ops = list(zip(values, counts))
        with np.errstate(over="ignore", invalid="ignore"):  # a count past the floats' range: inf
            parts = ctx.contract(tab, tab.labels, (), ops, "maxplus", alg)
        v, c0, c1 = (float(to_host(p)) for p in parts)
        answered = top2.answer(v, c0, c1, floats)
        if answered is not None:
            return [(as_size(tab, base + g * sign * int(s)), c) for s, c in answered], skip, bound
        if c1 == 0:  # the second best size lies lower
            return None, skip, bound
        skip.add(floats)  # the two best are one step apart, a count past the line: the k-best pass's would be too
        if floats == 8:
            bound = proven(tab, ctx, alg, ops, max(c0, c1), 4, bound)
    return None, skip, bound


def proven(tab: _tables.Tables, ctx: Context, alg: Any, ops: list[Any], largest: float, terms: int, bound: int) -> int:
    """``bound`` lowered to what a float64 pass proves of every count it computed (its rounding bounded by
    its multiply-adds: the plan's, ``terms`` per term of a step)."""
    plan = ctx.plan(tab, tab.labels, (), ops, "maxplus", alg)  # the pass's own (the same order)
    entries = sum(int(m.size) for m in tab.mask)
    flops = plan_flops(tab.labels, (), label_sizes(tab), plan) * terms
    upper = floatsum.upper_bound(largest, flops, entries, plan.nslices)
    return bound if upper is None else min(bound, upper)
