"""Each problem's tables against the problem's definition written directly (no tables), on random small
instances (hypothesis): feasibility and size agree on every configuration, sizes exact for integer
weights far beyond int64."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazykern.tn import problems as P

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WEIGHT = st.one_of(st.integers(-5, 5), st.integers(-(2**70), 2**70))


@st.composite
def graphs(draw, max_n=6):
    n = draw(st.integers(1, max_n))
    pairs = list(itertools.combinations(range(n), 2))
    edges = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))) if pairs else []
    return n, edges


def configs(n, q=2):
    return [list(c) for c in itertools.product(range(q), repeat=n)]


def neighbours(n, edges):
    nb = [set() for _ in range(n)]
    for u, v in edges:
        nb[u].add(v)
        nb[v].add(u)
    return nb


def agree(p, feasible, size, q=2):
    for c in configs(p.num_variables, q):
        assert p.is_feasible(c) == feasible(c), c
        got, want = p.size(c), size(c)
        assert got == want and type(got) is type(want), (c, got, want)


@SETTINGS
@given(graphs(), st.data())
def test_vertex_problems(graph, data):
    n, edges = graph
    w = data.draw(st.lists(WEIGHT, min_size=n, max_size=n))
    nb = neighbours(n, edges)
    weight = lambda c: sum(wi for wi, ci in zip(w, c) if ci)  # noqa: E731
    independent = lambda c: not any(c[u] and c[v] for u, v in edges)  # noqa: E731
    agree(P.IndependentSet((n, edges), w), independent, weight)
    maximal = lambda c: independent(c) and all(c[v] or any(c[u] for u in nb[v]) for v in range(n))  # noqa: E731
    agree(P.MaximalIS((n, edges), w), maximal, weight)
    dominating = lambda c: all(c[v] or any(c[u] for u in nb[v]) for v in range(n))  # noqa: E731
    agree(P.DominatingSet((n, edges), w), dominating, weight)


@SETTINGS
@given(graphs(), st.integers(1, 3), st.data())
def test_edge_problems(graph, k, data):
    n, edges = graph
    w = data.draw(st.lists(WEIGHT, min_size=len(edges), max_size=len(edges)))
    cut = lambda c: sum(we for we, (u, v) in zip(w, edges) if c[u] != c[v])  # noqa: E731
    agree(P.MaxCut((n, edges), w), lambda c: True, cut)
    agree(P.Coloring((n, edges), k, w), lambda c: True, cut, q=k)

    def matching(c):
        ends = [x for ce, e in zip(c, edges) if ce for x in e]
        return len(ends) == len(set(ends))

    taken = lambda c: sum(we for we, ce in zip(w, c) if ce)  # noqa: E731
    if edges:
        agree(P.Matching((n, edges), w), matching, taken)


@SETTINGS
@given(st.lists(st.lists(st.integers(0, 5), unique=True, max_size=4), min_size=1, max_size=6), st.data())
def test_set_problems(sets, data):
    w = data.draw(st.lists(WEIGHT, min_size=len(sets), max_size=len(sets)))
    taken = lambda c: sum(wi for wi, ci in zip(w, c) if ci)  # noqa: E731

    def packing(c):
        chosen = [x for s, ci in zip(sets, c) if ci for x in s]
        return len(chosen) == len(set(chosen))

    covering = lambda c: {x for s, ci in zip(sets, c) if ci for x in s} == {x for s in sets for x in s}  # noqa: E731
    agree(P.SetPacking(sets, w), packing, taken)
    agree(P.SetCovering(sets, w), covering, taken)


@SETTINGS
@given(
    st.lists(
        st.lists(st.integers(1, 5).flatmap(lambda v: st.sampled_from([v, -v])), min_size=1, max_size=4),
        min_size=1,
        max_size=5,
    ),
    st.data(),
)
def test_satisfiability(cnf, data):
    w = data.draw(st.lists(WEIGHT, min_size=len(cnf), max_size=len(cnf)))
    holds = lambda clause, c: any(c[abs(x) - 1] == (x > 0) for x in clause)  # noqa: E731
    p = P.Satisfiability(cnf, w)
    assert p.num_variables == max(abs(x) for cl in cnf for x in cl)
    agree(p, lambda c: True, lambda c: sum(wc for wc, cl in zip(w, cnf) if holds(cl, c)))


@SETTINGS
@given(st.permutations([0, 0, 1, 1, 2, 2, 3, 3]), st.integers(1, 4))
def test_paint_shop(sequence, cars):
    seq = [x for x in sequence if x < cars]
    p = P.PaintShop(seq)
    names = p.variable_names()
    assert names == list(dict.fromkeys(seq))

    def switches(c):
        seen, paint = set(), []
        for car in seq:
            colour = c[names.index(car)]
            paint.append(colour if car not in seen else 1 - colour)
            seen.add(car)
        return sum(a != b for a, b in zip(paint, paint[1:]))

    agree(p, lambda c: True, switches)


@SETTINGS
@given(st.integers(1, 5), st.data())
def test_spin_glass_hyperedges(n, data):
    subsets = [e for r in range(1, min(n, 3) + 1) for e in itertools.combinations(range(n), r)]
    edges = data.draw(st.lists(st.sampled_from(subsets), unique=True, max_size=6))
    J = data.draw(st.lists(WEIGHT, min_size=len(edges), max_size=len(edges)))
    h = data.draw(st.lists(WEIGHT, min_size=n, max_size=n))
    spin = lambda c: [P.SPIN[x] for x in c]  # noqa: E731

    def energy(c):
        s = spin(c)
        return -sum(j * math.prod(s[i] for i in e) for j, e in zip(J, edges)) - sum(hi * si for hi, si in zip(h, s))

    agree(P.SpinGlass((n, edges), J, h), lambda c: True, energy)


@SETTINGS
@given(graphs(), st.data())
def test_float_weights_sum_as_floats(graph, data):
    n, edges = graph
    w = data.draw(st.lists(st.floats(-10, 10, allow_nan=False), min_size=n, max_size=n))
    p = P.IndependentSet((n, edges), w)
    for c in configs(n):
        want = 0.0
        for wi, ci in zip(w, c):
            want += wi if ci else 0.0
        # whole floats (every weight an integer, their sums below 2^53) are integers, as solve answers them
        assert np.isclose(p.size(c), want, rtol=1e-12, atol=1e-12)
        assert type(p.size(c)) is (int if all(x == int(x) for x in w) else float)
