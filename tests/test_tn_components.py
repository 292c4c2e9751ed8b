"""Small independent components counted on the host, exactly (lazykern/tn/_components.py).

Counting properties of problems with isolated vertices, idle SAT variables and small components beside
a larger one, weighted, fixed and open, against brute force; and a problem of thousands of idle
variables, which as one network took a pass per prime over every leaf (minutes), answered at once.
"""

from __future__ import annotations

import importlib
import time
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

from lazykern.errors import LazykernWarning
from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn import solve
from lazykern.tn.algebras import polynomial

from ._gtn_brute import Brute, sorted_rows

C = importlib.import_module("lazykern.tn._components")
S = importlib.import_module("lazykern.tn.solver")


def _graph(seed: int) -> nx.Graph:
    """A 7-vertex random graph (one larger component, often), a triangle, a lone edge and isolated vertices."""
    rng = np.random.default_rng(seed)
    g = nx.disjoint_union_all([nx.gnp_random_graph(7, 0.5, seed=seed), nx.complete_graph(3), nx.path_graph(2)])
    g.add_nodes_from(range(12, 12 + int(rng.integers(1, 4))))
    return g


def _problems(seed: int) -> list:
    rng = np.random.default_rng(seed)
    g = _graph(seed)
    n = g.number_of_nodes()
    weights = [int(w) for w in rng.integers(-2, 4, n)]
    spins = list(g.edges())
    return [
        P.IndependentSet(g),
        P.IndependentSet(g, weights=weights),
        P.DominatingSet(g),
        P.MaxCut(g),
        P.Coloring(nx.disjoint_union_all([nx.cycle_graph(4), nx.complete_graph(3), nx.empty_graph(2)]), 3),
        P.SpinGlass((n, spins), J=rng.integers(-2, 3, len(spins)).tolist(), h=rng.integers(-1, 2, n).tolist()),
        P.Satisfiability([[1, -2], [2, 3], [-5], [9, -9]]),
        P.IndependentSet(g, fixedvertices={0: 1, n - 1: 0}),
    ]


@pytest.mark.parametrize("seed", range(6))
def test_counts_with_small_components_equal_brute_force(seed):
    for p in _problems(seed):
        b = Brute(p)
        for k in (1, 2, 3):
            assert solve(p, Q.SizeMax(k)) == b.size_max(k), (p, k)
            assert solve(p, Q.SizeMin(k)) == b.size_min(k), (p, k)
            assert solve(p, Q.CountingMax(k)) == b.counting_max(k), (p, k)
            assert solve(p, Q.CountingMin(k)) == b.counting_min(k), (p, k)
        assert solve(p, Q.CountingAll()) == b.counting_all()
        for beta in (0.0, 0.7, 3.0):
            assert solve(p, Q.PartitionFunction(beta)) == pytest.approx(b.log_partition(beta), rel=1e-12, abs=1e-12)
        for prop, best in ((Q.SingleConfigMax(), b.size_max()), (Q.SingleConfigMin(), b.size_min())):
            size, config = solve(p, prop)
            assert [size] == best and p.is_feasible(config) and p.size(config) == size
        assert solve(p, Q.GraphPolynomial(laurent=True)) == b.laurent()
        for (size, rows), (want_size, want_rows) in zip(solve(p, Q.ConfigsMax(2)), b.configs_max(2), strict=True):
            assert size == want_size and np.array_equal(sorted_rows(rows), sorted_rows(want_rows))
        assert np.array_equal(sorted_rows(solve(p, Q.ConfigsAll())), sorted_rows(b.configs_all()))
        if b.laurent()[0] >= 0:
            assert solve(p, Q.GraphPolynomial()) == b.polynomial()


def test_components_are_set_apart_only_where_small_and_exact():
    g = _graph(1)
    tab = S._tables.build(P.IndependentSet(g), {})
    parts = C.split(tab)
    assert parts is not None and parts.rest is not None
    small_vertices = set(range(7, g.number_of_nodes()))  # the triangle, the edge, the isolated vertices
    assert set(parts.rest.free) == set(range(7)) - (set(nx.isolates(g.subgraph(range(7)))))
    small = Brute(P.IndependentSet(g.subgraph(small_vertices).copy())).counting_all()
    assert sum(parts.histogram(C.keeper(None, True)).values()) == small
    assert C.split(S._tables.build(P.IndependentSet(nx.petersen_graph()), {})) is None
    one = S._tables.build(P.IndependentSet(nx.path_graph(3)), {})
    assert C.split(one) is None  # one component: the network, as always
    with pytest.warns(LazykernWarning, match="summed as float64"):
        floats = S._tables.build(P.IndependentSet((3, []), weights=[1 / 3, 0.5, 2.0**60]), {})
    assert not floats.integer and C.split(floats) is None


def test_identical_components_are_raised_to_their_number():
    h = {0: 1, 2: 1}
    keep = C.keeper(None, True)
    assert C.power(h, 5, keep) == C.merge(C.merge(C.merge(C.merge(h, h, keep), h, keep), h, keep), h, keep)
    assert C.power(h, 0, keep) == {0: 1}
    assert C.keeper(2, False)({3: 1, 1: 4, 2: 2}) == {1: 4, 2: 2}
    assert C.keeper(0, True)({3: 1, 1: 4}) == {0: 5}
    wide = {i: i + 1 for i in range(200)}
    assert C.merge(wide, wide, keep) == {
        s: sum((i + 1) * (s - i + 1) for i in range(max(0, s - 199), min(s, 199) + 1)) for s in range(399)
    }


def test_thousands_of_idle_variables_are_counted_at_once():
    n = 3000
    p = P.Satisfiability([[n]])  # n - 1 variables in no clause
    t = time.perf_counter()
    assert solve(p, Q.CountingAll()) == 2**n  # every configuration is feasible, one clause satisfied or not
    assert solve(p, Q.CountingMax()) == [(1, 2 ** (n - 1))]
    assert solve(p, Q.CountingMin(2)) == [(0, 2 ** (n - 1)), (1, 2 ** (n - 1))]
    assert solve(p, Q.GraphPolynomial()) == [2 ** (n - 1), 2 ** (n - 1)]
    assert solve(p, Q.SizeMax(3)) == [1, 0] and solve(p, Q.SizeMin()) == [0]
    size, config = solve(p, Q.SingleConfigMax())
    assert size == 1 and config[n - 1] == 1 and config.shape == (n,)
    # counted apart, a configuration set past its limit is refused at once, its count named by its size
    with pytest.raises(ValueError, match=r"ConfigsAll: the problem has about 2\^3000\.0 feasible configurations"):
        solve(p, Q.ConfigsAll())
    with pytest.raises(ValueError, match=r"ConfigsMax: the problem has about 2\^2999\.0 configurations"):
        solve(p, Q.ConfigsMax(1))
    assert solve(p, Q.PartitionFunction(1.0)) == pytest.approx((n - 1) * np.log(2) + np.log1p(np.e))
    weighted = P.IndependentSet((n, []), weights=[1 + (v % 3) for v in range(n)])
    poly = solve(weighted, Q.GraphPolynomial())
    assert len(poly) == 2 * n + 1 and poly[0] == 1 and poly[-1] == 1 and sum(poly) == 2**n
    assert time.perf_counter() - t < 60  # as one network: minutes (a pass per prime over n leaves)


def test_decimal_weights_and_a_degree_past_the_limit():
    p = P.IndependentSet((4, [(0, 1)]), weights=[0.5, 0.25, 1.5, 0.1])
    b = Brute(p)
    assert solve(p, Q.CountingMax(3)) == b.counting_max(3)
    assert all(isinstance(v, float) for v, _ in solve(p, Q.CountingMin(2)))
    with pytest.raises(ValueError, match="integer sizes"):
        solve(p, Q.GraphPolynomial())
    heavy = P.IndependentSet((3, []), weights=[1, 2, polynomial.DEGREE_MAX])
    with pytest.raises(ValueError, match="degree"):
        solve(heavy, Q.GraphPolynomial())
    assert solve(heavy, Q.CountingAll()) == 8
    assert Fraction(solve(heavy, Q.CountingMax())[0][0]) == 3 + polynomial.DEGREE_MAX


def test_open_vertices_with_components():
    g = _graph(2)
    p = P.IndependentSet(g, openvertices=(0, 12))
    got = solve(p, Q.CountingAll())
    b = Brute(p)
    want = b.tensor(lambda r: r.counting_all())
    assert got.shape == (2, 2) and got.tolist() == want.tolist()


@pytest.mark.parametrize("laurent", [False, True])
def test_a_degree_past_the_limit_from_small_components_is_refused_at_once(laurent):
    """Sizes add over independent components: 20000 isolated vertices of weight 1 (beside a 7-vertex path,
    contracted) make a polynomial of degree past what this solver gives; refused naming the whole span,
    unmerged."""
    n = 20000
    t = time.perf_counter()
    with pytest.raises(ValueError, match=r"sizes span 0\.\.20000, a polynomial of degree 20000"):
        solve(P.IndependentSet((n, [])), Q.GraphPolynomial(laurent=laurent))
    path = [(n + i, n + i + 1) for i in range(6)]  # 7 vertices, 128 configurations: contracted, at most 4 of them
    with pytest.raises(ValueError, match=r"sizes span 0\.\.20004, a polynomial of degree 20004"):
        solve(P.IndependentSet((n + 7, path)), Q.GraphPolynomial(laurent=laurent))
    assert time.perf_counter() - t < 30
