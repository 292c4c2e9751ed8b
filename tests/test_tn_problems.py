"""lazykern.tn.problems: each problem's tables against hand-checked cases, each bad input's error, and
GenericTensorNetworks.jl's published values reproduced through the brute-force oracle (tests/_gtn_brute.py).

The published values cite GenericTensorNetworks.jl v4.0.1 (QuEraComputing/GenericTensorNetworks.jl,
commit 0942d7a), test/ folder; its problem definitions are ProblemReductions.jl's src/models/*.jl
(GiggleLiu/ProblemReductions.jl, commit 8b29f55). Julia vertices are 1-based: Graphs.jl's vertex v is
our index v - 1, and its ``edges(g)`` order is the sorted (src < dst) order used below.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import problems as P
from tests._gtn_brute import Brute, sorted_rows

# Graphs.jl's smallgraph(:petersen), edges in Graphs.jl order, 0-based.
PETERSEN_EDGES = [
    (0, 1), (0, 4), (0, 5), (1, 2), (1, 6), (2, 3), (2, 7), (3, 4),
    (3, 8), (4, 9), (5, 7), (5, 8), (6, 8), (6, 9), (7, 9),
]  # fmt: skip
PETERSEN = (10, PETERSEN_EDGES)


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
    g.add_edges_from(["cd", "ce", "cf", "de", "ef", "fg"])
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
        ({"g": (2, []), "weights": {0: 1, 1: 2, 5: 3}}, "not a vertex"),
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
