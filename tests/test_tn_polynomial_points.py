"""GraphPolynomial carries its evaluation points in groups the memory holds (lazykern/tn/solving/graph_poly.py)."""

from __future__ import annotations

import importlib

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn import solve

from ._gtn_brute import Brute

S = importlib.import_module("lazykern.tn.solving.graph_poly")


@pytest.fixture
def passes(monkeypatch):
    """The point count of each polynomial contraction (the networks whose output is the points: the
    points are every operand's first axis)."""
    seen: list[int] = []
    real = S.Context.contract

    def spy(self, tab, labels, output, operands, *rest, **kw):
        if output == (S.polynomial.POINTS,):
            first = operands[0][0] if isinstance(operands[0], tuple) else operands[0]
            seen.append(int(first.shape[0]))
        return real(self, tab, labels, output, operands, *rest, **kw)

    monkeypatch.setattr(S.Context, "contract", spy)
    return seen


def test_points_in_groups_give_the_same_exact_polynomial(passes):
    g = nx.random_regular_graph(3, 16, seed=3)
    p = P.IndependentSet(g)
    want = Brute(p).polynomial()
    assert solve(p, Q.GraphPolynomial()) == want
    whole = set(passes)
    passes.clear()
    ctx = S.Context(np, "auto", None, None, None)
    largest = S._largest_intermediate(S._tables.build(p, {}), ctx)
    assert solve(p, Q.GraphPolynomial(), memory_limit=2 * largest) == want
    assert whole == {len(want)} and max(passes) <= 2 and sum(passes) % len(want) == 0


def test_points_per_pass_is_the_limit_over_the_largest_intermediate():
    ctx = S.Context(np, "greedy", 2**20, None, None)
    assert S._points_per_pass(ctx, 2**16, 8, 91) == 16
    assert S._points_per_pass(ctx, 2**21, 8, 91) == 1  # past the limit alone: one point, sliced
    assert S._points_per_pass(ctx, 1, 8, 91) == 91
    ctx = S.Context(np, "greedy", None, None, None)  # the host's default target
    assert 1 <= S._points_per_pass(ctx, 2**10, 40, 91) <= 91


def test_points_in_one_sliced_plan_of_their_own_give_the_same_exact_polynomial(passes, monkeypatch):
    """Where a plan of the polynomial network with every point in it, sliced to the memory, is predicted
    quicker than the shared order run per group of points (a GPU's 3-regular 200-vertex graph: 90
    passes of one point), one contraction carries every point, and the polynomial is the same."""
    g = nx.random_regular_graph(3, 30, seed=3)
    p = P.IndependentSet(g)
    want = solve(p, Q.GraphPolynomial())
    passes.clear()
    assert solve(p, Q.GraphPolynomial(), memory_limit=2**8, max_time=1) == want
    assert len(passes) > 1 and max(passes) < len(want)  # groups: on the host, slicing is predicted slower
    # the prediction's verdict reversed (seconds falling with slices): the plan of its own is taken
    monkeypatch.setattr(S, "_REPLAN_SECONDS", 0.0)
    monkeypatch.setattr(S._cost, "seconds", lambda steps, nslices, itemsize, rates: 1.0 / nslices)
    chosen = []
    real = S._points_plan
    monkeypatch.setattr(S, "_points_plan", lambda *a: chosen.append(real(*a)) or chosen[-1])
    passes.clear()
    assert solve(p, Q.GraphPolynomial(), memory_limit=2**8, max_time=1) == want
    (plan,) = chosen
    assert passes == [len(want)] and plan.nslices > 1 and plan.largest <= 2**8


def test_a_callers_own_order_is_never_replanned(monkeypatch):
    p = P.IndependentSet(nx.random_regular_graph(3, 12, seed=4))
    tab = S._tables.build(p, {})
    path = [tuple(x) for x in S.contraction_plan(tab.labels, (), S.label_sizes(tab), optimize="greedy").path]
    monkeypatch.setattr(S, "_REPLAN_SECONDS", 0.0)
    labels = [(S.polynomial.POINTS, *lab) for lab in tab.labels]
    ctx = S.Context(np, path, 2**4, None, None)
    assert S._points_plan(tab, labels, 7, 1, 8, ctx) is None
