"""lazykern.tn.algebras.top2: the best integer size and the counts of it and of one below.

Its numbers are the k-best algebra's cut to two powers: on whole networks of every problem (NumPy's
product; the host steps' in tests/test_tn_host_steps.py), on slices merged, and through ``solve``
(CountingMax(2) / CountingMin(2) with the route on and off, brute force beside). The kernels are checked
in tests/test_tn_top2_kernels.py."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import _tables, solve
from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn._backend import Backend
from lazykern.tn.algebras import _top2_kernels, kbest, top2
from lazykern.tn.einsum import contract_network
from lazykern.tn.solving import top_two
from lazykern.tn.solving import values as V

from .test_tn_host_steps import _network


def _top2_of_kbest(parts):
    """The top-two numbers a k = 2 k-best result implies: (v, c0, count at v - 1 or 0)."""
    v0, v1, c0, c1 = (np.asarray(x).item() for x in parts)
    return v0, c0, c1 if v1 == v0 - 1 else 0.0


def _cubic(n, seed):
    return nx.random_regular_graph(3, n, seed=seed)


PROBLEMS = {
    "independent set": lambda: P.IndependentSet(nx.random_regular_graph(3, 60, seed=1)),
    "weighted IS": lambda: P.IndependentSet(_cubic(50, 2), weights=[(i % 4) + 1 for i in range(50)]),
    "max cut": lambda: P.MaxCut(_cubic(40, 3), weights=[(-1) ** i * (i % 3 + 1) for i in range(60)]),
    "coloring": lambda: P.Coloring(nx.random_regular_graph(3, 40, seed=4), 3),
    "maximal IS": lambda: P.MaximalIS(nx.random_regular_graph(3, 40, seed=5)),
    "dominating set": lambda: P.DominatingSet(nx.random_regular_graph(3, 30, seed=6)),
    "star (gap below the best)": lambda: P.MaximalIS(nx.star_graph(6)),
    "two components": lambda: P.IndependentSet(nx.disjoint_union(_cubic(40, 7), nx.cycle_graph(5))),
}  # fmt: skip


def _operands(tab, floats, largest=True):
    values = V.size_values(tab, V.value_dtype(tab, tropical_only=False), True, sign=1 if largest else -1)
    return [(v, m.astype(f"f{floats}")) for v, m in zip(values, tab.mask)]


@pytest.mark.parametrize("name", sorted(PROBLEMS))
@pytest.mark.parametrize("floats", [4, 8])
@pytest.mark.parametrize("largest", [True, False])
def test_a_network_gives_the_kbest_numbers_cut_to_two_powers(name, floats, largest):
    tab, path = _network(PROBLEMS[name]())
    ops = _operands(tab, floats, largest)
    got = contract_network(tab.labels, (), ops, optimize=path, algebra=top2.algebra(floats))
    want = contract_network(tab.labels, (), ops, optimize=path, algebra=kbest.algebra(2, True, floats=floats))
    assert tuple(np.asarray(x).item() for x in got) == _top2_of_kbest(want)
    assert all(np.asarray(x).dtype == np.dtype(f"f{floats}") for x in got[1:])


def test_the_host_product_of_three_operands_and_no_sum():
    rng = np.random.default_rng(0)
    a = (
        rng.integers(0, 4, (2, 3)).astype("f4"),
        rng.integers(1, 3, (2, 3)).astype("f4"),
        rng.integers(0, 3, (2, 3)).astype("f4"),
    )
    b = (
        rng.integers(0, 4, (3,)).astype("f4"),
        rng.integers(1, 3, (3,)).astype("f4"),
        rng.integers(0, 3, (3,)).astype("f4"),
    )
    c = (
        rng.integers(0, 4, (2,)).astype("f4"),
        rng.integers(1, 3, (2,)).astype("f4"),
        rng.integers(0, 3, (2,)).astype("f4"),
    )
    kept = top2.host_product([a, b, c], [("i", "j"), ("j",), ("i",)], ["i", "j"], ("i", "j"))
    summed = top2.host_product([a, b, c], [("i", "j"), ("j",), ("i",)], ["i", "j"], ())
    for i, j in itertools.product(range(2), range(3)):  # the polynomials multiplied, cut to two powers
        v = a[0][i, j] + b[0][j] + c[0][i]
        x = [(a[1][i, j], a[2][i, j]), (b[1][j], b[2][j]), (c[1][i], c[2][i])]
        c0 = x[0][0] * x[1][0] * x[2][0]
        c1 = x[0][1] * x[1][0] * x[2][0] + x[0][0] * x[1][1] * x[2][0] + x[0][0] * x[1][0] * x[2][1]
        assert (kept[0][i, j], kept[1][i, j], kept[2][i, j]) == (v, c0, c1)
    T = kept[0].max()
    assert summed[0] == T
    assert summed[1] == kept[1][kept[0] == T].sum()
    assert summed[2] == kept[2][kept[0] == T].sum() + kept[1][kept[0] == T - 1].sum()


@pytest.mark.parametrize("zero", ["", "a", "b", "ab"])
def test_the_host_product_of_a_pair_by_its_definition_with_an_infeasible_row(zero):
    """A pair summed over one label: each kept entry's best, the counts at it and one below, from the terms
    one by one; a row whose every term is infeasible (-inf) has no count, whatever counts its terms hold.
    Operands whose counts one below are all 0 (``zero``: as a leaf's are) alike."""
    rng = np.random.default_rng(3)
    a = [rng.integers(0, 3, (3, 4)).astype("f8"), rng.integers(1, 4, (3, 4)).astype("f8"),
         rng.integers(0, 4, (3, 4)).astype("f8")]  # fmt: skip
    b = [rng.integers(0, 3, (4, 2)).astype("f8"), rng.integers(1, 4, (4, 2)).astype("f8"),
         rng.integers(0, 4, (4, 2)).astype("f8")]  # fmt: skip
    a[0][1] = -np.inf  # row 1: no feasible term
    for name, x in (("a", a), ("b", b)):
        if name in zero:
            x[2] = np.zeros_like(x[2])
    got = top2.host_product([tuple(a), tuple(b)], [("i", "k"), ("k", "j")], ["i", "k", "j"], ("i", "j"))
    assert all(x.flags.c_contiguous and x.shape == (3, 2) and x.dtype == np.float64 for x in got)
    kept = top2.host_product([tuple(a), tuple(b)], [("i", "k"), ("k", "j")], ["i", "k", "j"], ("i", "k", "j"))
    assert all(x.flags.c_contiguous and x.shape == (3, 4, 2) and x.dtype == np.float64 for x in kept)
    for i, k, j in itertools.product(range(3), range(4), range(2)):
        want = (a[0][i, k] + b[0][k, j], a[1][i, k] * b[1][k, j], a[2][i, k] * b[1][k, j] + a[1][i, k] * b[2][k, j])
        assert tuple(x[i, k, j] for x in kept) == want
    for i, j in itertools.product(range(3), range(2)):
        terms = [(a[0][i, k] + b[0][k, j], a[1][i, k] * b[1][k, j], a[2][i, k] * b[1][k, j] + a[1][i, k] * b[2][k, j])
                 for k in range(4)]  # fmt: skip
        best = max(t[0] for t in terms)
        if best == -np.inf:
            assert (got[0][i, j], got[1][i, j], got[2][i, j]) == (-np.inf, 0, 0)
            continue
        c0 = sum(t[1] for t in terms if t[0] == best)
        c1 = sum(t[2] for t in terms if t[0] == best) + sum(t[1] for t in terms if t[0] == best - 1)
        assert (got[0][i, j], got[1][i, j], got[2][i, j]) == (best, c0, c1)


def test_slices_merge_as_one_sum():
    alg = top2.algebra(8)("maxplus", Backend("numpy", np))
    x = (np.array([5.0, 3.0, -np.inf, 7.0]), np.array([2.0, 1.0, 0.0, 4.0]), np.array([1.0, 0.0, 0.0, 3.0]))
    y = (np.array([4.0, 3.0, 2.0, 9.0]), np.array([3.0, 2.0, 5.0, 1.0]), np.array([7.0, 6.0, 1.0, 0.0]))
    T, c0, c1 = alg.add(x, y)
    assert T.tolist() == [5.0, 3.0, 2.0, 9.0]
    assert c0.tolist() == [2.0, 3.0, 5.0, 1.0]
    assert c1.tolist() == [1.0 + 3.0, 0.0 + 6.0, 1.0, 0.0]
    unit = alg.unit(x, (4,))
    assert [u.tolist() for u in unit] == [[0.0] * 4, [1.0] * 4, [0.0] * 4]


def test_a_sliced_contraction_gives_the_unsliced_numbers():
    tab, path = _network(PROBLEMS["independent set"]())
    ops = _operands(tab, 8)
    alg = top2.algebra(8)
    whole = contract_network(tab.labels, (), ops, optimize=path, algebra=alg)
    label = tab.labels[len(tab.labels) // 2][0]
    sliced = contract_network(tab.labels, (), ops, optimize=path, algebra=alg, slices=[label])
    assert [np.asarray(x).item() for x in whole] == [np.asarray(x).item() for x in sliced]


@pytest.mark.gpu
@pytest.mark.parametrize("module", ["cupy", "torch"])
def test_slices_merge_on_the_device_as_on_the_host(module):
    """On a device two slices' results merge by the merge kernel: the same numbers as NumPy's, alone and
    in a sliced contraction (every count, every value)."""
    xp = pytest.importorskip(module)
    be = Backend(module, xp)
    dev = (lambda x: xp.asarray(x)) if module == "cupy" else (lambda x: xp.as_tensor(x, device="cuda"))
    host = (lambda x: x.get()) if module == "cupy" else (lambda x: x.cpu().numpy())
    x = (np.array([5.0, 3.0, -np.inf, 7.0]), np.array([2.0, 1.0, 0.0, 4.0]), np.array([1.0, 0.0, 0.0, 3.0]))
    y = (np.array([4.0, 3.0, 2.0, 9.0]), np.array([3.0, 2.0, 5.0, 1.0]), np.array([7.0, 6.0, 1.0, 0.0]))
    alg = top2.algebra(8)
    want = alg("maxplus", Backend("numpy", np)).add(x, y)
    got = alg("maxplus", be).add(tuple(dev(a) for a in x), tuple(dev(a) for a in y))
    assert all(np.array_equal(host(g), w) for g, w in zip(got, want))
    tab, path = _network(PROBLEMS["independent set"]())
    for floats in (4, 8):
        ops = _operands(tab, floats)
        whole = contract_network(tab.labels, (), ops, optimize=path, algebra=top2.algebra(floats))
        label = tab.labels[len(tab.labels) // 2][0]
        on = [tuple(dev(np.ascontiguousarray(a)) for a in op) for op in ops]
        sliced = contract_network(tab.labels, (), on, optimize=path, algebra=top2.algebra(floats), slices=[label])
        assert [np.asarray(w).item() for w in whole] == [host(g).item() for g in sliced]


def test_answer_refuses_what_it_cannot_tell():
    assert top2.answer(5.0, 3.0, 2.0, 4) == [(5.0, 3), (4.0, 2)]
    assert top2.answer(5.0, 3.0, 0.0, 4) is None  # no size one below: the k-best passes answer
    assert top2.answer(5.0, 2.0**24, 1.0, 4) is None  # past float32's exact line
    assert top2.answer(5.0, 2.0**24, 1.0, 8) == [(5.0, 2**24), (4.0, 1)]
    assert top2.answer(-np.inf, 0.0, 0.0, 4) == []
    with pytest.raises(ValueError, match="floats=4 or 8"):
        top2.algebra(2)
    with pytest.raises(TypeError, match="float32"):
        top2.algebra(4).prepare(Backend("numpy", np), (np.zeros(2), np.zeros(2, dtype="i8")), 0)
    with pytest.raises(ValueError, match="2 arrays"):
        top2.algebra(4).prepare(Backend("numpy", np), (np.zeros(2),), 3)


def _brute(problem, n, flavors, largest):
    found: dict[object, int] = {}
    for config in itertools.product(range(flavors), repeat=n):
        if problem.is_feasible(config):
            s = problem.size(config)
            found[s] = found.get(s, 0) + 1
    best = sorted(found, reverse=largest)[:2]
    return [(s, found[s]) for s in best]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["is", "mis", "cut", "dom", "weighted"])
def test_solve_counting_two_agrees_with_the_kbest_route_and_brute_force(seed, kind, monkeypatch):
    g = nx.gnp_random_graph(9, 0.35, seed=seed)
    make = {
        "is": lambda: P.IndependentSet(g),
        "mis": lambda: P.MaximalIS(g),
        "cut": lambda: P.MaxCut(g),
        "dom": lambda: P.DominatingSet(g),
        "weighted": lambda: P.IndependentSet(g, weights=[(3 * i) % 4 + 1 for i in range(9)]),
    }
    for prop in (Q.CountingMax(2), Q.CountingMin(2)):
        monkeypatch.setattr(top_two, "ROUTE", True)
        got = solve(make[kind](), prop)
        monkeypatch.setattr(top_two, "ROUTE", False)
        assert got == solve(make[kind](), prop)
        assert got == _brute(make[kind](), 9, 2, isinstance(prop, Q.CountingMax))


def test_counting_two_takes_the_top_two_pass_then_the_kbest_one_where_a_gap_lies_below(monkeypatch):
    seen = []
    real = top2.answer

    def spy(*args):
        out = real(*args)
        seen.append(out)
        return out

    monkeypatch.setattr(top2, "answer", spy)
    assert solve(P.IndependentSet(nx.cycle_graph(6)), Q.CountingMax(2)) == [(3, 2), (2, 9)]
    assert seen[-1] == [(3.0, 2), (2.0, 9)]
    # a star's maximal independent sets: its centre (1) and its leaves (6), one table of sizes {1, 6}: a
    # grid of step 5, on which they are neighbours
    assert top_two.grid(_tables.build(P.MaximalIS(nx.star_graph(6)), {})) == (5, [1])
    assert solve(P.MaximalIS(nx.star_graph(6)), Q.CountingMax(2)) == [(6, 1), (1, 1)]
    assert seen[-1] == [(1.0, 1), (0.0, 1)]  # in steps above the least
    # maximal independent sets of sizes 4 and 2, none of 3: the top-two pass finds no size one below
    g = nx.Graph([(0, 4), (1, 2), (1, 4), (2, 4), (2, 5), (3, 4), (3, 5), (3, 6), (4, 5), (4, 6), (5, 7), (5, 8),
                  (6, 7), (7, 8)])  # fmt: skip
    seen.clear()
    assert solve(P.MaximalIS(g), Q.CountingMax(2)) == [(4, 7), (2, 2)] == _brute(P.MaximalIS(g), 9, 2, True)
    assert seen == [None]


def test_the_grid_of_a_problems_sizes():
    cycle = nx.cycle_graph(5)
    assert top_two.grid(_tables.build(P.IndependentSet(cycle), {}))[0] == 1
    spins = P.SpinGlass(cycle, J=[1, -1, 1, 1, -1])  # each coupling -1 or +1: steps of 2
    assert top_two.grid(_tables.build(spins, {}))[0] == 2
    assert top_two.grid(_tables.build(P.IndependentSet(cycle, weights=[3] * 5), {}))[0] == 3
    # weights 2 and 3: a vertex's sizes 0 and 2 or 3 on a grid of 1, with holes: the k-best passes alone
    assert top_two.grid(_tables.build(P.IndependentSet(cycle, weights=[2, 3, 2, 3, 2]), {})) is None
    assert top_two.grid(_tables.build(P.IndependentSet(cycle, weights=[0] * 5), {})) is None  # no steps
    assert top_two.grid(_tables.build(P.IndependentSet(cycle, weights=[0.5] * 5), {}))[0] == 1  # in halves


@pytest.mark.parametrize("seed", range(4))
def test_spin_glass_levels_in_steps_of_two(seed, monkeypatch):
    g = nx.random_regular_graph(3, 12, seed=seed)
    rng = np.random.default_rng(seed)
    sg = P.SpinGlass(g, J=rng.choice([-1, 1], g.number_of_edges()).tolist(), h=rng.choice([-1, 1], 12).tolist())
    got = solve(sg, Q.CountingMin(2))
    monkeypatch.setattr(top_two, "ROUTE", False)
    assert got == solve(sg, Q.CountingMin(2)) == _brute(sg, 12, 2, False)
    assert got[1][0] - got[0][0] in (2, 4, 6)


def test_the_kernels_are_lazy_and_compile_for_sm90(cache):
    fam = _top2_kernels.make_family(cache)
    # 2 value types x 2 count types, each one thread per output, in the k-best tiles ("s", "n") and the merge
    assert len(fam.names()) == 16 and fam.compiled() == []
    names = ["top2_f32_f4_ts", "top2_f32_f4", "top2_f64_f8_tn", "top2_f32_f8", "top2_merge_f64_f4"]
    assert _top2_kernels.kernel_name(np.dtype("float32"), np.dtype("float32"), "s") == names[0]
    assert [k.name for k in fam.warm(names, arch="sm_90")] == names
    assert sorted(fam.compiled()) == sorted(names)


def test_chunking_fills_the_device_and_keeps_long_chunks():
    assert _top2_kernels.chunking(1 << 20, 4096) == 1
    assert _top2_kernels.chunking(1, 1 << 15) == (1 << 15) // 64
    assert _top2_kernels.chunking(16, 1 << 20) == (1 << 16) // 16
    assert _top2_kernels.chunking(16, 32) == 1
