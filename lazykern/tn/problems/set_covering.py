"""Set covering: sets that together hold every element; the size is their total weight, the goal
its minimum (ProblemReductions.jl ``SetCovering``).

>>> p = SetCovering([[1, 2], [2, 3], [3, 4]])
>>> p.is_feasible([1, 1, 0]), p.size([1, 0, 1]), p.goal
(False, 2, 'min')
"""

from __future__ import annotations

from typing import Any

from ._inputs import weights as check_weights
from ._sets import SetProblem, check_sets
from ._tables import constraint, vertex_objective


class SetCovering(SetProblem):
    """``sets``: a sequence of sets, each a list of hashable elements (each once; an empty set is
    allowed: it covers nothing); ``weights``: one per set (None: 1 each). The elements to cover are
    those of the sets. Variable i is set i (1: taken). One constraint per element over the sets
    holding it (at least one taken), one objective per set ([0, w])."""

    goal = "min"

    def __init__(self, sets: Any, weights: Any = None, openvertices: Any = (), fixedvertices: Any = None) -> None:
        s = check_sets(sets)
        w = check_weights(weights, list(range(len(s.sets))), "set")
        self.sets, self.elements, self.weights = s.sets, s.elements, w
        cons = [constraint(holders, 2, lambda c: any(c)) for holders in s.containing]
        objs = [vertex_objective(i, w[i]) for i in range(len(s.sets))]
        super().__init__(s.sets, 2, cons, objs, openvertices, {} if fixedvertices is None else fixedvertices)
