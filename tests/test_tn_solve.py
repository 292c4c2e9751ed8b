"""lazykern.tn.solve: every property against a brute force, GenericTensorNetworks' published values,
open and fixed vertices, exact big counts, and the errors of bad input (CPU)."""

from __future__ import annotations

import itertools
import math
import random

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import properties as Q
from lazykern.tn import solve
from tests._gtn_tiny import TableProblem, brute, brute_answers, independent_set

PETERSEN = list(nx.petersen_graph().edges())


@pytest.fixture(scope="module")
def petersen():
    return independent_set(10, PETERSEN)


def test_petersen_values_published_by_generic_tensor_networks(petersen):
    assert solve(petersen, Q.SizeMax()) == [4]
    assert solve(petersen, Q.SizeMax(k=3)) == [4, 3, 2]
    assert solve(petersen, Q.CountingMax(k=2)) == [(4, 5), (3, 30)]
    assert solve(petersen, Q.CountingAll()) == 76
    assert solve(petersen, Q.GraphPolynomial()) == [1, 10, 30, 30, 5]
    assert solve(petersen, Q.PartitionFunction(beta=1.0)) == pytest.approx(
        math.log(1 + 10 * math.e + 30 * math.e**2 + 30 * math.e**3 + 5 * math.e**4), rel=1e-12
    )
    size, config = solve(petersen, Q.SingleConfigMax())
    assert size == 4 and config.shape == (10,) and petersen.is_feasible(config) and config.sum() == 4
    [(size, configs)] = solve(petersen, Q.ConfigsMax(k=1))
    assert size == 4 and configs.shape == (5, 10)
    assert solve(petersen, Q.ConfigsAll(limit=10**6)).shape == (76, 10)


def test_petersen_through_the_problem_classes():
    P = pytest.importorskip("lazykern.tn.problems")
    p = P.IndependentSet(nx.petersen_graph())
    assert solve(p, Q.SizeMax(k=3)) == [4, 3, 2]
    assert solve(p, Q.CountingMax(k=2)) == [(4, 5), (3, 30)]
    assert solve(p, Q.GraphPolynomial()) == [1, 10, 30, 30, 5]
    assert solve(p, Q.ConfigsAll()).shape == (76, 10)


def _random_problem(rng: random.Random, integer: bool = True) -> TableProblem:
    """A few variables, flavors 2 or 3, constraint and objective tables of arity 1 to 3 (hyper-edges),
    sizes that may be negative (float ones multiples of 1/8, so that every order of summation ties
    alike); sometimes fixed vertices."""
    n, flavors = rng.randint(2, 6), rng.choice((2, 2, 3))
    nrng = np.random.default_rng(rng.randrange(2**32))
    cons, objs = [], []
    for _ in range(rng.randint(0, n + 1)):
        vs = tuple(rng.sample(range(n), rng.randint(1, min(3, n))))
        cons.append((vs, nrng.random((flavors,) * len(vs)) < 0.8))
    for _ in range(rng.randint(1, n + 2)):
        vs = tuple(rng.sample(range(n), rng.randint(1, min(2, n))))
        shape = (flavors,) * len(vs)
        objs.append((vs, nrng.integers(-3, 4, shape) if integer else np.round(nrng.normal(size=shape) * 8) / 8))
    fixed = {v: rng.randrange(flavors) for v in rng.sample(range(n), rng.randint(0, 1))}
    goal = rng.choice(("max", "min"))
    return TableProblem(n, flavors, cons, objs, goal=goal, fixedvertices=fixed, integer_weights=integer)


@pytest.mark.parametrize("seed", range(40))
def test_random_problems_against_brute_force(seed):
    rng = random.Random(seed)
    p = _random_problem(rng)
    k = rng.randint(1, 3)
    want = brute_answers(p, k=k, beta=0.7)
    assert solve(p, Q.SizeMax(k)) == want["max"]
    assert solve(p, Q.SizeMin(k)) == want["min"]
    assert solve(p, Q.CountingMax(k)) == want["cmax"]
    assert solve(p, Q.CountingMin(k)) == want["cmin"]
    assert solve(p, Q.CountingAll()) == want["all"]
    assert solve(p, Q.PartitionFunction(0.7)) == pytest.approx(want["logz"], rel=1e-10, abs=1e-10)
    assert np.array_equal(solve(p, Q.ConfigsAll()), want["configs"])
    got = solve(p, Q.ConfigsMax(k))
    assert [s for s, _ in got] == want["max"]
    for s, rows in got:
        assert np.array_equal(rows, want["by_size"][s])
    got = solve(p, Q.ConfigsMin(k))
    assert [s for s, _ in got] == want["min"]
    for s, rows in got:
        assert np.array_equal(rows, want["by_size"][s])
    if want["all"]:
        low, coefficients = solve(p, Q.GraphPolynomial(laurent=True))
        sizes = [s for _, s in brute(p)]
        assert low == min(sizes)
        assert coefficients == [sizes.count(low + i) for i in range(max(sizes) - low + 1)]
        for prop, best in ((Q.SingleConfigMax(), max(sizes)), (Q.SingleConfigMin(), min(sizes))):
            size, config = solve(p, prop)
            assert size == best and p.is_feasible(config) and p.size(config) == best
            assert all(config[v] == f for v, f in p.fixedvertices.items())
    else:
        with pytest.raises(ValueError, match="no feasible configuration"):
            solve(p, Q.SingleConfigMax())


@pytest.mark.parametrize("seed", range(8))
def test_float_weights(seed):
    rng = random.Random(100 + seed)
    p = _random_problem(rng, integer=False)
    want = brute_answers(p, k=2, beta=1.3)
    assert solve(p, Q.SizeMax(2)) == want["max"]
    assert solve(p, Q.CountingMin()) == want["cmin"][:1]
    assert solve(p, Q.CountingMax(2)) == want["cmax"]
    assert solve(p, Q.PartitionFunction(1.3)) == pytest.approx(want["logz"], rel=1e-10, abs=1e-10)
    with pytest.raises(ValueError, match="integer sizes"):
        solve(p, Q.GraphPolynomial())


def test_open_vertices_give_a_tensor_over_them(petersen):
    p = independent_set(10, PETERSEN, openvertices=(1, 0))
    counts = solve(p, Q.CountingAll())
    sizes = solve(p, Q.SizeMax())
    logz = solve(p, Q.PartitionFunction(0.5))
    assert counts.shape == sizes.shape == logz.shape == (2, 2) and logz.dtype == np.float64
    for a, b in itertools.product(range(2), repeat=2):
        fixed = independent_set(10, PETERSEN, fixedvertices={1: a, 0: b})
        want = brute_answers(fixed, beta=0.5)
        assert counts[a, b] == want["all"]
        assert sizes[a, b] == want["max"][:1]
        assert logz[a, b] == pytest.approx(want["logz"])
    assert counts[1, 1] == 0 and sizes[1, 1] == []  # vertices 0 and 1 are adjacent
    assert counts.sum() == 76


def test_fixed_vertices_keep_their_values():
    p = independent_set(10, PETERSEN, fixedvertices={0: 1, 5: 0})
    size, config = solve(p, Q.SingleConfigMax())
    assert config[0] == 1 and config[5] == 0 and size == max(s for _, s in brute(p))
    rows = solve(p, Q.ConfigsAll())
    assert np.all(rows[:, 0] == 1) and np.all(rows[:, 5] == 0)
    assert np.array_equal(rows, brute_answers(p)["configs"])


def test_infeasible_problem_answers():
    p = independent_set(10, PETERSEN, fixedvertices={0: 1, 1: 1})  # an edge with both ends in the set
    assert solve(p, Q.SizeMax()) == []
    assert solve(p, Q.SizeMax(k=2)) == []
    assert solve(p, Q.CountingMax(k=2)) == []
    assert solve(p, Q.CountingAll()) == 0
    assert solve(p, Q.GraphPolynomial()) == []
    assert solve(p, Q.PartitionFunction()) == -math.inf
    assert solve(p, Q.ConfigsMax()) == []
    assert solve(p, Q.ConfigsAll()).shape == (0, 10)
    with pytest.raises(ValueError, match="no feasible configuration"):
        solve(p, Q.SingleConfigMax())
    everything_forbidden = TableProblem(3, 2, [((0, 1), np.zeros((2, 2), bool))], [((2,), np.array([0, 1]))])
    assert solve(everything_forbidden, Q.SizeMax()) == []
    assert solve(everything_forbidden, Q.CountingMax()) == []
    assert solve(everything_forbidden, Q.CountingAll()) == 0
    assert solve(everything_forbidden, Q.PartitionFunction()) == -math.inf


def _grid_independent_sets(L: int) -> int:
    """Independent sets of the L x L grid by the transfer method over rows (exact ints)."""
    rows = [r for r in range(1 << L) if r & (r >> 1) == 0]
    ways = dict.fromkeys(rows, 1)
    for _ in range(L - 1):
        ways = {r: sum(w for s, w in ways.items() if r & s == 0) for r in rows}
    return sum(ways.values())


def test_hard_square_counts_are_exact_past_int64():
    g = nx.convert_node_labels_to_integers(nx.grid_2d_graph(12, 12))
    p = independent_set(144, list(g.edges()))
    count = solve(p, Q.CountingAll())
    assert count == _grid_independent_sets(12) == 162481813349792588536582997  # OEIS A006506(12), ~2^87
    assert solve(p, Q.SizeMax()) == [72]
    assert solve(p, Q.CountingMax()) == [(72, 2)]


def test_polynomial_of_a_grid_is_exact():
    g = nx.convert_node_labels_to_integers(nx.grid_2d_graph(5, 5))
    p = independent_set(25, list(g.edges()))
    coefficients = solve(p, Q.GraphPolynomial())
    assert sum(coefficients) == _grid_independent_sets(5) == 55447
    assert coefficients[:3] == [1, 25, 25 * 24 // 2 - 40]  # pairs of vertices minus the 40 edges
    assert solve(p, Q.CountingMax(k=3)) == [(s, coefficients[s]) for s in (13, 12, 11)]


def test_weighted_counting_max_and_large_integer_weights():
    p = independent_set(10, PETERSEN, weights=[2**40 + i for i in range(10)])
    want = brute_answers(p, k=2)
    assert solve(p, Q.SizeMax(k=2)) == want["max"]  # float64: exact below 2^53
    assert solve(p, Q.CountingMax(k=2)) == want["cmax"]
    size, config = solve(p, Q.SingleConfigMax())
    assert size == want["max"][0] and p.size(config) == size
    huge = independent_set(10, PETERSEN, weights=[2**58 + i for i in range(10)])
    assert solve(huge, Q.SizeMax()) == [max(s for _, s in brute(huge))]  # int64 tropical values
    assert solve(huge, Q.CountingAll()) == 76  # counting every configuration reads no size
    with pytest.raises(ValueError, match="past what this property holds exactly"):
        solve(huge, Q.CountingMax())


def test_bad_input_is_refused_with_the_reason(petersen):
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k is the number"):
            Q.SizeMax(k=bad)
        with pytest.raises(ValueError, match="k is the number"):
            Q.ConfigsMin(bad)
    with pytest.raises(ValueError, match="limit"):
        Q.ConfigsAll(limit=0)
    with pytest.raises(ValueError, match="beta"):
        Q.PartitionFunction(beta=float("nan"))
    with pytest.raises(ValueError, match="76 feasible configurations, past limit=75"):
        solve(petersen, Q.ConfigsAll(limit=75))
    with pytest.raises(ValueError, match="35 configurations at the 2 best sizes, past limit=10"):
        solve(petersen, Q.ConfigsMax(k=2, limit=10))
    with pytest.raises(TypeError, match="property"):
        solve(petersen, "SizeMax")
    with pytest.raises(ValueError, match="module"):
        solve(petersen, Q.SizeMax(), module="jax")
    with pytest.raises(ValueError, match="open vertices"):
        solve(independent_set(10, PETERSEN, openvertices=(1,), fixedvertices={1: 0}), Q.SizeMax())
    with pytest.raises(ValueError, match="flavors"):
        solve(independent_set(10, PETERSEN, fixedvertices={1: 2}), Q.SizeMax())
    negative = TableProblem(2, 2, [], [((0,), np.array([0, -2])), ((1,), np.array([0, 1]))])
    with pytest.raises(ValueError, match="laurent=True"):
        solve(negative, Q.GraphPolynomial())
    assert solve(negative, Q.GraphPolynomial(laurent=True)) == (-2, [1, 1, 1, 1])
    heavy = independent_set(10, PETERSEN, weights=[2**20] * 10)
    with pytest.raises(ValueError, match="degree 4194304"):
        solve(heavy, Q.GraphPolynomial())


def test_partition_function_is_stable_at_large_beta():
    g = nx.random_regular_graph(3, 30, seed=3)
    p = independent_set(30, list(g.edges()))
    [(best, count)] = solve(p, Q.CountingMax())
    for beta in (50.0, 400.0, 2000.0):
        logz = solve(p, Q.PartitionFunction(beta))
        assert math.isfinite(logz)
        assert logz == pytest.approx(beta * best + math.log(count), rel=1e-12)  # the others are e^-beta smaller
    assert solve(p, Q.PartitionFunction(0.0)) == pytest.approx(math.log(solve(p, Q.CountingAll())))


def test_min_goal_partition_function_uses_minus_beta():
    p = independent_set(10, PETERSEN)
    p.goal = "min"
    assert solve(p, Q.PartitionFunction(1.0)) == pytest.approx(brute_answers(p, beta=1.0)["logz"])


def test_three_flavors_and_a_clause_like_hyperedge():
    # 3-colouring of a triangle plus a pendant vertex: constraints over pairs, a 3-variable objective
    edges = [(0, 1), (1, 2), (0, 2), (2, 3)]
    differ = ~np.eye(3, dtype=bool)
    triple = np.zeros((3, 3, 3), dtype=np.int64)
    triple[0, 1, 2] = 5
    p = TableProblem(4, 3, [(e, differ) for e in edges], [((0, 1, 2), triple), ((3,), np.array([0, 1, 2]))])
    want = brute_answers(p, k=3)
    assert solve(p, Q.CountingAll()) == want["all"] == 12
    assert solve(p, Q.CountingMax(k=3)) == want["cmax"]
    assert solve(p, Q.GraphPolynomial()) == want["poly"]
    got = solve(p, Q.ConfigsMax(k=2))
    for s, rows in got:
        assert np.array_equal(rows, want["by_size"][s])


@pytest.mark.filterwarnings("ignore:tropical contraction plan")  # slicing this far is costly on purpose
def test_sliced_contractions_add_slices_in_every_algebra():
    g = nx.random_regular_graph(3, 24, seed=7)
    p = independent_set(24, list(g.edges()))
    for prop in (Q.SizeMax(), Q.SizeMax(3), Q.CountingMax(2), Q.CountingAll()):
        assert solve(p, prop, optimize="greedy", memory_limit=16) == solve(p, prop, optimize="greedy")
    # the polynomial's intermediates carry its points (an output label, never sliced): 11 x 16 entries
    assert solve(p, Q.GraphPolynomial(), optimize="greedy", memory_limit=176) == solve(p, Q.GraphPolynomial())
    sliced = solve(p, Q.PartitionFunction(2.0), optimize="greedy", memory_limit=16)
    assert sliced == pytest.approx(solve(p, Q.PartitionFunction(2.0)), rel=1e-12)


@pytest.mark.filterwarnings("ignore:tropical contraction plan")
def test_cotengra_plans_keep_the_polynomial_points_unsliced():
    # cotengra may slice any label to fit memory_limit; the points are the output and must stay whole
    pytest.importorskip("cotengra")
    from lazykern.tn.einsum import contraction_plan

    g = nx.random_regular_graph(3, 24, seed=7)
    inputs = [("points", a, b) for a, b in g.edges()]
    sizes = dict.fromkeys(range(24), 2) | {"points": 11}
    plan = contraction_plan(inputs, ("points",), sizes, optimize="cotengra", memory_limit=64, max_time=0.5, store=False)
    assert "points" not in plan.sliced and plan.largest <= 64


def _problem_instances():
    P = pytest.importorskip("lazykern.tn.problems")
    from tests import _gtn_instances as I

    rng = np.random.default_rng(3)
    sg_edges = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (1, 4)]
    return [
        P.IndependentSet(I.PETERSEN),
        P.IndependentSet(I.PETERSEN, weights=list(range(1, 11))),
        P.IndependentSet(I.FIVE, fixedvertices={0: 1}),
        P.MaximalIS(I.SEVEN),
        P.MaxCut(I.SEVEN),
        P.Matching(I.FIVE),
        P.Coloring(I.FIVE, 3),
        P.DominatingSet(I.SEVEN),
        P.SetPacking(I.SETS),
        P.SetCovering(I.SETS),
        P.Satisfiability(I.CNF),
        P.PaintShop(I.PAINT),
        P.SpinGlass((5, sg_edges), J=[int(x) for x in rng.integers(-2, 3, len(sg_edges))], h=[1, 0, -1, 0, 2]),
        P.SpinGlass((4, [(0, 1, 2), (1, 2, 3), (0, 3)]), J=[1, -1, 2]),  # hyperedges
    ]


@pytest.mark.parametrize("index", range(14))
def test_every_problem_class_against_its_brute_force(index):
    from tests._gtn_brute import Brute

    p = _problem_instances()[index]
    b = Brute(p)
    assert solve(p, Q.SizeMax(2)) == b.size_max(2)
    assert solve(p, Q.SizeMin(2)) == b.size_min(2)
    assert solve(p, Q.CountingMax(2)) == b.counting_max(2)
    assert solve(p, Q.CountingMin()) == b.counting_min()
    assert solve(p, Q.CountingAll()) == b.counting_all()
    assert solve(p, Q.PartitionFunction(0.3)) == pytest.approx(b.log_partition(0.3), rel=1e-12, abs=1e-12)
    assert solve(p, Q.GraphPolynomial(laurent=True)) == b.laurent()
    for (s, rows), (t, want) in zip(solve(p, Q.ConfigsMin(2)), b.configs_min(2), strict=True):
        assert s == t and np.array_equal(rows, want)
    assert np.array_equal(solve(p, Q.ConfigsAll()), b.configs_all())
    size, config = solve(p, Q.SingleConfigMax())
    assert size == b.size_max()[0] and p.size(config) == size and p.is_feasible(config)


def test_tutte_graph_minimum_maximal_independent_sets_published():
    P = pytest.importorskip("lazykern.tn.problems")
    from tests import _gtn_instances as I

    p = P.MaximalIS(nx.tutte_graph())
    assert solve(p, Q.GraphPolynomial()) == I.TUTTE_MAXIMAL_IS_POLYNOMIAL
    assert solve(p, Q.CountingMin()) == [(13, 2)]


def test_open_vertices_through_a_problem_class():
    P = pytest.importorskip("lazykern.tn.problems")
    from tests import _gtn_instances as I
    from tests._gtn_brute import Brute

    p = P.IndependentSet(I.PETERSEN, openvertices=(2, 7, 4))
    got = solve(p, Q.CountingMax())
    want = Brute(p).tensor(lambda b: b.counting_max())
    assert got.shape == (2, 2, 2) and got.tolist() == want.tolist()


@pytest.mark.filterwarnings("ignore:tropical contraction plan")
def test_devices_spread_the_slices_of_every_algebra():
    # on the host, devices= runs each group of slices on a thread of its own; the groups add in the algebra
    g = nx.random_regular_graph(3, 24, seed=7)
    p = independent_set(24, list(g.edges()))
    for prop in (Q.SizeMax(), Q.SizeMax(2), Q.CountingMax(2), Q.CountingAll(), Q.GraphPolynomial()):
        assert solve(p, prop, optimize="greedy", memory_limit=200, devices=[0, 1]) == solve(p, prop), prop
    spread = solve(p, Q.PartitionFunction(1.0), optimize="greedy", memory_limit=200, devices=[0, 1])
    assert spread == pytest.approx(solve(p, Q.PartitionFunction(1.0)), rel=1e-12)


def test_solve_problems_and_properties_are_lazy_names_of_lazykern_tn():
    import subprocess
    import sys

    code = (
        "import sys, lazykern.tn as tn\n"
        "assert 'lazykern.tn.solver' not in sys.modules and 'lazykern.tn.algebras' not in sys.modules\n"
        "import networkx\n"
        "p = tn.problems.IndependentSet(networkx.petersen_graph())\n"
        "print(tn.solve(p, tn.properties.CountingMax(2)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[(4, 5), (3, 30)]"


def test_every_variable_fixed_leaves_a_scalar_network():
    p = independent_set(3, [(0, 1), (1, 2)], fixedvertices={0: 1, 1: 0, 2: 1})
    assert solve(p, Q.SizeMax(2)) == [2] and solve(p, Q.CountingMax(2)) == [(2, 1)]
    assert solve(p, Q.CountingAll()) == 1 and solve(p, Q.GraphPolynomial()) == [0, 0, 1]
    assert solve(p, Q.PartitionFunction(1.0)) == pytest.approx(2.0)
    size, config = solve(p, Q.SingleConfigMax())
    assert size == 2 and config.tolist() == [1, 0, 1]
    assert solve(p, Q.ConfigsAll()).tolist() == [[1, 0, 1]]


def test_a_problem_of_no_variables_has_one_empty_configuration():
    """Matching on a graph with no edge: no variable, one (empty) configuration of size 0, for every property."""
    from lazykern.tn import problems as P
    from lazykern.tn import properties as Q
    from lazykern.tn import solve

    p = P.Matching((3, []))
    assert solve(p, Q.SizeMax()) == [0]
    assert solve(p, Q.CountingAll()) == 1
    assert solve(p, Q.CountingMax(k=2)) == [(0, 1)]
    assert solve(p, Q.GraphPolynomial()) == [1]
    everything = solve(p, Q.ConfigsAll())
    assert everything.shape == (1, 0)
    [(size, configs)] = solve(p, Q.ConfigsMax(k=2))
    assert size == 0 and configs.shape == (1, 0)


def test_a_repeated_solve_plans_its_order_once(monkeypatch):
    """The second solve of one problem structure (another problem object, another property) takes
    the order the first found in this process: no planning, the same answer."""
    from lazykern.tn import problems as P
    from lazykern.tn._contract import Algebra
    from lazykern.tn.solving import context

    graph = nx.random_regular_graph(3, 14, seed=4)
    first = solve(P.IndependentSet(graph), Q.SizeMax(), optimize="greedy")
    orders = []  # the tropical network of zeros that ctx.order plans (the passes plan other algebras)
    real = context.build_network

    def counted(*args, **kwargs):
        orders.extend([1] if args[4] is Algebra else [])
        return real(*args, **kwargs)

    monkeypatch.setattr(context, "build_network", counted)
    assert solve(P.IndependentSet(graph), Q.SizeMax(), optimize="greedy") == first
    assert solve(P.IndependentSet(graph), Q.CountingMax(2), optimize="greedy")[0][0] == first[0]
    assert orders == []
    monkeypatch.setattr(context, "_orders", {})
    assert solve(P.IndependentSet(graph), Q.SizeMax(), optimize="greedy") == first
    assert orders == [1]  # forgotten: planned again


def test_put_all_copies_each_dtype_once_into_aligned_views():
    """A device module gets one transfer per dtype; every array comes back as a view of it with its
    own entries and shape, starting on a 256-byte boundary."""
    import types

    from lazykern.tn.solving.context import Context

    copies = []
    fake = types.SimpleNamespace(__name__="fakecupy", asarray=lambda x: copies.append(x.dtype) or np.array(x))
    ctx = Context(fake, "greedy", None, None, None)
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(2, 2), (), (3,), (0,), (2, 2, 2)]]
    arrays.insert(2, np.arange(5, dtype=np.int64))
    got = ctx.put_all(arrays)
    assert sorted(map(str, copies)) == ["float32", "int64"]
    bases = {id(g.base) for g in got if g.dtype == np.float32}
    assert len(bases) == 1
    for a, g in zip(arrays, got):
        assert g.shape == a.shape and g.dtype == a.dtype and np.array_equal(g, a)
        assert (g.__array_interface__["data"][0] - g.base.__array_interface__["data"][0]) % 256 == 0


def test_counting_max_builds_one_network_per_pass(monkeypatch):
    """CountingMax(k > 1): each pass builds its network once (its plan made as it is built), not a
    network to plan and another to contract."""
    import importlib

    from lazykern.tn import problems as P
    from lazykern.tn.contraction.network import Network
    from lazykern.tn.solving import context

    E = importlib.import_module("lazykern.tn.einsum")
    graph = nx.random_regular_graph(3, 12, seed=6)
    solve(P.IndependentSet(graph), Q.SizeMax(), optimize="greedy")  # the order, planned once
    builds, passes = [], []
    real_build, real_contract = Network.build.__func__, E.contract_network

    def build(cls, *args, **kwargs):
        builds.append(1)
        return real_build(cls, *args, **kwargs)

    monkeypatch.setattr(Network, "build", classmethod(build))
    monkeypatch.setattr(context, "contract_network", lambda *a, **k: passes.append(1) or real_contract(*a, **k))
    got = solve(P.IndependentSet(graph), Q.CountingMax(2), optimize="greedy")
    assert got == brute_answers(independent_set(12, list(graph.edges())), k=2)["cmax"]
    assert passes and len(builds) == len(passes)


def test_polynomial_primes_come_from_a_float_count_bound(petersen, monkeypatch):
    """The polynomial's degree and primes come from one pass (the largest size beside a float64 count,
    a proven bound at or above the exact count; no residue pass); where that float overflows, the exact
    count by residues is used. Both give the published coefficients."""
    import networkx as nx

    from lazykern.tn import problems as P
    from lazykern.tn.algebras import floatsum
    from lazykern.tn.solving import graph_poly

    counted, found = [], []
    real, real_pass = graph_poly._modular_count, graph_poly._largest_and_count_bound
    monkeypatch.setattr(graph_poly, "_modular_count", lambda tab, ctx: counted.append(1) or real(tab, ctx))
    monkeypatch.setattr(
        graph_poly, "_largest_and_count_bound", lambda tab, ctx: found.append(real_pass(tab, ctx)) or found[-1]
    )
    assert solve(petersen, Q.GraphPolynomial()) == [1, 10, 30, 30, 5] and counted == []
    assert found[-1][0] == 4 and 76 <= found[-1][1] <= 77  # 76 independent sets; the margin adds at most 1
    graph = nx.random_regular_graph(3, 40, seed=3)
    problem = P.IndependentSet(graph)
    coefficients = solve(problem, Q.GraphPolynomial(), optimize="greedy")
    exact = solve(problem, Q.CountingAll(), optimize="greedy")
    largest, bound = found[-1]
    assert sum(coefficients) == exact and exact <= bound <= exact + exact // 2**20 + 1
    assert largest == len(coefficients) - 1 == solve(problem, Q.SizeMax(), optimize="greedy")[0]
    monkeypatch.setattr(floatsum, "upper_bound", lambda *args: None)  # as if the float had overflowed
    assert solve(petersen, Q.GraphPolynomial()) == [1, 10, 30, 30, 5] and counted == [1]


def test_polynomial_lowest_size_is_proven_by_a_uniform_configuration(monkeypatch):
    """Every vertex out of an independent set reaches the tables' lower bound: no SizeMin contraction
    (the largest size comes with the count bound's pass, not from sizes). A dominating set's all-out
    configuration is infeasible and all-in is above the bound: contracted."""
    from lazykern.tn import problems as P
    from lazykern.tn import solver
    from lazykern.tn.solving import apart, graph_poly
    from tests import _gtn_instances as I

    asked = []
    real = solver.sizes
    for where in (solver, apart, graph_poly):  # every module that calls sizes
        monkeypatch.setattr(where, "sizes", lambda tab, k, big, ctx: asked.append(big) or real(tab, k, big, ctx))
    weighted = P.IndependentSet(I.PETERSEN, weights=list(range(1, 11)))
    assert graph_poly._uniform_lowest(solver._tables.build(weighted, weighted.fixedvertices)) == 0
    assert solve(weighted, Q.GraphPolynomial(laurent=True))[0] == 0 and asked == []
    asked.clear()
    dominating = P.DominatingSet(I.SEVEN)
    assert graph_poly._uniform_lowest(solver._tables.build(dominating, dominating.fixedvertices)) is None
    low, coefficients = solve(dominating, Q.GraphPolynomial(laurent=True))
    assert asked == [False] and low > 0 and coefficients[0] > 0


def test_kbest_passes_on_a_gpu_search_an_order_ranked_by_their_kernels(monkeypatch):
    """On a GPU the tropical network's order is ranked by predicted seconds (large GEMMs are quick); the
    k-best products run at 1-6% of the GEMM rate, by the kernel a step's shape takes, so their networks
    search an order of their own ranked by those kernels' rates (``Algebra.plan_rank``), once per
    process and structure. On the host both rank by multiply-adds: one order."""
    import types

    from lazykern.tn import _tables
    from lazykern.tn import problems as P
    from lazykern.tn._contract import Algebra
    from lazykern.tn.algebras import kbest, top2
    from lazykern.tn.solving import context
    from lazykern.tn.solving.sizes import counting, sizes

    problem = P.IndependentSet(nx.random_regular_graph(3, 16, seed=7))
    want = solve(problem, Q.CountingMax(2))
    searched, seeds = [], []
    real = context.build_network

    def recorded(*args, **kwargs):
        net = real(*args, **kwargs)
        real_plan = net.plan
        net.plan = lambda *a: searched.append((args[4], net.alg.plan_rank)) or seeds.append(a[2:]) or real_plan(*a)
        return net

    monkeypatch.setattr(context, "build_network", recorded)
    monkeypatch.setattr(context, "_orders", {})
    gpu = types.SimpleNamespace(__name__="fakecupy", asarray=np.array)  # a device module, host arrays
    ctx = context.Context(gpu, "greedy", None, None, None)
    tab = _tables.build(problem, {})
    assert counting(tab, 2, True, ctx) == want
    # the tropical network's order first: the k-best search starts from it (and keeps it if nothing is better)
    assert searched[0] == (Algebra, "seconds") and [rank for _, rank in searched] == ["seconds", "kbest"]
    # CountingMax(2) of integer sizes: the top-two pass answers (it ranks orders as the k-best passes do)
    assert searched[1][0] is top2.algebra(4) and list(tab.ranked) == ["kbest"]
    assert kbest.KBestAlgebra.plan_rank == top2.Top2Algebra.plan_rank
    # the k-best search starts from the tropical order, for intermediates of 2^28 entries (a k-best order's
    # search within the free memory found orders of 2^1.8 more multiply-adds)
    assert seeds == [(None, None, None), (context.SEARCH_ENTRIES, None, tab.order)]
    assert sizes(tab, 1, True, ctx) == [want[0][0]]  # SizeMax: the tropical network's order, no search
    assert len(searched) == 2
    again = _tables.build(problem, {})
    assert counting(again, 2, True, ctx) == want and sizes(again, 3, True, ctx)[0] == want[0][0]
    assert len(searched) == 2  # both orders kept in the process: no search
    host = context.Context(np, "greedy", None, None, None)
    searched.clear()
    tab = _tables.build(problem, {})
    assert counting(tab, 2, True, host) == want and sizes(tab, 1, True, host) == [want[0][0]]
    assert searched == [(Algebra, "seconds")] and tab.ranked == {}  # on the host: one order (ranked by flops)


def test_counting_max_one_on_a_gpu_tries_one_float32_pass_first(monkeypatch):
    """CountingMax(1) on a GPU: one float32 k-best pass (k = 1) answers where its count is below 2^24; past
    it (25 disjoint edges: 2^25 best sets) the counting algebra counts again; a network whose largest
    intermediate passes ONE_FLOAT_ENTRIES goes to the counting algebra at once. The host: the counting
    algebra alone. (A device module over host arrays runs the GPU route's logic here.)"""
    import types

    from lazykern.tn import _tables
    from lazykern.tn import problems as P
    from lazykern.tn.algebras import kbest
    from lazykern.tn.solving import context, sizes

    exact, passes = [], []
    real_exact, real_contract = sizes._count_exactly, context.Context.contract
    monkeypatch.setattr(sizes, "_count_exactly", lambda *a: exact.append(1) or real_exact(*a))

    def contract(self, tab, labels, output, operands, semiring, algebra, plan=None):
        passes.append(getattr(algebra, "floats", None))
        return real_contract(self, tab, labels, output, operands, semiring, algebra, plan)

    monkeypatch.setattr(context.Context, "contract", contract)
    gpu = context.Context(types.SimpleNamespace(__name__="fakecupy", asarray=np.array), "greedy", None, None, None)
    host = context.Context(np, "greedy", None, None, None)
    small = P.IndependentSet(nx.random_regular_graph(3, 16, seed=7))
    want = sizes.counting(_tables.build(small, {}), 1, True, host)
    assert exact == [1] and passes == []  # the host: count_network, not the k-best pass
    exact.clear()
    assert sizes.counting(_tables.build(small, {}), 1, True, gpu) == want and exact == [] and passes == [4]
    assert issubclass(kbest.algebra(1, True, floats=4), kbest.KBestAlgebra)
    pairs = P.IndependentSet((50, [(2 * i, 2 * i + 1) for i in range(25)]))
    assert sizes.counting(_tables.build(pairs, {}), 1, True, gpu) == [(25, 2**25)] and exact == [1]
    monkeypatch.setattr(sizes, "ONE_FLOAT_ENTRIES", 1)
    passes.clear()
    assert sizes.counting(_tables.build(small, {}), 1, True, gpu) == want and exact == [1, 1] and passes == []
