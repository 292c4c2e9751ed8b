"""A problem's small steps over its tables run on the host before a GPU contraction, in the algebras that allow it.

A :mod:`lazykern.tn.solve` network on a GPU is its tables (hundreds of arrays of 2 to 8 entries) and a
plan whose steps over them are small: a 3-regular graph of 200 vertices has 274 of its 299 steps with
operands and result under 2^12 entries (:func:`._shared.split`). On the device each is a launch or two and
the executor's Python around them (0.2 ms a max-plus step, 0.47 ms a k-best step with counts on an H200
machine, session 65), the device idle meanwhile; here each is a few broadcast NumPy operations on arrays
the host already holds. Their results go to the device in one copy per dtype (:mod:`._upload`) and
become leaves of a shorter plan, the plan's own remaining steps (as the energies' do, :mod:`._shared`).

The numbers are the device's: max-plus values are exact in any order wherever they are exact at all
(the solver's dtypes keep every partial sum exact); k-best values likewise, and their counts are
integers modulo 2^64 (int64), modulo a prime, or floats exact below the line the caller checks
(:mod:`.algebras.kbest`: a float count below it was reached through exact operations only, in any order);
residues modulo primes (a polynomial's evaluations, :mod:`.algebras.modular`) are exact integers here in
int64; a float64 count of configurations (:mod:`.algebras.floatsum`) rounds within the bound its plan's
multiply-adds set, in any order. Other algebras run every step where the contraction runs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

import numpy as np

from . import _shared, _upload
from ._contract import Algebra
from ._eliminate import aligned
from .algebras import floatsum, kbest, modular, top2
from .einsum import build_network

Label = Hashable


def first(
    labels: Sequence[Sequence[Label]],
    output: Sequence[Label],
    host: Sequence[Any],
    semiring: str,
    algebra: type[Algebra],
    path: Sequence[Sequence[int]],
    operands: Sequence[Any],
    put: Callable[[np.ndarray], Any],
) -> tuple[list[tuple[Label, ...]], list[Any], list[tuple[int, ...]]] | None:
    """(labels, operands, path) of the shorter network: ``path``'s small steps over leaves run here on the
    host arrays ``host`` (NumPy, each operand's as given: an array, or a tuple of arrays), their results
    copied to the device by ``put``; the other leaves are ``operands`` as they are. None where no step is
    shared, or the algebra is not one this runs (:func:`runs`)."""
    form = _form(algebra, semiring)
    if form is None:
        return None
    found = _leaves(labels, output, host, semiring, algebra, form)
    if found is None:
        return None
    leaf_labels, leaves, sizes = found
    cut = _split(leaf_labels, tuple(output), sizes, path)
    if cut is None:
        return None
    new_labels, done = _shared.walk(cut, path, leaf_labels, leaves, output, form.product)
    done = [form.parts(d) for d in done]
    at = [j for j, (kind, _) in enumerate(cut.sources) if kind == "step"]
    copied = iter(_upload.upload([np.asarray(p, order="C") for j in at for p in done[j]], put))  # 0-d stays 0-d
    new_operands: list[Any] = []
    for j, (kind, i) in enumerate(cut.sources):
        if kind == "leaf":
            new_labels[j] = tuple(labels[i])
            new_operands.append(operands[i])
        else:
            parts = tuple(next(copied) for _ in done[j])
            new_operands.append(parts[0] if algebra.nparts == 1 else parts)
    return new_labels, new_operands, [tuple(s) for s in cut.path]


def _leaves(
    labels: Sequence[Sequence[Label]],
    output: Sequence[Label],
    host: Sequence[Any],
    semiring: str,
    algebra: type[Algebra],
    form: _Form,
) -> tuple[list[tuple[Label, ...]], list[tuple[np.ndarray, ...]], dict[Label, int]] | None:
    """(labels, parts, label sizes) of the network's leaves as the walk takes them: a value array each, or
    a k-best leaf's k values and k counts stacked on a last axis (:func:`_stacked`), as the algebra's
    ``prepare`` makes its parts. An operand naming a label twice takes the network's own build (its
    diagonal); None where the operands are not what the algebra takes (the contraction says why)."""
    leaf_labels = [tuple(t) for t in labels]
    if any(len(set(t)) != len(t) for t in leaf_labels):
        try:
            net = build_network(labels, output, host, semiring, algebra)
        except (TypeError, ValueError):
            return None
        parts = [form.prepared(t.parts) for t in net.leaves]
        return [t.labels for t in net.leaves], parts, dict(net.sizes)
    sizes: dict[Label, int] = {}
    leaves: list[tuple[np.ndarray, ...]] = []
    for t, op in zip(leaf_labels, host):
        arrays = op if isinstance(op, tuple) else (op,)
        if not all(isinstance(a, np.ndarray) and a.ndim == len(t) for a in arrays):
            return None
        for x, n in zip(t, arrays[0].shape):
            if sizes.setdefault(x, int(n)) != n:
                return None
        leaf = form.leaf(arrays)
        if leaf is None:
            return None
        leaves.append(leaf)
    return leaf_labels, leaves, sizes


def _padded(algebra: Any, arrays: tuple[np.ndarray, ...]) -> Any:
    """A plain k-best operand (values[, counts]) stacked as :meth:`.algebras.kbest.KBestAlgebra.prepare`
    pads it: its value, then -inf (counts: its count, reduced modulo the prime unless ``reduced``, then 0).
    None for an operand that is not one (the contraction raises there)."""
    k, counting = int(algebra.k), bool(algebra.counts)
    if len(arrays) != (2 if counting else 1):
        return None
    v = arrays[0]
    values = np.full(v.shape + (k,), -math.inf, dtype=v.dtype)
    values[..., 0] = v
    if not counting:
        return (values,)
    c = arrays[1]
    if algebra.floats and c.dtype != np.dtype(f"f{algebra.floats}"):
        return None
    counts = np.zeros(c.shape + (k,), dtype=c.dtype)
    counts[..., 0] = c % algebra.modulus if algebra.modulus and not algebra.reduced else c
    return (values, counts)


def _top2_leaf(floats: int, arrays: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...] | None:
    """A plain top-two operand (values, float counts) as :meth:`.algebras.top2.Top2Algebra.prepare` makes
    it: nothing one below. None for one that is not (the contraction raises there)."""
    if len(arrays) != 2 or arrays[1].dtype != np.dtype(f"f{floats}"):
        return None
    return arrays[0], arrays[1], np.zeros_like(arrays[1])


def _split(
    labels: list[tuple[Label, ...]], output: tuple[Label, ...], sizes: dict[Label, int], path: Sequence[Sequence[int]]
) -> _shared.Split | None:
    """:func:`._shared.split` of the leaves, kept for the last few networks: a count contracts one network
    in several algebras (float passes, integer rings), each with the same order."""
    key = (tuple(labels), output, tuple(sorted(sizes.items(), key=repr)), tuple(map(tuple, path)))
    if key in _splits:
        return _splits[key]
    cut = _shared.split(labels, output, sizes, path, [1] * len(labels))
    if len(_splits) >= _SPLITS_KEPT:
        _splits.pop(next(iter(_splits)))  # the oldest
    _splits[key] = cut
    return cut


_splits: dict[tuple[Any, ...], _shared.Split | None] = {}
_SPLITS_KEPT = 8


class _Form(NamedTuple):
    """How :func:`first` holds one algebra's terms: ``leaf`` makes a plain operand's arrays a term (None for
    one the algebra does not take), ``prepared`` does the same for the algebra's own parts (a leaf its
    ``prepare`` made), ``product`` is one step, ``parts`` turns a term back into the algebra's parts."""

    leaf: Callable[[tuple[np.ndarray, ...]], Any]
    prepared: Callable[[tuple[np.ndarray, ...]], Any]
    product: _shared.Product
    parts: Callable[[tuple[np.ndarray, ...]], tuple[np.ndarray, ...]]


def _form(algebra: type[Algebra], semiring: str) -> _Form | None:
    """The form of ``algebra``'s terms here, or None for an algebra whose steps stay where the contraction
    runs: plain max-plus and min-plus values, GraphPolynomial's size-and-count pass (maxplus), sums of
    products modulo primes, the k-best algebras (values, int64, prime or float counts; not the paired
    one) and the top-two algebra."""
    if algebra is Algebra:
        return _Form(_same, _same, _shared.values_product(semiring), _same) if semiring in _TROPICAL else None
    if not isinstance(algebra, type):
        return None
    if algebra is floatsum.SizeAndCountAlgebra:
        return _Form(_same, _same, _size_and_count, _same) if semiring == "maxplus" else None
    if issubclass(algebra, modular.ModularAlgebra):
        stack = functools.partial(_residues, algebra.moduli)
        return _Form(stack, stack, _modular_product(algebra.moduli), functools.partial(_primes, len(algebra.moduli)))
    if issubclass(algebra, top2.Top2Algebra):
        leaf = functools.partial(_top2_leaf, algebra.floats)
        return _Form(leaf, _same, top2.host_product, _same) if semiring == "maxplus" else None
    if issubclass(algebra, kbest.KBestAlgebra) and not issubclass(algebra, kbest.PairedKBestAlgebra):
        k = _k(algebra)
        padded, stacked = functools.partial(_padded, algebra), functools.partial(_stacked, k=k)
        unstacked = functools.partial(_unstacked, k)
        return _Form(padded, stacked, _kbest_product(algebra), unstacked) if semiring == "maxplus" else None
    return None


_TROPICAL = ("maxplus", "minplus")


def _same(arrays: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    return arrays


def _primes(r: int, term: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """A modular term (int64 residues stacked on a last axis) as the algebra's parts: each prime's, float64."""
    return tuple(term[0][..., i].astype(np.float64) for i in range(r))


def _unstacked(k: int, term: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """A k-best term (values, counts stacked on a last axis) as the algebra's parts: k values, then k counts."""
    return tuple(x[..., i] for x in term for i in range(k))


def runs(algebra: type[Algebra], semiring: str) -> bool:
    """Whether :func:`first` runs ``algebra``'s steps (:func:`_form`)."""
    return _form(algebra, semiring) is not None


def _k(algebra: Any) -> int:
    """The k of a k-best algebra class (the base class declares it; the executor's ``Algebra`` has none)."""
    return int(algebra.k)


def _stacked(parts: Sequence[np.ndarray], k: int) -> tuple[np.ndarray, ...]:
    """A k-best term's parts as (values, counts), each its k arrays stacked on a last axis."""
    return tuple(np.stack(parts[i : i + k], axis=-1) for i in range(0, len(parts), k))


def _kbest_product(algebra: type[Algebra]) -> _shared.Product:
    """One k-best step as :class:`.algebras.kbest.KBestAlgebra` computes it, over terms held stacked
    (:func:`_stacked`): every pair of the operands' k values summed (counts multiplied) over the union of
    their labels, then the k largest distinct sums over the summed labels and pairs, the counts reaching
    each added."""
    kind: Any = algebra  # a k-best class (its k, counts, modulus)
    counting, modulus, k = bool(kind.counts), int(kind.modulus), int(kind.k)

    def product(
        operands: list[tuple[np.ndarray, ...]], at: list[tuple[Label, ...]], union: list[Label], kept: tuple[Label, ...]
    ) -> tuple[np.ndarray, ...]:
        axes = [*union, _K]
        values = _crossed([aligned(p[0], (*t, _K), axes) for p, t in zip(operands, at)], np.add, k)
        counts = (
            _crossed([aligned(p[1], (*t, _K), axes) for p, t in zip(operands, at)], np.multiply, k)
            if counting
            else None
        )
        if counts is not None and modulus:
            counts = counts % modulus  # not in place: one operand's counts may be a view of its own
        full = np.broadcast_shapes(values.shape, *(() if counts is None else (counts.shape,)))
        values = np.broadcast_to(values, full)
        counts = None if counts is None else np.broadcast_to(counts, full)
        summed = (*(i for i, x in enumerate(union) if x not in kept), len(union))  # and the candidates' axis
        best, totals = kbest.best_on_host(kind, values, counts, summed)  # the kept labels in union order
        return (best,) if totals is None else (best, totals)

    return product


def _size_and_count(
    operands: list[tuple[np.ndarray, ...]], at: list[tuple[Label, ...]], union: list[Label], kept: tuple[Label, ...]
) -> tuple[np.ndarray, ...]:
    """One step of :class:`.algebras.floatsum.SizeAndCountAlgebra`: the largest size (max-plus) and the
    float64 sum-product of the counts, each over the labels not kept. The same multiply-adds as the
    device's matrix product, in another order: the rounding bound (:func:`.algebras.floatsum.upper_bound`,
    from the plan's multiply-adds) holds for any order."""
    values = _shared.board([p[0] for p in operands], at, union, _shared.adder("maxplus"))  # int64 sizes: saturated
    counts = _shared.board([p[1] for p in operands], at, union, np.multiply)
    summed = tuple(i for i, x in enumerate(union) if x not in kept)
    if not summed:
        return np.array(values, order="C"), np.array(counts, order="C")
    return np.array(values.max(axis=summed), order="C"), np.array(counts.sum(axis=summed), order="C")


def _residues(moduli: tuple[int, ...], arrays: Sequence[np.ndarray]) -> Any:
    """A modular operand (one float64 residue array per prime) as int64 residues stacked on a last axis;
    None for one that is not (the contraction says why)."""
    if len(arrays) != len(moduli) or any(a.dtype != np.float64 for a in arrays):
        return None
    return (np.stack(arrays, axis=-1).astype(np.int64),)


def _modular_product(moduli: tuple[int, ...]) -> _shared.Product:
    """One step of :class:`.algebras.modular.ModularAlgebra` over terms held as int64 residues stacked on
    a last axis (one per prime): the operands multiplied, each product of two residues (below 2^42) reduced
    below its prime (2^21), then summed over the labels not kept: at most 2^24 terms (the union of two
    operands under 2^12 entries each, :func:`._shared.split`), below 2^45, and reduced again. Exact in
    int64, as the device's float64 chunks are."""
    column = np.array(moduli, dtype=np.int64)

    def product(
        operands: list[tuple[np.ndarray, ...]], at: list[tuple[Label, ...]], union: list[Label], kept: tuple[Label, ...]
    ) -> tuple[np.ndarray, ...]:
        axes = [*union, _K]
        out = aligned(operands[0][0], (*at[0], _K), axes)
        for p, t in zip(operands[1:], at[1:]):
            out = np.multiply(out, aligned(p[0], (*t, _K), axes)) % column
        summed = tuple(i for i, x in enumerate(union) if x not in kept)
        if summed:
            out = out.sum(axis=summed, dtype=np.int64) % column
        return (np.ascontiguousarray(out),)

    return product


_K = object()  # the label of a stacked term's last axis (its k values or counts)


def _crossed(arrays: list[np.ndarray], op: Any, k: int) -> np.ndarray:
    """The arrays' last axes (k entries each) crossed by ``op``, only the combinations that can be among
    the k best (:func:`.algebras.kbest.kept_pairs`: indices summing below k): union + (candidates,)."""
    if len(arrays) == 2:
        i, j = kbest.kept_pairs(k)
        pairs: np.ndarray = op(arrays[0][..., i], arrays[1][..., j])
        return pairs
    out = arrays[0]
    for arr in arrays[1:]:  # every combination, then those whose indices sum below k (the same chains)
        out = op(out[..., None], arr.reshape(arr.shape[:-1] + (1,) * (out.ndim - arr.ndim + 1) + arr.shape[-1:]))
    n = len(arrays)
    digits = np.indices((k,) * n).reshape(n, -1).sum(axis=0)
    return out.reshape(*out.shape[: out.ndim - n], -1)[..., digits < k]
