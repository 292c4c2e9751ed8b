"""A user's collection of sets, checked once, for the set problems (packing, covering).

>>> s = check_sets([[1, 2], [2, 3]])
>>> s.sets, s.elements, s.containing
([(1, 2), (2, 3)], [1, 2, 3], [[0], [0, 1], [1]])
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._base import Problem
from ._inputs import refuse_set


@dataclass(frozen=True)
class Sets:
    """The sets (tuples, in the order given), the elements in order of first appearance, and for
    each element the indices of the sets that hold it (ascending)."""

    sets: list[tuple[Hashable, ...]]
    elements: list[Hashable]
    containing: list[list[int]]


def check_sets(sets: Any) -> Sets:
    if isinstance(sets, (str, bytes, Mapping)) or not hasattr(sets, "__iter__"):
        raise ValueError(f"sets must be a sequence of sets (each a list of elements), got {type(sets).__name__}")
    refuse_set("sets", sets, "set i is variable i, named by its index")
    out: list[tuple[Hashable, ...]] = []
    where: dict[Hashable, list[int]] = {}
    for i, s in enumerate(sets):
        if isinstance(s, (str, bytes, Mapping)) or not hasattr(s, "__iter__"):
            raise ValueError(f"set {i} is {s!r}: give each set as a list of elements")
        items = list(s)
        for e in items:
            try:
                hash(e)
            except TypeError:
                raise ValueError(f"set {i} holds {e!r}, which is not hashable: elements must be") from None
        if len(set(items)) != len(items):
            raise ValueError(f"set {i} {items!r} lists an element twice: give each element once")
        out.append(tuple(items))
        for e in items:
            where.setdefault(e, []).append(i)
    return Sets(out, list(where), list(where.values()))


class SetProblem(Problem):
    """A problem whose variables are sets: named by their index in ``sets`` (0-based) in
    ``openvertices`` / ``fixedvertices``; :meth:`variable_names` gives the sets themselves."""

    def _index(self, what: str, name: Any) -> int:
        """A set's index (a Python or NumPy integer, not a bool) as a Python int."""
        whole = isinstance(name, (int, np.integer)) and not isinstance(name, (bool, np.bool_))
        if not whole or not 0 <= name < self.num_variables:
            raise ValueError(f"{what} names {name!r}: name a set by its index 0..{self.num_variables - 1} in sets")
        return int(name)
