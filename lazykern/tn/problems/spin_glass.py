"""Ising spin glasses, hyperedges allowed; the size is the energy E(s) = -sum_e J_e prod_(i in e) s_i
- sum_i h_i s_i, the goal its minimum. Flavor 0 is spin +1, flavor 1 spin -1, as in
:mod:`lazykern.tn.networks` (whose energy this is, for pairs).

ProblemReductions.jl ``SpinGlass`` has the opposite sign (H = sum J prod s + sum h s): its instance
(J, h) is this one's (-J, -h), with the same flavors (its spin is 1 - 2 * flavor).

>>> p = SpinGlass((3, [(0, 1), (0, 1, 2)]), J=[1, 2], h=[0, 0, 1])
>>> p.size([0, 0, 0]), p.size([1, 0, 0])
(-4, 2)
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from . import _inputs
from ._base import Problem
from ._tables import objective

SPIN = (1, -1)  # flavor -> spin value, as lazykern.tn.networks.SPIN


def _coupling(J: int | float) -> Any:
    def size(c: tuple[int, ...]) -> int | float:
        return -J * math.prod(SPIN[x] for x in c)

    return size


def _field(h: int | float) -> Any:
    def size(c: tuple[int, ...]) -> int | float:
        return -h * SPIN[c[0]]

    return size


def _graph(g: Any, h: Any, edge_order: str | None) -> _inputs.Graph:
    """A networkx graph, (n, edges), or a plain list of (hyper)edges (n: len(h), else the largest
    index + 1); ``edge_order`` as :func:`._inputs.graph` takes it."""
    if _inputs.is_networkx(g):
        return _inputs.graph(g, hyperedges=True)
    plain = isinstance(g, (list, tuple)) and not (
        len(g) == 2 and isinstance(g[0], (int, np.integer)) and not isinstance(g[0], (bool, np.bool_))
    )
    if plain:
        edges = list(g)
        if h is not None and not isinstance(h, Mapping) and hasattr(h, "__len__"):
            n = len(h)
        else:
            ends = [v for e in edges if hasattr(e, "__iter__") for v in e if isinstance(v, (int, np.integer))]
            n = max(ends, default=-1) + 1
        return _inputs.graph((n, edges), hyperedges=True)
    return _inputs.graph(g, hyperedges=True, edge_order=edge_order)


class SpinGlass(Problem):
    """``g_or_hyperedges``: a networkx graph, ``(n, edges)`` or a list of edges, where an edge
    holds one or more distinct spins (a hyperedge: its coupling multiplies all of them); ``J``: one
    coupling per edge (sequence, or dict keyed by edge); ``h``: one field per spin (None: no
    field). One objective per edge (-J prod s) and one per spin ([-h, h]); no constraints. An edge
    given twice is refused (sum its couplings first), as :class:`lazykern.tn.networks.SpinGlass` does."""

    goal = "min"

    def __init__(
        self, g_or_hyperedges: Any, J: Any, h: Any = None, openvertices: Any = (), fixedvertices: Any = None
    ) -> None:
        if J is None:
            raise ValueError("SpinGlass needs J, one coupling per edge")
        graph = _graph(g_or_hyperedges, h, _inputs.weights_in_order(J, "edge"))
        couplings = _inputs.weights(J, graph.edge_names(), "edge", unordered=True)
        fields = [0] * graph.n if h is None else _inputs.weights(h, graph.names, "vertex")
        if any(isinstance(x, float) for x in [*couplings, *fields]):
            both = _inputs.numbers([*couplings, *fields], "coupling and field")
            couplings, fields = both[: len(couplings)], both[len(couplings) :]
        self.graph, self.J, self.h = graph, couplings, fields
        objs = [objective(e, 2, _coupling(j)) for e, j in zip(graph.edges, couplings)]
        objs += [objective((v,), 2, _field(f)) for v, f in enumerate(fields)]
        super().__init__(graph.names, 2, [], objs, openvertices, {} if fixedvertices is None else fixedvertices)

    @classmethod
    def from_instance(cls, sg: Any, openvertices: Any = (), fixedvertices: Any = None) -> SpinGlass:
        """The problem of a :class:`lazykern.tn.networks.SpinGlass` (spins 0..n-1, same energy)."""
        from ..networks import SpinGlass as Instance

        if not isinstance(sg, Instance):
            raise TypeError(
                f"SpinGlass.from_instance(sg): sg is a lazykern.tn.networks.SpinGlass, got {type(sg).__name__}"
            )
        edges: list[tuple[Hashable, ...]] = [tuple(int(v) for v in e) for e in np.asarray(sg.edges).tolist()]
        return cls(
            (int(sg.n), edges),
            list(np.asarray(sg.J).tolist()),
            list(np.asarray(sg.h).tolist()),
            openvertices,
            fixedvertices,
        )
