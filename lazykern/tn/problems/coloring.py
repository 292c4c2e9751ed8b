"""Vertex colouring with k colours; the size is the total weight of the edges whose ends differ in
colour, the goal its maximum (ProblemReductions.jl ``Coloring{K}``, its default objective form:
weights on the edges, no constraints). A proper colouring is one of size sum(weights).

>>> p = Coloring((3, [(0, 1), (1, 2)]), 3)
>>> p.size([0, 1, 0]), p.size([0, 0, 2]), p.num_flavors
(2, 1, 3)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _inputs
from ._base import Problem
from ._tables import differ, objective


class Coloring(Problem):
    """``g``: a networkx graph or ``(n, edges)``; ``k``: the number of colours (>= 1), so variable i
    (node i's colour) has k flavors; ``weights``: one per edge, in the order of ``g.edges`` (or a
    dict keyed by edge; None: 1 each). One objective per edge (a k x k table: w off the
    diagonal). Self loops and repeated edges are refused."""

    goal = "max"

    def __init__(self, g: Any, k: int, weights: Any = None, openvertices: Any = (), fixedvertices: Any = None) -> None:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            raise ValueError(f"Coloring: k (the number of colours) must be an integer, got {k!r}")
        if k < 1:
            raise ValueError(f"Coloring: k (the number of colours) must be at least 1, got {k}")
        graph = _inputs.graph(g, edge_order=_inputs.weights_in_order(weights, "edge"))
        w = _inputs.weights(weights, graph.edge_names(), "edge", unordered=True)
        self.graph = graph
        self.weights = w
        self.k = int(k)
        objs = [objective(e, self.k, differ(wk)) for e, wk in zip(graph.edges, w)]
        super().__init__(graph.names, self.k, [], objs, openvertices, {} if fixedvertices is None else fixedvertices)
