"""Matchings: edges no two of which share a vertex; the size is their total weight, the goal its
maximum (ProblemReductions.jl ``Matching``). The variables are the edges, in the order given.

>>> p = Matching((3, [(0, 1), (1, 2)]))
>>> p.variable_names(), p.is_feasible([1, 1]), p.size([0, 1])
([(0, 1), (1, 2)], False, 1)
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from . import _inputs
from ._base import Problem
from ._tables import constraint, vertex_objective


class Matching(Problem):
    """``g``: a networkx graph or ``(n, edges)``; ``weights``: one per edge (or a dict keyed by
    edge, either orientation; None: 1 each). Variable k is edge k of ``g.edges`` (1: in the
    matching); ``openvertices`` / ``fixedvertices`` name edges ``(u, v)``, either orientation.
    One constraint per vertex with edges, over them (at most one in), one objective per edge
    ([0, w]). Self loops and repeated edges are refused."""

    goal = "max"

    def __init__(self, g: Any, weights: Any = None, openvertices: Any = (), fixedvertices: Any = None) -> None:
        graph = _inputs.graph(g, edge_order="the variables are the edges, in order")
        w = _inputs.weights(weights, graph.edge_names(), "edge", unordered=True)
        self.graph = graph
        self.weights = w
        incident: list[list[int]] = [[] for _ in range(graph.n)]
        for k, (u, v) in enumerate(graph.edges):
            incident[u].append(k)
            incident[v].append(k)
        # A vertex with no edge constrains nothing: ProblemReductions' table over no variable is True.
        cons = [constraint(ks, 2, lambda c: sum(c) <= 1) for ks in incident if ks]
        objs = [vertex_objective(k, w[k]) for k in range(len(graph.edges))]
        self._edges = _inputs.edge_lookup(graph)
        super().__init__(
            graph.edge_names(), 2, cons, objs, openvertices, {} if fixedvertices is None else fixedvertices
        )

    def _index(self, what: str, name: Any) -> int:
        key: Hashable = frozenset(name) if isinstance(name, tuple) and len(name) == 2 else None
        if key not in self._edges or not _inputs.same_name(name, self.variable_names()[self._edges[key]]):
            raise ValueError(f"{what} names {name!r}, which is not an edge (u, v) of the graph")
        return self._edges[key]
