"""Dominating sets: vertices such that every vertex is in the set or next to one; the size is their
total weight, the goal its minimum (ProblemReductions.jl ``DominatingSet``).

>>> p = DominatingSet((3, [(0, 1), (1, 2)]))
>>> p.is_feasible([0, 1, 0]), p.is_feasible([1, 0, 0]), p.goal
(True, False, 'min')
"""

from __future__ import annotations

from typing import Any

from . import _inputs
from ._base import Problem
from ._tables import constraint, vertex_objective


class DominatingSet(Problem):
    """``g``: a networkx graph or ``(n, edges)``; ``weights``: one per vertex (None: 1 each).
    One constraint per vertex over it and its neighbours (at least one of them in the set), one
    objective per vertex ([0, w]). Self loops are refused; a repeated edge is kept once."""

    goal = "min"

    def __init__(self, g: Any, weights: Any = None, openvertices: Any = (), fixedvertices: Any = None) -> None:
        graph = _inputs.graph(g, duplicates="drop")
        w = _inputs.weights(weights, graph.names, "vertex")
        self.graph = graph
        self.weights = w
        cons = [constraint((v, *nbrs), 2, lambda c: any(c)) for v, nbrs in enumerate(graph.neighbors())]
        objs = [vertex_objective(v, w[v]) for v in range(graph.n)]
        super().__init__(graph.names, 2, cons, objs, openvertices, {} if fixedvertices is None else fixedvertices)
