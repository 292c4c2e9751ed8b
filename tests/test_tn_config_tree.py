"""lazykern.tn.config_tree: configurations kept as a tree (``tree_storage=True``), counted, indexed and sampled
exactly, against the brute force and the plain listing."""

from __future__ import annotations

import math
import pickle
import random
from collections import Counter

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn import solve
from lazykern.tn.config_tree import ConfigTree

from ._gtn_brute import Brute


def _petersen_tree() -> ConfigTree:
    tree = solve(P.IndependentSet(nx.petersen_graph()), Q.ConfigsAll(tree_storage=True))
    assert isinstance(tree, ConfigTree)
    return tree


def _every(tree: ConfigTree) -> np.ndarray:
    return tree[:]


def test_the_petersen_tree_holds_its_76_independent_sets_once_each():
    tree = _petersen_tree()
    assert tree.count == len(tree) == 76 and tree.size is None
    rows = solve(P.IndependentSet(nx.petersen_graph()), Q.ConfigsAll())
    every = _every(tree)
    assert every.dtype == np.int64 and len({tuple(r) for r in every}) == 76
    assert sorted(map(tuple, every)) == [tuple(r) for r in rows]
    assert np.array_equal(tree.configurations(), rows)
    assert np.array_equal(tree[-1], every[-1]) and np.array_equal(tree[-76], every[0])
    assert all(np.array_equal(tree[i], every[i]) for i in (0, 17, 75))
    assert np.array_equal(tree[[3, -1, 3]], every[[3, 75, 3]]) and np.array_equal(tree[np.arange(5)], every[:5])
    assert np.array_equal(tree[10:40:3], every[10:40:3]) and tree[80:].shape == (0, 10)
    assert "76 feasible configurations of 10 variables" in repr(tree)


def test_indexing_refuses_what_is_not_an_index_of_the_tree():
    tree = _petersen_tree()
    for bad in (76, -77, 10**30):
        with pytest.raises(IndexError, match="of a tree of 76"):
            tree[bad]
    with pytest.raises(IndexError):
        tree[[0, 76]]
    for bad in (1.0, True, "0", [0, 1.0]):
        with pytest.raises(TypeError, match="indexed by an int"):
            tree[bad]  # type: ignore[index]
    with pytest.raises(ValueError, match="limit=10"):
        tree.configurations(limit=10)


def test_a_uniform_sample_of_the_76_passes_a_chi_square_test():
    """Every draw is an exact uniform integer below the count, read down the tree: 76 x 300 draws land
    on the 76 sets with a chi-square statistic well inside its 75 degrees of freedom."""
    tree = _petersen_tree()
    draws = tree.sample(76 * 300, seed=7)
    assert draws.shape == (76 * 300, 10) and draws.dtype == np.int64
    seen = Counter(map(tuple, draws))
    assert set(seen) == set(map(tuple, tree.configurations()))
    chi2 = sum((n - 300) ** 2 / 300 for n in seen.values())
    assert chi2 < 75 + 6 * math.sqrt(2 * 75)


def test_seeds_make_samples_repeatable_in_every_form_they_come():
    tree = _petersen_tree()
    assert np.array_equal(tree.sample(50, seed=3), tree.sample(50, seed=3))
    assert not np.array_equal(tree.sample(50, seed=3), tree.sample(50, seed=4))
    a = tree.sample(20, seed=np.random.default_rng(5))
    assert np.array_equal(a, tree.sample(20, seed=np.random.default_rng(5)))
    assert np.array_equal(tree.sample(20, seed=random.Random(9)), tree.sample(20, seed=9))
    assert tree.sample(0).shape == (0, 10) and tree.sample(np.int64(2)).shape == (2, 10)
    for bad in (-1, 1.5, True, None):
        with pytest.raises(ValueError, match="sample"):
            tree.sample(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seed"):
        tree.sample(2, seed="x")  # type: ignore[arg-type]


def test_the_numpy_generator_draws_exactly_below_counts_past_64_bits():
    from lazykern.tn.config_tree import _below

    gen = np.random.default_rng(0)
    count = 3 * 2**100 + 1
    draws = [_below(count, gen) for _ in range(200)]
    assert all(0 <= d < count for d in draws) and max(draws) > 2**100
    assert {_below(1, gen) for _ in range(5)} == {0}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_problem_s_trees_are_its_brute_force_configurations(seed):
    """ConfigsAll and ConfigsMax/Min(k) as trees, with fixed vertices, colours, sets, clauses, weights:
    each tree's count, sorted configurations and every index agree with the brute force."""
    rng = np.random.default_rng(seed)
    g = nx.gnp_random_graph(9, 0.35, seed=seed)
    edges = list(g.edges())
    problems = [
        P.IndependentSet(g, weights=[int(w) for w in rng.integers(1, 4, 9)], fixedvertices={0: 0}),
        P.MaximalIS(g),
        P.MaxCut(g, weights=[int(w) for w in rng.integers(-2, 3, len(edges))] if edges else None),
        P.Matching(g),
        P.Coloring(g, 3, fixedvertices={1: 2}),
        P.DominatingSet(g),
        P.SetPacking([[0, 1], [1, 2], [2, 3, 4], [4, 0], [5]]),
        P.SetCovering([[0, 1], [1, 2], [2, 3, 4], [4, 0], [3]], weights=[2, 1, 3, 1, 1]),
        P.Satisfiability([[1, -2], [2, 3], [-1, -3], [4]]),
        P.PaintShop([0, 1, 2, 0, 2, 1]),
        P.SpinGlass((6, [(0, 1), (1, 2, 3), (3, 4), (4, 5), (5, 0)]), [1, -2, 1, 1, -1], h=[0, 1, 0, 0, -1, 0]),
    ]
    for p in problems:
        b = Brute(p)
        tree = solve(p, Q.ConfigsAll(tree_storage=True))
        assert tree.count == len(b.configs_all())
        assert tree.configurations().tolist() == b.configs_all().tolist()
        assert sorted(map(tuple, _every(tree).tolist())) == [tuple(r) for r in b.configs_all().tolist()]
        for k in (1, 3):
            for prop, want in ((Q.ConfigsMax(k, tree_storage=True), b.configs_max(k)),
                               (Q.ConfigsMin(k, tree_storage=True), b.configs_min(k))):  # fmt: skip
                got = solve(p, prop)
                assert [size for size, _ in got] == [size for size, _ in want], (p, prop)
                for (size, t), (_, rows) in zip(got, want):
                    assert t.size == size and t.count == len(rows)
                    assert t.configurations().tolist() == rows.tolist()
                    assert {tuple(r) for r in t.sample(30, seed=1).tolist()} <= {tuple(r) for r in rows.tolist()}


def test_counts_past_64_bits_are_exact_and_their_samples_feasible():
    """The independent sets of a 12 x 12 grid (about 2^87): the tree's count is CountingAll's, and draws
    below it give independent sets whose number of members spreads as the polynomial says."""
    g = nx.convert_node_labels_to_integers(nx.grid_2d_graph(12, 12))
    p = P.IndependentSet(g)
    tree = solve(p, Q.ConfigsAll(tree_storage=True))
    assert tree.count == solve(p, Q.CountingAll()) and tree.count > 2**70
    with pytest.raises(OverflowError, match=r"read \.count"):
        len(tree)
    assert str(tree.count) in repr(tree)
    draws = tree.sample(400, seed=11)
    assert all(p.is_feasible(c) for c in draws)
    poly = solve(p, Q.GraphPolynomial())
    mean = sum(s * c for s, c in enumerate(poly)) / tree.count
    assert abs(draws.sum(axis=1).mean() - mean) < 1.0  # the sizes' spread is about 3: 400 draws, 6+ sigma
    best = solve(p, Q.ConfigsMax(2, tree_storage=True))
    assert [(s, t.count) for s, t in best] == solve(p, Q.CountingMax(2))
    assert all(c.sum() == best[1][0] for c in best[1][1].sample(20, seed=2))


def test_tree_storage_has_no_limit_and_the_limit_s_refusal_names_it():
    g = nx.random_regular_graph(3, 30, seed=1)
    with pytest.raises(ValueError, match="tree_storage=True"):
        solve(P.IndependentSet(g), Q.ConfigsAll(limit=100))
    tree = solve(P.IndependentSet(g), Q.ConfigsAll(limit=100, tree_storage=True))
    assert tree.count == solve(P.IndependentSet(g), Q.CountingAll()) > 100
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="tree_storage"):
            Q.ConfigsAll(tree_storage=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="tree_storage"):
            Q.ConfigsMin(2, tree_storage=bad)  # type: ignore[arg-type]


def test_nothing_feasible_is_an_empty_tree():
    p = P.IndependentSet(nx.path_graph(3), fixedvertices={0: 1, 1: 1})
    tree = solve(p, Q.ConfigsAll(tree_storage=True))
    assert tree.count == 0 and len(tree) == 0 and tree.sample(0).shape == (0, 3)
    assert tree.configurations().shape == (0, 3)
    with pytest.raises(ValueError, match="no configuration"):
        tree.sample(1)
    with pytest.raises(IndexError):
        tree[0]
    assert solve(p, Q.ConfigsMax(2, tree_storage=True)) == []


def test_fixed_values_stay_in_every_sample_and_open_vertices_give_a_tensor_of_trees():
    g = nx.cycle_graph(7)
    tree = solve(P.Coloring(g, 3, fixedvertices={3: 2}), Q.ConfigsAll(tree_storage=True))
    assert tree.count == 3**6 and (tree.sample(100, seed=0)[:, 3] == 2).all()
    tensor = solve(P.IndependentSet(g, openvertices=(0, 1)), Q.ConfigsAll(tree_storage=True))
    assert tensor.shape == (2, 2)
    for index in np.ndindex(2, 2):
        want = Brute(P.IndependentSet(g, fixedvertices=dict(zip((0, 1), index)))).configs_all()
        assert tensor[index].configurations().tolist() == want.tolist()


def test_a_tree_survives_pickling_with_its_answers():
    tree = solve(P.MaxCut(nx.petersen_graph()), Q.ConfigsMax(2, tree_storage=True))[1][1]
    again = pickle.loads(pickle.dumps(tree))
    assert again.count == tree.count and again.size == tree.size
    assert np.array_equal(again.sample(10, seed=4), tree.sample(10, seed=4))


@pytest.mark.gpu
def test_a_tree_built_on_the_gpu_answers_as_the_host_s():
    cupy = pytest.importorskip("cupy")
    g = nx.random_regular_graph(3, 40, seed=3)
    host = solve(P.IndependentSet(g), Q.ConfigsMax(2, tree_storage=True))
    device = solve(P.IndependentSet(g), Q.ConfigsMax(2, tree_storage=True), module=cupy)
    assert [(s, t.count) for s, t in device] == [(s, t.count) for s, t in host]
    for (_, a), (_, b) in zip(host, device):
        assert np.array_equal(a.configurations(), b.configurations())
        assert all(P.IndependentSet(g).is_feasible(c) for c in b.sample(50, seed=1))
    every = solve(P.IndependentSet(g), Q.ConfigsAll(tree_storage=True), module=cupy)
    assert every.count == solve(P.IndependentSet(g), Q.CountingAll())


@pytest.mark.parametrize("k", [1, 2, 4])
def test_the_tree_s_order_is_the_listing_s_order_index_by_index(k):
    """Index i of a tree is column i of the walk that lists every configuration (before sorting): the
    running counts and the mixed-radix split follow the listing's ties and products exactly."""
    g = nx.gnp_random_graph(10, 0.3, seed=k)
    for p in (P.IndependentSet(g, weights=[1, 2, 3, 1, 2, 3, 1, 2, 3, 1]), P.Coloring(g, 3), P.MaxCut(g)):
        for _, tree in solve(p, Q.ConfigsMax(k, tree_storage=True)):
            labels, listed = tree._tree.rows(tree._target, tree._sizes)
            again, found = tree._tree.assignments(tree._target, range(tree.count), tree._sizes)
            assert labels == again and np.array_equal(listed, found)


def test_sizes_one_unit_apart_near_2_to_the_51_stay_apart_in_a_tree():
    """Integer weights near 2^50 (sums one unit apart near 2^51, which float32 could not tell apart): each
    tree holds exactly the brute force's configurations of its size; past 2^53 the property refuses."""
    g = nx.cycle_graph(6)
    with pytest.raises(ValueError, match="past what this property holds exactly"):
        solve(P.IndependentSet(g, weights=[2**55 + i for i in range(6)]), Q.ConfigsMax(3, tree_storage=True))
    p = P.IndependentSet(g, weights=[2**50 + i for i in range(6)])
    want = Brute(p).configs_max(3)
    got = solve(p, Q.ConfigsMax(3, tree_storage=True))
    assert [s for s, _ in got] == [s for s, _ in want]
    for (_, tree), (_, rows) in zip(got, want):
        assert tree.configurations().tolist() == rows.tolist()


@pytest.mark.parametrize("seed", [0, 1])
def test_single_config_max_of_k_gives_one_configuration_at_each_of_the_k_best_sizes(seed):
    """GenericTensorNetworks' SingleConfigMax(k) / SingleConfigMin(k): one configuration of each size,
    best first, each the problem's own at that size; k=None (the default) keeps (size, configuration)."""
    g = nx.gnp_random_graph(9, 0.4, seed=seed)
    for p in (P.IndependentSet(g, weights=list(range(1, 10))), P.MaxCut(g), P.DominatingSet(g)):
        b = Brute(p)
        for prop, want in ((Q.SingleConfigMax(3), b.configs_max(3)), (Q.SingleConfigMin(2), b.configs_min(2))):
            got = solve(p, prop)
            assert [s for s, _ in got] == [s for s, _ in want]
            for (size, config), (_, rows) in zip(got, want):
                assert config.tolist() in rows.tolist() and p.size(config) == size
        size, config = solve(p, Q.SingleConfigMax())
        assert size == b.size_max()[0] and p.size(config) == size
    assert solve(P.IndependentSet(nx.path_graph(2), fixedvertices={0: 1, 1: 1}), Q.SingleConfigMax(2)) == []
    with pytest.raises(ValueError, match="k is the number"):
        Q.SingleConfigMin(k=0)


def test_trees_deeper_than_python_s_recursion_limit_are_built_and_read():
    """A tree of hundreds of levels (600 idle variables, a 1000-vertex path): its labels' order was found
    by recursion, one frame a level, and raised RecursionError."""
    tree = solve(P.MaxCut(nx.empty_graph(600)), Q.ConfigsAll(tree_storage=True))
    assert tree.count == 2**600 and bool(tree) and tree.sample(3, seed=1).shape == (3, 600)
    [(size, best)] = solve(P.IndependentSet(nx.path_graph(1000)), Q.ConfigsMin(1, tree_storage=True))
    assert size == 0 and best.count == 1 and not best[0].any()
    assert [(s, c.shape) for s, c in solve(P.IndependentSet(nx.path_graph(1500)), Q.ConfigsMin(2))] == [
        (0, (1, 1500)),
        (1, (1500, 1500)),
    ]
    empty = solve(P.IndependentSet(nx.path_graph(2), fixedvertices={0: 1, 1: 1}), Q.ConfigsAll(tree_storage=True))
    assert not empty
