"""A plan's small subtrees of leaves contracted on the host: once for a count's passes, or an energy's.

An exact count past int64 runs its whole plan once per pass, each in another ring (primes,
:func:`lazykern.tn.counting.exact`). A step whose operands are leaves, or results of such steps, and
whose operands and result are small (a sweep's local tensors: on a 32 x 32 lattice 2707 of 3007 steps,
each a launch or two of a few hundred entries and ~0.2 ms of Python a residue) gives the same values
in every pass, and counts that are integers a bound proves below 2^63. Those steps run once, counted in
int64 (exact below that bound), and their results become leaves of a shorter plan that every pass runs:
a pass reduces a leaf's int64 counts modulo its primes as it does any operand's
(:meth:`lazykern.tn.counting.CountingAlgebra.prepare`). The labels each step sums out do not depend on
the order the steps run in (a label is summed where no other term still carries it, and a leaf outside
the step's subtree that carries it keeps it carried), so the shorter plan's steps are the plan's own.

An energy on a GPU runs the same steps on the host for another reason (:func:`run_values`): each is a
launch and the executor's Python there, against a few broadcast NumPy operations here (~25 us a step: a
32 x 32 lattice's 2687 in about 60 ms on one core); that energy took 1.26 s with them on the host against
1.45 s without (medians of 6 warm calls alternating in one process on an H200,
benchmarks/results/s63-h200/README.json, call 8). Max-plus and min-plus values are exact in any order
wherever they are exact at all (the solvers' dtypes keep every partial sum exact), so the host's results
are the device's.

>>> import numpy as np
>>> labels = [(0,), (0,), (0, 1)]
>>> path = ((0, 1), (0, 1))
>>> cut = split(labels, (), {0: 2, 1: 2}, path, [1, 1, 1], small=3)  # the first step: under 3 entries
>>> cut.shared, cut.path, cut.sources
([True, False], ((0, 1),), [('leaf', 2), ('step', 0)])
>>> J = np.array([[1.0, -1.0], [-1.0, 1.0]])
>>> run_values(cut, path, labels, [np.array([0.0, 2.0]), np.array([1.0, 0.0]), J], (), "maxplus")
([(0, 1), (0,)], [array([[ 1., -1.],
       [-1.,  1.]]), array([1., 2.])])
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..tropical.reference import product as tropical_product
from ._eliminate import aligned
from .einsum import ContractionPlan

Label = Hashable

SMALL = 1 << 12  # entries of a shared step's operands and result (below the bit-addressed steps' 2^12)
INT64_BOUND = 1 << 63  # a shared step's counts are int64: exact while every count is below this


class Split(NamedTuple):
    """Which steps of a plan run once: ``shared[n]`` for step n; the shorter plan's path, and where each of
    its leaves comes from (``("leaf", i)``: the network's leaf i; ``("step", n)``: the result of shared
    step n)."""

    shared: list[bool]
    path: tuple[tuple[int, ...], ...]
    sources: list[tuple[str, int]]


def split(
    labels: Sequence[Sequence[Label]],
    output: Sequence[Label],
    sizes: dict[Label, int],
    path: Sequence[Sequence[int]],
    bounds: Sequence[int],
    small: int = SMALL,
) -> Split | None:
    """The steps of ``path`` that run once: pairs of leaves or shared results, every operand and the result
    under ``small`` entries, whose counts a bound proves below 2^63 (``bounds``: each leaf's largest
    count; a step's bound is the product of its operands' and of the sizes it sums out). None where no
    step is shared, or every step is (nothing left to share it with).

    The last few answers are kept (read only by their callers): an energy and then a count of one network in
    one process split the same plan (a 32 x 32 sweep's 3007 steps: 0.1-0.2 s of Python on an H200 machine),
    and each of a count's networks asks again."""
    key = (
        tuple(tuple(t) for t in labels),
        tuple(output),
        frozenset(sizes.items()),
        tuple(tuple(s) for s in path),
        tuple(int(b) for b in bounds),
        small,
    )
    if key in _splits:
        return _splits[key]
    found = _split(labels, output, sizes, path, bounds, small)
    _splits[key] = found
    _evict(_splits)
    return found


SPLITS_KEPT = 4
_splits: dict[tuple[Any, ...], Split | None] = {}


def _split(
    labels: Sequence[Sequence[Label]],
    output: Sequence[Label],
    sizes: dict[Label, int],
    path: Sequence[Sequence[int]],
    bounds: Sequence[int],
    small: int,
) -> Split | None:
    out = set(output)
    live: list[tuple[str, int]] = [("leaf", i) for i in range(len(labels))]
    info: dict[tuple[str, int], tuple[frozenset[Label], bool, int]] = {
        ("leaf", i): (frozenset(t), True, int(b)) for i, (t, b) in enumerate(zip(labels, bounds))
    }
    uses: Counter[Label] = Counter(x for t in labels for x in set(t))
    shared: list[bool] = []
    for n, step in enumerate(path):
        picked = [live[i] for i in step]
        for i in sorted(step, reverse=True):
            live.pop(i)
        for key in picked:
            uses.subtract(info[key][0])
        union = frozenset().union(*(info[k][0] for k in picked))
        result = frozenset(x for x in union if uses[x] > 0 or x in out)
        entries = [_entries(info[k][0], sizes) for k in picked] + [_entries(result, sizes)]
        bound = math.prod(info[k][2] for k in picked) * math.prod(sizes[x] for x in union - result)
        mine = len(step) <= 2 and all(info[k][1] for k in picked) and max(entries) < small and bound < INT64_BOUND
        shared.append(mine)
        key = ("step", n)
        info[key] = (result, mine, bound)
        live.append(key)
        uses.update(result)
    if not any(shared) or all(shared):
        return None
    return Split(shared, *_shorter(len(labels), path, shared))


def _entries(labels: frozenset[Label], sizes: dict[Label, int]) -> int:
    return math.prod(sizes[x] for x in labels)


def _shorter(
    leaves: int, path: Sequence[Sequence[int]], shared: list[bool]
) -> tuple[tuple[tuple[int, ...], ...], list[tuple[str, int]]]:
    """The path of the steps that are not shared, over new leaves: the network's leaves and shared results
    that such a step reads, in the order it first reads them."""
    live: list[tuple[str, int]] = [("leaf", i) for i in range(leaves)]
    reads: list[list[tuple[str, int]]] = []
    for n, step in enumerate(path):
        picked = [live[i] for i in step]
        for i in sorted(step, reverse=True):
            live.pop(i)
        live.append(("step", n))
        if not shared[n]:
            reads.append(picked)
    sources: list[tuple[str, int]] = []
    seen: set[tuple[str, int]] = set()
    for picked in reads:
        for key in picked:
            if key not in seen and not (key[0] == "step" and not shared[key[1]]):
                seen.add(key)
                sources.append(key)
    now: list[tuple[str, int]] = list(sources)
    steps: list[tuple[int, ...]] = []
    for n, picked in zip((n for n in range(len(path)) if not shared[n]), reads):
        positions = tuple(now.index(key) for key in picked)
        for i in sorted(positions, reverse=True):
            now.pop(i)
        now.append(("step", n))
        steps.append(positions)
    return tuple(steps), sources


def run_shared(
    net: Any, plan: ContractionPlan, cut: Split, operands: Sequence[Any], labels: Sequence[Sequence[Label]]
) -> tuple[list[tuple[Label, ...]], list[Any]]:
    """Run the shared steps of ``net`` (:func:`lazykern.tn.einsum.build_network`'s, in int64 counts) in
    ``plan``'s order; the shorter plan's leaves: their labels, and their operands (a leaf's own of
    ``operands`` and ``labels``, a shared result's (values, int64 counts)). Each step keeps the labels its
    operands share with a term not yet contracted, or the output, as
    :meth:`.contraction.executor.Executor.run` decides them."""
    live: list[tuple[tuple[str, int], Any]] = [(("leaf", i), t) for i, t in enumerate(net.leaves)]
    uses: Counter[Label] = Counter(x for _, t in live for x in t.labels)
    output = set(net.output)
    done: dict[int, Any] = {}
    term: Any
    for n, step in enumerate(plan.path):
        picked = [live[i] for i in step]
        for i in sorted(step, reverse=True):
            uses.subtract(live.pop(i)[1].labels)
        if cut.shared[n]:
            for key, _ in picked:  # read by this shared step: not a leaf of the passes, and maybe written over
                done.pop(key[1] if key[0] == "step" else -1, None)
            owned = [key[0] == "step" for key, _ in picked]  # a shared result is this run's alone: written over
            term = net.shared_step([t for _, t in picked], uses, owned)
            done[n] = term
        else:  # a step of the passes: only its labels matter here
            union = {x for _, t in picked for x in t.labels}
            term = _Labels(tuple(x for x in union if uses[x] > 0 or x in output))
        live.append((("step", n), term))
        uses.update(term.labels)
    new_labels: list[tuple[Label, ...]] = []
    new_operands: list[Any] = []
    for kind, i in cut.sources:
        if kind == "leaf":
            new_labels.append(tuple(labels[i]))
            new_operands.append(operands[i])
        else:
            new_labels.append(tuple(done[i].labels))
            new_operands.append(tuple(done[i].parts))
    return new_labels, new_operands


class _Labels(NamedTuple):
    """A term no shared step reads: its labels alone."""

    labels: tuple[Label, ...]


def run_values(
    cut: Split,
    path: Sequence[Sequence[int]],
    labels: Sequence[Sequence[Label]],
    tensors: Sequence[np.ndarray],
    output: Sequence[Label],
    semiring: str,
) -> tuple[list[tuple[Label, ...]], list[np.ndarray]]:
    """The shared steps of a network of plain values (NumPy ``tensors``, no label twice in one) in
    ``semiring`` ("maxplus" or "minplus"), run here in ``path``'s order; the shorter plan's leaves (their
    labels and arrays), as :func:`run_shared` gives them."""
    new, leaves = walk(cut, path, labels, [(t,) for t in tensors], output, values_product(semiring))
    return new, [p[0] for p in leaves]


def values_product(semiring: str) -> Product:
    """One step of plain values in ``semiring`` ("maxplus" or "minplus") for :func:`walk`: the operands
    added over the union of their labels, the labels not kept reduced by the semiring's sum."""
    reduce = _REDUCE[semiring]

    def product(
        operands: list[tuple[np.ndarray, ...]], at: list[tuple[Label, ...]], union: list[Label], kept: tuple[Label, ...]
    ) -> tuple[np.ndarray, ...]:
        sums = board([p[0] for p in operands], at, union, adder(semiring))
        summed = tuple(k for k, x in enumerate(union) if x not in kept)
        return (np.array(reduce(sums, axis=summed) if summed else sums, order="C"),)

    return product


def adder(semiring: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Two operands' values added as the device adds them in ``semiring``: floats as they are; integers by
    the tropical kernels' rule (:func:`lazykern.tropical.reference.product`: the dtype's bounds stand for
    -inf/+inf and absorb). NumPy's addition wraps: int64's MIN, a forbidden entry, plus a negative size was
    a large positive value, and a GPU solve of sizes past 2^53 answered [] for a feasible problem."""
    return functools.partial(tropical_product, semiring)


def run_counts(
    cut: Split,
    path: Sequence[Sequence[int]],
    labels: Sequence[Sequence[Label]],
    leaves: Sequence[tuple[np.ndarray, np.ndarray]],
    output: Sequence[Label],
    semiring: str,
) -> tuple[list[tuple[Label, ...]], list[tuple[np.ndarray, np.ndarray]]]:
    """:func:`run_values` for (values, int64 counts) pairs of finite values (no label twice in one): a
    step's count is the sum, over the summed-out assignments reaching its value, of the product of its
    operands' counts, as the counting product gives it for finite values (exact: :func:`split` shares a
    step only while a bound proves its counts below 2^63)."""
    reduce = _REDUCE[semiring]

    def product(
        operands: list[tuple[np.ndarray, ...]], at: list[tuple[Label, ...]], union: list[Label], kept: tuple[Label, ...]
    ) -> tuple[np.ndarray, ...]:
        values = board([p[0] for p in operands], at, union, np.add)
        counts = board([p[1] for p in operands], at, union, np.multiply)
        shape = np.broadcast_shapes(values.shape, counts.shape)
        values, counts = np.broadcast_to(values, shape), np.broadcast_to(counts, shape)
        summed = tuple(k for k, x in enumerate(union) if x not in kept)
        if not summed:
            return np.array(values, order="C"), np.array(counts, order="C")
        best = reduce(values, axis=summed, keepdims=True)
        hits = np.where(values == best, counts, 0).sum(axis=summed, dtype=np.int64)
        return np.array(best.reshape(hits.shape), order="C"), np.array(hits, order="C")

    new, done = walk(cut, path, labels, leaves, output, product)
    return new, [(p[0], p[1]) for p in done]


Product = Callable[
    [list[tuple[np.ndarray, ...]], list[tuple[Label, ...]], list[Label], tuple[Label, ...]], tuple[np.ndarray, ...]
]


def walk(
    cut: Split,
    path: Sequence[Sequence[int]],
    labels: Sequence[Sequence[Label]],
    leaves: Sequence[tuple[np.ndarray, ...]],
    output: Sequence[Label],
    product: Product,
) -> tuple[list[tuple[Label, ...]], list[tuple[np.ndarray, ...]]]:
    """The shared steps run here, each ``product(operands, their labels, the union of their labels, the
    labels kept)``; the shorter plan's leaves (labels and parts), :attr:`Split.sources`' order. Each step
    keeps the labels its operands share with a term not yet contracted, or the output, as
    :meth:`lazykern.tn.contraction.executor.Executor.run` decides them (read in ``path``'s order).

    Steps that do not depend on each other and have one form run as one product: the steps in waves (a
    step's wave is one past its operands' latest), each wave's steps grouped by their form (the union's
    sizes, each operand's labels as places in the union, the places kept), each group's operands stacked on
    a leading axis that the product keeps. A graph's or a lattice's leaf steps are a few forms repeated
    hundreds of times: a product each, not one per step (a 3-regular graph of 200 vertices: 274 steps in
    75 products). ``product`` must take labels as names only, and the leaves' parts their labels' axes
    first (trailing axes of their own allowed). Each entry is computed by the same operations as alone."""
    size: dict[Label, int] = {}
    for t, parts in zip(labels, leaves):
        size.update(zip(t, (int(n) for n in np.shape(parts[0])[: len(t)])))
    named, groups = _schedule(cut, path, labels, size, output)
    values: dict[tuple[str, int], tuple[np.ndarray, ...]] = {("leaf", i): tuple(p) for i, p in enumerate(leaves)}
    for form, group in groups:
        if len(group) == 1:
            n, picked, union, kept = group[0]
            values[("step", n)] = product([values[key] for key in picked], [named[key] for key in picked], union, kept)
            continue
        _, places, keep = form
        stacked = [
            tuple(np.stack([values[picked[j]][q] for _, picked, _, _ in group]) for q in range(len(values[key])))
            for j, key in enumerate(group[0][1])
        ]
        union_c: list[Label] = [_BATCH, *range(len(form[0]))]
        result = product(stacked, [(_BATCH, *p) for p in places], union_c, (_BATCH, *keep))
        for b, (n, _, _, _) in enumerate(group):
            values[("step", n)] = tuple(r[b, ...] for r in result)  # a 0-d result stays an array
    return [named[key] for key in cut.sources], [values[key] for key in cut.sources]


Key = tuple[str, int]
Group = list[tuple[int, list[Key], list[Label], tuple[Label, ...]]]


def _schedule(
    cut: Split,
    path: Sequence[Sequence[int]],
    labels: Sequence[Sequence[Label]],
    size: dict[Label, int],
    output: Sequence[Label],
) -> tuple[dict[Key, tuple[Label, ...]], list[tuple[Any, Group]]]:
    """:func:`walk`'s plan, which depends on the network's structure alone: every term's labels, and the
    shared steps in waves, grouped by form, in the order they run. The last few are kept: a solve's
    passes (a float32 then a float64 count, a repeated call) walk one structure again, and replaying a
    300-step path was a fifth of a k-best pass's host steps."""
    key = (tuple(map(tuple, labels)), tuple(map(tuple, path)), frozenset(size.items()), tuple(output),
           tuple(cut.shared))  # fmt: skip
    found = _schedules.get(key)
    if found is not None:
        return found
    named: dict[Key, tuple[Label, ...]] = {("leaf", i): tuple(t) for i, t in enumerate(labels)}
    live = list(named)
    uses: Counter[Label] = Counter(x for t in named.values() for x in t)
    out = set(output)
    wave: dict[Key, int] = dict.fromkeys(named, 0)
    forms: dict[tuple[int, Any], Group] = {}
    for n, step in enumerate(path):
        picked = [live[i] for i in step]
        for i in sorted(step, reverse=True):
            uses.subtract(named[live.pop(i)])
        union = list(dict.fromkeys(x for key in picked for x in named[key]))
        kept = tuple(x for x in union if uses[x] > 0 or x in out)
        named[("step", n)] = kept
        live.append(("step", n))
        uses.update(kept)
        if cut.shared[n]:
            w = wave[("step", n)] = 1 + max(wave[key] for key in picked)
            at = {x: i for i, x in enumerate(union)}
            form = (
                tuple(size[x] for x in union),
                tuple(tuple(at[x] for x in named[key]) for key in picked),
                tuple(at[x] for x in kept),
            )
            forms.setdefault((w, form), []).append((n, picked, union, kept))
    groups = [(form, group) for (_, form), group in sorted(forms.items(), key=lambda item: item[0][0])]
    _schedules[key] = found = (named, groups)
    _evict(_schedules)
    return found


def _evict(kept: dict[Any, Any]) -> None:
    """Drop the oldest of ``kept`` past SPLITS_KEPT; another thread's solve dropping one at the same
    time (Dask workers share the process) is no error."""
    while len(kept) > SPLITS_KEPT:
        try:
            del kept[next(iter(kept))]
        except (KeyError, RuntimeError, StopIteration):
            return


_schedules: dict[tuple[Any, ...], tuple[dict[Key, tuple[Label, ...]], list[tuple[Any, Group]]]] = {}


_BATCH = object()  # the label of a group's leading axis (:func:`walk`)


def board(arrays: Sequence[np.ndarray], labels: Sequence[tuple[Label, ...]], union: list[Label], op: Any) -> np.ndarray:
    """``arrays`` combined by ``op`` (np.add, np.multiply) over the axes ``union``, each broadcast along the
    axes it lacks."""
    out = aligned(arrays[0], labels[0], union)
    for arr, t in zip(arrays[1:], labels[1:]):
        out = op(out, aligned(arr, t, union))
    return out


_REDUCE: dict[str, Callable[..., np.ndarray]] = {"maxplus": np.max, "minplus": np.min}
