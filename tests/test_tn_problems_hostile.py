"""The hostile round on ``lazykern.tn.problems`` / ``solve``: huge exponents a polynomial never reaches, k
past the sizes that occur, float weights spanning many orders of magnitude, sizes past float64's range
in the partition function, and inputs given as sets (whose order follows hashes)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from lazykern.errors import LazykernWarning
from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn import solve, solver
from lazykern.tn.algebras import polynomial
from lazykern.tn.solving.values import k_cap
from tests._gtn_brute import Brute

B = 2**45


def _lazykern_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, LazykernWarning)]


# ------------------------------------------------------------ 1. polynomial powers --
def test_a_huge_exponent_no_feasible_configuration_reaches_costs_no_memory():
    p = P.SetPacking([[3, 0, 1], [3, 2], [2], [2, 1, 0]], weights=[1, 1, 0, B], fixedvertices={1: 1})
    assert solve(p, Q.GraphPolynomial()) == [0, 1] == Brute(p).polynomial()
    q = P.MaximalIS((4, [(0, 2), (0, 3), (1, 2), (1, 3)]), weights=[B, 0, B, 0])
    assert solve(q, Q.GraphPolynomial(laurent=True)) == (B, [2]) == Brute(q).laurent()


def test_a_polynomial_of_sizes_past_int64_entries_keeps_its_exponents_exact():
    # 2^70 entries, every feasible size 0 or 1: exponents past int64 in the tables, a degree of 1
    p = P.SetPacking([[0, 1], [1], [0]], weights=[2**70, 1, 0], fixedvertices={1: 1})
    assert solve(p, Q.GraphPolynomial()) == Brute(p).polynomial() == [0, 2]


def test_powers_modulo_matches_pow_for_int64_and_object_exponents():
    rng = np.random.default_rng(3)
    small = rng.integers(0, 3000, (2, 3))
    huge = np.array([[0, 1, 2**64 + 3], [2**200, 2097142, 2097143 * 5]], dtype=object)
    points = np.arange(1, 30, dtype=np.int64)
    primes = (2097143, 2097133, 7)  # 7: points that are its multiples stay 0 at every exponent >= 1
    for exponents in (small, huge):
        mask = np.array([[True, True, False], [True, True, True]])
        got = polynomial.powers_modulo(exponents, mask, points, primes)
        assert got.shape == (3, 29, 2, 3) and got.dtype == np.float64
        for table, p in zip(got, primes):
            for i, x in enumerate(points.tolist()):
                want = [pow(x, int(e), p) * bool(m) for e, m in zip(exponents.ravel(), mask.ravel())]
                assert table[i].ravel().tolist() == want


# ----------------------------------------------------------------------- 2. k cap --
def test_k_past_the_sizes_that_occur_costs_nothing():
    p = P.IndependentSet((3, [(0, 1), (1, 2)]))
    b = Brute(p)
    assert solve(p, Q.SizeMax(100000)) == [2, 1, 0] == b.size_max(3)
    assert solve(p, Q.SizeMin(1000)) == [0, 1, 2]
    assert solve(p, Q.CountingMin(100000)) == b.counting_min(3)
    got = solve(p, Q.ConfigsMax(100000))
    assert [(s, rows.tolist()) for s, rows in got] == [(s, rows.tolist()) for s, rows in b.configs_max(3)]


def test_k_is_capped_by_configurations_and_by_the_size_range():
    path = solver._tables.build(P.IndependentSet((3, [(0, 1), (1, 2)])), {})
    assert k_cap(path, 100000) == 3 and k_cap(path, 2) == 2  # sizes 0..2
    heavy = solver._tables.build(P.IndependentSet((2, []), weights=[10**6, 1]), {})
    assert k_cap(heavy, 100000) == 4  # 2^2 configurations, a range of 10^6 + 2
    with pytest.warns(LazykernWarning, match="not short decimals"):
        thirds = solver._tables.build(P.IndependentSet((3, []), weights=[1 / 3, 1 / 7, 1 / 9]), {})
    assert k_cap(thirds, 100000) == 8  # floats: the configurations alone
    decimals = solver._tables.build(P.IndependentSet((3, []), weights=[0.1, 0.2, 0.3]), {})
    assert k_cap(decimals, 100000) == 7  # numerators 0..6 of 1/10
    many = solver._tables.build(P.IndependentSet((300, [])), {})
    assert k_cap(many, 10**9) == 301


def test_k_best_sizes_of_weighted_problems_are_unchanged_by_the_cap():
    p = P.IndependentSet((5, [(0, 1), (1, 2), (3, 4)]), weights=[3, -1, 2, 5, 5])
    b = Brute(p)
    for k in (1, 2, 5, 50):
        assert solve(p, Q.SizeMax(k)) == b.size_max(k)
        assert solve(p, Q.CountingMax(k)) == b.counting_max(k)


# ---------------------------------------------------------- 3. floats across scales --
def test_decimal_weights_spanning_many_magnitudes_are_summed_as_floats_with_one_warning():
    cases = [
        (P.IndependentSet((3, []), weights=[1.0, 1e-300, 0.5]), [1.5]),
        (P.IndependentSet((2, []), weights=[1e22, 1.0]), [1e22]),
    ]
    for p, want in cases:
        with pytest.warns(LazykernWarning) as record:
            assert solve(p, Q.SizeMax()) == want
        (message,) = _lazykern_warnings(record)
        assert "summed in float64 instead" in message and "past what this property holds exactly" in message
    # a k-best list: the weights on a grid of 2^21 (1 and 0 are one size on it), as the warning says
    with pytest.warns(LazykernWarning, match="rounded to whole multiples of 2.10e\\+6"):
        assert solve(cases[1][0], Q.CountingMax(3)) == [(1e22, 2), (0.0, 2)]


def test_short_decimals_within_range_stay_exact_and_quiet():
    p = P.IndependentSet((3, []), weights=[0.1, 0.2, 0.3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert solve(p, Q.CountingMax(2)) == [(0.6, 1), (0.5, 1)]
        assert solve(p, Q.CountingMin(4)) == [(0.0, 1), (0.1, 1), (0.2, 1), (0.3, 2)]  # 0.1 + 0.2 ties 0.3


def test_integer_weights_past_range_are_still_refused_in_the_problems_units():
    p = P.IndependentSet((2, [(0, 1)]), weights=[2**62, 2**62])
    with pytest.raises(ValueError, match="sizes reach 4611686018427387904, past what this property holds exactly"):
        solve(p, Q.SizeMax(2))
    # numerators of 1/2 past 2^53, had they been kept (a property reading no size keeps them): the refusal
    # states the size (1.5e18), not the 3e18 halves
    tab = solver._tables.build(P.IndependentSet((2, []), weights=[1.5e18 + 0.5, 0.5]), {})
    assert tab.integer and tab.unit == 0.5
    with pytest.raises(ValueError, match=r"sizes reach 1\.50e\+18 \(3\.00e\+18 units of 0\.5\)"):
        solver.value_dtype(tab, tropical_only=False)


# ---------------------------------------------------- 4. partition function overflow --
def test_a_partition_function_of_sizes_past_float64_answers_or_says_why():
    with pytest.warns(LazykernWarning, match="summed in float64 instead"):
        assert solve(P.IndependentSet((2, []), weights=[1e200, 1e-200]), Q.PartitionFunction(1.0)) == 1e200
    huge = P.IndependentSet((1, []), weights=[10**400])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)  # log-weights of 1e400: the precision warning
        assert solve(huge, Q.PartitionFunction(-1.0)) == 0.0  # exp(0) + exp(-10^400) = 1
        assert solve(huge, Q.PartitionFunction(1e-300)) == pytest.approx(1e100, rel=1e-12)
    assert solve(huge, Q.PartitionFunction(0.0)) == pytest.approx(math.log(2))  # beta 0: log(count)
    with pytest.raises(ValueError, match="log Z is past float64's range"):
        solve(huge, Q.PartitionFunction(1.0))
    fixed = P.IndependentSet((1, []), weights=[10**400], fixedvertices={0: 1})  # log Z = -10^400
    with pytest.raises(ValueError, match="log Z is past float64's range"):
        solve(fixed, Q.PartitionFunction(-1.0))
    small = P.IndependentSet((2, []))  # exact offsets: beta times the best size past the range
    with pytest.raises(ValueError, match="log Z is past float64's range"):
        solve(small, Q.PartitionFunction(1e308))
    with pytest.raises(ValueError, match="log Z is past float64's range"):
        solve(P.IndependentSet((2, []), fixedvertices={0: 1, 1: 1}), Q.PartitionFunction(-1e308))
    assert solve(small, Q.PartitionFunction(-1e308)) == 0.0  # the empty set: exp(0)


def test_an_int_past_float64_among_float_weights_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="weight 0 of the vertices, an int of 401 digits, has no exact float64"):
        P.IndependentSet((2, []), weights=[10**400, 0.5])
    with pytest.raises(ValueError, match="weight 2 of the coupling and fields"):
        P.SpinGlass((2, [(0, 1)]), J=[1.5], h=[0, 10**400])


# ------------------------------------------------------------------- 5. set order --
_AXES = """
import json, networkx as nx
from lazykern.tn import problems as P, properties as Q, solve
g = nx.Graph(); g.add_nodes_from(["u", "v", "w", "x"]); g.add_edge("u", "w")
p = P.IndependentSet(g, weights=[1, 2, 4, 8], openvertices={"x", "w", "u", "v"})
print(json.dumps([list(p.openvertices), solve(p, Q.SizeMax()).tolist()]))
"""


def test_open_vertices_given_as_a_set_take_ascending_index_in_every_run():
    runs = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", _AXES], env=env, capture_output=True, text=True, check=True)
        runs.add(out.stdout.strip())
    (only,) = runs
    opened, answer = json.loads(only)
    assert opened == [0, 1, 2, 3]
    assert answer[1][0][0][1] == [9] and answer[1][0][1][0] == []  # u and x in (8 + 1); u and w: infeasible


@pytest.mark.parametrize(
    "make",
    [
        lambda: P.Matching((3, {(0, 1), (1, 2)})),
        lambda: P.MaxCut((3, {(0, 1), (1, 2)}), weights=[1, 2]),
        lambda: P.Coloring((3, {(0, 1), (1, 2)}), 3, weights=np.array([1, 2])),
        lambda: P.SpinGlass((3, {(0, 1), (1, 2)}), J=[1, 2]),
        lambda: P.SetPacking({frozenset([1, 2]), frozenset([2, 3])}),
        lambda: P.SetCovering(frozenset({(1, 2), (2, 3)})),
        lambda: P.Satisfiability({(1, -2), (2, 3)}, weights=[1, 2]),
        lambda: P.PaintShop({"a", "b"}),
        lambda: P.IndependentSet((3, []), weights={1, 2, 3}),
    ],
)
def test_a_set_where_order_names_variables_or_matches_weights_is_refused(make):
    with pytest.raises(ValueError, match="a set has no order; give a list"):
        make()


def test_a_set_where_order_changes_nothing_is_accepted():
    edges = {(0, 1), (1, 2)}
    assert solve(P.IndependentSet((3, edges)), Q.SizeMax()) == [2]
    assert solve(P.MaxCut((3, edges)), Q.SizeMax()) == [2]
    assert solve(P.MaxCut((3, edges), weights={(0, 1): 1, (2, 1): 5}), Q.SizeMax()) == [6]
    assert solve(P.SpinGlass((3, edges), J={(0, 1): 1, (1, 2): 1}), Q.SizeMin()) == [-2]
    assert solve(P.Satisfiability({(1, -2), (2, 3)}), Q.SizeMax()) == [2]
    assert solve(P.SetPacking([{1, 2}, frozenset({2, 3})]), Q.SizeMax()) == [1]  # each set's own elements
