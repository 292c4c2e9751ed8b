"""lazykern.tn.problems: each problem's tables against hand-checked cases, each bad input's error, and
GenericTensorNetworks.jl's published values reproduced through the brute-force oracle (tests/_gtn_brute.py).

The published values cite GenericTensorNetworks.jl v4.0.1 (QuEraComputing/GenericTensorNetworks.jl,
commit 0942d7a), test/ folder; its problem definitions are ProblemReductions.jl's src/models/*.jl
(GiggleLiu/ProblemReductions.jl, commit 8b29f55). Julia vertices are 1-based: Graphs.jl's vertex v is
our index v - 1, and its ``edges(g)`` order is the sorted (src < dst) order used below.
"""

from __future__ import annotations

import math
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import problems as P
from tests._gtn_brute import (
    Brute,
    count_by_contraction,
    laurent_by_contraction,
    log_partition_by_contraction,
    sorted_rows,
)
from tests._gtn_instances import (
    A006506,
    C60_LOG_Z_PER_SPIN,
    CDEFG_EDGES,
    CNF,
    CROSSING_GADGET,
    FIVE,
    PAINT,
    PETERSEN,
    PETERSEN_EDGES,
    SETS,
    SEVEN,
    TUTTE_MAXIMAL_IS_POLYNOMIAL,
    fullerene_graph,
)
from tests._spin_oracles import meant


def test_petersen_is_networkx_petersen():
    assert nx.is_isomorphic(nx.Graph(PETERSEN_EDGES), nx.petersen_graph())


# -- IndependentSet ---------------------------------------------------------------------------------
def test_independent_set_tables():
    p = P.IndependentSet((3, [(0, 1), (1, 2)]), weights=[1, 2, 3])
    assert (p.num_variables, p.num_flavors, p.goal) == (3, 2, "max")
    cons = p.constraints()
    assert [t.variables for t in cons] == [(0, 1), (1, 2)]
    assert all(t.values.dtype == bool and t.values.tolist() == [[True, True], [True, False]] for t in cons)
    objs = p.objectives()
    assert [t.variables for t in objs] == [(0,), (1,), (2,)]
    assert [t.values.tolist() for t in objs] == [[0, 1], [0, 2], [0, 3]]
    assert all(t.values.dtype == np.int64 for t in objs) and p.integer_weights
    assert p.size([1, 0, 1]) == 4 and type(p.size([1, 0, 1])) is int
    assert p.is_feasible([1, 0, 1]) and not p.is_feasible([0, 1, 1])
    assert p.variable_names() == [0, 1, 2]


def test_independent_set_networkx_names_open_and_fixed():
    g = nx.Graph([("a", "b"), ("b", "c")])
    p = P.IndependentSet(g, weights={"a": 2, "b": 1, "c": 5}, openvertices=["c", "a"], fixedvertices={"b": 0})
    assert p.variable_names() == ["a", "b", "c"]
    assert p.openvertices == (2, 0) and p.fixedvertices == {1: 0}
    assert [t.values.tolist() for t in p.objectives()] == [[0, 2], [0, 1], [0, 5]]


def test_petersen_independent_sets():
    """test/interfaces.jl, "independent set problem": SizeMax 4, CountingAll 76, CountingMax 4 x 5,
    CountingMax(2) (3: 30, 4: 5), CountingMax(3) (2: 30, 3: 30, 4: 5), polynomial 1 + 10x + 30x^2 + 30x^3
    + 5x^4, PartitionFunction(0.0) = 76, ConfigsMax(3): 30, 30 and 5 sets of sizes 2, 3, 4."""
    b = Brute(P.IndependentSet(nx.petersen_graph()))
    assert b.size_max() == [4]
    assert b.size_max(3) == [4, 3, 2]
    assert b.counting_all() == 76
    assert b.counting_max() == [(4, 5)]
    assert b.counting_max(2) == [(4, 5), (3, 30)]
    assert b.counting_max(3) == [(4, 5), (3, 30), (2, 30)]
    assert b.polynomial() == [1, 10, 30, 30, 5]
    assert b.log_partition(0.0) == pytest.approx(np.log(76))
    assert [(s, len(c)) for s, c in b.configs_max(3)] == [(4, 5), (3, 30), (2, 30)]
    assert all(c.sum(axis=1).tolist() == [s] * len(c) for s, c in b.configs_max(3))
    assert len(b.configs_all()) == 76
    assert all(b.problem.is_feasible(c) for c in b.configs_all())


def test_petersen_weighted_independent_sets():
    """test/interfaces.jl, "Weighted": weights 1:10 give SizeMax 24, CountingMax 24 x 1, CountingMax(2)
    Max2Poly(1, 1, 24) (23 once, 24 once); weights 0.5 give SizeMax(6).orders [1.5, 2, 2, 2, 2, 2]."""
    b = Brute(P.IndependentSet(PETERSEN, weights=list(range(1, 11))))
    assert b.size_max() == [24] and b.counting_max(2) == [(24, 1), (23, 1)]
    (best,) = b.configs_at(24)
    assert int(best @ np.arange(1, 11)) == 24
    half = Brute(P.IndependentSet(PETERSEN, weights=[0.5] * 10))
    assert half.largest(6) == [2.0] * 5 + [1.5]


def test_open_vertices_tensor():
    """test/configurations.jl, "configs bug fix": vertices "cdefg", edges cd ce cf de ef fg, openvertices
    [1, 4, 5] (c, f, g): SizeMax is reshape([1, 1, 2, -Inf, 2, 2, -Inf, -Inf], 2, 2, 2) (Julia's column
    order: the first open vertex is the fastest index)."""
    names = "cdefg"
    g = nx.Graph()
    g.add_nodes_from(names)
    g.add_edges_from(CDEFG_EDGES)
    b = Brute(P.IndependentSet(g, openvertices=["c", "f", "g"]))
    t = b.tensor(lambda s: s.size_max()[0] if s.counting_all() else -np.inf)
    julia = np.array([1, 1, 2, -np.inf, 2, 2, -np.inf, -np.inf]).reshape(2, 2, 2, order="F")
    assert t.astype(float).tolist() == julia.tolist()


def test_open_vertices_count_of_feasible_entries():
    """test/networks/IndependentSet.jl, "mis compactify": openvertices [1, 4, 6, 3] of the 6-cycle-like
    graph (1,2) (2,3) (4,5) (5,6) (1,6): 12 entries of SizeMax are not -Inf."""
    edges = [(0, 1), (1, 2), (3, 4), (4, 5), (0, 5)]
    b = Brute(P.IndependentSet((6, edges), openvertices=[0, 3, 5, 2]))
    t = b.tensor(lambda s: s.counting_all())
    assert t.shape == (2, 2, 2, 2) and int((t > 0).sum()) == 12


def test_independent_set_tables_contract_with_tropical_einsum():
    """The tables are contraction-ready: max-plus over them (constraints as 0 / -inf) gives Petersen's 4."""
    from lazykern.tn.einsum import contract_network

    p = P.IndependentSet(nx.petersen_graph())
    tables = p.constraints() + p.objectives()
    ops = [np.where(t.values, 0.0, -np.inf) for t in p.constraints()]
    ops += [t.values.astype(np.float64) for t in p.objectives()]
    out = contract_network([t.variables for t in tables], [], ops, semiring="maxplus")
    assert float(out) == 4.0


# -- bad input --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"g": (3, [(0, 0)])}, "self loop"),
        ({"g": (3, [(0, 3)])}, "0..2"),
        ({"g": (3, [(0, 1, 2)])}, "pair"),
        ({"g": (-1, [])}, "non-negative"),
        ({"g": "abc"}, "networkx graph or"),
        ({"g": nx.DiGraph([(0, 1)])}, "directed"),
        ({"g": (3, []), "weights": [1, 2]}, "2 weights for 3 vertices"),
        ({"g": (2, []), "weights": [1.0, np.nan]}, "finite"),
        ({"g": (2, []), "weights": [1.0, np.inf]}, "finite"),
        ({"g": (2, []), "weights": {0: 1}}, "no entry"),
        ({"g": (2, []), "weights": {0: 1, 1: 2, 5: 3}}, "no vertex of this problem"),
        ({"g": (3, []), "openvertices": [7]}, "not a variable"),
        ({"g": (3, []), "openvertices": [1, 1]}, "twice"),
        ({"g": (3, []), "fixedvertices": {7: 0}}, "not a variable"),
        ({"g": (3, []), "fixedvertices": {1: 2}}, "flavors are 0..1"),
        ({"g": (3, []), "fixedvertices": {1: -1}}, "flavors are 0..1"),
        ({"g": (3, []), "openvertices": [1], "fixedvertices": {1: 0}}, "both open and fixed"),
    ],
)
def test_independent_set_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        P.IndependentSet(**kwargs)


@pytest.mark.parametrize("w", [[True, False], [1 + 2j, 1], ["a", 1], np.array([True, False])])
def test_weights_of_the_wrong_type(w):
    with pytest.raises(TypeError, match="weight"):
        P.IndependentSet((2, []), weights=w)


def test_integer_weights_stay_exact():
    big = P.IndependentSet((2, []), weights=[2**62, 2**62])
    assert big.objectives()[0].values.dtype == object
    assert big.size([1, 1]) == 2**63 and type(big.size([1, 1])) is int
    fits = P.IndependentSet((2, []), weights=[np.int64(2**61), 2**61])
    assert fits.objectives()[0].values.dtype == np.int64
    floats = P.IndependentSet((2, []), weights=[0.5, 2])
    assert floats.objectives()[1].values.dtype == np.float64 and not floats.integer_weights
    integral = P.IndependentSet((2, []), weights=[2.0, 3.0])
    assert integral.integer_weights and integral.objectives()[0].values.dtype == np.float64


def test_config_checks():
    p = P.IndependentSet((2, [(0, 1)]))
    with pytest.raises(ValueError, match="one flavor per variable"):
        p.size([1])
    with pytest.raises(ValueError, match="flavors are 0..1"):
        p.is_feasible([0, 2])


def test_sorted_rows_helper():
    assert sorted_rows([[1, 0], [0, 1]]).tolist() == [[0, 1], [1, 0]]


# -- MaximalIS --------------------------------------------------------------------------------------
def test_maximal_is_tables():
    p = P.MaximalIS((3, [(0, 1), (1, 2)]))
    cons = p.constraints()
    assert [t.variables for t in cons] == [(0, 1), (1, 0, 2), (2, 1)]
    assert cons[0].values.tolist() == [[False, True], [True, False]]
    # vertex 1 with neighbours 0 and 2: in and both out, or out and some neighbour in
    v = cons[1].values
    assert v[1, 0, 0] and not v[1, 1, 0] and not v[0, 0, 0] and v[0, 1, 0] and v[0, 1, 1]
    assert [t.values.tolist() for t in p.objectives()] == [[0, 1]] * 3
    assert p.goal == "max"
    lonely = P.MaximalIS((1, []))
    assert lonely.constraints()[0].values.tolist() == [False, True]  # an isolated vertex is always in


def test_maximal_is_problemreductions_example():
    """ProblemReductions.jl src/models/MaximalIS.jl docstring: edges (1,2) (1,3) (3,4) (2,3) (1,4);
    [0, 1, 0, 0] is not feasible; the best is [0, 1, 0, 1]."""
    p = P.MaximalIS((4, [(0, 1), (0, 2), (2, 3), (1, 2), (0, 3)]))
    assert not p.is_feasible([0, 1, 0, 0])
    assert Brute(p).configs_max()[0][1].tolist() == [[0, 1, 0, 1]]


def test_maximal_is_polynomial_counts_maximal_cliques_of_the_complement():
    """test/networks/MaximalIS.jl, "counting maximal IS": the polynomial's coefficient of x^i is the number
    of maximal cliques of size i of the complement graph (a random 3-regular graph; 12 vertices here)."""
    g = nx.random_regular_graph(3, 12, seed=5)
    poly = Brute(P.MaximalIS(g)).polynomial()
    sizes = [len(c) for c in nx.find_cliques(nx.complement(g))]
    assert poly == [sizes.count(i) for i in range(len(poly))]
    assert sum(poly) == len(sizes)


def test_tutte_minimum_maximal_independent_sets():
    """test/networks/MaximalIS.jl, "counting minimum maximal IS" (smallgraph(:tutte), 46 vertices: past brute
    force, so an exact integer contraction with x = a large base): polynomial 2x^13 + 150x^14 + 7510x^15 +
    71669x^16 + 66252x^17 + 14925x^18 + 571x^19; so SizeMin 13, CountingMin 2, CountingMin(3) (2, 150, 7510)."""
    lowest, coeffs = laurent_by_contraction(P.MaximalIS(nx.tutte_graph()))
    assert [0] * lowest + coeffs == TUTTE_MAXIMAL_IS_POLYNOMIAL
    assert (lowest, coeffs[:3]) == (13, [2, 150, 7510])


def test_hard_square_counts():
    """OEIS A006506, the independent sets of the n x n grid, to n = 12 (about 2^87): exact integers."""
    counts = [count_by_contraction(P.IndependentSet(nx.grid_2d_graph(n, n))) for n in range(1, 13)]
    assert counts == A006506
    assert Brute(P.IndependentSet(nx.grid_2d_graph(4, 4))).counting_all() == A006506[3]


def test_contraction_oracle_agrees_with_the_brute_force():
    for p in _random_problems(11):
        if p.integer_weights:
            assert laurent_by_contraction(p) == Brute(p).laurent()
        assert count_by_contraction(p) == Brute(p).counting_all()
        assert log_partition_by_contraction(p, 0.7) == pytest.approx(Brute(p).log_partition(0.7), rel=1e-12)


# -- DominatingSet ----------------------------------------------------------------------------------
def test_dominating_set_tables():
    p = P.DominatingSet((3, [(0, 1), (1, 2)]), weights=[1, 2, 3])
    assert p.goal == "min"
    assert [t.variables for t in p.constraints()] == [(0, 1), (1, 0, 2), (2, 1)]
    assert p.constraints()[0].values.tolist() == [[False, True], [True, True]]
    assert [t.values.tolist() for t in p.objectives()] == [[0, 1], [0, 2], [0, 3]]


def test_dominating_set_published():
    """test/networks/DominatingSet.jl: on Petersen SizeMax is 10, the minimum dominating sets are the
    minimum maximal independent sets, and every maximal independent set dominates.
    ProblemReductions.jl src/models/DominatingSet.jl docstring: path_graph(5) has three best sets."""
    ds = Brute(P.DominatingSet(PETERSEN))
    mis = Brute(P.MaximalIS(PETERSEN))
    assert ds.size_max() == [10]
    (s1, c1), (s2, c2) = ds.configs_min()[0], mis.configs_min()[0]
    assert s1 == s2 and c1.tolist() == c2.tolist()
    p = ds.problem
    assert all(p.is_feasible(c) for c in mis.configs_all())
    path = Brute(P.DominatingSet((5, [(0, 1), (1, 2), (2, 3), (3, 4)])))
    assert path.configs_min()[0][1].tolist() == sorted([[1, 0, 0, 1, 0], [0, 1, 0, 1, 0], [0, 1, 0, 0, 1]])


# -- MaxCut -----------------------------------------------------------------------------------------
def test_max_cut_tables():
    p = P.MaxCut((3, [(0, 1), (1, 2)]), weights={(2, 1): 5, (0, 1): 2})
    assert p.constraints() == []
    assert [(t.variables, t.values.tolist()) for t in p.objectives()] == [
        ((0, 1), [[0, 2], [2, 0]]),
        ((1, 2), [[0, 5], [5, 0]]),
    ]
    assert p.size([0, 1, 0]) == 7


def test_max_cut_published():
    """test/networks/MaxCut.jl: on the 5-vertex graph the polynomial is [2, 2, 4, 12, 10, 2] and two
    configurations cut 5; fixing vertex 1 to 1 and 4 to 0 leaves the one best [1, 0, 1, 0, 0]; Petersen
    with weights 1:15 (Graphs.jl edge order) has 2 maximum cuts. ProblemReductions.jl
    src/models/MaxCut.jl docstring: complete_graph(3) weighted [1, 2, 3]: size([0, 1, 0]) = 4, best [1, 1, 0] and
    [0, 0, 1]."""
    b = Brute(P.MaxCut(FIVE))
    assert b.polynomial() == [2, 2, 4, 12, 10, 2]
    assert [(s, len(c)) for s, c in b.configs_max()] == [(5, 2)]
    fixed = Brute(P.MaxCut(FIVE, fixedvertices={0: 1, 3: 0}))
    assert fixed.configs_max()[0][1].tolist() == [[1, 0, 1, 0, 0]]
    assert Brute(P.MaxCut(PETERSEN, weights=list(range(1, 16)))).counting_max()[0][1] == 2
    k3 = P.MaxCut((3, [(0, 1), (0, 2), (1, 2)]), weights=[1, 2, 3])
    assert k3.size([0, 1, 0]) == 4
    assert Brute(k3).configs_max()[0] == (5, pytest.approx(np.array([[0, 0, 1], [1, 1, 0]])))


# -- Matching ---------------------------------------------------------------------------------------
def test_matching_tables_and_edge_names():
    p = P.Matching((4, [(0, 1), (1, 2), (2, 0)]), openvertices=[(1, 0)], fixedvertices={(2, 1): 1})
    assert p.variable_names() == [(0, 1), (1, 2), (2, 0)]
    assert p.num_variables == 3 and p.openvertices == (0,) and p.fixedvertices == {1: 1}
    # vertex 3 has no edge: no table; vertex 0 holds edges 0 and 2
    assert [t.variables for t in p.constraints()] == [(0, 2), (0, 1), (1, 2)]
    assert p.constraints()[0].values.tolist() == [[True, True], [True, False]]
    with pytest.raises(ValueError, match="not an edge"):
        P.Matching((3, [(0, 1)]), fixedvertices={(0, 2): 1})
    with pytest.raises(ValueError, match="not an edge"):
        P.Matching((3, [(0, 1)]), openvertices=[0])


def test_matching_published():
    """test/networks/Matching.jl: Petersen has 6 maximum matchings of 5 edges, 2 of them hold edge (1, 2);
    the matching polynomial of the 7-vertex graph (1,2) (2,3) (3,4) (4,5) (5,6) (6,1) (1,7) is [1, 7, 13, 5] and
    Petersen's is [1, 15, 75, 145, 90, 6]; weights 2 give SizeMax 10."""
    b = Brute(P.Matching(PETERSEN))
    assert b.counting_max() == [(5, 6)]
    assert b.polynomial() == [1, 15, 75, 145, 90, 6]
    fixed = Brute(P.Matching(PETERSEN, fixedvertices={(0, 1): 1}))
    ((size, configs),) = fixed.configs_max()
    assert size == 5 and len(configs) == 2 and all(configs[:, 0] == 1)
    assert Brute(P.Matching(SEVEN)).polynomial() == [1, 7, 13, 5]
    assert Brute(P.Matching(PETERSEN, weights=[2] * 15)).size_max() == [10]


# -- Coloring ---------------------------------------------------------------------------------------
def test_coloring_tables():
    p = P.Coloring((2, [(0, 1)]), 3, weights=[4])
    assert (p.num_flavors, p.goal, p.constraints()) == (3, "max", [])
    (t,) = p.objectives()
    assert t.values.tolist() == [[0, 4, 4], [4, 0, 4], [4, 4, 0]]
    assert p.size([2, 2]) == 0 and p.size([0, 2]) == 4


@pytest.mark.parametrize("k", [0, -1])
def test_coloring_needs_a_colour(k):
    with pytest.raises(ValueError, match="at least 1"):
        P.Coloring(PETERSEN, k)


def test_coloring_published():
    """test/networks/Coloring.jl: 12 proper 3-colourings of the 5-vertex graph, 120 of Petersen; weights 2
    give SizeMax 30 (the sum of the weights); the empty graph's SizeMax is 0."""
    assert Brute(P.Coloring(FIVE, 3)).counting_max() == [(6, 12)]
    assert Brute(P.Coloring(PETERSEN, 3)).counting_max() == [(15, 120)]
    assert Brute(P.Coloring(PETERSEN, 3, weights=[2] * 15)).size_max() == [30]
    assert Brute(P.Coloring((4, []), 3)).size_max() == [0]


def test_coloring_crossing_gadget_open_vertices():
    """test/networks/Coloring.jl, "planar gadget checking": open vertices 3 and 5 (Julia); at every entry
    (i, j) the best colourings give vertices 1 and 5 colour j, vertices 3 and 7 colour i."""
    p = P.Coloring(CROSSING_GADGET, 3, openvertices=[2, 4])
    best = Brute(p).tensor(lambda s: s.configs_max()[0][1])
    for i in range(3):
        for j in range(3):
            c = best[i, j]
            assert len(c) > 0
            assert (c[:, 0] == j).all() and (c[:, 4] == j).all() and (c[:, 2] == i).all() and (c[:, 6] == i).all()


# -- SetPacking / SetCovering -----------------------------------------------------------------------


def test_set_tables():
    p = P.SetPacking([["a", "b"], ["b"], []], weights=[1, 2, 3])
    assert p.variable_names() == [("a", "b"), ("b",), ()] and p.elements == ["a", "b"]
    assert [t.variables for t in p.constraints()] == [(0,), (0, 1)]
    assert p.constraints()[1].values.tolist() == [[True, True], [True, False]]
    assert [t.values.tolist() for t in p.objectives()] == [[0, 1], [0, 2], [0, 3]]
    c = P.SetCovering([["a", "b"], ["b"]], fixedvertices={1: 0})
    assert c.goal == "min" and c.fixedvertices == {1: 0}
    assert c.constraints()[1].values.tolist() == [[False, True], [True, True]]
    with pytest.raises(ValueError, match="index 0..1"):
        P.SetCovering([["a"], ["b"]], openvertices=["a"])


def test_set_packing_published():
    """test/networks/SetPacking.jl: the best packings take 2 sets, among them [0,0,1,1,0], [1,0,0,1,0] and
    [0,1,1,0,0] (the same three as ProblemReductions.jl's SetPacking docstring)."""
    ((size, configs),) = Brute(P.SetPacking(SETS)).configs_max()
    assert size == 2
    assert configs.tolist() == sorted([[0, 0, 1, 1, 0], [1, 0, 0, 1, 0], [0, 1, 1, 0, 0]])


def test_set_covering_published():
    """test/networks/SetCovering.jl: the smallest covers take 3 sets, among them [1,0,1,1,0] and
    [1,0,1,0,1]. ProblemReductions.jl src/models/SetCovering.jl docstring: sets [1,2,3] [2,4] [1,4]
    weighted 1, 2, 3: [1, 0, 1] has size 4 and covers, [0, 1, 1] has size 5 and does not."""
    ((size, configs),) = Brute(P.SetCovering(SETS)).configs_min()
    assert size == 3
    rows = configs.tolist()
    assert [1, 0, 1, 1, 0] in rows and [1, 0, 1, 0, 1] in rows
    p = P.SetCovering([[1, 2, 3], [2, 4], [1, 4]], weights=[1, 2, 3])
    assert (p.size([1, 0, 1]), p.is_feasible([1, 0, 1])) == (4, True)
    assert (p.size([0, 1, 1]), p.is_feasible([0, 1, 1])) == (5, False)


@pytest.mark.parametrize(
    "sets, match",
    [("abc", "sequence of sets"), ([[1], "ab"], "list of elements"), ([[1, 1]], "twice"), ([[[1]]], "hashable")],
)
def test_set_bad_input(sets, match):
    for cls in (P.SetPacking, P.SetCovering):
        with pytest.raises(ValueError, match=match):
            cls(sets)


# -- Satisfiability ---------------------------------------------------------------------------------


def _holds(cnf, config):
    return all(any(config[abs(x) - 1] == (x > 0) for x in clause) for clause in cnf)


def test_satisfiability_tables():
    p = P.Satisfiability([[1, -2], [2, 2, -3]], weights=[5, 1])
    assert p.constraints() == [] and p.variable_names() == [1, 2, 3]
    t0, t1 = p.objectives()
    assert t0.variables == (0, 1) and t0.values.tolist() == [[5, 0], [5, 5]]
    assert t1.variables == (1, 2) and t1.values.tolist() == [[1, 0], [1, 1]]
    assert P.Satisfiability([[1]], num_variables=3).num_variables == 3
    assert P.Satisfiability([[1, -3]], fixedvertices={3: 1}).fixedvertices == {2: 1}


def test_satisfiability_published():
    """test/networks/Satisfiability.jl, "enumeration - sat" and "weighted cnf": SizeMin is the sum of the
    weights less 2 (unit weights) or less 4 (weights 2); the configurations of the largest size are exactly
    the satisfying assignments."""
    b = Brute(P.Satisfiability(CNF))
    assert b.size_min() == [4 - 2] and b.size_max() == [4]
    sat = {tuple(c) for c in b.configs_max()[0][1].tolist()}
    every = [tuple((i >> k) & 1 for k in range(6)) for i in range(64)]
    assert sat == {c for c in every if _holds(CNF, c)} and len(sat) > 0
    w = Brute(P.Satisfiability(CNF, weights=[2] * 4))
    assert w.size_min() == [8 - 4]
    assert {tuple(c) for c in w.configs_max()[0][1].tolist()} == sat


@pytest.mark.parametrize(
    "cnf, match",
    [
        ([[1, 0]], "holds 0"),
        ([[]], "empty"),
        ([3], "a clause is a list"),
        ([[1.5]], "nonzero integers"),
        ([[True]], "nonzero integers"),
        ("p cnf", "sequence of clauses"),
    ],
)
def test_satisfiability_bad_input(cnf, match):
    with pytest.raises(ValueError, match=match):
        P.Satisfiability(cnf)


def test_satisfiability_num_variables_too_small():
    with pytest.raises(ValueError, match="names variable 4"):
        P.Satisfiability([[4]], num_variables=3)


# -- PaintShop --------------------------------------------------------------------------------------
def _painting(sequence, config):
    """ProblemReductions' paint_shop_coloring_from_config: a car's first occurrence gets its flavor."""
    cars = list(dict.fromkeys(sequence))
    seen, out = set(), []
    for car in sequence:
        colour = config[cars.index(car)]
        out.append(colour if car not in seen else 1 - colour)
        seen.add(car)
    return out


def test_paint_shop_tables():
    p = P.PaintShop("abba")
    assert p.variable_names() == ["a", "b"] and p.goal == "min"
    objs = p.objectives()
    assert [t.variables for t in objs] == [(0, 1), (1,), (1, 0)]
    assert objs[0].values.tolist() == [[0, 1], [1, 0]]  # first a, first b: a change when the flavors differ
    assert objs[1].values.tolist() == [1, 1]  # b next to b: always a change
    assert objs[2].values.tolist() == [[0, 1], [1, 0]]  # second b, second a: each the other colour, so the same rule
    ab = P.PaintShop("aabb").objectives()[1]  # second a, first b: a change when the flavors agree
    assert ab.variables == (0, 1) and ab.values.tolist() == [[1, 0], [0, 1]]


def test_paint_shop_published():
    """test/networks/PaintShop.jl: "abaccb" needs 2 colour changes at best, [1, 0, 0] is among the best and
    its painting changes colour twice. ProblemReductions.jl src/models/Paintshop.jl docstring: [0, 1, 0] has
    size 4, the best are [1, 0, 0] and [0, 1, 1]."""
    seq = PAINT
    b = Brute(P.PaintShop(seq))
    ((size, configs),) = b.configs_min()
    assert size == 2 and configs.tolist() == [[0, 1, 1], [1, 0, 0]]
    paint = _painting(seq, [1, 0, 0])
    assert sum(paint[i] != paint[i + 1] for i in range(len(seq) - 1)) == 2
    assert b.problem.size([0, 1, 0]) == 4
    for config in b.configs_all():
        paint = _painting(seq, list(config))
        assert b.problem.size(config) == sum(paint[i] != paint[i + 1] for i in range(len(seq) - 1))


@pytest.mark.parametrize("seq, match", [("aab", "'b' appears 1 times"), ("aaa", "3 times"), ([[1], [1]], "hashable")])
def test_paint_shop_bad_input(seq, match):
    with pytest.raises(ValueError, match=match):
        P.PaintShop(seq)


# -- SpinGlass --------------------------------------------------------------------------------------
def test_spin_glass_matches_networks_energy():
    """The size is lazykern.tn.networks' energy, flavor 0 is spin +1 (networks.SPIN)."""
    from lazykern.tn import networks

    assert list(P.SPIN) == networks.SPIN.tolist()
    rng = np.random.default_rng(3)
    sg = networks.SpinGlass(
        6, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 3)], rng.integers(-3, 4, 7), h=rng.integers(-2, 3, 6)
    )
    p = P.SpinGlass.from_instance(sg)
    for i in range(64):
        config = [(i >> k) & 1 for k in range(6)]
        assert p.size(config) == sg.energy(networks.SPIN[config])


def test_spin_glass_tables_and_hyperedges():
    p = P.SpinGlass((3, [(0, 1, 2)]), J=[2], h={0: 1, 1: 0, 2: 0})
    assert p.goal == "min" and p.constraints() == []
    t, h0, _, _ = p.objectives()
    assert t.variables == (0, 1, 2)
    assert t.values[0, 0, 0] == -2 and t.values[1, 0, 0] == 2 and t.values[1, 1, 0] == -2 and t.values[1, 1, 1] == 2
    assert h0.values.tolist() == [-1, 1]
    plain = P.SpinGlass([[0, 1], [1, 2, 3]], J=[1.0, 0.5])
    assert plain.num_variables == 4 and not plain.integer_weights
    assert P.SpinGlass(nx.path_graph(3), J=[1, 1]).variable_names() == [0, 1, 2]


def test_spin_glass_problemreductions_example():
    """ProblemReductions.jl src/models/SpinGlass.jl docstring: edges (1,2) (1,3) (2,3) (3,4) (Graphs.jl
    order) with J = [1, -1, 1, -1], h = [1, -1, -1, 1]: size([1, 0, 0, 1]) = -2 and the best is [1, 0, 1, 1].
    Its (J, h) is our (-J, -h)."""
    J, h = [1, -1, 1, -1], [1, -1, -1, 1]
    p = P.SpinGlass((4, [(0, 1), (0, 2), (1, 2), (2, 3)]), J=[-x for x in J], h=[-x for x in h])
    assert p.size([1, 0, 0, 1]) == -2
    assert Brute(p).configs_min()[0][1].tolist() == [[1, 0, 1, 1]]


def test_spin_glass_published_relations():
    """test/networks/SpinGlass.jl: Petersen with J = 1, h = 0 (GTN's sign): CountingAll is 1024, and the
    polynomial's lowest and highest exponents are the smallest and largest energies; SizeMax(2) are the two
    largest energies (with multiplicity)."""
    edges = PETERSEN_EDGES
    p = P.SpinGlass((10, edges), J=[-1] * 15)  # GTN's J = 1
    b = Brute(p)
    energies = sorted(sum(SPIN_OF(c, u) * SPIN_OF(c, v) for u, v in edges) for c in range(1024))
    assert b.counting_all() == 1024
    lo, coeffs = b.laurent()
    assert lo == energies[0] and lo + len(coeffs) - 1 == energies[-1]
    assert b.largest(2) == energies[-1:-3:-1]
    assert b.size_min() == [energies[0]]


def SPIN_OF(c, i):
    return 1 - 2 * ((c >> i) & 1)


@pytest.mark.parametrize(
    "args, match",
    [
        (((3, [(0, 1, 1)]), [1]), "a vertex twice"),
        (((3, [(0, 1), (1, 0)]), [1, 2]), "appears twice"),
        (((3, [()]), [1]), "empty"),
        (((3, [(0, 1)]), [1, 2]), "2 weights for 1 edges"),
        (((3, [(0, 1)]), None), "needs J"),
    ],
)
def test_spin_glass_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        P.SpinGlass(*args)


def test_c60_partition_function():
    """test/interfaces.jl, "partition function": C60 (UnitDiskGraph(fullerene(), sqrt(5))) as a spin glass
    with GTN's J = 1, h = 0 (our J = -1): log Z(beta = 1) / 60 = 1.3073684577607942 (60 spins: one float
    contraction, not the brute force)."""
    n, edges = fullerene_graph()
    assert (n, len(edges)) == (60, 90)
    p = P.SpinGlass((n, edges), J=[-1] * len(edges))
    assert log_partition_by_contraction(p, 1.0) / n == pytest.approx(C60_LOG_Z_PER_SPIN, rel=1e-12)


# -- every problem: size() is the sum over the tables ----------------------------------------------
def _random_problems(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    g = nx.gnp_random_graph(n, 0.5, seed=int(rng.integers(1 << 30)))
    m = g.number_of_edges()
    wv = rng.integers(-5, 6, n).tolist()
    we = rng.integers(-5, 6, m).tolist()
    sets = [rng.choice(6, int(rng.integers(0, 4)), replace=False).tolist() for _ in range(n)]
    cnf = [
        [
            int(v) * int(s)
            for v, s in zip(rng.choice(np.arange(1, n + 1), int(rng.integers(1, 4))), rng.choice([-1, 1], 3))
        ]
        for _ in range(4)
    ]
    cars = list(range(n)) * 2
    rng.shuffle(cars)
    yield P.IndependentSet(g, wv)
    yield P.MaximalIS(g, rng.random(n).tolist())
    yield P.DominatingSet(g, wv)
    yield P.MaxCut(g, we)
    yield P.Matching(g, rng.random(m).tolist())
    yield P.Coloring(g, int(rng.integers(1, 4)), we)
    yield P.SetPacking(sets, wv)
    yield P.SetCovering(sets, wv)
    yield P.Satisfiability(cnf, rng.integers(1, 4, 4).tolist())
    yield P.PaintShop(cars)
    yield P.SpinGlass(g, we, wv)


@pytest.mark.parametrize("seed", range(6))
def test_size_is_the_sum_over_the_tables(seed):
    for p in _random_problems(seed):
        b = Brute(p)
        for row, size, feasible in zip(b.configs, b.sizes, b.feasible):
            entries = [t.values[tuple(row[list(t.variables)])] for t in p.objectives()]
            if p.integer_weights:
                assert p.size(row) == sum(entries) == size
            else:  # the float nearest the exact sum of the entries as meant; the oracle sums floats
                exact = sum((meant(x) for x in entries), Fraction(0))
                assert p.size(row) == exact.numerator / exact.denominator
                assert math.isclose(p.size(row), size, rel_tol=1e-12, abs_tol=1e-12)
            assert (
                p.is_feasible(row) == all(t.values[tuple(row[list(t.variables)])] for t in p.constraints()) == feasible
            )
            if p.integer_weights:
                assert type(p.size(row)) is int


# -- repeated edges: refused where an edge carries a weight or is a variable, dropped where it changes nothing
@pytest.mark.parametrize("cls", [P.MaxCut, P.Matching, lambda g, **kw: P.Coloring(g, 3, **kw)])
def test_repeated_edges_are_refused_where_they_matter(cls):
    with pytest.raises(ValueError, match=r"edge 1 \(1, 0\) appears twice"):
        cls((3, [(0, 1), (1, 0)]))
    with pytest.raises(ValueError, match="self loop"):
        cls((3, [(0, 1), (2, 2)]))
    multi = nx.MultiGraph([(0, 1), (0, 1)])
    with pytest.raises(ValueError, match="appears twice"):
        cls(multi)


@pytest.mark.parametrize("cls", [P.IndependentSet, P.MaximalIS, P.DominatingSet])
def test_repeated_edges_are_dropped_where_they_change_nothing(cls):
    once, twice = cls((3, [(0, 1), (1, 2)])), cls((3, [(0, 1), (1, 0), (1, 2)]))
    assert Brute(once).counts() == Brute(twice).counts()
    with pytest.raises(ValueError, match="self loop"):
        cls((3, [(1, 1)]))


def test_edge_weights_by_name():
    with pytest.raises(ValueError, match=r"names \(0, 2\): no edge of this problem"):
        P.MaxCut((3, [(0, 1), (1, 2)]), weights={(0, 1): 1, (0, 2): 2})
    with pytest.raises(ValueError, match="gives edge"):
        P.MaxCut((3, [(0, 1)]), weights={(0, 1): 1, (1, 0): 2})
    with pytest.raises(ValueError, match="integer"):
        P.Coloring(PETERSEN, 2.0)


def test_folding_keeps_every_table_and_its_total():
    """_tables._fold merges groups into the groups that hold their variables: whatever is left
    unset (no mask, no sizes), the folded tables allow and score every assignment exactly as the
    groups did, and every group's variables lie in one folded table."""
    import itertools

    from lazykern.tn import _tables

    rng = np.random.default_rng(8)
    n, flavors = 5, 2
    for integer in (True, False):
        for _ in range(20):
            groups = {}
            for size in rng.integers(1, 4, 6):
                labels = tuple(sorted(rng.choice(n, size, replace=False).tolist()))
                shape = (flavors,) * len(labels)
                mask = rng.random(shape) < 0.8 if rng.random() < 0.6 else None
                values = rng.integers(-3, 4, shape)
                sizes = (values.astype(object) if integer else values * 0.5) if rng.random() < 0.6 else None
                groups[labels] = [mask, sizes]
            folded = _tables._fold({k: list(v) for k, v in groups.items()}, flavors, integer)
            assert all(any(set(g) <= set(f) for f in folded) for g in groups)
            for f, (m, s) in folded.items():
                assert m.dtype == bool and m.shape == s.shape == (flavors,) * len(f)
                assert s.dtype == (object if integer else np.float64)
            for config in itertools.product(range(flavors), repeat=n):
                want_ok = all(m is None or m[tuple(config[v] for v in g)] for g, (m, _) in groups.items())
                want = sum(s[tuple(config[v] for v in g)] for g, (_, s) in groups.items() if s is not None)
                got_ok = all(m[tuple(config[v] for v in f)] for f, (m, _) in folded.items())
                got = sum(s[tuple(config[v] for v in f)] for f, (_, s) in folded.items())
                assert got_ok == want_ok and got == want
