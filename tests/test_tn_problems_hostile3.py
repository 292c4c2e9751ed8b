"""Hostile round 3 of ``lazykern.tn.problems``: float sizes with a fixed-vertex offset, exact sizes of
whole floats past 9 digits, long double weights, and GraphPolynomial's reach over allowed entries.
Expected values come from a brute force over every configuration with exact Fractions."""

from __future__ import annotations

import itertools
import math
import re
import warnings
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from lazykern.errors import LazykernWarning
from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn import solve, solver
from tests._spin_oracles import meant


def _nearest(x: Fraction) -> float:
    return x.numerator / x.denominator


def _exact_sizes(p: Any) -> dict[tuple[int, ...], Fraction]:
    """Every feasible configuration (fixed vertices kept) and its exact size, each entry as meant."""
    fixed = dict(p.fixedvertices)
    out = {}
    for combo in itertools.product(range(p.num_flavors), repeat=p.num_variables):
        if any(combo[v] != f for v, f in fixed.items()):
            continue
        if all(t.values[tuple(combo[v] for v in t.variables)] for t in p.constraints()):
            out[combo] = sum(
                (meant(t.values[tuple(combo[v] for v in t.variables)]) for t in p.objectives()), Fraction(0)
            )
    return out


def _agree(p: Any, k: int, largest: bool) -> list[Any]:
    """SizeMax/Min(k), CountingMax/Min(k) and ConfigsMax/Min(k) of ``p``, checked against each other:
    the same distinct sizes, each count the number of rows listed; the sizes."""
    S, C, L = (Q.SizeMax, Q.CountingMax, Q.ConfigsMax) if largest else (Q.SizeMin, Q.CountingMin, Q.ConfigsMin)
    sizes = solve(p, S(k))
    counts = solve(p, C(k))
    configs = solve(p, L(k))
    assert len(set(sizes)) == len(sizes)
    assert sizes == [s for s, _ in counts] == [s for s, _ in configs]
    assert [c for _, c in counts] == [len(rows) for _, rows in configs]
    for _, rows in configs:
        for row in rows:
            assert p.is_feasible(row)
    return sizes


# -- 5: the offset of fixed vertices is part of a float size, before k distinct values are chosen --------
def test_a_float_offset_that_absorbs_every_size_gives_one_size_with_every_configuration():
    p = P.IndependentSet((2, []), weights=[1e300, 1.0], fixedvertices={0: 1})
    with pytest.warns(LazykernWarning, match="may tie"):
        assert _agree(p, 2, True) == [1e300]
    with pytest.warns(LazykernWarning):
        assert solve(p, Q.CountingMax(2)) == [(1e300, 2)]
    with pytest.warns(LazykernWarning):
        ((size, rows),) = solve(p, Q.ConfigsMax(2))
    assert size == 1e300 and rows.tolist() == [[1, 0], [1, 1]]
    # every exact size of this problem is nearest to 1e300 as a float
    assert {_nearest(s) for s in _exact_sizes(p).values()} == {1e300}


def test_a_float_offset_beside_tiny_weights_gives_distinct_sizes_and_every_configuration():
    p = P.SetCovering([[0, 1], [1, 0], [0], [0, 1]], weights=[1.0, 3e-300, 1e-300, 1e-320], fixedvertices={0: 1})
    exact = _exact_sizes(p)
    with pytest.warns(LazykernWarning, match="may tie"):  # on a grid: within its tolerance of 1.0
        (one,) = _agree(p, 3, False)
    assert one == pytest.approx(1.0, abs=1e-15)
    with pytest.warns(LazykernWarning):
        ((size, count),) = solve(p, Q.CountingMin(3))
    assert size == pytest.approx(1.0, abs=1e-15) and count == len(exact)
    assert {_nearest(s) for s in exact.values()} == {1.0}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("largest", [True, False])
def test_float_sizes_with_an_offset_agree_across_properties(seed, largest):
    rng = np.random.default_rng(seed)
    n = 6
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.3]
    w = [1e300 if i == 0 else float(rng.choice([1.0, 2.0, 1e284, 3e-300])) for i in range(n)]
    p = P.IndependentSet((n, [e for e in edges if 0 not in e]), weights=w, fixedvertices={0: 1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)
        sizes = _agree(p, 4, largest)
        counts = dict(solve(p, (Q.CountingMax if largest else Q.CountingMin)(4)))
    # the float sizes the solver reports are within float rounding of exact sizes, and every
    # configuration is counted under one of them or lies beyond the k listed
    exact = _exact_sizes(p)
    assert sum(counts.values()) <= len(exact)
    for s in sizes:
        assert any(abs(float(e) - s) <= 1e-12 * abs(s) for e in exact.values())


def test_decimal_sizes_that_would_round_to_one_float_are_not_listed_twice():
    p = P.IndependentSet((3, []), weights=[9e13, 0.01, 0.01])
    with pytest.warns(LazykernWarning, match="may tie"):  # on a grid of 0.02: 9e13 + 0.01 and + 0.02 may tie
        sizes = _agree(p, 3, True)
    assert len(set(sizes)) == len(sizes) and 2 <= len(sizes) <= 3


# -- 6: a problem's size is the float nearest the exact sum of its weights as read ----------------------
def test_whole_floats_past_nine_digits_sum_exactly_everywhere():
    p = P.DominatingSet((3, []), weights=[4503599627370497.0, 0.5, -4503599627370496.0])
    exact = _exact_sizes(p)
    for config, size in exact.items():
        assert p.size(list(config)) == _nearest(size)
    assert p.size([1, 1, 1]) == 1.5
    best = min(exact.values())
    with warnings.catch_warnings():
        warnings.simplefilter("error", LazykernWarning)  # exact: no warning
        size, config = solve(p, Q.SingleConfigMin())
        assert (size, config.tolist()) == (1.5, [1, 1, 1]) == (_nearest(best), [1, 1, 1])
        assert solve(p, Q.SizeMin()) == [1.5]
    # CountingMin sums in float64, which cannot hold 2^52 + 1.5: it says so
    with pytest.warns(LazykernWarning, match="may tie"):
        solve(p, Q.CountingMin())


@pytest.mark.parametrize("seed", range(5))
def test_size_is_the_float_nearest_the_exact_sum(seed):
    rng = np.random.default_rng(seed)
    pool = [0.1, 0.2, 0.3, 2.75, 1 / 3, float(2**52 + 1), -float(2**52), 1e-5, float(rng.random())]
    w = [float(rng.choice(pool)) for _ in range(6)]
    p = P.IndependentSet((6, [(0, 1), (2, 3)]), weights=w)
    for config, size in _exact_sizes(p).items():
        assert p.size(list(config)) == _nearest(size)


# -- 7: long doubles at their exact value -------------------------------------------------------------
needs_long = pytest.mark.skipif(
    np.dtype(np.longdouble).itemsize <= 8, reason="np.longdouble is float64 on this platform: nothing to round"
)


@needs_long
def test_long_double_weights_are_read_exactly():
    L = np.longdouble
    p = P.IndependentSet((2, []), weights=[L(2**53) + 1, L(1)])
    assert p.weights == [2**53 + 1, 1]
    assert solve(p, Q.SizeMax()) == [9007199254740994]
    sg = P.SpinGlass((2, [(0, 1)]), J=[L(2**53) + 1], h=[L(1), L(0)])
    assert solve(sg, Q.SizeMin()) == [-9007199254740994]
    assert P.IndependentSet((2, []), weights=[L(0.5), 0.25]).weights == [0.5, 0.25]


@needs_long
def test_a_long_double_float64_would_round_is_refused():
    with pytest.raises(ValueError, match="long double .* float64 would round"):
        P.IndependentSet((2, []), weights=[np.longdouble(1) / np.longdouble(3), 0.25])
    with pytest.raises(ValueError, match="finite"):
        P.IndependentSet((2, []), weights=[np.longdouble("inf"), 0.25])


@pytest.mark.parametrize("w", [np.complex128(1), complex(1, 0), np.clongdouble(1)])
def test_complex_weights_are_refused(w):
    with pytest.raises(TypeError, match="real number"):
        P.IndependentSet((2, []), weights=[w, 1])


# -- 8: GraphPolynomial reads the sizes the constraints allow ------------------------------------------
def test_graph_polynomial_of_whole_floats_ignores_entries_the_constraints_forbid():
    fixed = {(0, 2): 1}
    p = P.Matching((3, [(0, 1), (0, 2)]), weights=[1e22, 1.0], fixedvertices=fixed)
    q = P.Matching((3, [(0, 1), (0, 2)]), weights=[10**22, 1], fixedvertices=fixed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LazykernWarning)
        assert solve(p, Q.GraphPolynomial()) == solve(q, Q.GraphPolynomial()) == [0, 1]
    counts: dict[Fraction, int] = {}
    for size in _exact_sizes(p).values():
        counts[size] = counts.get(size, 0) + 1
    assert counts == {Fraction(1): 1}


def test_graph_polynomial_refusals_say_why():
    whole = P.Matching((3, [(0, 1), (0, 2)]), weights=[1e22, 1.0])
    with pytest.warns(LazykernWarning), pytest.raises(ValueError, match="whole-number weights .* past") as e:
        solve(whole, Q.GraphPolynomial())
    assert "not whole" not in str(e.value) and "not integers" not in str(e.value)
    with pytest.raises(ValueError, match="not whole numbers"):
        solve(P.Matching((3, [(0, 1), (0, 2)]), weights=[1.5, 1.0]), Q.GraphPolynomial())


# -- ConfigsAll reads no size: like CountingAll, no weight refuses it or warns that sizes round ----------
@pytest.mark.parametrize(
    "weights",
    [[2**53, 1, 2**60], [2**70, -(2**70), 1], [1e300, 1e-300, 1.0], [1e300, 0.1, 3e-300]],
)
def test_configs_all_lists_every_feasible_configuration_whatever_the_sizes_reach(weights):
    p = P.IndependentSet((3, [(0, 1)]), weights=weights)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no size-rounding warning: no size is read
        rows = solve(p, Q.ConfigsAll())
        assert solve(p, Q.CountingAll()) == len(rows) == 6
    assert rows.tolist() == sorted(list(c) for c in _exact_sizes(p))


def test_configs_all_past_two_to_the_53_while_configs_max_still_refuses():
    p = P.IndependentSet((2, []), weights=[2**53, 1])
    assert solve(p, Q.ConfigsAll()).tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    with pytest.raises(ValueError, match="sizes reach 9007199254740993"):
        solve(p, Q.ConfigsMax(1))


@pytest.mark.parametrize(
    "weights",
    [[2.0**53, 1.0, -1.0, 0.5], [-1e300, 1e-300, 1e299, 1e299, 1.0, 1e-300], [1 / 3, 2 / 3, 1.0, 1e17, 0.1]],
)
def test_k_best_lists_of_float_weights_skip_no_size(weights):
    """Float weights past the exact range: a k-best list of float sums kept two partial sums that a later
    addition made one, and skipped a real size (2^53 - 1 left out of SizeMax(2) = [2^53, 1.5]). On a grid
    every size the list gives lies within the warned tolerance of an exact size, the list skips no size,
    and the counts of SizeMax(k)'s sizes are every configuration's once k reaches them all."""
    n = len(weights)
    p = P.IndependentSet((n, [(n - 2, n - 1)]), weights=weights)
    exact = sorted(set(_exact_sizes(p).values()), reverse=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)
        tab = solver._tables.build(p, {}, solver.FLOAT64_EXACT, grid=True)
        every = solve(p, Q.CountingMax(len(exact)))
        two = solve(p, Q.SizeMax(2))
    # the grid's stated tolerance; floats whose exact numerators pass int64 (1/3 beside 1e17) stay float sums,
    # each within n roundings of the largest partial sum
    tol = float(tab.tolerance) * (1 + 1e-12) if tab.tolerance else sum(map(abs, weights)) * n * 2.0**-52
    assert sum(c for _, c in every) == len(_exact_sizes(p))  # no configuration lost
    assert [s for s, _ in every][:2] == two  # the first two of the longer list: nothing skipped
    for s, _ in every:
        assert any(abs(float(Fraction(s) - e)) <= tol for e in exact)


def test_binary_floats_past_int64_numerators_go_on_the_grid_too():
    """1/3 and 2/3 beside 1e17 (exact numerators past int64): float sums lost configurations from k-best
    lists (CountingMin(2) counted 2 of 5, CountingMin(3) 3 of 5 at the same size). On the grid the counts
    do not change with k, the shorter lists are prefixes of the longer, and every configuration is counted."""
    p = P.DominatingSet((6, [(1, 4), (3, 4)]), weights=[-1e17, 0.1, -1e17, -100.0, 2 / 3, -1e17])
    feasible = len(_exact_sizes(p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)
        lists = [solve(p, Q.CountingMin(k)) for k in (2, 3, 8)]
        rows = sum(len(c) for _, c in solve(p, Q.ConfigsMin(8)))
    assert all(sum(c for _, c in got) == feasible for got in lists) and rows == feasible
    assert lists[0] == lists[1][: len(lists[0])] == lists[2][: len(lists[0])]


def test_the_grid_warning_says_equal_sizes_may_come_out_apart():
    """Hostile round 5: weights -1/3, -2/3, -1/3 (floats at their binary value) on hyperedges: each merged
    table rounded to the grid, two configurations of one exact size -2/3 came out one step apart (two sizes
    of count 1, and 4/3 dropped from SizeMin(5)). The warning said only that near sizes may merge; it now
    says equal ones may come out apart, and by how much at most."""
    p = P.SpinGlass((3, [(1, 2), (2,), (0,)]), J=[-1 / 3, -2 / 3, -1 / 3])
    with pytest.warns(LazykernWarning, match=r"sizes that are equal may come out up to (\S+) apart") as record:
        sizes = solve(p, Q.SizeMin(5))
    apart = float(re.search(r"come out up to (\S+) apart", str(record[0].message)).group(1))
    exact = [-4 / 3, -2 / 3, 0.0, 2 / 3, 4 / 3]
    # every size listed lies within the stated distance of an exact one, in order
    assert sizes == sorted(sizes) and all(min(abs(s - e) for e in exact) <= apart for s in sizes)


def test_an_entry_another_table_forbids_sets_no_offset_or_range():
    """Hostile round 6: set 0 carries -(2^55 - 2), but the fixed set 2 excludes it. Its table still allowed
    it, so it was that table's best size: log Z came out ln 2 - 2 for beta = -1 (the offset's float64
    rounding), and CountingMax refused sizes past 2^53 where every feasible size is 0. A flavor some
    table allows nowhere is now struck from every table (unary consistency)."""
    W = -(2**55 - 2)
    p = P.SetPacking([(1, 2), (2,), (2,), (1,)], weights=[W, 0, 0, 0], fixedvertices={2: 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error", LazykernWarning)  # nothing past the exact range any more
        for beta in (-1.0, -0.5, 1.0, 2.0):
            assert solve(p, Q.PartitionFunction(beta)) == pytest.approx(np.log(2), rel=1e-12)
        assert solve(p, Q.CountingMax(2)) == [(0, 2)] and solve(p, Q.SizeMin(3)) == [0]
    assert solve(p, Q.ConfigsAll()).tolist() == [[0, 0, 1, 0], [0, 0, 1, 1]]


def test_float_passes_past_their_range_leak_no_numpy_warning():
    """Hostile round 6: counts past 2^128 (float32 k-best pass) or 2^1024 (the float64 bound pass) gave
    NumPy's overflow RuntimeWarnings, a FloatingPointError under np.seterr(all="raise"); those passes'
    inf is read as "count again exactly", which they are."""
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert solve(P.MaxCut((129, [(0, 1)])), Q.CountingMax(2)) == [(1, 2**128), (0, 2**128)]
        poly = solve(P.IndependentSet((1100, [])), Q.GraphPolynomial())
    assert len(poly) == 1101 and poly[550] == math.comb(1100, 550)
