"""Independent sets: vertices no two of which share an edge; the size is their total weight, the
goal its maximum (ProblemReductions.jl ``IndependentSet``).

>>> p = IndependentSet((3, [(0, 1), (1, 2)]))
>>> p.size([1, 0, 1]), p.is_feasible([1, 1, 0])
(2, False)
"""

from __future__ import annotations

from typing import Any

from . import _inputs
from ._base import Problem
from ._tables import constraint, vertex_objective


class IndependentSet(Problem):
    """``g``: a networkx graph or ``(n, edges)``; ``weights``: one per vertex (sequence or dict
    keyed by node; None: 1 each). Variable i is node i of ``list(g.nodes)``: 1 in the set, 0 out.
    One constraint per edge (not both ends), one objective per vertex ([0, w]). Self loops are
    refused; a repeated edge is kept once (it changes nothing)."""

    goal = "max"

    def __init__(self, g: Any, weights: Any = None, openvertices: Any = (), fixedvertices: Any = None) -> None:
        graph = _inputs.graph(g, duplicates="drop")
        w = _inputs.weights(weights, graph.names, "vertex")
        self.graph = graph
        self.weights = w
        cons = [constraint(e, 2, lambda c: sum(c) <= 1) for e in graph.edges]
        objs = [vertex_objective(v, w[v]) for v in range(graph.n)]
        super().__init__(graph.names, 2, cons, objs, openvertices, {} if fixedvertices is None else fixedvertices)
