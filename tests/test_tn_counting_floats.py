"""CountingMax / CountingMin (k > 1), lazykern/tn/solving/sizes.py's ``counting``: a pass of float32 counts
answers whenever the k best counts are below 2^24, then one of float64 counts below 2^53
(kbest.FLOAT_EXACT); a count past both is counted again by the integer rings (int64, or residues past
2^63). Checked against exact counts of disjoint
unions of small graphs (the union's size polynomial is the product of its components', each found by
brute force), so the counts pass 2^53 and 2^63."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import _components, solve
from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn.algebras import kbest
from lazykern.tn.solving import configurations
from lazykern.tn.solving import sizes as solving_sizes
from lazykern.tn.solving.context import Context


@pytest.fixture(autouse=True)
def one_network(monkeypatch):
    """These problems are unions of small components, built to make counts past 2^53 and 2^63: each is
    contracted as one network here (the passes under test), not counted apart (tests/test_tn_components.py)."""
    monkeypatch.setattr(_components, "SMALL", 0)


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
    real = Context.contract

    def contract(self, tab, labels, output, operands, semiring, algebra, plan=None):
        seen.append(algebra.__name__)
        return real(self, tab, labels, output, operands, semiring, algebra, plan)

    monkeypatch.setattr(Context, "contract", contract)
    return seen


def _instances(seed: int, weights: str) -> tuple[P.IndependentSet, dict[int, int]]:
    """About 110 vertices in components of 3 to 8 (over 2^63 independent sets); weights 1, small
    integers, 0 and 1, or mostly 0 (so many configurations at the best sizes that counts pass 2^53)."""
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


def test_small_best_counts_take_one_float_pass(monkeypatch):
    """Counts past 2^63 overall (the bound), small at the best sizes: one contraction, float32 counts."""
    p, poly = _instances(0, "small")
    assert sum(poly.values()) > 1 << 63 and max(c for _, c in sorted(poly.items())[-2:]) < 1 << 24
    seen = _passes(monkeypatch)
    assert solve(p, Q.CountingMax(2)) == sorted(poly.items(), reverse=True)[:2]
    assert len(seen) == 1 and "Floats4" in seen[0]


@pytest.mark.parametrize(
    "n,want,passes",
    [
        (23, 5 * 2**20, ["Floats4"]),  # below 2^24: the float32 pass alone (the bound 2^23 skips the next)
        (24, 5 * 2**21, ["Floats4"]),  # 2^23.3: float32 still
        (25, 5 * 2**22, ["Floats4", "Floats8"]),  # 2^24.3: float64
        (53, 5 * 2**50, ["Floats4", "Floats8"]),  # below 2^53: float64
        (54, 5 * 2**51, ["Floats4", "Floats8", "KBest2Counting"]),  # past 2^53, below 2^63: one int64 pass
        (64, 5 * 2**61, ["Floats4", "Floats8", "Paired"]),  # 2^63.3: int64 and residues
        (70, 5 * 2**67, ["Floats4", "Floats8", "Paired"]),
    ],
)
def test_counts_past_2_53_are_counted_again(monkeypatch, n, want, passes):
    """Every configuration at one size (all weights 0: 5 * 2^(n - 3) independent sets of a path of 3
    and n - 3 isolated vertices): no top-two pass (the sizes do not move), the float passes, then the
    integer rings the bound asks for."""
    # one size occurs: solve would cap k at 1 (values.k_cap); these are the k-best passes' checks
    for where in (solving_sizes, configurations):  # every module that calls k_cap
        monkeypatch.setattr(where, "k_cap", lambda tab, k: k)
    seen = _passes(monkeypatch)
    p = P.IndependentSet((n, [(0, 1), (1, 2)]), weights=[0] * n)
    assert solve(p, Q.CountingMax(2)) == [(0, want)]
    assert not any("Top2" in s for s in seen)
    assert len(seen) >= len(passes) and all(w in s for w, s in zip(passes, seen))
    assert len(seen) == len(passes) or passes[-1] == "Paired"  # the residue passes may be several


def test_float_exact_lines():
    assert kbest.FLOAT_EXACT == {8: 2**53, 4: 2**24}
    assert float(2**53 - 1) == 2**53 - 1 and float(2**53 + 1) == 2**53
    assert np.float32(2**24 - 1) == 2**24 - 1 and np.float32(2**24 + 1) == 2**24


@pytest.mark.parametrize(
    "n,passes",
    [
        (20, ["Top2Floats4"]),  # 2^17 and 3 * 2^17: the float32 top-two pass answers
        (30, ["Top2Floats4", "Top2Floats8"]),  # past 2^24, below 2^53: float64's
        (60, ["Top2Floats4", "Top2Floats8", "KBest2Counting"]),  # past 2^53: the int64 ring, no k-best float pass
        (70, ["Top2Floats4", "Top2Floats8", "Paired"]),  # past 2^63: int64 and residues
    ],
)
def test_top_two_counts_past_the_float_lines_skip_the_kbest_float_passes(monkeypatch, n, passes):
    """A path of 3 (sizes 2, 1, 0: 1, 3, 1 ways) beside n - 3 isolated vertices of weight 0: the two best
    sizes are consecutive, 2^(n-3) and 3 * 2^(n-3) ways. A float pass of the top-two algebra whose counts
    pass its exact line tells that the k-best pass of those floats would too: the next runs instead."""
    seen = _passes(monkeypatch)
    p = P.IndependentSet((n, [(0, 1), (1, 2)]), weights=[1, 1, 1] + [0] * (n - 3))
    assert solve(p, Q.CountingMax(2)) == [(2, 2 ** (n - 3)), (1, 3 * 2 ** (n - 3))]
    assert not any("KBest2CountingFloats" in s for s in seen)
    assert seen[:2] == passes[:2] and all(w in s for w, s in zip(passes, seen))
    assert len(seen) == len(passes) or passes[-1] == "Paired"  # the residue passes may be several
