"""Maximal independent sets: independent sets no vertex can be added to; the size is their total
weight, the goal its maximum (ProblemReductions.jl ``MaximalIS``; ``SizeMin`` asks for the smallest).

>>> p = MaximalIS((3, [(0, 1), (1, 2)]))
>>> p.is_feasible([0, 1, 0]), p.is_feasible([1, 0, 0])
(True, False)
"""

from __future__ import annotations

from typing import Any

from . import _inputs
from ._base import Problem
from ._tables import constraint, vertex_objective


def _maximal(c: tuple[int, ...]) -> bool:
    """c[0]: the vertex, c[1:]: its neighbours. In: no neighbour in; out: some neighbour in."""
    return (c[0] == 1 and not any(c[1:])) or (c[0] == 0 and any(c[1:]))


class MaximalIS(Problem):
    """``g``: a networkx graph or ``(n, edges)``; ``weights``: one per vertex (None: 1 each).
    One constraint per vertex over it and its neighbours (a table of 2^(degree+1) entries), one
    objective per vertex ([0, w]). Self loops are refused; a repeated edge is kept once."""

    goal = "max"

    def __init__(self, g: Any, weights: Any = None, openvertices: Any = (), fixedvertices: Any = None) -> None:
        graph = _inputs.graph(g, duplicates="drop")
        w = _inputs.weights(weights, graph.names, "vertex")
        self.graph = graph
        self.weights = w
        cons = [constraint((v, *nbrs), 2, _maximal) for v, nbrs in enumerate(graph.neighbors())]
        objs = [vertex_objective(v, w[v]) for v in range(graph.n)]
        super().__init__(graph.names, 2, cons, objs, openvertices, {} if fixedvertices is None else fixedvertices)
