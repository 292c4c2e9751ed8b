"""What an argmax run's backtracking recomputes, priced from the plan alone (no array is touched).

A configuration needs each step's choice at the position the steps above it chose. The choices of
the steps with at most ``keep`` result entries are kept by the run; every other step is recomputed
by :func:`lazykern.tn.contraction.argmax._backtrack` in segments: the subtree under the first step without a
choice, down to the checkpoints (steps whose values the run kept), with the labels chosen so far
fixed, keeping the smallest of the segment's choices within ``budget`` bytes. This module walks the
same way over the plan's labels, so that memory can be split between kept choices, checkpoints
and segments by the time they save (on a 32 x 32 lattice: keeping the small steps' choices left
room for one checkpoint and 7 forward contractions recomputed; keeping none, 13 and 0.9).

A label set is a bit mask (one bit per label), so a step's entries with the chosen labels fixed are a
product over its free bits. A segment's walk meets every step below its top down to the checkpoints,
thousands on a sweep, though only the steps without a kept choice (the boundary's) can be a
checkpoint or a choice the segment keeps: the steps between two of those are summed once per plan,
and a group is walked step by step only where a chosen label reaches it (near the segment's top).
So one pricing takes milliseconds, and :meth:`lazykern.tn.contraction.checkpoints.Checkpoints.checkpoints` can compare
many sets of checkpoints.

>>> inputs = [(0, 1), (1, 2), (2, 3)]
>>> sizes = dict.fromkeys(range(4), 2)
>>> recomputed(inputs, sizes, [(0, 1), (0, 1)], keep=-1, save=frozenset(), budget=1e9, entry_bytes=4)
(1, 12)
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

Label = Hashable
# Checkpoints :func:`place` compares, spread over the run's predicted time: on a 32 x 32 lattice 20 of
# its 275 candidates found a set redoing 1.1 runs where all of them found 0.8 and the old even shares
# 3.9, in 0.2 s instead of 10.
POOL = 20


@dataclass
class _Walk:
    """The plan's steps seen from those without a kept choice (``big``): the order in which the
    backtracking's walk reaches them, with the labels summed above each (a mask); for each, the big
    steps next below it and the other steps in between (their masks and their entries summed)."""

    order: list[tuple[int, int]]  # (big step, mask of the labels its ancestors sum out), in walk order
    below: dict[int, list[int]]  # big step -> the big steps next below it
    between: dict[int, list[int]]  # big step -> the other steps under it, above the next big ones
    reach: dict[int, int]  # big step -> mask of every label of its ``between`` steps
    full: dict[int, int]  # big step -> entries of its ``between`` steps with no label fixed
    sides: list[int]  # the steps right under a big one with no big step below them


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
        bit = {x: 1 << i for i, x in enumerate(sizes)}
        self._classes = [(n, sum(bit[x] for x in sizes if sizes[x] == n)) for n in set(sizes.values()) if n > 1]
        sizes_over_1 = [n for n, _ in self._classes]
        self._binary = None if any(n != 2 for n in sizes_over_1) else sum(m for _, m in self._classes)
        self._kept = [sum(bit[x] for x in kept) for kept, _, _ in self.steps]
        self._summed = [sum(bit[x] for x in gone) for _, gone, _ in self.steps]
        self._walks: dict[tuple[float, frozenset[int]], _Walk] = {}

    def entries(self, labels: frozenset[Label]) -> int:
        return math.prod(self.sizes[x] for x in labels)

    def _entries(self, mask: int) -> int:
        """Entries of the labels in ``mask`` (a product over the sizes: a power of two for binary labels)."""
        if self._binary is not None:  # every label of 2 entries (or 1): a spin network's
            return 1 << (mask & self._binary).bit_count()
        out = 1
        for size, members in self._classes:
            out *= size ** (mask & members).bit_count()
        return out

    def _walk(self, keep: float, stops: frozenset[int]) -> _Walk:
        """The plan's steps grouped around those with more than ``keep`` result entries, the root and
        ``stops`` (checkpoints among the others, where a segment's walk stops too)."""
        found = self._walks.get((keep, stops))
        if found is not None:
            return found
        steps, summed = self.steps, self._summed
        walk = _Walk([], {}, {}, {}, {}, [])
        if steps:
            root = len(steps) - 1
            stack = [(root, root, 0, False)]  # (step, big step above it, labels summed above it, under it)
            while stack:
                n, owner, above, under = stack.pop()
                if n == root or self.result[n] > keep or n in stops:
                    if n != root:
                        walk.below[owner].append(n)
                    walk.order.append((n, above))
                    walk.below[n], walk.between[n] = [], []
                    walk.reach[n], walk.full[n] = 0, 0
                    owner, under = n, self.result[n] > keep  # the root and stops start no segment
                else:
                    if under:
                        walk.sides.append(n)
                    mask = self._kept[n] | summed[n]
                    walk.between[owner].append(n)
                    walk.reach[owner] |= mask
                    walk.full[owner] += self._entries(mask)
                    under = False
                stack.extend((c, owner, above | summed[n], under) for c in steps[n][2])
        if len(self._walks) > 8:
            self._walks.clear()
        self._walks[keep, stops] = walk
        return walk

    def sides(self, keep: float) -> frozenset[int]:
        """The steps right under one with more than ``keep`` result entries whose subtree has none: kept
        as checkpoints, a segment redoes none of the steps under them (a sweep's tensors of the next
        spins, about eight small steps beside each step of the boundary, and the start of the boundary
        up to the first step whose choice is not kept)."""
        return frozenset(self._walk(keep, frozenset()).sides)

    def recomputed(self, keep: float, save: frozenset[int], budget: float, entry_bytes: int) -> tuple[int, int]:
        """(segments, multiply-adds recomputed) of the backtracking of a run whose steps with at most
        ``keep`` result entries kept their choice and whose steps in ``save`` their values."""
        segments, flops, _ = self.redone(keep, save, budget, entry_bytes)
        return segments, flops

    def redone(self, keep: float, save: frozenset[int], budget: float, entry_bytes: int) -> tuple[int, int, int]:
        """:meth:`recomputed` and the steps the segments run: each has a fixed cost beside its
        multiply-adds (launches and the executor's Python), which binds where a segment redoes a
        thousand small steps from the leaves."""
        walk = self._walk(keep, frozenset(n for n in save if self.result[n] <= keep))
        kept, summed, entries, result = self._kept, self._summed, self._entries, self.result
        found: dict[int, int] = {}  # step -> bytes of its choice, held until the walk reads it
        segments = flops = runs = 0
        for n, chosen in walk.order:
            if result[n] > keep and n not in found:
                segments += 1
                costs: dict[int, int] = {}
                free = ~chosen
                below = [n]
                while below:
                    m = below.pop()
                    flops += entries((kept[m] | summed[m]) & free)
                    runs += 1 + len(walk.between[m])
                    if result[m] > keep:
                        costs[m] = entries(kept[m] & free) * (4 + entry_bytes)
                    if walk.reach[m] & chosen:  # a chosen label reaches these steps: each priced as fixed
                        flops += sum(entries((kept[s] | summed[s]) & free) for s in walk.between[m])
                    else:
                        flops += walk.full[m]
                    below.extend(c for c in reversed(walk.below[m]) if c not in save)  # as the walk met them
                spent = sum(found.values())
                found[n] = costs.pop(n)
                for m, cost in sorted(costs.items(), key=lambda item: item[1]):
                    if spent + cost > budget:
                        break
                    found[m] = cost
                    spent += cost
            found.pop(n, None)
        return segments, flops, runs


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


def place(
    tree: Tree,
    keep: float,
    candidates: Sequence[int],
    elapsed: Sequence[float],
    peak: Callable[[frozenset[int]], float],
    room: float,
    seconds: Callable[[int, int], float],
    entry_bytes: int,
    start: frozenset[int] = frozenset(),
) -> frozenset[int]:
    """Checkpoints for the backtracking of a run keeping the choices up to ``keep`` entries, added one at
    a time, each the one of ``candidates`` (steps in run order) that most cuts the predicted seconds of
    the recomputation (``seconds(multiply-adds, steps)`` of :meth:`Tree.redone`), while ``peak(save)``
    (the run's and the backtracking's peak with those checkpoints) stays within ``room`` bytes; a
    segment's choices get the rest. The candidates compared are POOL of them at even shares of the
    run's predicted time (``elapsed``: the seconds at each step's end). A set that fits the memory but
    puts its checkpoints where the boundary is largest is not the best: a 16 GiB checkpoint in the
    middle of a 32 x 32 sweep left room for nothing else, where checkpoints of 2 to 8 GiB on both sides
    of it cut the recomputation fourfold. ``start``: checkpoints taken before any is added (it must fit)."""
    if not candidates:
        return start
    times = [elapsed[n] for n in candidates]
    marks = [elapsed[-1] * (i + 0.5) / POOL for i in range(POOL)]
    pool = sorted({candidates[min(bisect.bisect_left(times, m), len(candidates) - 1)] for m in marks})

    def priced(save: frozenset[int]) -> float | None:
        bytes_then = peak(save)
        if bytes_then > room:
            return None
        _, flops, runs = tree.redone(keep, save, room - bytes_then, entry_bytes)
        return seconds(flops, runs)

    save = start
    best = priced(save)
    if best is None:
        return save
    while True:
        trials = [(cost, n) for n in pool if n not in save for cost in [priced(save | {n})] if cost is not None]
        if not trials or min(trials)[0] >= best:
            return save
        best, n = min(trials)
        save = save | {n}
