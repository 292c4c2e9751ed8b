"""Every configuration at the best sizes, read top-down through a contraction that kept its intermediates.

A contraction in the tropical or k-best algebra keeps, at every step, the best values of each entry
of its result. Going back down from the root with a wanted value t at a known position of a step's
labels: a product step C = A (x) B summed over labels S reaches t exactly where a value a of A and b
of B at the same assignment s of S add up to t, and then every configuration of A's subtree reaching
a combines with every one of B's reaching b (their summed labels are disjoint). Only the k best of
each factor can add up to one of the k best of the product (a worse one would leave k distinct
better sums above it), so the kept values are enough, and every list built is part of the answer:
the work is about the number of configurations times the depth of the tree, not one contraction per
configuration. The same walk with every feasible entry worth 0 lists every feasible configuration.

Sizes tie exactly: integer sizes are exact in the value dtype, and a float step's value is the very
sum the walk recomputes (same operands, same operation).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._contract import Algebra, Term, contract, reduce

Label = Hashable
Assignment = tuple[tuple[Label, int], ...]  # sorted (label, value) pairs of a subtree's summed labels


@dataclass
class _Node:
    kind: str  # "leaf", "reduce" or "pair"
    children: tuple[int, ...]
    summed: tuple[Label, ...]  # labels summed at this step
    labels: tuple[Label, ...]
    values: list[np.ndarray]  # the k best values per entry, on the host


class Tree:
    """A contraction of ``leaves`` along ``path`` to a scalar in ``alg``, every step's values kept."""

    def __init__(self, alg: Algebra, leaves: Sequence[Term], path: Sequence[tuple[int, ...]], k: int) -> None:
        self.alg, self.be, self.k = alg, alg.be, k
        self.nodes: list[_Node] = []
        self._orders: dict[int, tuple[Label, ...]] = {}  # node -> the labels of its rows (:meth:`_order`)
        live = [(self._add("leaf", (), (), t), t) for t in leaves]
        uses = Counter(x for t in leaves for x in t.labels)
        for step in path:
            picked = [live[i] for i in step]
            for i in sorted(step, reverse=True):
                for x in live.pop(i)[1].labels:
                    uses[x] -= 1
            node, term = picked[0]
            for j, (other_id, other) in enumerate(picked[1:]):
                later = {x for _, t in picked[j + 2 :] for x in t.labels}
                needed = {x for x in term.labels + other.labels if uses[x] > 0 or x in later}
                node, term = self._reduce(node, term, needed | set(other.labels))
                other_id, other = self._reduce(other_id, other, needed | set(term.labels))
                out, choice = contract(alg, term, other, needed, False)
                node, term = self._add("pair", (node, other_id), choice.labels, out), out
            live.append((node, term))
            for x in term.labels:
                uses[x] += 1
        if len(live) != 1:
            raise ValueError(f"the contraction path leaves {len(live)} operands; it must contract all of them")
        self.root, _ = self._reduce(*live[0], set())

    def _add(self, kind: str, children: tuple[int, ...], summed: tuple[Label, ...], term: Term) -> int:
        values = [self.be.to_host(p) for p in term.parts[: self.k]]
        self.nodes.append(_Node(kind, children, tuple(summed), term.labels, values))
        return len(self.nodes) - 1

    def _reduce(self, node: int, term: Term, needed: set[Label]) -> tuple[int, Term]:
        own = [x for x in term.labels if x not in needed]
        if not own:
            return node, term
        out, choice = reduce(self.alg, term, own, False)
        return self._add("reduce", (node,), choice.labels, out), out

    def best(self) -> list[Any]:
        """The root's k best values (-inf where fewer occur)."""
        return [v.item() for v in self.nodes[self.root].values]

    def rows(self, target: Any, sizes: Mapping[Label, int]) -> tuple[tuple[Label, ...], np.ndarray]:
        """Every assignment of the labels reaching the root value ``target``: the labels (the tree's summed
        labels, in its order) and their values, an array (labels, assignments), one column an assignment,
        of the smallest unsigned type that holds every value of ``sizes``."""
        memo: dict[tuple[int, Assignment, Any], np.ndarray] = {}
        dtype = np.min_scalar_type(max([*sizes.values(), 1]) - 1)
        depth = sys.getrecursionlimit()
        sys.setrecursionlimit(max(depth, 4 * len(self.nodes) + 1000))  # one frame per tree level, two at most
        try:
            found = self._below(self.root, (), target, sizes, memo, dtype)
        finally:
            sys.setrecursionlimit(depth)
        return self._order(self.root), found

    def _order(self, node_id: int) -> tuple[Label, ...]:
        """The labels of a subtree's rows: the node's summed labels, then each child's, in order (kept per
        node: a listing asks for a node's once per position it is reached at)."""
        found = self._orders.get(node_id)
        if found is None:
            node = self.nodes[node_id]
            found = self._orders[node_id] = node.summed + tuple(x for c in node.children for x in self._order(c))
        return found

    def _below(
        self,
        node_id: int,
        position: Assignment,
        target: Any,
        sizes: Mapping[Label, int],
        memo: dict[tuple[int, Assignment, Any], np.ndarray],
        dtype: np.dtype[Any],
    ) -> np.ndarray:
        """The assignments (labels as :meth:`_order`, one column each) of the subtree at ``node_id`` reaching
        ``target`` with its labels at ``position``: arrays of values, not a Python tuple per assignment (6.7
        million of them took 148 s to list, 2 minutes of it building tuples and dicts one by one, session 81)."""
        key = (node_id, position, target)
        if key in memo:
            return memo[key]
        node = self.nodes[node_id]
        if node.kind == "leaf":
            found = np.zeros((0, 1), dtype=dtype)
        else:
            at = dict(position)
            kids = [self.nodes[c] for c in node.children]
            grids = [_over(kid, at, node.summed, sizes) for kid in kids]  # per child: k arrays over summed
            pieces = []
            for s, picks in _ties(grids, target, node.summed):
                here = at | dict(zip(node.summed, s))
                parts = [
                    self._below(c, tuple((x, here[x]) for x in self.nodes[c].labels), v, sizes, memo, dtype)
                    for c, v in zip(node.children, picks)
                ]
                pieces.append(_product([np.array(s, dtype=dtype).reshape(len(s), 1), *parts]))
            found = np.concatenate(pieces, axis=1) if pieces else np.zeros((len(self._order(node_id)), 0), dtype=dtype)
        memo[key] = found
        return found


def _product(blocks: Sequence[np.ndarray]) -> np.ndarray:
    """Every combination of one column of each block, stacked (the first block's column varying slowest,
    as itertools.product)."""
    out = blocks[0]
    for block in blocks[1:]:
        n, m = out.shape[1], block.shape[1]
        out = np.concatenate([np.repeat(out, m, axis=1), np.tile(block, (1, n))], axis=0)
    return out


def _over(node: _Node, at: dict[Label, int], summed: tuple[Label, ...], sizes: Mapping[Label, int]) -> list[np.ndarray]:
    """``node``'s k value arrays at the fixed labels ``at``, as arrays over ``summed`` (broadcast
    along the summed labels the node lacks)."""
    index = tuple(at[x] if x in at else slice(None) for x in node.labels)
    rest = [x for x in node.labels if x not in at]
    out = []
    for v in node.values:
        sub = v[index] if index else v
        order = [rest.index(x) for x in summed if x in rest]
        sub = np.transpose(sub, order) if order else sub
        shape = [sizes[x] if x in rest else 1 for x in summed]
        out.append(np.broadcast_to(np.reshape(sub, shape), [sizes[x] for x in summed]))
    return out


def _ties(grids: list[list[np.ndarray]], target: Any, summed: tuple[Label, ...]) -> list[tuple[tuple[int, ...], Any]]:
    """(assignment of ``summed``, one value per child) where the children's values add up to ``target``:
    every choice of one of each child's k values at once, as one broadcast sum over (k,) * children +
    the summed labels' shape (in the order one loop over the choices, then the assignments, would find them)."""
    stacked = [np.stack(g) for g in grids]  # child c: (k_c, *summed shape)
    total: Any = None
    for c, child in enumerate(stacked):
        shape = [1] * len(stacked) + list(child.shape[1:])
        shape[c] = child.shape[0]
        total = child.reshape(shape) if total is None else total + child.reshape(shape)  # children in order
    with np.errstate(invalid="ignore"):
        hits = np.argwhere(np.asarray(total == target))
    out = []
    for hit in hits:
        picks, s = hit[: len(stacked)], tuple(int(x) for x in hit[len(stacked) :])
        values = tuple(stacked[c][i][s].item() for c, i in enumerate(picks))
        if all(math.isfinite(v) for v in values):
            out.append((s, values))
    return out
