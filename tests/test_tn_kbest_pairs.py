"""The k-best products keep only the pairs whose index sum is below k (:func:`lazykern.tn.algebras.kbest.kept_pairs`):
checked against every pair, on the host's small steps (two and three operands) and on the array product,
with ties, -inf padding and several summed axes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lazykern.tn import _host_steps
from lazykern.tn._backend import Backend
from lazykern.tn.algebras import kbest


def _entries(rng, shape, k):
    """k-best entries: k distinct values sorted from the largest down (-inf padded), counts (0 at -inf)."""
    raw = rng.integers(-3, 4, shape + (3 * k,)).astype(np.float64)
    values = np.full(shape + (k,), -math.inf)
    counts = np.zeros(shape + (k,), np.int64)
    for idx in np.ndindex(*shape):
        d = np.unique(raw[idx])[::-1][: rng.integers(1, k + 1)]
        values[idx][: len(d)] = d
        counts[idx][: len(d)] = rng.integers(1, 5, len(d))
    return values, counts


def _brute(values, counts, k):
    """{value: count} of every candidate along the last axis, the k largest distinct kept."""
    out = []
    for v, c in zip(values.reshape(-1, values.shape[-1]), counts.reshape(-1, counts.shape[-1])):
        total: dict[float, int] = {}
        for x, n in zip(v, c):
            if x != -math.inf:
                total[x] = total.get(x, 0) + int(n)
        out.append(sorted(total.items(), reverse=True)[:k])
    return out


def _got(best, totals):
    return [
        [(float(x), int(n)) for x, n in zip(b, t) if x != -math.inf]
        for b, t in zip(best.reshape(-1, best.shape[-1]), totals.reshape(-1, totals.shape[-1]))
    ]


def test_kept_pairs_are_those_below_k():
    for k in range(1, 6):
        i, j = kbest.kept_pairs(k)
        assert sorted(zip(i.tolist(), j.tolist())) == [(a, b) for a in range(k) for b in range(k) if a + b < k]


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("operands", [2, 3])
def test_host_step_equals_every_pair(k, operands):
    """One host step (labels a, b, c, d; a and c summed) against all k^n combinations, counted by hand."""
    rng = np.random.default_rng(10 * k + operands)
    alg = kbest.algebra(k, True)
    at = [("a", "b"), ("b", "c", "d"), ("a", "d")][:operands]
    sizes = {"a": 3, "b": 2, "c": 4, "d": 2}
    terms = [_entries(rng, tuple(sizes[x] for x in t), k) for t in at]
    union = list(dict.fromkeys(x for t in at for x in t))
    kept = tuple(x for x in union if x in ("b", "d"))
    product = _host_steps._kbest_product(alg)
    best, totals = product(terms, at, union, kept)
    # every combination: values summed, counts multiplied, over the summed labels and all index tuples
    grids = np.meshgrid(*[np.arange(sizes[x]) for x in union], indexing="ij")
    at_point = {x: g.ravel() for x, g in zip(union, grids)}
    cand_v, cand_c = [], []
    for combo in np.ndindex(*(k,) * operands):
        v = sum(t[0][tuple(at_point[x] for x in lab)][:, i] for t, lab, i in zip(terms, at, combo))
        c = np.prod([t[1][tuple(at_point[x] for x in lab)][:, i] for t, lab, i in zip(terms, at, combo)], axis=0)
        cand_v.append(v)
        cand_c.append(c)
    v, c = np.stack(cand_v, -1), np.stack(cand_c, -1)  # (points, combos)
    order = [union.index(x) for x in kept] + [union.index(x) for x in union if x not in kept]
    shape = tuple(sizes[x] for x in union)
    v = v.reshape(*shape, -1).transpose(*order, len(union)).reshape(*(sizes[x] for x in kept), -1)
    c = c.reshape(*shape, -1).transpose(*order, len(union)).reshape(*(sizes[x] for x in kept), -1)
    assert _got(best, totals) == _brute(v, c, k)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_array_product_equals_every_pair(k):
    """KBestAlgebra.bmm's array route (the host's, and any device without the kernels) against all pairs."""
    rng = np.random.default_rng(k)
    alg = kbest.algebra(k, True)("maxplus", Backend("numpy", np))
    (av, ac), (bv, bc) = _entries(rng, (2, 3, 5), k), _entries(rng, (2, 5, 4), k)
    parts, _ = alg.bmm(
        tuple(av[..., q] for q in range(k)) + tuple(ac[..., q] for q in range(k)),
        tuple(bv[..., q] for q in range(k)) + tuple(bc[..., q] for q in range(k)),
        False,
    )
    best, totals = np.stack(parts[:k], -1), np.stack(parts[k:], -1)
    v = (av[:, :, :, None, :, None] + bv[:, None, :, :, None, :]).transpose(0, 1, 3, 2, 4, 5).reshape(2, 3, 4, -1)
    c = (ac[:, :, :, None, :, None] * bc[:, None, :, :, None, :]).transpose(0, 1, 3, 2, 4, 5).reshape(2, 3, 4, -1)
    assert _got(best, totals) == _brute(v, c, k)


def test_best_over_several_axes_is_best_over_them_flattened():
    rng = np.random.default_rng(5)
    alg = kbest.algebra(3, True)
    values = rng.integers(-2, 3, (4, 3, 5, 2)).astype(np.float64)
    values[0, 0] = -math.inf  # an entry with nothing: -inf values, zero counts
    counts = rng.integers(0, 7, values.shape)
    b1, t1 = kbest.best_on_host(alg, values, counts, (1, 3))
    flat = values.transpose(0, 2, 1, 3).reshape(4, 5, -1), counts.transpose(0, 2, 1, 3).reshape(4, 5, -1)
    b2, t2 = kbest.best_on_host(alg, *flat)
    assert b1.shape == b2.shape == (4, 5, 3) and np.array_equal(b1, b2) and np.array_equal(t1, t2)
    assert np.all(t1[0][b1[0] == -math.inf] == 0)
