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

The walk also counts without listing (:meth:`Tree.count`: at each reached node, position and value, the
ties and the exact number of assignments below each) and finds the i-th assignment of the listing's
order without the others (:meth:`Tree.assignments`: each node's ties in the listing's order, then the
children's indices in mixed radix, the first child the most significant digit), which samples uniformly
from a number of configurations far past what a listing holds (GenericTensorNetworks' ``SumProductTree``
and ``generate_samples``).

Sizes tie exactly: integer sizes are exact in the value dtype, and a float step's value is the very
sum the walk recomputes (same operands, same operation).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import sys
from collections import Counter
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ReconstructionError
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
    """A contraction of ``leaves`` along ``path`` to a scalar in ``alg``, every step's values kept on the
    host (the tree holds no device array and no algebra once built)."""

    def __init__(self, alg: Algebra, leaves: Sequence[Term], path: Sequence[tuple[int, ...]], k: int) -> None:
        self.k = k
        self.nodes: list[_Node] = []
        self._orders: dict[int, tuple[Label, ...]] = {}  # node -> the labels of its rows (:meth:`_order`)
        self._counts: list[list[np.ndarray]] = []  # per node, per kept value: its assignments (:meth:`_count_all`)
        # per node, per kept value: the running counts (entries, choices that ever count) and those choices
        self._running: list[list[tuple[np.ndarray, np.ndarray]]] = []
        live = [(self._add(alg, "leaf", (), (), t), t) for t in leaves]
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
                node, term = self._reduce(alg, node, term, needed | set(other.labels))
                other_id, other = self._reduce(alg, other_id, other, needed | set(term.labels))
                out, choice = contract(alg, term, other, needed, False)
                node, term = self._add(alg, "pair", (node, other_id), choice.labels, out), out
            live.append((node, term))
            for x in term.labels:
                uses[x] += 1
        if len(live) != 1:
            raise ValueError(f"the contraction path leaves {len(live)} operands; it must contract all of them")
        self.root, _ = self._reduce(alg, *live[0], set())

    def _add(self, alg: Algebra, kind: str, children: tuple[int, ...], summed: tuple[Label, ...], term: Term) -> int:
        values = [alg.be.to_host(p) for p in term.parts[: self.k]]
        self.nodes.append(_Node(kind, children, tuple(summed), term.labels, values))
        return len(self.nodes) - 1

    def _reduce(self, alg: Algebra, node: int, term: Term, needed: set[Label]) -> tuple[int, Term]:
        own = [x for x in term.labels if x not in needed]
        if not own:
            return node, term
        out, choice = reduce(alg, term, own, False)
        return self._add(alg, "reduce", (node,), choice.labels, out), out

    def best(self) -> list[Any]:
        """The root's k best values (-inf where fewer occur)."""
        return [v.item() for v in self.nodes[self.root].values]

    def rows(self, target: Any, sizes: Mapping[Label, int]) -> tuple[tuple[Label, ...], np.ndarray]:
        """Every assignment of the labels reaching the root value ``target``: the labels (the tree's summed
        labels, in its order) and their values, an array (labels, assignments), one column an assignment,
        of the smallest unsigned type that holds every value of ``sizes``."""
        memo: dict[tuple[int, Assignment, Any], np.ndarray] = {}
        with self._deep():
            found = self._below(self.root, (), target, sizes, memo, _dtype(sizes))
        return self._order(self.root), found

    def count(self, target: Any, sizes: Mapping[Label, int]) -> int:
        """How many assignments :meth:`rows` lists for ``target``, exactly, without listing them."""
        counts = self._count_all(sizes)[self.root]
        return sum(int(c[()]) for v, c in zip(self.nodes[self.root].values, counts) if v[()] == target)

    def assignments(
        self, target: Any, indices: Sequence[int], sizes: Mapping[Label, int]
    ) -> tuple[tuple[Label, ...], np.ndarray]:
        """The assignments at ``indices`` (each below :meth:`count`) of :meth:`rows`'s listing for ``target``,
        found without the others: the labels and an array (labels, len(indices)) as :meth:`rows` gives.
        Every index passes every node once, all of them together: at a node, its choices (each child's
        kept value, then the summed labels' assignment, in the listing's order) have running counts per
        entry; an index picks the first whose running count passes it, and what is left of it splits
        among the children in mixed radix, the last child the fastest digit."""
        labels = self._order(self.root)
        row = {x: i for i, x in enumerate(labels)}
        m = len(indices)
        out = np.zeros((len(labels), m), dtype=_dtype(sizes))
        counts = self._count_all(sizes)
        # every entry a walk reaches counts at most the root's assignments: int64 indices where those fit
        rtype: Any = np.int64 if self.count(target, sizes) < 2**63 else object
        root = self.nodes[self.root]
        first = next(j for j, v in enumerate(root.values) if v[()] == target)
        incoming = {self.root: (np.zeros((m, 0), np.intp), np.full(m, first), np.array(list(indices), dtype=rtype))}
        for node_id in range(len(self.nodes) - 1, -1, -1):  # a node comes after its children
            node = self.nodes[node_id]
            if node_id not in incoming or node.kind == "leaf" or not m:
                continue
            position, which, ranks = incoming.pop(node_id)
            shape = [sizes[x] for x in node.labels]
            entry = np.ravel_multi_index(tuple(position.T), shape) if shape else np.zeros(m, np.intp)
            choice, rest = np.zeros(m, np.intp), np.zeros(m, dtype=rtype)
            for j in np.unique(which):
                sel = np.flatnonzero(which == j)
                table, kept = self._running[node_id][int(j)]
                running = table[entry[sel]]  # (picked here, choices that count)
                if not running.shape[1] or not (running[:, -1] > ranks[sel]).all():  # never silently
                    raise ReconstructionError(f"a tree's step {node_id} counts fewer assignments than its parent's")
                got = np.argmax(running > ranks[sel][:, None], axis=1)
                before = running[np.arange(len(sel)), np.maximum(got - 1, 0)].astype(rtype)
                choice[sel], rest[sel] = kept[got], ranks[sel] - np.where(got > 0, before, 0)
            summed = [sizes[x] for x in node.summed]
            picks, flat = np.divmod(choice, math.prod(summed))
            values = np.unravel_index(flat, summed) if summed else ()
            for x, v in zip(node.summed, values):
                out[row[x]] = v
            joint = np.concatenate([position, np.stack(values, axis=1)], axis=1) if summed else position
            where = node.labels + node.summed
            kids = []
            for c, pick in zip(node.children, np.unravel_index(picks, [len(counts[c]) for c in node.children])):
                at = joint[:, [where.index(x) for x in self.nodes[c].labels]]
                kids.append((c, at, pick, np.stack(counts[c])[tuple([pick, *at.T])].astype(rtype)))
            for c, at, pick, n in reversed(kids):  # the last child varies fastest
                incoming[c] = (at, pick, rest % n)
                rest = rest // n
        return labels, out

    @contextlib.contextmanager
    def _deep(self) -> Iterator[None]:
        """Room for a walk down the tree: one frame per tree level, two at most."""
        depth = sys.getrecursionlimit()
        sys.setrecursionlimit(max(depth, 4 * len(self.nodes) + 1000))
        try:
            yield
        finally:
            sys.setrecursionlimit(depth)

    def _order(self, node_id: int) -> tuple[Label, ...]:
        """The labels of a subtree's rows: the node's summed labels, then each child's, in order (kept per
        node: a listing asks for a node's once per position it is reached at)."""
        found = self._orders.get(node_id)
        if found is None:
            for i in range(node_id + 1):  # a node comes after its children: no recursion, however deep the tree
                if i not in self._orders:
                    node = self.nodes[i]
                    self._orders[i] = node.summed + tuple(x for c in node.children for x in self._orders[c])
            found = self._orders[node_id]
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
            grids = [_over(kid.values, kid.labels, at, node.summed, sizes) for kid in kids]  # k arrays over summed
            pieces = []
            for s, picks, _ in _ties(grids, target, node.summed):
                here = at | dict(zip(node.summed, s))
                parts = [
                    self._below(c, tuple((x, here[x]) for x in self.nodes[c].labels), v, sizes, memo, dtype)
                    for c, v in zip(node.children, picks)
                ]
                pieces.append(_product([np.array(s, dtype=dtype).reshape(len(s), 1), *parts]))
            found = np.concatenate(pieces, axis=1) if pieces else np.zeros((len(self._order(node_id)), 0), dtype=dtype)
        memo[key] = found
        return found

    def _count_all(self, sizes: Mapping[Label, int]) -> list[list[np.ndarray]]:
        """Per node and kept value, at every entry: how many assignments of the node's summed labels below
        reach that value there, exactly (0 where it is -inf); and the running counts of each entry's
        choices (:func:`_choices`), which :meth:`assignments` reads. One pass up the tree, array by array,
        as a counting contraction keeping its steps: in int64 where :func:`_bound` keeps every count
        below 2^60, else in Python ints (object arrays)."""
        if self._counts:
            return self._counts
        counts: list[list[np.ndarray]] = []
        running: list[list[tuple[np.ndarray, np.ndarray]]] = []
        for node in self.nodes:
            if node.kind == "leaf":
                counts.append([np.isfinite(v).astype(np.int64) for v in node.values])
                running.append([])
                continue
            kids = [counts[c] for c in node.children]
            kind: Any = np.int64
            if any(k.dtype != np.int64 for kid in kids for k in kid) or _bound(node, kids, sizes) >= 2**60:
                kind, kids = object, [[k.astype(object) for k in kid] for kid in kids]
            shape = [sizes[x] for x in node.labels]
            steps, own = [], []
            for choices, named in _choices(self, node, kids, sizes, kind):
                counted = np.flatnonzero((choices != 0).any(axis=0))  # a choice no entry counts is left out
                table, kept = np.cumsum(choices[:, counted], axis=1, dtype=kind), named[counted]
                total = table[:, -1] if kept.size else np.zeros(len(table), dtype=kind)
                own.append(np.asarray(total, dtype=kind).reshape(shape))
                steps.append((_narrow(table), kept))
            running.append(steps)
            counts.append(own)
        self._counts, self._running = counts, running
        return counts


def sorted_rows(columns: np.ndarray, flavors: int) -> np.ndarray:
    """The configurations ``columns`` (variables, configurations; entries below ``flavors``) as rows in
    lexicographic order, C-contiguous: by one integer key per configuration (its digits in base
    ``flavors``) where flavors^variables fits int64, else by every variable (numpy's lexsort of 36
    variables took 15 s of 6.7 million configurations, the one key under 1 s)."""
    n, count = columns.shape
    if count == 0 or n == 0:  # none, or the one empty configuration of no variable: nothing to order by
        return np.zeros((count, n), dtype=np.int64)
    if flavors**n < 2**63:
        key = np.zeros(count, dtype=np.int64)
        for variable in columns:
            key = key * flavors + variable
        order = np.argsort(key, kind="stable")
    else:
        order = np.lexsort(columns[::-1])
    return np.ascontiguousarray(columns[:, order].T)


def _choices(
    tree: Tree, node: _Node, kids: list[list[np.ndarray]], sizes: Mapping[Label, int], dtype: Any
) -> list[tuple[np.ndarray, np.ndarray]]:
    """One step's choices, per kept value j of the node: an array (entries of the node, choices), each
    entry's choices in the listing's order (one kept value per child, then an assignment of the summed
    labels, C order), each the product of the children's counts ``kids`` where their values (added in the
    children's order, as :func:`_ties` adds them) are the node's value j at that entry, else 0; and each
    column's choice (columns of a choice of kept values that nowhere adds up to j are left out)."""
    joint = node.labels + node.summed
    full = [sizes[x] for x in joint]

    def spread(a: np.ndarray, labels: tuple[Label, ...]) -> np.ndarray:
        order = [labels.index(x) for x in joint if x in labels]
        a = np.transpose(a, order) if order else a
        return np.reshape(a, [sizes[x] if x in labels else 1 for x in joint])

    children = [tree.nodes[c] for c in node.children]
    values = [[spread(v, kid.labels) for v in kid.values] for kid in children]
    counts = [[spread(n, kid.labels) for n in own] for kid, own in zip(children, kids)]
    sums = []
    for picks in itertools.product(*(range(len(v)) for v in values)):
        total: Any = None
        product: Any = None
        for c, i in enumerate(picks):
            total = values[c][i] if total is None else total + values[c][i]
            product = counts[c][i] if product is None else product * counts[c][i]
        sums.append((total, np.isfinite(total), product))
    zero = np.zeros((), dtype=dtype)
    entries, each = math.prod(full[: len(node.labels)]), math.prod(full[len(node.labels) :])
    out = []
    for target in node.values:
        wanted = spread(target, node.labels)
        terms, named = [], []
        for c, (total, finite, product) in enumerate(sums):
            with np.errstate(invalid="ignore"):
                hit = (total == wanted) & finite
            if hit.any():  # a choice of kept values that never adds up to this one is not built
                terms.append(np.broadcast_to(np.where(hit, product, zero), full))
                named.append(np.arange(c * each, (c + 1) * each))
        if not terms:
            out.append((np.zeros((entries, 0), dtype=dtype), np.zeros(0, dtype=np.intp)))
            continue
        stacked = np.stack(terms, axis=len(node.labels))  # (*node's labels, choices, *summed labels)
        out.append((stacked.reshape(entries, -1), np.concatenate(named)))
    return out


def _bound(node: _Node, kids: list[list[np.ndarray]], sizes: Mapping[Label, int]) -> int:
    """At least any count of a step (Python ints): each child's largest counts summed over its kept values,
    multiplied, times the summed labels' assignments. Past 2^60 the step counts in Python ints."""
    most = [sum(int(k.max()) if k.size else 0 for k in kid) for kid in kids]
    return math.prod(most) * math.prod(sizes[x] for x in node.summed)


def _narrow(table: np.ndarray) -> np.ndarray:
    """Running counts in the narrowest signed int type that holds them (int16 to int64; Python ints stay)."""
    if table.dtype != np.int64 or not table.size:
        return table
    top = int(table.max())
    return table.astype(np.int16 if top < 2**15 else np.int32 if top < 2**31 else np.int64)


def _dtype(sizes: Mapping[Label, int]) -> np.dtype[Any]:
    """The smallest unsigned type that holds every value of ``sizes``."""
    return np.min_scalar_type(max([*sizes.values(), 1]) - 1)


def _product(blocks: Sequence[np.ndarray]) -> np.ndarray:
    """Every combination of one column of each block, stacked (the first block's column varying slowest,
    as itertools.product)."""
    out = blocks[0]
    for block in blocks[1:]:
        n, m = out.shape[1], block.shape[1]
        out = np.concatenate([np.repeat(out, m, axis=1), np.tile(block, (1, n))], axis=0)
    return out


def _over(
    arrays: list[np.ndarray],
    labels: tuple[Label, ...],
    at: dict[Label, int],
    summed: tuple[Label, ...],
    sizes: Mapping[Label, int],
) -> list[np.ndarray]:
    """A node's arrays over its ``labels`` (its k values, or their counts) at the fixed labels ``at``, as
    arrays over ``summed`` (broadcast along the summed labels the node lacks)."""
    index = tuple(at[x] if x in at else slice(None) for x in labels)
    rest = [x for x in labels if x not in at]
    out = []
    for v in arrays:
        sub = v[index] if index else v
        order = [rest.index(x) for x in summed if x in rest]
        sub = np.transpose(sub, order) if order else sub
        shape = [sizes[x] if x in rest else 1 for x in summed]
        out.append(np.broadcast_to(np.reshape(sub, shape), [sizes[x] for x in summed]))
    return out


def _ties(
    grids: list[list[np.ndarray]], target: Any, summed: tuple[Label, ...]
) -> list[tuple[tuple[int, ...], Any, tuple[int, ...]]]:
    """(assignment of ``summed``, one value per child, which of its k values each is) where the children's
    values add up to ``target``:
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
            out.append((s, values, tuple(int(i) for i in picks)))
    return out
