"""Binary paint shop: a sequence in which each car appears twice, painted one colour at its first
occurrence and the other at its second; the size is the number of colour changes along the
sequence, the goal its minimum (ProblemReductions.jl ``PaintShop``).

One variable per car, in order of first appearance: 0 paints its first occurrence colour 0.

>>> p = PaintShop("abaccb")
>>> p.variable_names(), p.size([1, 0, 0]), p.goal
(['a', 'b', 'c'], 2, 'min')
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from ._base import Problem
from ._inputs import refuse_set
from ._tables import objective


def _switch(first_a: bool, first_b: bool) -> Any:
    """ProblemReductions' ``_paintshop_constraint``: the colours of two neighbouring occurrences
    differ exactly when (same car flavor) disagrees with (both first or both second occurrences)."""

    def size(c: tuple[int, ...]) -> int:
        return 0 if (c[0] == c[1]) == (first_a == first_b) else 1

    return size


def _diagonal(rule: Any) -> Any:
    def size(c: tuple[int, ...]) -> int:
        return int(rule((c[0], c[0])))

    return size


class PaintShop(Problem):
    """``sequence``: cars (hashable; a string is a sequence of one-letter cars), each exactly twice.
    One objective per neighbouring pair of occurrences (1 where the colour changes); a car next to
    itself always changes colour (a table over that one car, [1, 1]). No constraints."""

    goal = "min"

    def __init__(self, sequence: Any, openvertices: Any = (), fixedvertices: Any = None) -> None:
        if isinstance(sequence, (bytes, Mapping)) or not hasattr(sequence, "__iter__"):
            raise ValueError(f"sequence must be a sequence of cars, got {type(sequence).__name__}")
        refuse_set("sequence", sequence, "the order of the occurrences is the paint shop")
        seq = list(sequence)
        index: dict[Hashable, int] = {}
        counts: list[int] = []
        for k, car in enumerate(seq):
            try:
                i = index.setdefault(car, len(index))
            except TypeError:
                raise ValueError(f"occurrence {k} is {car!r}, which is not hashable: cars must be") from None
            if i == len(counts):
                counts.append(0)
            counts[i] += 1
        cars = list(index)
        wrong = [(car, c) for car, c in zip(cars, counts) if c != 2]
        if wrong:
            car, c = wrong[0]
            raise ValueError(f"car {car!r} appears {c} times: each car appears exactly twice in a paint shop")
        first = [seq.index(car) == k for k, car in enumerate(seq)]
        self.sequence = seq
        objs = []
        for k in range(len(seq) - 1):
            a, b = index[seq[k]], index[seq[k + 1]]
            rule = _switch(first[k], first[k + 1])
            if a == b:  # both occurrences of one car: ProblemReductions' table over (a, a), read on its diagonal
                objs.append(objective((a,), 2, _diagonal(rule)))
            else:
                objs.append(objective((a, b), 2, rule))
        super().__init__(cars, 2, [], objs, openvertices, {} if fixedvertices is None else fixedvertices)
