"""Every configuration of a set, listed by branching on variables with exact counts as the guide.

The set (the feasible configurations, or those at the k best sizes) is known only through two
questions about a partial assignment: how many of its configurations agree with it, per size
(``count``), and, when exactly one does, which it is (``single``: one argmax contraction). The
search fixes the free variables one at a time in order and asks ``count`` for every flavor but the
last (whose count is what is left of its parent's), dropping branches that hold none and finishing a
branch that holds one with ``single``. Every contraction keeps the network's shape (a pinned variable
forbids its other flavors), so one plan serves them all. The total is checked against ``limit`` before
anything is listed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Counts = dict[Any, int]  # size -> configurations at that size


def enumerate_configs(
    free: Sequence[int],
    flavors: int,
    count: Callable[[dict[int, int]], Counts],
    single: Callable[[dict[int, int]], tuple[Any, dict[int, int]]],
    total: Counts,
) -> list[tuple[Any, dict[int, int]]]:
    """(size, assignment of ``free``) of every configuration of the set whose counts are ``total``."""
    found: list[tuple[Any, dict[int, int]]] = []
    stack: list[tuple[dict[int, int], Counts]] = [({}, total)]
    while stack:
        assigned, counts = stack.pop()
        counts = {v: c for v, c in counts.items() if c}
        if not counts:
            continue
        if len(assigned) == len(free) and sum(counts.values()) > 1:
            raise ArithmeticError(f"the full assignment {assigned} is counted {sum(counts.values())} times")
        if sum(counts.values()) == 1:
            size, assignment = single(assigned)
            if size not in counts:
                raise ArithmeticError(f"the branch {assigned} holds one configuration of size {next(iter(counts))}, "
                                      f"but its argmax has size {size}")  # fmt: skip
            found.append((size, assignment))
            continue
        var = free[len(assigned)]
        rest = dict(counts)
        for f in range(flavors - 1):
            child = count(assigned | {var: f})
            for v, c in child.items():
                rest[v] = rest.get(v, 0) - c
            stack.append((assigned | {var: f}, child))
        if any(c < 0 for c in rest.values()):
            raise ArithmeticError(f"branching on variable {var}: the flavors' counts exceed their parent's")
        stack.append((assigned | {var: flavors - 1}, rest))
    return found
