"""Decimal weights are exact: a problem's sizes are sums of the weights as written (0.1 + 0.2 ties 0.3),
checked against an enumeration in exact fractions on random small problems of several classes."""

from __future__ import annotations

import itertools
import math
import warnings
from decimal import Decimal
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

from lazykern.errors import LazykernWarning
from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn import solve


def _exact(x: float) -> Fraction:
    return Fraction(Decimal(repr(float(x))))


def _enumerate(p):
    """(configuration, exact size) of every feasible configuration, the fixed vertices kept."""
    n, q = p.num_variables, p.num_flavors
    out = []
    for row in itertools.product(range(q), repeat=n):
        if any(row[v] != f for v, f in p.fixedvertices.items()) or not p.is_feasible(row):
            continue
        size = sum((_exact(t.values[tuple(row[v] for v in t.variables)]) for t in p.objectives()), Fraction(0))
        out.append((np.array(row), size))
    return out


def _problems(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    g = nx.gnp_random_graph(n, 0.6, seed=int(rng.integers(1 << 30)))
    digits = int(rng.integers(1, 3))

    def weights(k):  # few distinct decimals: ties between different sums are common
        return [round(float(x), digits) for x in rng.choice([-0.3, -0.1, 0.1, 0.2, 0.3, 0.7, 0.25], k)]

    yield P.IndependentSet(g, weights=weights(n))
    if g.number_of_edges():
        yield P.MaxCut(g, weights=weights(g.number_of_edges()))
        yield P.SpinGlass(g, J=weights(g.number_of_edges()), h=weights(n))
    yield P.DominatingSet(g, weights=weights(n))


@pytest.mark.parametrize("seed", range(12))
def test_decimal_weights_against_exact_enumeration(seed):
    for p in _problems(seed):
        rows = _enumerate(p)
        sizes = sorted({s for _, s in rows}, reverse=True)
        best = sizes if p.goal == "max" else sizes[::-1]
        count = {s: sum(1 for _, t in rows if t == s) for s in sizes}
        as_float = {s: s.numerator / s.denominator for s in sizes}
        assert solve(p, Q.SizeMax(3)) == [as_float[s] for s in sizes[:3]]
        assert solve(p, Q.SizeMin(2)) == [as_float[s] for s in sizes[::-1][:2]]
        assert solve(p, Q.CountingMax(3)) == [(as_float[s], count[s]) for s in sizes[:3]]
        assert solve(p, Q.CountingMin(2)) == [(as_float[s], count[s]) for s in sizes[::-1][:2]]
        got = solve(p, Q.ConfigsMax(2))
        assert [s for s, _ in got] == [as_float[s] for s in sizes[:2]]
        for (s, configs), exact in zip(got, sizes[:2]):
            want = sorted(tuple(c.tolist()) for c, t in rows if t == exact)
            assert sorted(map(tuple, configs.tolist())) == want
            assert all(p.size(c) == s for c in configs)  # the problem's own size agrees exactly
        size, config = solve(p, Q.SingleConfigMax() if p.goal == "max" else Q.SingleConfigMin())
        assert size == as_float[best[0]] and p.size(config) == size
        sign = 1 if p.goal == "max" else -1
        logz = math.log(sum(math.exp(sign * 0.9 * float(s)) for _, s in rows))
        assert solve(p, Q.PartitionFunction(0.9)) == pytest.approx(logz, rel=1e-12)


def test_a_tie_of_decimals_is_one_size():
    """0.1 + 0.2 and 0.3 are one size (float64 gives 0.30000000000000004 and 0.3: two sizes, one each)."""
    p = P.IndependentSet((3, [(0, 2), (1, 2)]), weights=[0.1, 0.2, 0.3])
    assert solve(p, Q.SizeMax(2)) == [0.3, 0.2]
    assert solve(p, Q.CountingMax(2)) == [(0.3, 2), (0.2, 1)]
    assert p.size([1, 1, 0]) == 0.3 == p.size([0, 0, 1])
    ((size, configs),) = solve(p, Q.ConfigsMax(1))
    assert size == 0.3 and configs.tolist() == [[0, 0, 1], [1, 1, 0]]
    with pytest.raises(ValueError, match="integer sizes"):
        solve(p, Q.GraphPolynomial())


def test_fixed_decimal_weights_add_exactly():
    p = P.IndependentSet((3, [(0, 2), (1, 2)]), weights=[0.1, 0.2, 0.3], fixedvertices={0: 1})
    assert solve(p, Q.CountingMax(2)) == [(0.3, 1), (0.1, 1)]


def test_floats_that_are_not_decimals_warn_that_ties_may_split():
    p = P.IndependentSet((3, [(0, 2), (1, 2)]), weights=[1 / 3, 1 / 3, 2 / 3])
    with pytest.warns(LazykernWarning, match="not short decimals"):
        got = solve(p, Q.CountingMax(1))
    assert got[0][0] == pytest.approx(2 / 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve(P.IndependentSet((3, [(0, 2), (1, 2)]), weights=[0.5, 0.25, 1.75]), Q.SizeMax())


def test_weights_past_float64_range_are_refused():
    with pytest.raises(ValueError, match="past float64's range"):
        P.IndependentSet((2, []), weights=[1e308, 1e308])
    # one huge decimal is no overflow, but its exact numerators (units of 1/2) pass what sizes hold: a k-best
    # list puts the weights on a grid (of 2e292 here: 0.5 is 0 on it), with one warning saying so
    with pytest.warns(LazykernWarning, match="rounded to whole multiples of 2.00e\\+292"):
        assert solve(P.IndependentSet((2, [(0, 1)]), weights=[1.5e308, 0.5]), Q.SizeMax(2)) == [1.5e308, 0.0]
    with pytest.warns(LazykernWarning, match="summed in float64 instead"):  # one best size: a float sum
        assert solve(P.IndependentSet((2, [(0, 1)]), weights=[1.5e308, 0.5]), Q.SizeMin()) == [0.0]
    with pytest.warns(LazykernWarning, match="round at float64's precision"):  # binary floats: summed as floats
        assert solve(P.IndependentSet((2, [(0, 1)]), weights=[1.5e308, 1 / 3]), Q.SizeMax()) == [1.5e308]


# -- Fractions and Decimals: exact where a float names them, refused where none does ------------------------
def test_short_fractions_and_decimals_are_the_decimals_they_name():
    g = nx.petersen_graph()
    as_floats = P.IndependentSet(g, weights=[0.1, 0.25] * 5)
    for given in ([Decimal("0.1"), Fraction(1, 4)] * 5, [Fraction(1, 10), Decimal("0.25")] * 5):
        p = P.IndependentSet(g, weights=given)
        with warnings.catch_warnings():
            warnings.simplefilter("error", LazykernWarning)
            assert solve(p, Q.CountingMax(2)) == solve(as_floats, Q.CountingMax(2))
    whole = P.IndependentSet(g, weights=[Fraction(3), Decimal("2")] * 5)
    assert solve(whole, Q.SizeMax()) == solve(P.IndependentSet(g, weights=[3, 2] * 5), Q.SizeMax())
    assert all(isinstance(x, int) for x in solve(whole, Q.SizeMax(2)))


@pytest.mark.parametrize(
    "w",
    [Fraction(1, 3), Decimal("0.1234567891"), Fraction(2**60 + 1, 2), Fraction(10**400, 3)],
    ids=["third", "ten-digits", "past-53-bits", "past-float-range"],
)
def test_a_fraction_no_float_names_is_refused_not_rounded(w):
    with pytest.raises(ValueError, match="no float the solver reads exactly") as err:
        P.IndependentSet((2, []), weights=[w, 1])
    assert len(str(err.value)) < 400


@pytest.mark.parametrize("w", [Decimal("NaN"), Decimal("-Infinity"), Decimal("sNaN")])
def test_decimals_that_are_not_finite_are_refused(w):
    with pytest.raises(ValueError, match="finite"):
        P.IndependentSet((2, []), weights=[w, 1])
