"""What an argmax run's backtracking recomputes, priced from the plan alone (no array is touched).

A configuration needs each step's choice at the position the steps above it chose. The choices of
the steps with at most ``keep`` result entries are kept by the run; every other step is recomputed
by :func:`lazykern.tn.einsum._backtrack` in segments: the subtree under the first step without a
choice, down to the checkpoints (steps whose values the run kept), with the labels chosen so far
fixed, keeping the smallest of the segment's choices within ``budget`` bytes. This module walks the
same way over the plan's labels, so that memory can be split between kept choices, checkpoints
and segments by the time they save (on a 32 x 32 lattice: keeping the small steps' choices left
room for one checkpoint and 7 forward contractions recomputed; keeping none, 13 and 0.9).

>>> inputs = [(0, 1), (1, 2), (2, 3)]
>>> sizes = dict.fromkeys(range(4), 2)
>>> recomputed(inputs, sizes, [(0, 1), (0, 1)], keep=-1, save=frozenset(), budget=1e9, entry_bytes=4)
(1, 12)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

Label = Hashable


class Tree:
    """A plan's steps as a tree: each step's labels (``kept``), the labels it sums out (``summed``)
    and its child steps; built once, priced for many splits by :meth:`recomputed`."""

    def __init__(self, inputs: Sequence[Sequence[Label]], sizes: dict[Label, int], path: Sequence[tuple[int, ...]]):
        self.sizes = sizes
        terms: list[tuple[frozenset[Label], int]] = [(frozenset(t), -1) for t in inputs]
        uses = Counter(x for t in inputs for x in t)
        self.steps: list[tuple[frozenset[Label], frozenset[Label], list[int]]] = []
        for step in path:
            picked = [terms[i] for i in step]
            for i in sorted(step, reverse=True):
                uses.subtract(terms.pop(i)[0])
            union = frozenset().union(*(t for t, _ in picked))
            kept = frozenset(x for x in union if uses[x] > 0)
            self.steps.append((kept, union - kept, [origin for _, origin in picked if origin >= 0]))
            terms.append((kept, len(self.steps) - 1))
            uses.update(kept)
        self.result = [self.entries(kept) for kept, _, _ in self.steps]

    def entries(self, labels: frozenset[Label]) -> int:
        return math.prod(self.sizes[x] for x in labels)

    def recomputed(self, keep: float, save: frozenset[int], budget: float, entry_bytes: int) -> tuple[int, int]:
        """(segments, multiply-adds recomputed) of the backtracking of a run whose steps with at most
        ``keep`` result entries kept their choice and whose steps in ``save`` their values."""
        steps, entries = self.steps, self.entries
        chosen: set[Label] = set()
        found: dict[int, int] = {}  # step -> bytes of its choice, held until the walk reads it
        segments = flops = 0
        walk = [len(steps) - 1] if steps else []
        while walk:
            n = walk.pop()
            if self.result[n] > keep and n not in found:
                segments += 1
                costs: dict[int, int] = {}
                below = [n]
                while below:
                    m = below.pop()
                    labels, gone, children = steps[m]
                    flops += entries((labels | gone) - chosen)
                    if self.result[m] > keep:
                        costs[m] = entries(labels - chosen) * (4 + entry_bytes)
                    below.extend(c for c in children if c not in save)
                spent = sum(found.values())
                found[n] = costs.pop(n)
                for m, cost in sorted(costs.items(), key=lambda item: item[1]):
                    if spent + cost > budget:
                        break
                    found[m] = cost
                    spent += cost
            found.pop(n, None)
            chosen |= steps[n][1]
            walk.extend(steps[n][2])
        return segments, flops


def recomputed(
    inputs: Sequence[Sequence[Label]],
    sizes: dict[Label, int],
    path: Sequence[tuple[int, ...]],
    keep: float,
    save: frozenset[int],
    budget: float,
    entry_bytes: int,
) -> tuple[int, int]:
    """(segments, multiply-adds recomputed) of the backtracking of ``path``'s run, whose steps with
    at most ``keep`` result entries kept their choice and whose steps in ``save`` their values."""
    return Tree(inputs, sizes, path).recomputed(keep, save, budget, entry_bytes)
