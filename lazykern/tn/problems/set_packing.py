"""Set packing: sets no two of which share an element; the size is their total weight, the goal
its maximum (ProblemReductions.jl ``SetPacking``).

>>> p = SetPacking([[1, 2], [2, 3], [3, 4]])
>>> p.is_feasible([1, 1, 0]), p.size([1, 0, 1])
(False, 2)
"""

from __future__ import annotations

from typing import Any

from ._inputs import weights as check_weights
from ._sets import SetProblem, check_sets
from ._tables import constraint, vertex_objective


class SetPacking(SetProblem):
    """``sets``: a sequence of sets, each a list of hashable elements (each once; an empty set is
    allowed and always free to take); ``weights``: one per set (None: 1 each). Variable i is set i
    (1: taken). One constraint per element over the sets holding it (at most one taken), one
    objective per set ([0, w])."""

    goal = "max"

    def __init__(self, sets: Any, weights: Any = None, openvertices: Any = (), fixedvertices: Any = None) -> None:
        s = check_sets(sets)
        w = check_weights(weights, list(range(len(s.sets))), "set")
        self.sets, self.elements, self.weights = s.sets, s.elements, w
        cons = [constraint(holders, 2, lambda c: sum(c) <= 1) for holders in s.containing]
        objs = [vertex_objective(i, w[i]) for i in range(len(s.sets))]
        super().__init__(s.sets, 2, cons, objs, openvertices, {} if fixedvertices is None else fixedvertices)
