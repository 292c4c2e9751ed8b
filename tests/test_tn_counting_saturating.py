"""CountingMax / CountingMin (k > 1) past int64 (lazykern/tn/solver.py's ``counting``): one pass of
saturating counts answers whenever the k best counts are below 2^63 - 1; a saturated count is counted
again by residues. Checked against exact counts of disjoint unions of small graphs (the union's size
polynomial is the product of its components', each found by brute force), so the counts pass 2^63."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn import solve, solver
from lazykern.tn.algebras import kbest


def _component_polynomial(g: nx.Graph, weights: list[int]) -> dict[int, int]:
    """size -> number of independent sets of ``g`` of that total weight, by brute force."""
    nodes = list(g)
    out: dict[int, int] = {}
    for bits in itertools.product((0, 1), repeat=len(nodes)):
        chosen = {v for v, b in zip(nodes, bits) if b}
        if any(u in chosen and v in chosen for u, v in g.edges):
            continue
        size = sum(weights[v] for v in chosen)
        out[size] = out.get(size, 0) + 1
    return out


def _union(parts: list[tuple[nx.Graph, list[int]]]) -> tuple[P.IndependentSet, dict[int, int]]:
    """The disjoint union as an IndependentSet (vertices renumbered) and its exact size polynomial."""
    edges: list[tuple[int, int]] = []
    weights: list[int] = []
    poly, offset = {0: 1}, 0
    for g, w in parts:
        edges += [(u + offset, v + offset) for u, v in g.edges]
        weights += w
        offset += g.number_of_nodes()
        comp = _component_polynomial(g, w)
        new: dict[int, int] = {}
        for a, ca in poly.items():
            for b, cb in comp.items():
                new[a + b] = new.get(a + b, 0) + ca * cb
        poly = new
    return P.IndependentSet((offset, edges), weights=weights), poly


def _passes(monkeypatch) -> list[str]:
    """The algebra of every contraction ``solve`` runs, by name."""
    seen: list[str] = []
    real = solver._Context.contract

    def contract(self, tab, labels, output, operands, semiring, algebra, plan=None):
        seen.append(algebra.__name__)
        return real(self, tab, labels, output, operands, semiring, algebra, plan)

    monkeypatch.setattr(solver._Context, "contract", contract)
    return seen


def _instances(seed: int, weights: str) -> tuple[P.IndependentSet, dict[int, int]]:
    """About 110 vertices in components of 3 to 8 (over 2^63 independent sets); weights 1, small
    integers, 0 and 1, or mostly 0 (so many configurations at the best sizes that counts saturate)."""
    rng = np.random.default_rng(seed)
    parts = []
    while sum(g.number_of_nodes() for g, _ in parts) < 110:
        n = int(rng.integers(3, 9))
        g = nx.gnp_random_graph(n, 0.3, seed=int(rng.integers(1 << 30)))
        pool = {"one": [1], "small": [-2, -1, 0, 1, 2, 3], "zero_one": [0, 1], "mostly_zero": [0, 0, 0, 0, 1]}
        parts.append((g, [int(x) for x in rng.choice(pool[weights], n)]))
    return _union(parts)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weights", ["one", "small", "zero_one", "mostly_zero"])
def test_counting_max_and_min_past_int64_are_exact(seed, weights):
    p, poly = _instances(seed, weights)
    assert sum(poly.values()) > 1 << 63
    for k in (2, 3):
        want_max = sorted(poly.items(), reverse=True)[:k]
        want_min = sorted(poly.items())[:k]
        assert solve(p, Q.CountingMax(k)) == want_max
        assert solve(p, Q.CountingMin(k)) == want_min


def test_small_best_counts_take_one_saturating_pass(monkeypatch):
    """Counts past 2^63 overall (the bound), small at the best sizes: one contraction, saturating."""
    p, poly = _instances(0, "one")
    assert sum(poly.values()) > 1 << 63
    seen = _passes(monkeypatch)
    assert solve(p, Q.CountingMax(2)) == sorted(poly.items(), reverse=True)[:2]
    assert len(seen) == 1 and "Saturating" in seen[0]


def test_saturated_counts_are_counted_again_by_residues(monkeypatch):
    """Every configuration at one size (all weights 0): 5 * 2^67 independent sets, past the saturating
    pass; the residue passes give it exactly. 5 * 2^60 (between 2^62 and 2^63) too: the host's
    saturating sums read it as saturated, and the residue passes count it."""
    for n, want in ((70, 5 * 2**67), (63, 5 * 2**60)):
        seen = _passes(monkeypatch)
        p = P.IndependentSet((n, [(0, 1), (1, 2)]), weights=[0] * n)
        assert solve(p, Q.CountingMax(2)) == [(0, want)]
        assert "Saturating" in seen[0] and len(seen) > 1
        monkeypatch.undo()


def test_counts_that_fit_int64_take_the_int64_pass_alone(monkeypatch):
    """A bound below 2^63 (at most 62 binary variables): one int64 pass, no saturating one."""
    seen = _passes(monkeypatch)
    g = nx.random_regular_graph(3, 20, seed=1)
    solve(P.IndependentSet(g), Q.CountingMax(2))
    assert len(seen) == 1 and "Saturating" not in seen[0]


def test_saturated_constant():
    assert kbest.SATURATED == 2**63 - 1 == np.iinfo(np.int64).max
