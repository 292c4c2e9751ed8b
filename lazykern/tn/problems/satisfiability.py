"""Satisfiability of a CNF formula; the size is the total weight of the satisfied clauses, the goal
its maximum (ProblemReductions.jl ``Satisfiability``, its default objective form: a formula is
satisfiable when its best size is the sum of the weights).

Clauses are DIMACS style: nonzero integers, v for variable v, -v for its negation; variable v is
index v - 1, flavor 1 is true.

>>> p = Satisfiability([[1, -2], [2, 3]])
>>> p.num_variables, p.size([0, 0, 1]), p.size([0, 1, 0])
(3, 2, 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import shown
from . import _inputs
from ._base import Problem
from ._tables import objective


def _clause(k: int, clause: Any) -> list[int]:
    if isinstance(clause, (str, bytes, Mapping)) or not hasattr(clause, "__iter__"):
        raise ValueError(f"clause {k} is {clause!r}: a clause is a list of nonzero integers (DIMACS literals)")
    lits = list(clause)
    if not lits:
        raise ValueError(f"clause {k} is empty: an empty clause is never satisfied; remove it or add literals")
    for x in lits:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            raise ValueError(f"clause {k} holds {x!r}: literals are nonzero integers (v or -v)")
        if x == 0:
            raise ValueError(f"clause {k} holds 0: literals are nonzero (0 ends a clause in DIMACS files only)")
    return [int(x) for x in lits]


def _satisfied_size(lits: list[int], variables: list[int], w: int | float) -> Any:
    position = {v: i for i, v in enumerate(variables)}

    def size(c: tuple[int, ...]) -> int | float:
        sat = any(c[position[abs(x) - 1]] == (1 if x > 0 else 0) for x in lits)
        return w if sat else 0 * w

    return size


class Satisfiability(Problem):
    """``cnf``: clauses of nonzero ints (DIMACS); ``weights``: one per clause (None: 1 each);
    ``num_variables``: the number of variables (default: the largest |literal|; a variable in no
    clause is free). ``openvertices`` / ``fixedvertices`` name DIMACS variables (1..n). One
    objective per clause over its variables (w where the clause holds); no constraints."""

    goal = "max"

    def __init__(
        self,
        cnf: Any,
        weights: Any = None,
        openvertices: Any = (),
        fixedvertices: Any = None,
        *,
        num_variables: int | None = None,
    ) -> None:
        if isinstance(cnf, (str, bytes, Mapping)) or not hasattr(cnf, "__iter__"):
            raise ValueError(f"cnf must be a sequence of clauses (lists of nonzero ints), got {type(cnf).__name__}")
        if weights is not None:  # by index or in order, weights name clauses by their place in cnf
            _inputs.refuse_set("cnf", cnf, "weights name each clause by its index in cnf")
        clauses = [_clause(k, c) for k, c in enumerate(cnf)]
        largest = max((abs(x) for c in clauses for x in c), default=0)
        _inputs.check_variables(largest, "the largest variable a clause names")
        if num_variables is None:
            n = largest
        elif isinstance(num_variables, bool) or not isinstance(num_variables, (int, np.integer)):
            raise ValueError(f"num_variables must be an integer, got {num_variables!r}")
        elif num_variables < 0:
            raise ValueError(f"num_variables must be at least 0 (the number of variables), got {shown(num_variables)}")
        elif num_variables < largest:
            raise ValueError(f"num_variables = {num_variables}, but a clause names variable {largest}")
        else:
            n = int(num_variables)
            _inputs.check_variables(n, "num_variables")
        w = _inputs.weights(weights, list(range(len(clauses))), "clause")
        self.clauses, self.weights = clauses, w
        objs = []
        for lits, wk in zip(clauses, w):
            variables = list(dict.fromkeys(abs(x) - 1 for x in lits))  # each once, in order of appearance
            objs.append(objective(variables, 2, _satisfied_size(lits, variables, wk)))
        names = list(range(1, n + 1))
        super().__init__(names, 2, [], objs, openvertices, {} if fixedvertices is None else fixedvertices)
