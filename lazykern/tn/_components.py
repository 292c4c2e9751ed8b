"""A problem's independent parts counted apart: small components enumerated on the host, exactly.

Variables that share no table, directly or through others, are independent: the counts of their
configurations multiply, their sizes add, their best configurations join and their log Z add. A
component of few configurations (at most :data:`SMALL`: an isolated vertex, an idle SAT variable, a
lone edge) is enumerated on the host (:class:`Alike`: identical components once); the larger components
stay one network, contracted as before. Sizes and counts combine the two by exact convolutions of
histograms (size numerator -> count, Python ints), keeping only what the property reads
(:func:`keeper`: the k best sizes, every size, or only the total) and raising identical components to
their number by squaring; one configuration joins each part's best; log Z sums each part's exact best
term and float64 log weight.

Why: ``Satisfiability([[2000]])`` has 1999 variables in no clause. As leaves of one network its count,
2^1999, took 100 primes, each prime a pass over 2000 leaves (23 s, quadratic in the variables), and
``[[10**5]]`` planned a network of 10^5 leaves for minutes; here each takes seconds.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from ._tables import Tables

SMALL = 1 << 6  # configurations of a component enumerated on the host

Histogram = dict[int, int]  # size numerator (offset excluded) -> number of configurations
Keep = Callable[[Histogram], Histogram]


@dataclasses.dataclass
class Alike:
    """Identical small components (table indices of each, variables in the same order) and one's table
    of configurations: ``grid`` (a column per configuration, a row per variable), which are ``allowed``,
    and their sizes (numerators, Python ints)."""

    components: list[list[int]]
    grid: np.ndarray
    allowed: np.ndarray
    sizes: np.ndarray

    def histogram(self) -> Histogram:
        """One component's allowed sizes, counted."""
        out: Histogram = {}
        for s in self.sizes[self.allowed].tolist():
            out[int(s)] = out.get(int(s), 0) + 1
        return out


@dataclasses.dataclass
class Split:
    """``tab`` in two independent parts: ``rest``, the components too large to enumerate (one Tables
    whose answers are its size numerators: no offset, no float conversion), or None where there are
    none; ``small``, the small components, identical ones together."""

    rest: Tables | None
    small: list[Alike]

    def extremes(self) -> tuple[int, int] | None:
        """The small components' smallest and largest sizes together (each one's, summed: they are
        independent), without merging; None where one has no allowed configuration."""
        low = high = 0
        for group in self.small:
            sizes = [int(s) for s in group.sizes[group.allowed].tolist()]
            if not sizes:
                return None
            low, high = low + min(sizes) * len(group.components), high + max(sizes) * len(group.components)
        return low, high

    def histogram(self, keep: Keep) -> Histogram:
        """Every small component's sizes counted together (what ``keep`` keeps of them)."""
        out: Histogram = {0: 1}
        for group in self.small:
            out = merge(out, power(group.histogram(), len(group.components), keep), keep)
        return out


def keeper(k: int | None, largest: bool) -> Keep:
    """What a histogram keeps: the ``k`` largest (``largest``) or smallest sizes; every size for
    ``k=None``; with ``k=0`` only the total, at size 0."""
    if k is None:
        return lambda h: h
    if k == 0:
        return lambda h: {0: sum(h.values())} if h else {}
    return lambda h: {v: h[v] for v in sorted(h, reverse=largest)[:k]}


def split(tab: Tables) -> Split | None:
    """``tab``'s small components enumerated on the host and the rest as one Tables; None where ``tab``
    is one component, has no small one, or is not of exact integer sizes (float sums stay one network)."""
    if not tab.feasible or not tab.integer or tab.tolerance:
        return None
    components = _components(tab.labels)
    if len(components) < 2:
        return None
    small = [c for c in components if tab.flavors ** len(_variables(tab, c)) <= SMALL]
    if not small:
        return None
    alike: dict[Any, list[list[int]]] = {}
    for c in small:
        alike.setdefault(_signature(tab, c), []).append(c)
    groups = [Alike(cs, *_enumerated(tab, cs[0])) for cs in alike.values()]
    taken = {t for c in small for t in c}
    rest = [t for t in range(len(tab.labels)) if t not in taken]
    return Split(_subtables(tab, rest) if rest else None, groups)


def best_assignment(tab: Tables, part: Split, largest: bool) -> tuple[int, dict[int, int]] | None:
    """The small components' best size (a numerator) and one assignment of their variables reaching it
    (each component's first best configuration); None where one has no allowed configuration."""
    total = 0
    assignment: dict[int, int] = {}
    for group in part.small:
        if not group.allowed.any():
            return None
        allowed = [(s, i) for i, (s, ok) in enumerate(zip(group.sizes.tolist(), group.allowed.tolist())) if ok]
        best, column = (max if largest else min)(allowed, key=lambda x: x[0])  # the first best
        for c in group.components:
            total += int(best)
            assignment.update(zip(_variables(tab, c), (int(f) for f in group.grid[:, column])))
    return total, assignment


def log_sum(h: Histogram, worth: Fraction) -> Fraction | float:
    """log of sum over sizes s of count(s) exp(worth * s): the largest exponent, exact, plus the float64
    log of the terms relative to it; -inf for an empty histogram."""
    if not h:
        return -math.inf
    top = max(worth * s for s in h)
    # a term below exp(-800) of the largest is 0 in float64 (and its exponent may be past float64's range)
    rest = math.fsum(c * math.exp(float(worth * s - top)) for s, c in h.items() if worth * s - top > -800)
    return top + Fraction(math.log(rest))


def merge(a: Histogram, b: Histogram, keep: Keep) -> Histogram:
    """The histogram of two independent parts: sizes added, counts multiplied (then kept). Dense ones
    (a polynomial's) by one convolution of object arrays (Python ints, exact)."""
    if a and b and len(a) * len(b) > _DENSE_WORK:
        lo_a, lo_b = min(a), min(b)
        width = max(a) - lo_a + max(b) - lo_b + 1
        if width <= 4 * (len(a) + len(b)):
            dense = np.convolve(_dense(a, lo_a), _dense(b, lo_b))
            return keep({lo_a + lo_b + i: int(c) for i, c in enumerate(dense.tolist()) if c})
    out: Histogram = {}
    for (x, m), (y, n) in itertools.product(a.items(), b.items()):
        out[x + y] = out.get(x + y, 0) + m * n
    return keep(out)


_DENSE_WORK = 1 << 12  # pairs of sizes past which a merge of dense histograms convolves arrays


def _dense(h: Histogram, low: int) -> np.ndarray:
    out = np.zeros(max(h) - low + 1, dtype=object)
    for v, c in h.items():
        out[v - low] = c
    return out


def power(h: Histogram, times: int, keep: Keep) -> Histogram:
    """``times`` independent copies of ``h`` merged, by squaring."""
    out: Histogram = {0: 1}
    while times:
        if times & 1:
            out = merge(out, h, keep)
        times >>= 1
        if times:
            h = merge(h, h, keep)
    return out


def _components(labels: list[tuple[int, ...]]) -> list[list[int]]:
    """The tables in groups linked by shared variables (union-find over variables)."""
    parent: dict[int, int] = {}

    def root(v: int) -> int:
        while parent.setdefault(v, v) != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for lab in labels:
        for v in lab[1:]:
            parent[root(v)] = root(lab[0])
    groups: dict[Any, list[int]] = {}
    for t, lab in enumerate(labels):
        groups.setdefault(root(lab[0]) if lab else ("scalar", t), []).append(t)
    return list(groups.values())


def _variables(tab: Tables, component: list[int]) -> list[int]:
    return sorted({v for t in component for v in tab.labels[t]})


def _signature(tab: Tables, component: list[int]) -> Any:
    """The component's tables with its variables renumbered in order: equal for identical components."""
    place = {v: i for i, v in enumerate(_variables(tab, component))}
    return tuple(
        (tuple(place[v] for v in tab.labels[t]), tab.mask[t].tobytes(), tuple(tab.size[t].ravel().tolist()))
        for t in component
    )


def _enumerated(tab: Tables, component: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every configuration of the component's variables (columns of a grid, a row per variable in
    order), whether it is allowed, and its size (a numerator)."""
    variables = _variables(tab, component)
    place = {v: i for i, v in enumerate(variables)}
    grid = np.indices((tab.flavors,) * len(variables)).reshape(len(variables), -1)  # a column a configuration
    if not variables:  # a table of no variable (every variable fixed): one configuration
        grid = np.zeros((0, 1), dtype=np.int64)
    allowed = np.ones(grid.shape[1], dtype=bool)
    sizes = np.zeros(grid.shape[1], dtype=object)
    for t in component:
        at = tuple(grid[place[v]] for v in tab.labels[t])
        allowed &= tab.mask[t][at] if at else bool(tab.mask[t])
        sizes = sizes + (tab.size[t][at] if at else tab.size[t].item())
    return grid, allowed, sizes


def _subtables(tab: Tables, tables: list[int]) -> Tables:
    """The tables ``tables`` of ``tab`` as Tables of their own, answering size numerators, with orders of
    their own (``ranked`` shared with ``tab`` gave the whole network the k-best order a GPU searched for
    these: ConfigsMax(2) beside a small component failed, "the path leaves 2 operands")."""
    free = tuple(sorted({v for t in tables for v in tab.labels[t]}))
    return dataclasses.replace(
        tab, free=free, labels=[tab.labels[t] for t in tables], mask=[tab.mask[t] for t in tables],
        size=[tab.size[t] for t in tables], offset=0, floats=False, order=None, ranked={},
    )  # fmt: skip
