"""lazykern.tn._configs (every configuration at the best sizes, as arrays) and the rows it ends in."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import _configs, _tables, solve
from lazykern.tn import problems as P
from lazykern.tn import properties as Q

from ._gtn_brute import Brute


def test_product_is_every_combination_in_itertools_order():
    blocks = [np.array([[7]]), np.array([[1, 2, 3], [4, 5, 6]]), np.zeros((0, 2), int), np.array([[8, 9]])]
    got = _configs._product([blocks[0], blocks[1], blocks[3]])
    want = [(7, *a, *b) for a, b in itertools.product(zip(*blocks[1]), zip(*blocks[3]))]
    assert [tuple(c) for c in got.T] == want
    assert _configs._product([blocks[0], blocks[2]]).tolist() == [[7, 7]]  # two assignments of no label
    empty = _configs._product([blocks[0], np.zeros((1, 0), int)])
    assert empty.shape == (2, 0)  # no assignment of the second: no combination


def test_configurations_put_fixed_values_and_each_assignment_in_place():
    p = P.IndependentSet(nx.path_graph(4), fixedvertices={1: 0})
    tab = _tables.build(p, {1: 0})
    values = np.array([[1, 0, 1], [0, 1, 0]], dtype=np.uint8)  # labels 3 and 0, three assignments
    got = tab.configurations((3, 0), values)
    assert got.dtype == np.int64 and got.shape == (4, 3)
    assert got.T.tolist() == [[0, 0, 0, 1], [1, 0, 0, 0], [0, 0, 0, 1]]
    assert tab.configurations((), np.zeros((0, 1), np.uint8)).T.tolist() == [[0, 0, 0, 0]]


@pytest.mark.parametrize("flavors,n", [(2, 5), (3, 4), (2, 64), (200, 9)])
def test_sorted_rows_are_lexicographic_by_one_key_or_by_every_variable(flavors, n):
    """One integer key where flavors^n fits int64 (2^5, 3^4), every variable past it (2^64, 200^9)."""
    rng = np.random.default_rng(flavors + n)
    rows = rng.integers(0, flavors, size=(500, n))
    rows[:50] = rows[50:100]  # repeats keep their places among equals
    got = _configs.sorted_rows(np.ascontiguousarray(rows.T), flavors)
    assert got.flags.c_contiguous and got.dtype == np.int64
    assert got.tolist() == sorted(rows.tolist())
    assert _configs.sorted_rows(np.zeros((n, 0), np.int64), flavors).shape == (0, n)
    assert _configs.sorted_rows(np.zeros((0, 1), np.int64), flavors).shape == (1, 0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_configuration_and_the_best_ones_equal_the_brute_force(seed):
    """Random graphs with fixed vertices and colours: ConfigsAll and ConfigsMax(2) list exactly the brute
    force's configurations, sorted, as int64 rows."""
    g = nx.gnp_random_graph(11, 0.3, seed=seed)
    for p in (P.IndependentSet(g, fixedvertices={0: 1}), P.Coloring(g, 3), P.MaxCut(g, fixedvertices={2: 1})):
        b = Brute(p)
        every = solve(p, Q.ConfigsAll(limit=10**6))
        assert every.dtype == np.int64 and every.flags.c_contiguous
        assert every.tolist() == b.configs_all().tolist()
        for (size, got), (want_size, want) in zip(solve(p, Q.ConfigsMax(2)), b.configs_max(2), strict=True):
            assert size == want_size and got.tolist() == want.tolist()
