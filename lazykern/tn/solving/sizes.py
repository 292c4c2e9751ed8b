"""The k best sizes (``SizeMax/SizeMin``), with their exact counts (``CountingMax/Min``: float32, then
float64 counts, then integer rings and CRT), and the number of feasible configurations
(``CountingAll``)."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from .. import _crt, _tables
from .._contract import Algebra
from ..algebras import kbest
from ..counting import count_network
from . import top_two
from .context import Context
from .values import as_size, finite, k_cap, size_values, to_host, value_dtype

log = logging.getLogger("lazykern")


def sizes(tab: _tables.Tables, k: int, largest: bool, ctx: Context) -> list[Any]:
    """The k best distinct sizes, best first."""
    if not tab.feasible:
        return []
    k = k_cap(tab, k)
    if k == 1:
        dtype = value_dtype(tab, tropical_only=True)
        tensors = ctx.put_all(size_values(tab, dtype, largest))
        out = ctx.contract(tab, tab.labels, (), tensors, "maxplus" if largest else "minplus", Algebra)
        v = to_host(out).item()
        return [as_size(tab, v)] if finite(v, dtype) else []
    dtype = value_dtype(tab, tropical_only=False)
    sign = 1 if largest else -1  # a minimum is the maximum of the negated sizes
    tensors = [(t,) for t in ctx.put_all(size_values(tab, dtype, True, sign=sign))]
    parts = ctx.contract(tab, tab.labels, (), tensors, "maxplus", kbest.algebra(k))
    return [as_size(tab, sign * v) for v in (to_host(p).item() for p in parts) if math.isfinite(v)]


def _count_operands(tab: _tables.Tables, dtype: np.dtype, largest: bool, ctx: Context) -> list[Any]:
    values = size_values(tab, dtype, largest)
    return list(zip(ctx.put_all(values), ctx.put_all([m.astype(np.int64) for m in tab.mask])))


ONE_FLOAT_ENTRIES = 1 << 30  # intermediates (entries) up to which CountingMax(1) on a GPU tries a float32 pass


def _count_exactly(tab: _tables.Tables, dtype: np.dtype, largest: bool, ctx: Context) -> list[tuple[Any, int]]:
    """(size, exact count) at the best size, by the counting algebra (:func:`..counting.count_network`)."""
    ops = _count_operands(tab, dtype, largest, ctx)
    v, c = count_network(tab.labels, (), ops, **ctx.planning(tab, semiring="maxplus" if largest else "minplus"))
    value = to_host(v).item()
    return [(as_size(tab, value), int(to_host(c).item()))] if math.isfinite(value) else []


def counting(tab: _tables.Tables, k: int, largest: bool, ctx: Context) -> list[tuple[Any, int]]:
    """(size, exact count) at the k best sizes."""
    k = k_cap(tab, k)
    if not tab.feasible:
        return []
    dtype = value_dtype(tab, tropical_only=False)
    bound = tab.flavors ** len(tab.free)
    # k = 1 on a GPU: a float32 pass of the k-best kernels first (one value and count an entry, 8 bytes),
    # then, where a count passes 2^24, the counting algebra's exact passes (count_network: its own float64
    # bound, 128-bit counts, primes). A 3-regular graph of 200 vertices took 0.96 s in count_network on
    # the H200, where the one float32 pass answers (session 73). On the host, and for networks whose
    # intermediates pass ONE_FLOAT_ENTRIES (a lattice's boundary, its counts past 2^100: a pass wasted
    # there costs seconds), count_network alone.
    gpu = ctx.xp.__name__ != "numpy" and kbest.USE_KERNEL
    one_float = k == 1 and gpu and (ctx.largest(tab) or 0) <= ONE_FLOAT_ENTRIES
    if k == 1 and not one_float:
        return _count_exactly(tab, dtype, largest, ctx)
    sign = 1 if largest else -1
    n = len(tab.mask)
    first = kbest.FLOAT_PASSES[0]
    # the values and the first pass's counts in one transfer per dtype (float32 sizes beside float32 counts: one)
    put = ctx.put_all(size_values(tab, dtype, True, sign=sign) + [m.astype(f"f{first}") for m in tab.mask])
    values, first_counts = put[:n], put[n:]
    # CountingMax(2) of sizes that move in steps of one unit: the top-two algebra first (:mod:`.top_two`),
    # which answers wherever a size one step below the best occurs; its float passes tell which k-best
    # float passes would fail as well.
    skip: set[int] = set()
    if k == 2 and top_two.ROUTE:
        answered, skip, bound = top_two.counting(tab, sign, values, first_counts, bound, ctx)
        if answered is not None:
            return answered
    # First passes of float counts: float32, exact wherever the k best counts are below 2^24, then float64,
    # below 2^53 (kbest.FLOAT_EXACT), as they mostly are for a few best sizes, at a float multiply-add per
    # term; a count past both (possible only where the bound allows it) is counted again by the integer
    # rings below. A float pass the bound makes needless is skipped.
    # (The inputs are exact in either float type: Tables' masks are boolean, counts 0 or 1.)
    for floats in kbest.FLOAT_PASSES[:1] if one_float else kbest.FLOAT_PASSES:
        if floats != kbest.FLOAT_PASSES[0] and bound < kbest.FLOAT_EXACT[kbest.FLOAT_PASSES[0]]:
            break
        if floats in skip:
            continue
        counts = first_counts if floats == first else ctx.put_all([m.astype(f"f{floats}") for m in tab.mask])
        alg = kbest.algebra(k, True, floats=floats)
        float_ops = list(zip(values, counts))
        with np.errstate(over="ignore", invalid="ignore"):  # a count past the floats' range: inf, counted again
            parts = ctx.contract(tab, tab.labels, (), float_ops, "maxplus", alg)
        found = [(float(to_host(v)), float(to_host(c))) for v, c in zip(parts[:k], parts[k:])]
        found = [(v, c) for v, c in found if math.isfinite(v)]
        if all(c < kbest.FLOAT_EXACT[floats] for _, c in found):
            return [(as_size(tab, sign * v), int(c)) for v, c in found]
        if floats == 8:
            bound = top_two.proven(tab, ctx, alg, float_ops, max(c for _, c in found), k * k, bound)
    if one_float:
        return _count_exactly(tab, dtype, largest, ctx)
    log.debug("CountingMax(%d): a count past what float counts hold exactly; counting in integer rings", k)
    ones = ctx.put_all([m.astype(np.int64) for m in tab.mask])
    operands = list(zip(values, ones))
    # Boolean masks count 0 or 1, their own residues modulo any prime: no `% p` per operand and pass.
    reduced = all(m.dtype == np.bool_ for m in tab.mask)

    # Each pass plans the shared order for its own algebra as it builds its network (one build, not a
    # plan's network and then the pass's: 300 operands prepared twice); the path's costs are kept.
    def run(moduli: tuple[int, ...]) -> tuple[Any, list[Any]]:
        alg = kbest.algebra(k, True, moduli[0] if moduli else 0, reduced=reduced)
        parts = ctx.contract(tab, tab.labels, (), operands, "maxplus", alg)
        return np.array([to_host(p) for p in parts[:k]]), [np.array([to_host(p) for p in parts[k:]])]

    def pair(_int64: tuple[int, ...], first: tuple[int, ...]) -> tuple[tuple[Any, list[Any]], tuple[Any, list[Any]]]:
        """The int64 pass and the first prime's in one contraction (both are needed once counts may
        pass 2^63): the values and their choices computed once, each count in both rings."""
        (p,) = first
        both = ctx.contract(tab, tab.labels, (), operands, "maxplus", kbest.paired_algebra(k, p, reduced=reduced))
        values = np.array([to_host(x) for x in both[:k]])
        wide_counts = np.array([to_host(x) for x in both[k : 2 * k]])
        return (values, [wide_counts]), (values, [np.array([to_host(x) for x in both[2 * k :]])])

    vals, counts = _crt.solve(run, bound, 1, pair=pair if k <= kbest.PAIRED_KMAX and kbest.PAIRED else None)
    pairs = zip(vals.tolist(), np.asarray(counts).tolist())
    return [(as_size(tab, sign * v), int(c)) for v, c in pairs if math.isfinite(v)]


def count_all(tab: _tables.Tables, ctx: Context) -> int:
    """The number of feasible configurations (every value equal: the counting product is a sum of products)."""
    if not tab.feasible:
        return 0
    ops = [(ctx.put(np.zeros(m.shape, np.float32)), ctx.put(m.astype(np.int64))) for m in tab.mask]
    _, c = count_network(
        tab.labels,
        (),
        ops,
        **ctx.planning(tab),
    )
    return int(to_host(c).item())
