"""One step of a tropical contraction as one batched tropical product.

A pairwise contraction of A[labels] and B[labels] sorts the labels into batch (in
both, still needed later), left (A only), contracted (in both, not needed later) and
right (B only), and runs (batch, left, con) x (batch, con, right) through a batched
product. Each operand is arranged as (batch, left, con) or (batch, con, left),
whichever its own axis order already is, so that the reshape is a view and the
product reads it as a plain or transposed matrix. Any other result (a permuted view whose
axes merge into three but read neither as rows nor as columns) is copied: every operand
handed to a product passes :func:`lazykern.tropical.plan.operand_layout`, the rule
:func:`lazykern.tropical.bmm` holds on the GPU and on the host alike.
A reduction over labels that one operand alone carries is the product with the
semiring unit column (0 for max-plus / min-plus, 1 for max-times), so argmax and
gradients come from the same kernels.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..tropical.plan import operand_layout
from . import _arena, _reference_einsum, _strided
from ._backend import Backend

Label = Hashable


class Term(NamedTuple):
    """An intermediate: its arrays (one, or value and count) and one label per axis."""

    parts: tuple[Any, ...]
    labels: tuple[Label, ...]


class Choice(NamedTuple):
    """What a step chose for each output position: the flat index over ``labels``."""

    labels: tuple[Label, ...]
    sizes: tuple[int, ...]
    index: Any  # int32 array shaped like the step's output, or None when not kept


class Algebra:
    """Numbers of one semiring: the batched product on each backend, its unit, the slice sum."""

    nparts = 1
    counting = False
    values_also: tuple[np.dtype, ...] = ()  # value dtypes beside the products' own (a 128-bit count's int16)
    strided = True  # has a row kernel for :mod:`._strided` steps (``rows``); False: every step is ``bmm``
    # How a search on a GPU ranks orders for this algebra's networks (a rank of contraction.search.RANKS):
    # "seconds" (predicted at the max-plus GEMM's rates, which favor large GEMMs) or "kbest" (predicted
    # at the k-best kernels' rates: the merge's instructions bind them, at 1-6% of the GEMM rate).
    plan_rank = "seconds"
    # The buffer a run keeps its boundary in (:mod:`._arena`), set for one run by the executor where that
    # pays or the run fits the device only so (:meth:`lazykern.tn.contraction.network.Network.use_arena`).
    arena: _arena.Arena | None = None

    def __init__(self, semiring: str, backend: Backend, grad: bool = False) -> None:
        self.semiring = semiring
        self.be = backend
        self.grad = grad
        self.rank: dict[Label, int] | None = None  # label -> order of first appearance in the network

    @classmethod
    def prepare(cls, be: Backend, parts: tuple[Any, ...], position: int) -> tuple[Any, ...]:
        """An operand's arrays as this algebra holds them."""
        return parts

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        return (self.be.full(like[0], shape, 1 if self.semiring == "maxmul" else 0),)

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        a, b = A[0], B[0]
        if self.be.on_host:
            res = _reference_einsum.bmm(a, b, self.semiring, argmax)
        elif self.grad:
            from ..tropical.torch import TropicalMatmul

            if argmax:
                raise ValueError("argmax and autograd are separate routes to a configuration: pick one")
            res = TropicalMatmul.apply(a, b, self.semiring)
        else:
            from ..tropical.api import bmm

            res = bmm(a, b, self.semiring, argmax=argmax, out=self.be.product_out(a, b, argmax))
        return ((res[0],), res[1]) if argmax else ((res,), None)

    def rows(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any]) -> tuple[Any, ...]:
        """A strided step (:mod:`._strided`): X read in place through ``lay``, Y contiguous."""
        return (_strided.launch(self.be, X[0], Y[0], lay, self.semiring),)

    def prefetch(self, like: tuple[Any, ...], tiles: Sequence[tuple[int, int]]) -> list[threading.Thread]:
        """Start building the kernels of the bit-addressed steps ``tiles`` (spins out, spins in) a run is
        about to launch, operands like ``like``: an algebra with such steps (``bits``) names them. The
        threads building them, for the run to join."""
        return []

    def arena_step(self, X: tuple[Any, ...], Y: tuple[Any, ...], out: tuple[Any, ...], lay: dict[str, Any]) -> None:
        """An arena's step (:func:`._arena.layout`): X's parts read where they lie, Y's contiguous (batch,
        con, right), the result written at ``out``'s addresses (views of the arena, maybe X's own)."""
        _arena.launch(self.be, X[0], Y[0], out[0], lay, self.semiring)

    def prefetch_arena(self, like: tuple[Any, ...], tiles: Sequence[tuple[int, int]]) -> list[threading.Thread]:
        """:meth:`prefetch` for the arena's steps ``tiles``."""
        return _arena.prefetch(self.be, like[0], self.semiring, tiles)

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        """Elementwise semiring sum (slices of a sliced contraction)."""
        return (self.be.fmax(X[0], Y[0], self.semiring == "minplus"),)


def map_parts(fn: Callable[..., Any], parts: tuple[Any, ...]) -> tuple[Any, ...]:
    """``fn`` applied to each part (it takes one; callers bind loop values as its defaults, hence ``...``)."""
    return tuple(fn(p) for p in parts)


def _arrange(be: Backend, term: Term, orders: Sequence[Sequence[Sequence[Label]]]) -> tuple[tuple[Any, ...], bool]:
    """Permute to the first candidate order (3 groups) that is the term's own, else to the first;
    reshape to 3-D. Returns the parts and whether the last two groups came swapped."""
    chosen, swapped = orders[0], False
    for i, cand in enumerate(orders):
        if tuple(x for g in cand for x in g) == term.labels:
            chosen, swapped = cand, i == 1
            break
    else:  # not the term's own order: of a large term, the cheaper order to arrange
        if len(orders) > 1 and math.prod(_shape(be, term)) >= COALESCE_MIN:
            best = _cheaper(be, term, orders)
            chosen, swapped = orders[best], best == 1
    flat = [x for g in chosen for x in g]
    perm = tuple(term.labels.index(x) for x in flat)
    sizes = dict(zip(term.labels, _shape(be, term)))
    shape3 = tuple(math.prod(sizes[x] for x in g) for g in chosen)

    lengths = [len(g) for g in chosen]
    moved = perm != tuple(range(len(perm)))

    def fix(ps: list[Any]) -> list[Any]:
        """Parts of one shape and strides laid out as one: the checks read the first, a copy copies all
        at once (:meth:`Backend.contiguous_parts`: a k-best operand's 6 parts in 2 launches)."""
        if moved:
            ps = [be.permute(p, perm) for p in ps]
            if not merges(tuple(int(n) for n in ps[0].shape), be.strides(ps[0]), lengths):
                ps = list(
                    be.contiguous_parts(ps, alike=True)
                )  # the reshape would copy: the backend's copy is the faster one
        ps = [be.reshape(p, shape3) for p in ps]
        ps = [be.permute(p, (0, 2, 1)) for p in ps] if swapped else ps
        if operand_layout(tuple(ps[0].shape), be.strides(ps[0])) is not None:
            return ps
        return list(be.contiguous_parts(ps, alike=True))

    if len(term.parts) == 1:
        return (fix([term.parts[0]])[0],), swapped
    # The algebras of several parts (k-best, counting) mostly hold them laid out alike: one group.
    runs: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(term.parts):
        runs.setdefault(be.strides(p), []).append(i)
    out: list[Any] = [None] * len(term.parts)
    for at in runs.values():
        for i, p in zip(at, fix([term.parts[i] for i in at])):
            out[i] = p
    return tuple(out), swapped


COALESCE_MIN = 1 << 16  # entries from which a copied operand's order is chosen for the copy's reads


def _cheaper(be: Backend, term: Term, orders: Sequence[Sequence[Sequence[Label]]]) -> int:
    """Which of ``orders`` (none the term's own) arranges ``term`` cheaper: a view before a copy, then
    the copy whose innermost output axes read the source's smallest strides (:func:`_inner_run`), then
    the first."""
    shape, strides = _shape(be, term), be.strides(term.parts[0])
    at = {x: i for i, x in enumerate(term.labels)}

    def score(i: int) -> tuple[bool, int, int]:
        flat = [at[x] for g in orders[i] for x in g]
        view = merges(tuple(shape[a] for a in flat), tuple(strides[a] for a in flat), [len(g) for g in orders[i]])
        return view, _inner_run([shape[a] for a in flat], [strides[a] for a in flat]), -i

    return max(range(len(orders)), key=score)


def _inner_run(shape: Sequence[int], strides: Sequence[int]) -> int:
    """How many (up to a warp's 5 bits) of a copy's innermost output axes of more than one entry (``shape``
    and the source's ``strides`` in output order) are, in some order, the source's axes of the smallest
    strides: a warp of the copy then reads that many bits' worth of nearby addresses.

    >>> _inner_run([2] * 6, [4, 8, 16, 32, 1, 2]), _inner_run([2] * 6, [1, 2, 4, 8, 16, 32])
    (2, 0)
    """
    order = [st for n, st in zip(shape, strides) if n > 1]
    smallest = sorted(order)
    top = min(WARP_BITS, len(order))
    return max((k for k in range(1, top + 1) if sorted(order[-k:]) == smallest[:k]), default=0)


WARP_BITS = 5


def merges(shape: tuple[int, ...], strides: tuple[int, ...], lengths: Sequence[int]) -> bool:
    """Whether each run of ``lengths`` consecutive axes reads as one axis (a reshape to their products
    is a view): within a run, every axis of more than one entry strides by the next one's extent.

    >>> merges((2, 3, 4), (12, 4, 1), [1, 2]), merges((2, 3, 4), (1, 2, 8), [1, 2])
    (True, False)
    """
    start = 0
    for length in lengths:
        axes = [a for a in range(start, start + length) if shape[a] > 1]
        start += length
        for outer, inner in zip(axes, axes[1:]):
            if strides[outer] != strides[inner] * shape[inner]:
                return False
    return True


def _shape(be: Backend, term: Term) -> tuple[int, ...]:
    return tuple(term.parts[0].shape)  # ints already (NumPy, CuPy, torch.Size): read several times a step


def contract(
    alg: Algebra, A: Term, B: Term, keep: set[Label], argmax: bool, owned: tuple[bool, bool] = (False, False)
) -> tuple[Term, Choice]:
    """A (x) B summed over the labels both share and ``keep`` lacks. ``owned``: whether A's, B's arrays
    are this step's to overwrite (an intermediate nothing else holds: no leaf, cache or checkpoint).
    With an arena (:mod:`._arena`), a step it can take writes its result there; any other step that
    reads the arena's term frees it."""
    arena = alg.arena
    if arena is None:
        return _contract(alg, A, B, keep, argmax, owned)
    if not argmax:
        done = _arena_step(alg, arena, A, B, keep, owned)
        if done is not None:
            return done
    out = _contract(alg, A, B, keep, argmax, owned)
    arena.consumed(alg.be, *(t.parts[0] for t, mine in zip((A, B), owned) if mine))
    return out


def _contract(
    alg: Algebra, A: Term, B: Term, keep: set[Label], argmax: bool, owned: tuple[bool, bool]
) -> tuple[Term, Choice]:
    be = alg.be
    if not argmax and not alg.grad and not be.on_host and alg.strided:
        done = _bits_step(alg, A, B, keep, owned)
        if done is None:
            done = _strided_step(alg, A, B, keep)
        if done is not None:
            return done
    sizes = dict(zip(A.labels, _shape(be, A))) | dict(zip(B.labels, _shape(be, B)))
    batch = [x for x in A.labels if x in B.labels and x in keep]
    con = [x for x in A.labels if x in B.labels and x not in keep]
    left = [x for x in A.labels if x not in B.labels]
    right = [x for x in B.labels if x not in A.labels]
    a3, _ = _arrange(be, A, [(batch, left, con), (batch, con, left)])
    b3, _ = _arrange(be, B, [(batch, con, right), (batch, right, con)])
    out, index = alg.bmm(a3, b3, argmax)
    labels = tuple(batch + left + right)
    shape = tuple(sizes[x] for x in labels)
    out = map_parts(lambda p: be.reshape(p, shape), out)
    index = None if index is None else be.reshape(index, shape)
    return Term(out, labels), Choice(tuple(con), tuple(sizes[x] for x in con), index)


STRIDED_MIN = 1 << 12  # entries of the larger operand from which a step may take the strided row kernel


def _strided_step(alg: Algebra, A: Term, B: Term, keep: set[Label]) -> tuple[Term, Choice] | None:
    """The step through :mod:`._strided` (the larger operand read in place, the result in its axis
    order), or None when the shapes or strides do not fit it."""
    be = alg.be
    X, Y = (A, B) if _size(be, A) >= _size(be, B) else (B, A)
    if _size(be, X) < STRIDED_MIN:
        return None
    # Y's new labels go innermost in the order they first appear in the network (a sweep's order), so
    # the label the next step shares is the last axis, where the next layout needs it.
    rank = alg.rank or {}
    y_labels = sorted(Y.labels, key=lambda lab: rank.get(lab, -1))
    y_shape = [dict(zip(Y.labels, _shape(be, Y)))[lab] for lab in y_labels]
    lay = _layout(be, X, y_labels, y_shape, keep)
    if lay is None and _strided.fits_rows(X.labels, y_labels, y_shape, keep):
        # One copy into (contracted, rest, batch) order; a sweep's boundary then stays in that order
        # (oldest labels first, newest last) and the following steps read it in place.
        labels = [x for x in X.labels if x in Y.labels and x not in keep]
        labels += [x for x in X.labels if x not in Y.labels] + [x for x in X.labels if x in Y.labels and x in keep]
        perm = tuple(X.labels.index(lab) for lab in labels)
        X = Term(map_parts(lambda p: be.contiguous(be.permute(p, perm)), X.parts), tuple(labels))
        lay = _layout(be, X, y_labels, y_shape, keep)
    if lay is None:
        return None
    perm = tuple(Y.labels.index(lab) for lab in lay["batch"] + lay["con"] + lay["right"])
    out = alg.rows(X.parts, map_parts(lambda p: be.contiguous(be.permute(p, perm)), Y.parts), lay)
    sizes = dict(zip(X.labels, _shape(be, X)))
    return Term(out, tuple(lay["out"])), Choice(tuple(lay["con"]), tuple(sizes[x] for x in lay["con"]), None)


def _bits_step(
    alg: Algebra, A: Term, B: Term, keep: set[Label], owned: tuple[bool, bool]
) -> tuple[Term, Choice] | None:
    """The step bit-addressed (:func:`._strided.bits_layout`) when the algebra has such a kernel: the
    larger operand read where it lies, the result written over it when it is the step's own and as
    large; None otherwise."""
    bits_rows = getattr(alg, "bits", None)
    if bits_rows is None:
        return None
    be = alg.be
    (X, mine), (Y, _) = sorted(((A, owned[0]), (B, owned[1])), key=lambda t: -_size(be, t[0]))
    if _size(be, X) < STRIDED_MIN:
        return None
    rank = alg.rank or {}
    y_labels = sorted(Y.labels, key=lambda lab: rank.get(lab, -1))
    y_size = dict(zip(Y.labels, _shape(be, Y)))
    shape = _shape(be, X)
    dense = tuple(math.prod(shape[a + 1 :]) for a in range(len(shape)))
    contiguous = all(be.strides(p) == dense for p in X.parts)
    lay = _strided.bits_layout(X.labels, shape, contiguous, y_labels, [y_size[x] for x in y_labels], keep)
    if lay is None:
        return None
    perm = tuple(Y.labels.index(lab) for lab in lay["batch_labels"] + lay["con_labels"] + lay["right"])
    y = map_parts(lambda p: be.contiguous(be.permute(p, perm)), Y.parts)
    out = bits_rows(X.parts, y, lay, mine and lay["inplace"])
    con = tuple(lay["con_labels"])
    return Term(out, tuple(lay["out"])), Choice(con, (2,) * len(con), None)


def _arena_step(
    alg: Algebra, arena: _arena.Arena, A: Term, B: Term, keep: set[Label], owned: tuple[bool, bool]
) -> tuple[Term, Choice] | None:
    """The step bit-addressed with its result in the arena (:func:`._arena.layout`): over the arena's
    term when that is the larger operand (and this step's own), or from a larger operand elsewhere while
    the arena holds no live term; None otherwise (and for what the kernel cannot take)."""
    be = alg.be
    (X, mine), (Y, _) = sorted(((A, owned[0]), (B, owned[1])), key=lambda t: -_size(be, t[0]))
    if _size(be, X) < STRIDED_MIN or any(int(n) != 2 for n in _shape(be, Y)):
        return None
    inside = arena.holds(be, X.parts[0])
    if (inside and not mine) or (arena.held and not inside):
        return None
    x_pos = _arena.positions(be, X.parts[0])
    if x_pos is None or any(be.strides(p) != be.strides(X.parts[0]) for p in X.parts[1:]):
        return None
    rank = alg.rank or {}
    y_labels = sorted(Y.labels, key=lambda lab: rank.get(lab, -1))
    lay = _arena.layout(X.labels, x_pos, y_labels, keep, arena.bits, inside)
    if lay is None:
        return None
    perm = tuple(Y.labels.index(lab) for lab in lay["batch_labels"] + lay["con_labels"] + lay["right"])
    y = map_parts(lambda p: be.contiguous(be.permute(p, perm)), Y.parts)
    out = arena.view(be, X.parts, lay["out_pos"])
    alg.arena_step(X.parts, y, out, lay)
    arena.held = True
    con = tuple(lay["con_labels"])
    return Term(out, tuple(lay["out"])), Choice(con, (2,) * len(con), None)


def _layout(be: Backend, X: Term, y_labels: list[Label], y_shape: list[int], keep: set[Label]) -> dict[str, Any] | None:
    """X's strided layout; None also where X's parts (values and counts) lie differently."""
    strides = be.strides(X.parts[0])
    if any(be.strides(p) != strides for p in X.parts[1:]):
        return None
    return _strided.layout(X.labels, _shape(be, X), strides, y_labels, y_shape, keep)


def _size(be: Backend, term: Term) -> int:
    return math.prod(_shape(be, term))


def reduce(alg: Algebra, X: Term, labels: Sequence[Label], argmax: bool) -> tuple[Term, Choice]:
    """The semiring sum of X over ``labels`` (a product with the unit column); it frees the arena's term
    when X is that (a run with an arena owns every intermediate)."""
    be = alg.be
    if alg.arena is not None:
        alg.arena.consumed(be, X.parts[0])
    sizes = dict(zip(X.labels, _shape(be, X)))
    rest = [x for x in X.labels if x not in labels]
    red = [x for x in X.labels if x in labels]
    x3, _ = _arrange(be, X, [((), rest, red)])
    R = math.prod(sizes[x] for x in red)
    out, index = alg.bmm(x3, alg.unit(X.parts, (1, R, 1)), argmax)
    shape = tuple(sizes[x] for x in rest)
    out = map_parts(lambda p: be.reshape(p, shape), out)
    index = None if index is None else be.reshape(index, shape)
    return Term(out, tuple(rest)), Choice(tuple(red), tuple(sizes[x] for x in red), index)


def diagonals(be: Backend, X: Term) -> Term:
    """Collapse every label repeated within one operand to its diagonal."""
    parts, labels = X.parts, list(X.labels)
    while len(set(labels)) < len(labels):
        a = next(i for i, x in enumerate(labels) if labels.count(x) > 1)
        b = labels.index(labels[a], a + 1)
        parts = map_parts(lambda p, a=a, b=b: be.diagonal(p, a, b), parts)
        labels = [x for i, x in enumerate(labels) if i not in (a, b)] + [labels[a]]
    return Term(parts, tuple(labels))


def fix(be: Backend, X: Term, values: dict[Label, int]) -> Term:
    """X with the labels in ``values`` fixed to those values (views). Walks X's labels, not ``values``:
    a backtracking segment fixes a thousand chosen labels on each of its small operands."""
    parts, labels = X.parts, list(X.labels)
    for lab in [x for x in dict.fromkeys(X.labels) if x in values]:
        v = values[lab]
        while lab in labels:
            axis = labels.index(lab)
            parts = map_parts(lambda p, axis=axis, v=v: be.select(p, axis, v), parts)
            labels.pop(axis)
    return Term(parts, tuple(labels))


def unravel(choice: Choice, position: tuple[int, ...], be: Backend) -> dict[Label, int]:
    """The labels' values a step chose at one output position."""
    if not choice.labels:
        return {}
    flat = int(be.item(choice.index, position))
    return dict(zip(choice.labels, (int(v) for v in np.unravel_index(flat, choice.sizes))))
