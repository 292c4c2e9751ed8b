"""``GraphPolynomial``: exact coefficients from evaluations modulo primes, interpolated. The degree
and the primes come from one pass (the largest size beside a proven float64 count bound); the
evaluation points ride in as few groups as the memory holds, or in one sliced plan of their own where
that is predicted quicker."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Hashable
from typing import Any

import numpy as np

from ...errors import ReconstructionError
from .. import _cost, _crt, _tables
from .._backend import backend_of
from ..algebras import floatsum, modular, polynomial
from ..einsum import ContractionPlan, contraction_plan, plan_flops, plan_steps
from .context import Context
from .sizes import sizes
from .values import as_size, finite, label_sizes, size_values, to_host, value_dtype

log = logging.getLogger("lazykern")


def graph_polynomial(tab: _tables.Tables, laurent: bool, ctx: Context) -> Any:
    """Exact coefficients of sum_s count(s) x^s (index s), or (lowest, coefficients) with ``laurent``."""
    if not tab.integer or tab.unit != 1:
        why = (
            f"{tab.floated}: scale the weights down"
            if tab.floated
            else f"weights that are not whole numbers (sizes in units of {tab.unit}): give integer weights"
        )
        raise ValueError(f"GraphPolynomial needs integer sizes, summed exactly; this problem has {why}")
    proven = _uniform_lowest(tab)  # most problems' smallest size needs no contraction (see there)
    low = [proven] if proven is not None else sizes(tab, 1, False, ctx)
    if not low:
        return (0, []) if laurent else []
    smax, bound = _largest_and_count_bound(tab, ctx)
    smin = int(low[0])
    polynomial_checks(smin, smax, laurent)
    mins = [int(s[m].min()) for m, s in zip(tab.mask, tab.size)]
    # Python ints (object arrays), exact at any size: an entry past int64 no feasible configuration reaches
    # still gets its power (:func:`..algebras.polynomial.all_powers_modulo` reduces it modulo p - 1)
    exponents = [np.where(m, s - lo, 0) for m, s, lo in zip(tab.mask, tab.size, mins)]
    shift = smin - (sum(mins) + int(tab.offset))  # Q(x) = x^shift R(x), R of degree smax - smin
    points = smax - smin + 1
    xs = np.arange(1, points + 1, dtype=np.int64)
    labels = [(polynomial.POINTS, *lab) for lab in tab.labels]

    largest = _largest_intermediate(tab, ctx)

    def run(moduli: tuple[int, ...]) -> np.ndarray:
        """One pass: the evaluations at every point modulo each of ``moduli`` (one part per prime), the
        points taken in as few groups as the memory holds without slicing (:func:`_points_per_pass`), or
        all at once by a plan of their own where that is predicted quicker (:func:`_points_plan`)."""
        r = len(moduli)
        per_pass = _points_per_pass(ctx, largest, 8 * r, points)
        plan = _points_plan(tab, labels, points, per_pass, 8 * r, ctx) if per_pass < points else None
        groups = 1 if plan is not None else -(-points // per_pass)
        out = []
        for chunk in np.array_split(xs, groups):
            tables = [t for ts in polynomial.all_powers_modulo(exponents, tab.mask, chunk, moduli) for t in ts]
            put = ctx.put_all(tables)  # one transfer, not one per table and prime
            ops = [tuple(put[i : i + r]) for i in range(0, len(put), r)]
            operands = [op[0] for op in ops] if r == 1 else ops  # one part: the array itself
            alg = modular.algebra(*moduli)
            parts = ctx.contract(tab, labels, (polynomial.POINTS,), operands, "maxplus", alg, plan)
            parts = parts if isinstance(parts, tuple) else (parts,)  # one part comes back as the array itself
            out.append(np.array([to_host(p) for p in parts], dtype=np.int64).reshape(r, len(chunk)))
        return np.concatenate(out, axis=1)

    # No coefficient exceeds the number of feasible configurations (``bound``, proven from above by the
    # float64 count of the largest size's pass): it says how many primes the one pass of evaluations
    # needs, often far fewer than the free variables' bound (flavors ** free) asks.
    coefficients = polynomial.reconstruct(run, points, shift, bound, polynomial.primes_needed(bound))
    while coefficients and coefficients[-1] == 0:
        coefficients.pop()
    if laurent:
        return smin, coefficients
    return [0] * smin + coefficients


def polynomial_checks(smin: int, smax: int, laurent: bool) -> None:
    """Refuse a polynomial of sizes ``smin``..``smax`` this solver does not give (with the reason)."""
    if smin < 0 and not laurent:
        raise ValueError(
            f"sizes go down to {smin}: a polynomial in x has no negative powers; pass "
            "GraphPolynomial(laurent=True) for (lowest size, coefficients)"
        )
    if smin >= polynomial.DEGREE_MAX and not laurent:
        raise ValueError(
            f"sizes start at {smin}: the coefficient list would open with {smin} zeros; pass "
            "GraphPolynomial(laurent=True) for (lowest size, coefficients)"
        )
    if smax - smin >= polynomial.DEGREE_MAX:
        raise ValueError(
            f"GraphPolynomial: sizes span {smin}..{smax}, a polynomial of degree {smax - smin}; this solver "
            f"evaluates it at every degree + 1 points and stops at degree {polynomial.DEGREE_MAX - 1} "
            "(scale the weights down, or ask CountingMax(k) for the top coefficients)"
        )


def _largest_intermediate(tab: _tables.Tables, ctx: Context) -> int:
    """Entries of the largest intermediate of ``tab``'s order, unsliced (every polynomial tensor holds
    that many per point)."""
    sizes: dict[Hashable, int] = {lab: tab.flavors for labels in tab.labels for lab in labels}
    order = ctx.order(tab)
    if isinstance(order, ContractionPlan):  # every label holds ``flavors`` entries
        return int(order.largest * tab.flavors ** len(order.sliced))
    if not isinstance(order, list):  # the caller's optimizer object: it plans each network itself
        return 1
    plan = contraction_plan(tab.labels, (), sizes, optimize=order, memory_limit=2**62, store=False)
    return int(plan.largest)


def _points_per_pass(ctx: Context, largest: int, entry_bytes: int, points: int) -> int:
    """How many evaluation points one contraction carries: as many as keep its largest intermediate
    (``largest`` entries per point) within the slicing target (the caller's ``memory_limit``, else the
    one the free memory sets for ``entry_bytes``). A 3-regular graph of 200 vertices, planned for a GPU,
    has intermediates of 2^29 entries: with its 91 points and 6 primes one such array is 2.3 TB, 16
    times an H200's memory, and slicing that far re-runs much of the network per slice (no answer in
    40 s, session 59); groups of points cost only their own work."""
    limit = ctx.memory_limit if ctx.memory_limit is not None else _device_limit(ctx, entry_bytes)
    return max(1, min(points, int(limit) // max(largest, 1)))


def _device_limit(ctx: Context, entry_bytes: int) -> int:
    """The slicing target the free memory of the caller's device sets for entries of ``entry_bytes``."""
    be, _ = backend_of(ctx.put(np.zeros(1, np.float64)))
    return int(be.memory_limit(entry_bytes))


# Predicted seconds of the polynomial's groups of points below which no plan of its own is searched for
# (a search takes up to max_time, 5 s by default, the first time a network is seen).
_REPLAN_SECONDS = 2.0


def _points_plan(
    tab: _tables.Tables, labels: list[Any], points: int, per_pass: int, entry_bytes: int, ctx: Context
) -> ContractionPlan | None:
    """A plan of the polynomial network with every point in it, sliced to the memory target, where it is
    predicted quicker than the shared order run once per group of ``per_pass`` points; else None. The
    shared order is the tropical network's quickest, whose largest intermediates a GPU holds once:
    every evaluation tensor holds them once per point and prime, and its steps stream them through
    memory (a 3-regular graph of 200 vertices: intermediates of 2^29 entries, one point per pass, 90
    passes of 0.5 s each on an H200, session 67). An order of smaller intermediates, sliced, streams
    less in all. Only a searched order is replanned (a caller's own plan or path is followed)."""
    order = ctx.order(tab)
    if not isinstance(optimize := ctx.optimize, str) or not isinstance(order, list):
        return None
    sizes = {**label_sizes(tab), polynomial.POINTS: points}
    rates = _cost.rates_for(ctx.xp.__name__ == "numpy", 8)
    output = (polynomial.POINTS,)
    group = {**sizes, polynomial.POINTS: per_pass}
    groups = -(-points // per_pass)
    shared = groups * _cost.seconds(plan_steps(labels, output, group, order, {}), 1, entry_bytes, rates)
    if shared < _REPLAN_SECONDS:  # a search could cost more than it saves
        return None
    limit = ctx.memory_limit if ctx.memory_limit is not None else _device_limit(ctx, entry_bytes)
    plan = contraction_plan(
        labels, output, sizes, optimize=optimize, memory_limit=limit, max_time=ctx.max_time, initial=order,
        rank="seconds",
    )  # fmt: skip
    steps = plan_steps(labels, output, sizes, plan.path, dict(plan.sliced))
    mine = _cost.seconds(steps, plan.nslices, entry_bytes, rates)
    log.debug("GraphPolynomial: %d points in one plan of %d slices %.3g s, in %d groups %.3g s (predicted)",
              points, plan.nslices, mine, groups, shared)  # fmt: skip
    return plan if mine < shared else None


def _uniform_lowest(tab: _tables.Tables) -> int | None:
    """The smallest size of a feasible configuration when one with every free variable at one flavor
    proves it: feasible, and of the tables' lower bound (each table's smallest allowed size, summed),
    which nothing goes below (every vertex out of an independent set; no edge cut). None when no
    such configuration is feasible and at that bound (the minimum then takes a contraction)."""
    if not tab.feasible or not tab.integer:
        return None
    low, _ = tab.size_bounds()
    for flavor in range(tab.flavors):
        total = tab.offset
        for m, s in zip(tab.mask, tab.size):
            at = (flavor,) * m.ndim
            if not m[at]:
                break
            total += s[at]
        else:
            if total == low:
                return int(low)
    return None


def _largest_and_count_bound(tab: _tables.Tables, ctx: Context) -> tuple[int, int]:
    """The largest size of a feasible configuration, and at least their number (proven): one pass of
    the max-plus values beside the float64 sum-product of the masks, its rounding bounded
    (:func:`..algebras.floatsum.upper_bound`), capped by flavors ** free variables; where the float
    overflowed, the exact count by residues (:func:`_modular_count`)."""
    dtype = value_dtype(tab, tropical_only=True)
    values = ctx.put_all(size_values(tab, dtype, True))
    masks = ctx.put_all([m.astype(np.float64) for m in tab.mask])
    operands = list(zip(values, masks))
    alg = floatsum.SizeAndCountAlgebra
    plan = ctx.plan(tab, tab.labels, (), operands, "maxplus", alg)
    with np.errstate(over="ignore", invalid="ignore"):  # counts past 2^1024: inf or NaN, no bound (upper_bound)
        top, count = ctx.contract(tab, tab.labels, (), operands, "maxplus", alg, plan)
    largest = to_host(top).item()
    if not finite(largest, dtype):
        raise ReconstructionError("GraphPolynomial: no feasible configuration reached the largest size; report it")
    computed = float(to_host(count).item())
    flops = plan_flops(tab.labels, (), label_sizes(tab), plan)
    bound = floatsum.upper_bound(computed, flops, sum(int(m.size) for m in tab.mask), plan.nslices)
    if bound is None:
        log.debug("GraphPolynomial: the float64 count overflowed (%r); counting by residues", computed)
        bound = _modular_count(tab, ctx)
    return int(as_size(tab, largest)), min(bound, tab.flavors ** len(tab.free))


def _modular_count(tab: _tables.Tables, ctx: Context) -> int:
    """The number of feasible configurations by the modular algebra: one pass with as many primes as
    the proven bound (flavors ** free variables) needs, then the Chinese remainder theorem."""
    moduli = tuple(itertools.islice(_crt.primes(modular.PRIME_BELOW - 1), polynomial.primes_needed(
        tab.flavors ** len(tab.free))))  # fmt: skip
    ones = [tuple(ctx.put(m.astype(np.float64)) for _ in moduli) for m in tab.mask]
    operands = [op if len(moduli) > 1 else op[0] for op in ones]
    parts = ctx.contract(tab, tab.labels, (), operands, "maxplus", modular.algebra(*moduli))
    parts = parts if isinstance(parts, tuple) else (parts,)
    x, M = 0, 1
    for p, r in zip(moduli, parts):
        x, M = _crt.combine(x, M, int(to_host(r).item()), p), M * p
    return int(x)
