"""Max cut: two groups of vertices; the size is the total weight of the edges between the groups,
the goal its maximum (ProblemReductions.jl ``MaxCut``: weights on the edges, no constraints).

>>> p = MaxCut((3, [(0, 1), (1, 2)]), weights=[1, 2])
>>> p.size([0, 1, 0]), p.size([0, 0, 1])
(3, 2)
"""

from __future__ import annotations

from typing import Any

from . import _inputs
from ._base import Problem
from ._tables import differ, objective


class MaxCut(Problem):
    """``g``: a networkx graph or ``(n, edges)``; ``weights``: one per edge, in the order of
    ``g.edges`` (or a dict keyed by edge, either orientation; None: 1 each). Variable i is node i's
    group (0 or 1). One objective per edge ([[0, w], [w, 0]]). Self loops and repeated edges are
    refused (a repeated edge's weight would be ambiguous: merge them)."""

    goal = "max"

    def __init__(self, g: Any, weights: Any = None, openvertices: Any = (), fixedvertices: Any = None) -> None:
        graph = _inputs.graph(g, edge_order=_inputs.weights_in_order(weights, "edge"))
        w = _inputs.weights(weights, graph.edge_names(), "edge", unordered=True)
        self.graph = graph
        self.weights = w
        objs = [objective(e, 2, differ(wk)) for e, wk in zip(graph.edges, w)]
        super().__init__(graph.names, 2, [], objs, openvertices, {} if fixedvertices is None else fixedvertices)
