"""Hostile round on the CPU of what ``solve(..., module="cupy")`` runs: a device module over host arrays
(``fakecupy``) takes the GPU route's logic (small steps on the host first, k-best orders of their own,
CountingMax(1)'s float32 pass, float counts trusted below 2^24 and 2^53, groups of polynomial points),
checked against brute forces written here from the problems' definitions and against counts built in.

Two bugs it found: int64 sizes (weights past 2^53) added by NumPy in the host's small steps wrapped where a
forbidden entry (int64's MIN) met a negative size, so a feasible problem answered [] or a size near 2^63;
and ConfigsMax(k > 1) beside a small component took the rest's k-best order for the whole network
("the path leaves 2 operands")."""

from __future__ import annotations

import math
import random
import types
import warnings

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import _host_steps, _tables, solve, solver
from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn._contract import Algebra
from lazykern.tn.algebras import floatsum
from lazykern.tn.einsum import contract_network, contraction_plan
from lazykern.tn.solving import context
from lazykern.tn.solving import values as V


def _gpu(problem, prop, memory_limit=None, optimize="greedy"):
    """``prop`` of ``problem`` by the GPU route's logic: a device module whose arrays are NumPy's."""
    fake = types.SimpleNamespace(__name__="fakecupy", asarray=np.array)
    ctx = context.Context(fake, optimize, memory_limit, None, None)
    return solver._solve(problem, prop, dict(problem.fixedvertices), ctx)


def _brute(kind, n, edges, weights, cnf=()):
    """{size: count} of the feasible configurations, from the definitions: independent sets, maximal ones
    (no vertex outside has no neighbour inside), dominating sets, cuts, and satisfied clauses' weights."""
    c = ((np.arange(1 << n, dtype=np.int64)[:, None] >> np.arange(n)) & 1).astype(bool)
    ok = np.ones(len(c), dtype=bool)
    neighbours = [[] for _ in range(n)]
    for a, b in edges:
        neighbours[a].append(b)
        neighbours[b].append(a)
    if kind in ("IS", "MIS"):
        for a, b in edges:
            ok &= ~(c[:, a] & c[:, b])
    if kind in ("MIS", "Dom"):
        for i in range(n):
            ok &= c[:, i] | c[:, neighbours[i]].any(axis=1)
    w = np.array(weights, dtype=np.int64)
    if kind == "Cut":
        s = sum(np.where(c[:, a] != c[:, b], x, 0) for (a, b), x in zip(edges, w))
    elif kind == "Sat":
        s = sum(
            np.where(np.any([c[:, abs(x) - 1] == (x > 0) for x in clause], axis=0), y, 0) for clause, y in zip(cnf, w)
        )
    else:
        s = c.astype(np.int64) @ w
    values, counts = np.unique(s[ok], return_counts=True)
    return {int(v): int(k) for v, k in zip(values, counts)}


# A 4-regular graph of 14 vertices, and a pendant pair (14 on vertex 0, 15 on 14): a maximal independent set
# holds exactly one of the pair, so every size is -2^55 plus 3 to 5. Sizes past 2^53 ride in int64.
_REGULAR = [(0, 1), (0, 6), (0, 10), (0, 11), (1, 5), (1, 8), (1, 10), (2, 3), (2, 8), (2, 9), (2, 12), (3, 8),
            (3, 9), (3, 13), (4, 6), (4, 7), (4, 10), (4, 13), (5, 6), (5, 9), (5, 12), (6, 13), (7, 11), (7, 12),
            (7, 13), (8, 11), (9, 10), (11, 12)]  # fmt: skip
_PENDANT = [*_REGULAR, (0, 14), (14, 15)]
_PENDANT_WEIGHTS = [1] * 14 + [-(1 << 55)] * 2


def _host_steps_ran(monkeypatch):
    ran = []
    real = _host_steps.first

    def first(*args):
        out = real(*args)
        ran.append(out is not None)
        return out

    monkeypatch.setattr(context._host_steps, "first", first)
    return ran


def test_int64_sizes_in_the_hosts_small_steps_saturate_as_the_device_adds_them(monkeypatch):
    """Regression: NumPy's int64 addition in the host's small steps wrapped MIN + -2^55 to a large positive
    value: SizeMax(1) answered 9187343239835811848 (and [] for others: every value read as the semiring
    zero), GraphPolynomial (0, [])."""
    low = -(1 << 55) + 3
    assert _brute("MIS", 16, _PENDANT, _PENDANT_WEIGHTS) == {low: 1, low + 1: 78, low + 2: 4}
    ran = _host_steps_ran(monkeypatch)
    p = P.MaximalIS((16, _PENDANT), weights=_PENDANT_WEIGHTS)
    assert _gpu(p, Q.SizeMax()) == [low + 2]
    assert _gpu(p, Q.SizeMin()) == [low]
    assert _gpu(p, Q.GraphPolynomial(laurent=True)) == (low, [1, 78, 4])
    assert ran and all(ran)  # the network has small steps: the host ran them
    assert solve(p, Q.SizeMax()) == [low + 2] and solve(p, Q.SingleConfigMax())[0] == low + 2


@pytest.mark.parametrize("algebra", ["values", "size and count"])
def test_int64_host_steps_give_the_full_contractions_numbers(algebra):
    """The host's small steps over int64 sizes with forbidden entries (MIN) and negative sizes: the shorter
    network's answer is the full one's (max-plus values, and GraphPolynomial's size-and-count pass)."""
    tab = _tables.build(P.MaximalIS((16, _PENDANT), weights=_PENDANT_WEIGHTS), {})
    sizes = {x: tab.flavors for t in tab.labels for x in t}
    path = [tuple(s) for s in contraction_plan(tab.labels, (), sizes, optimize="greedy", store=False).path]
    values = V.size_values(tab, V.value_dtype(tab, tropical_only=True), True)
    assert values[0].dtype == np.int64
    if algebra == "values":
        operands, alg = values, Algebra
    else:
        operands, alg = list(zip(values, [m.astype(np.float64) for m in tab.mask])), floatsum.SizeAndCountAlgebra
    shorter = _host_steps.first(tab.labels, (), operands, "maxplus", alg, path, operands, np.asarray)
    assert shorter is not None
    labels, ops, short_path = shorter
    full = contract_network(tab.labels, (), operands, semiring="maxplus", optimize=path, algebra=alg)
    short = contract_network(labels, (), ops, semiring="maxplus", optimize=short_path, algebra=alg)
    numbers = [[np.asarray(x).item() for x in (r if isinstance(r, tuple) else (r,))] for r in (full, short)]
    assert numbers[0] == numbers[1] and numbers[0][0] == -(1 << 55) + 5


def test_configs_max_beside_a_small_component_takes_the_whole_networks_order():
    """Regression: the rest of a problem beside a small component shared its k-best order dict with the whole
    problem, so ConfigsMax(2) read the rest's order for the whole network: "the path leaves 2 operands"."""
    g = nx.disjoint_union(nx.petersen_graph(), nx.path_graph(2))
    p = P.IndependentSet(g)
    got, want = _gpu(p, Q.ConfigsMax(2)), solve(p, Q.ConfigsMax(2))
    assert [(s, rows.tolist()) for s, rows in got] == [(s, rows.tolist()) for s, rows in want]
    assert [(s, len(rows)) for s, rows in got] == [(5, 2 * 5), (4, 5 + 2 * 30)]  # Petersen: 5 sets of 4, 30 of 3
    assert _gpu(p, Q.ConfigsMin(2))[1][0] == 1


# Independent sets whose best size has exactly N sets, as one network: an int j is a clique K_j (size 1, j
# sets), a tuple a disjoint union (sizes add, counts multiply), ("+1", t) a hub joined to every vertex of t
# with t's best size as its weight (one more set: the hub alone). The top union is joined by a vertex of
# weight -1 (never in a best set).
_COUNTS = {
    (1 << 24) - 1: (3, 3, 5, 7, ("+1", (4, 3)), ("+1", (8, 2)), ("+1", (8, 6, 5))),
    1 << 24: (4,) * 12,
    (1 << 24) + 1: (("+1", (8, 4, 3)), ("+1", (8, 8, 4)), ("+1", (8, 4, 3, 7))),
    (1 << 53) - 1: (
        ("+1", (8, 3, 5, ("+1", (4, ("+1", (4, 3)))))),
        ("+1", (2, 5, ("+1", (4, ("+1", (4, 3)))), ("+1", (2, 5, ("+1", (4, 3)))))),
        ("+1", (8, 4, 5, 5, ("+1", (4, 3)), ("+1", (4, 3, 3)), ("+1", (4, ("+1", (4, 3)))))),
    ),
    (1 << 53) + 1: (3, ("+1", (2, ("+1", (4, ("+1", (4, 3)))))), ("+1", (8, 8, 3, ("+1", (8, 5)), (
        "+1", (4, ("+1", (4, 3)))), ("+1", (4, 3, 3, ("+1", (4, 3)), ("+1", (2, 5, ("+1", (4, 3)))), (
        "+1", (8, ("+1", (8, ("+1", (8, 2))))))))))),
}  # fmt: skip


def _sets(tree):
    """(n, edges, weights, best size, count) of ``tree``'s independent sets."""
    edges, weights = [], []

    def vertex(w):
        weights.append(w)
        return len(weights) - 1

    def build(t):  # (vertices, best size, count, one vertex of each connected part)
        if isinstance(t, int):
            vs = [vertex(1) for _ in range(t)]
            edges.extend((a, b) for i, a in enumerate(vs) for b in vs[i + 1 :])
            return vs, 1, t, vs[:1]
        if t[0] == "+1":
            vs, s, c, _ = build(t[1])
            hub = vertex(s)
            edges.extend((v, hub) for v in vs)
            return [*vs, hub], s, c + 1, [hub]
        parts = [build(x) for x in t]
        return (
            [v for p in parts for v in p[0]],
            sum(p[1] for p in parts),
            math.prod(p[2] for p in parts),
            [p[3][0] for p in parts],
        )

    _, best, count, tops = build(tree)
    if len(tops) > 1:
        joint = vertex(-1)
        edges.extend((t, joint) for t in tops)
    return len(weights), edges, weights, best, count


def test_the_count_gadgets_count_what_they_say():
    for n_sets, tree in _COUNTS.items():
        assert _sets(tree)[4] == n_sets
    n, edges, weights, best, count = _sets((3, ("+1", (2, 2)), ("+1", (3,))))
    assert _brute("IS", n, edges, weights)[best] == count == 3 * 5 * 4


@pytest.mark.parametrize("n_sets", sorted(_COUNTS))
def test_counts_at_the_float_boundaries(n_sets):
    """The best size's count at 2^24 - 1, 2^24, 2^24 + 1 (CountingMax(1)'s float32 pass trusts below 2^24)
    and 2^53 +- 1 (CountingMax(k > 1)'s float64 pass trusts below 2^53), for the largest and (weights
    negated) the smallest sizes, unsliced and (below 2^25: the sliced run of the largest takes a minute) sliced."""
    n, edges, weights, best, count = _sets(_COUNTS[n_sets])
    assert count == n_sets
    top = P.IndependentSet((n, edges), weights=weights)
    bottom = P.IndependentSet((n, edges), weights=[-w for w in weights])
    for limit in (None, 64) if n_sets < 1 << 25 else (None,):
        assert _gpu(top, Q.CountingMax(1), limit) == [(best, count)]
        assert _gpu(bottom, Q.CountingMin(1), limit) == [(-best, count)]
        second = _gpu(top, Q.CountingMax(2), limit)
        assert second[0] == (best, count) and second == solve(top, Q.CountingMax(2))
        assert _gpu(bottom, Q.CountingMin(2), limit) == [(-s, c) for s, c in second]


def _random_problem(rng):
    """A random problem of 13 to 17 variables over a connected graph (or 3-clauses), integer weights up to
    2^57, the lazykern problem and its brute-force histogram."""
    kind = rng.choice(["IS", "MIS", "Dom", "Cut", "Sat"])
    n = rng.randint(13, 17)
    edges = {(rng.randrange(i), i) for i in range(1, n)}
    edges |= {tuple(sorted(rng.sample(range(n), 2))) for _ in range(rng.randint(n // 2, 2 * n))}
    edges = sorted(edges)
    big = rng.choice([1, 3, 1 << 22, 1 << 50, 1 << 57])
    cnf = [[rng.choice([1, -1]) * v for v in rng.sample(range(1, n + 1), 3)] for _ in range(2 * n)]
    m = {"Cut": len(edges), "Sat": len(cnf)}.get(kind, n)
    weights = [rng.choice([big, -big, big + 1, 1, 0, -1, 2]) for _ in range(m)]
    make = {
        "IS": lambda: P.IndependentSet((n, edges), weights=weights),
        "MIS": lambda: P.MaximalIS((n, edges), weights=weights),
        "Dom": lambda: P.DominatingSet((n, edges), weights=weights),
        "Cut": lambda: P.MaxCut((n, edges), weights=weights),
        "Sat": lambda: P.Satisfiability(cnf, weights=weights, num_variables=n),
    }[kind]
    return make(), _brute(kind, n, edges, weights, cnf), big


def test_random_problems_by_the_gpu_route_match_a_brute_force():
    """Random problems (host steps, k-best orders, float passes, slicing) against the brute force: sizes,
    counts, the polynomial and log Z, or the refusal of sizes past what the property holds exactly."""
    rng = random.Random(20240613)
    checked = 0
    for _ in range(80):
        problem, hist, big = _random_problem(rng)
        goal_sign = 1 if problem.goal == "max" else -1
        order = sorted(hist)
        k = rng.choice([2, 3, 5])
        wanted = {
            Q.SizeMax(1): order[-1:],
            Q.SizeMin(1): order[:1],
            Q.SizeMax(k): order[::-1][:k],
            Q.CountingMax(k): [(s, hist[s]) for s in order[::-1][:k]],
            Q.CountingMin(1): [(order[0], hist[order[0]])],
            Q.CountingAll(): sum(hist.values()),
        }
        if order[-1] - order[0] < 500:
            wanted[Q.GraphPolynomial(laurent=True)] = (
                order[0],
                [hist.get(s, 0) for s in range(order[0], order[-1] + 1)],
            )
        beta = 0.5 / max(1, abs(order[0]), abs(order[-1]))
        terms = [goal_sign * beta * s for s in order]
        top = max(terms)
        log_z = top + math.log(sum(hist[s] * math.exp(t - top) for s, t in zip(order, terms)))
        for limit in (None, 1 << 10):
            for prop, want in wanted.items():
                try:
                    got = _gpu(problem, prop, limit)
                except ValueError as error:  # k-best sizes and counts ride in float64: below 2^53 only
                    assert big >= 1 << 50 and "past what this property holds exactly" in str(error), (prop, error)
                    continue
                assert got == want, (problem, prop, limit)
                checked += 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = _gpu(problem, Q.PartitionFunction(beta), limit)
            assert math.isclose(got, log_z, rel_tol=1e-9, abs_tol=1e-9), (problem, beta)
    assert checked > 100
