"""Configurations held as the contraction that found them, not as a list (GenericTensorNetworks'
``SumProductTree``): ``ConfigsAll(tree_storage=True)`` and ``ConfigsMax/Min(k, tree_storage=True)``.

A :class:`ConfigTree` knows its exact count, gives the i-th configuration of its own order and samples
uniformly (with replacement) without listing the others, so a count far past what memory holds can
still be sampled: each sample is one exact integer
drawn below the count and read down the tree. Its memory grows with the network, not with the count:
every step's values and exact counts, and each pair step's running counts over its output entries times
the assignments of the labels it sums (the step's multiply-add space, for each choice of kept values that
counts there): a network whose largest steps pass memory as such tables is one to count, not to keep.

>>> import networkx as nx
>>> from lazykern.tn import problems as P, properties as Q, solve
>>> tree = solve(P.IndependentSet(nx.petersen_graph()), Q.ConfigsAll(tree_storage=True))
>>> tree.count
76
>>> tree.sample(3, seed=1).shape
(3, 10)
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from ._configs import Tree, sorted_rows
from ._tables import Tables
from .properties import check_limit

Seed = int | np.random.Generator | random.Random | None


class ConfigTree:
    """Every configuration at one size (``size``; None for every feasible one), as a tree.

    ``count`` (an exact int), ``len(tree)`` (the same, where it fits an index), ``tree[i]`` (the i-th
    configuration of the tree's own order, which is not sorted; ``tree[a:b]`` and ``tree[[i, j]]`` as
    rows), :meth:`sample` and
    :meth:`configurations` (every one, sorted, as ``ConfigsAll`` lists them). A configuration is a numpy
    int64 array with one entry per variable, fixed values kept."""

    def __init__(
        self, tree: Tree | None, target: Any, tab: Tables, size: Any, check: Callable[[np.ndarray], Any]
    ) -> None:
        """``tree``'s assignments reaching the root value ``target`` (None: no configuration), as
        configurations of ``tab``'s problem; ``check`` raises for a configuration the problem rejects
        (one is checked here, and the first of every later request)."""
        self._tree, self._target, self._tab, self._check = tree, target, tab, check
        self._sizes: dict[Hashable, int] = dict.fromkeys(tab.free, tab.flavors)
        self.size = size
        self.count: int = 0 if tree is None else tree.count(target, self._sizes)
        if self.count:
            self._at([0])

    def __bool__(self) -> bool:
        return self.count > 0

    def __len__(self) -> int:
        if self.count > sys.maxsize:
            raise OverflowError(f"the tree holds {_many(self.count)} configurations, past len(); read .count")
        return self.count

    def __repr__(self) -> str:
        plural = "" if self.count == 1 else "s"
        what = f"feasible configuration{plural}" if self.size is None else f"configuration{plural} of size {self.size}"
        return f"<ConfigTree: {_many(self.count)} {what} of {self._tab.num_variables} variables>"

    def __getitem__(self, index: int | slice | Sequence[int] | np.ndarray) -> np.ndarray:
        """Configuration ``index`` of the tree's own order (negative from the end); a slice or a sequence
        of ints gives those as rows, found together in one walk down the tree."""
        if isinstance(index, slice):
            return self._at(list(range(*index.indices(self.count))))
        if isinstance(index, (list, tuple, np.ndarray)):
            return self._at([self._index(i) for i in np.asarray(index, dtype=object).reshape(-1)])
        row: np.ndarray = self._at([self._index(index)])[0]
        return row

    def _index(self, index: object) -> int:
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise TypeError(
                f"a ConfigTree is indexed by an int, a slice or ints, got {type(index).__name__}; sample() draws many"
            )
        i = int(index) + (self.count if index < 0 else 0)
        if not 0 <= i < self.count:
            raise IndexError(f"configuration {int(index)} of a tree of {_many(self.count)}")
        return i

    def sample(self, n: int, seed: Seed = None) -> np.ndarray:
        """``n`` configurations drawn uniformly, independently (with replacement): an int64 array (n, variables).
        ``seed``: None (fresh entropy), an int, a ``random.Random`` or a ``numpy.random.Generator``; each draw
        is an exact integer below the count, whatever its size. A seed repeats its samples on one tree, and in
        another process wherever the contraction order is the same (a searched order is kept in the store:
        a large network searched afresh may order its tree, and so its samples, differently)."""
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"sample(n={n!r}): n is the number of configurations to draw, an int of at least 0")
        if n and not self.count:
            raise ValueError("sample(): the tree holds no configuration to draw")
        draw = _drawer(seed)
        return self._at([draw(self.count) for _ in range(int(n))])

    def configurations(self, limit: int = 10**6) -> np.ndarray:
        """Every configuration, one row each, sorted (``ConfigsAll``'s listing); a ValueError past ``limit``."""
        limit = check_limit("ConfigTree.configurations", limit)
        if self.count > limit:
            raise ValueError(f"the tree holds {_many(self.count)} configurations, past limit={limit}")
        if self._tree is None:
            return np.zeros((0, self._tab.num_variables), dtype=np.int64)
        labels, rows = self._tree.rows(self._target, self._sizes)
        return sorted_rows(self._tab.configurations(labels, rows), self._tab.flavors)

    def _at(self, indices: list[int]) -> np.ndarray:
        if self._tree is None:
            return np.zeros((0, self._tab.num_variables), dtype=np.int64)
        labels, rows = self._tree.assignments(self._target, indices, self._sizes)
        configs = np.ascontiguousarray(self._tab.configurations(labels, rows).T)
        if len(configs):  # the problem's own word on one of them (the count was checked when the tree was made)
            self._check(configs[0])
        return configs


def _drawer(seed: Seed) -> Any:
    """A function drawing an exact uniform int below its argument, from ``seed``."""
    if isinstance(seed, np.random.Generator):
        return lambda count: _below(count, seed)
    if isinstance(seed, random.Random):
        return seed.randrange
    if seed is None or (isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_))):
        return random.Random(None if seed is None else int(seed)).randrange
    raise TypeError(f"seed must be None, an int, a random.Random or a numpy.random.Generator, got {seed!r}")


def _below(count: int, gen: np.random.Generator) -> int:
    """A uniform int in [0, count) from ``gen``'s bytes, by rejection (exact for any count)."""
    bits = (count - 1).bit_length()
    width = (bits + 7) // 8
    while True:
        x = int.from_bytes(gen.bytes(width), "little") >> (8 * width - bits) if bits else 0
        if x < count:
            return x


def _many(count: int) -> str:
    return str(count) if count < 10**30 else f"about 2^{math.log2(count):.1f}"


__all__ = ["ConfigTree"]
