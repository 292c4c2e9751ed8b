"""Tables made from a rule over local configurations, as ProblemReductions.jl writes its
``LocalConstraint`` / ``LocalSolutionSize``: one entry per local configuration.

>>> t = constraint((0, 1), 2, lambda c: sum(c) <= 1)
>>> t.values.tolist()
[[True, True], [True, False]]
>>> vertex_objective(3, 5)[1].tolist()
[0, 5]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...errors import shown
from ._base import Table

Local = tuple[int, ...]
# Entries of one local table, past which a problem is refused when it is made: each entry is computed here
# one by one (a Python call), and the network holds the table whole. 2^24 is an edge of 4096 colours, a
# clause or hyperedge of 24 binary variables.
TABLE_ENTRIES_MAX = 1 << 24


def _shape(variables: Sequence[int], num_flavors: int) -> tuple[int, ...]:
    """The table's shape, or a ValueError naming it where it would pass TABLE_ENTRIES_MAX entries."""
    if num_flavors ** len(variables) > TABLE_ENTRIES_MAX:
        raise ValueError(
            f"a table over {len(variables)} variables of {shown(num_flavors)} flavors would hold "
            f"{shown(num_flavors)}^{len(variables)} entries, past the {TABLE_ENTRIES_MAX} (2^24) one table may hold "
            "here: use fewer flavors (colours) or split the clause, set or hyperedge"
        )
    return (num_flavors,) * len(variables)


def constraint(variables: Sequence[int], num_flavors: int, allowed: Callable[[Local], bool]) -> Table:
    """A bool table: ``allowed(c)`` for each local configuration ``c`` (flavors of ``variables``)."""
    shape = _shape(variables, num_flavors)
    values = np.zeros(shape, dtype=bool)
    for c in np.ndindex(*shape):
        values[c] = bool(allowed(tuple(int(x) for x in c)))
    return Table(tuple(variables), values)


def objective(
    variables: Sequence[int], num_flavors: int, size: Callable[[Local], int | float]
) -> tuple[tuple[int, ...], np.ndarray]:
    """(variables, values): ``size(c)`` per local configuration, kept as Python numbers (exact)
    until the problem picks the dtype (:func:`._base._finish_objectives`)."""
    shape = _shape(variables, num_flavors)
    values = np.empty(shape, dtype=object)
    for c in np.ndindex(*shape):
        values[c] = size(tuple(int(x) for x in c))
    return tuple(variables), values


def vertex_objective(v: int, w: int | float) -> tuple[tuple[int, ...], np.ndarray]:
    """[0, w]: a binary variable adds its weight when it is 1 (in the set, in the matching ...)."""
    return objective((v,), 2, lambda c: w if c[0] else 0 * w)


def differ(w: int | float) -> Callable[[Local], int | float]:
    """w when the two ends of an edge take different flavors, else 0 (a cut edge, a properly coloured one)."""

    def size(c: Local) -> int | float:
        return w if c[0] != c[1] else 0 * w

    return size
