"""k-best max-plus numbers: the k largest distinct values of a set of sizes, with their counts if asked.

An entry holds k values sorted from the largest down (``-inf`` where fewer than k occur) and, for
counting, the number of configurations at each. The sum keeps the k largest distinct values of the
union (counts of equal values added); the product the k largest of the pairwise sums (counts
multiplied, and added over the pairs that reach one value). Only the k best of each factor can
reach the k best of a product (a worse one would leave k distinct better sums above it), so the
truncation is exact: this is GenericTensorNetworks' k-best algebra (``TruncatedPoly`` / extended
tropical numbers) for *distinct* sizes.

The arrays of one entry are the algebra's parts: values ``v_0 .. v_{k-1}``, then counts ``c_0 ..
c_{k-1}`` (int64; modulo 2^64, or modulo a prime ``p`` for :func:`algebra` (k, counts, p)), each an
array over the network's labels, so every layout step of :mod:`lazykern.tn._contract` maps over them
unchanged. The product is written once with array operations (NumPy, CuPy, torch alike): the k x k
pairwise sums of a chunk of the contracted axis, then k passes per output entry, each taking the
largest value below the previous one and summing the counts that reach it. A minimum is the maximum
of the negated sizes (the caller negates).

Float counts (:func:`algebra` with ``floats=8`` or ``4``): float64 or float32 counts, exact wherever
the result is below :data:`FLOAT_EXACT` (2^53, 2^24). Counts are nonnegative integers and every sum or
product with a nonzero count is at least each of its terms; rounding to nearest is monotone, so a
computed count at or past that line stays there through every later operation it enters. A result
below it was therefore reached through operations whose exact results were all below it, where the
float type holds every integer: it is exact. One such pass answers whenever the counts asked for are
below the line, at the cost of one float multiply and add per term (the int64 ring takes several
integer instructions, the paired ring twice that); a count past it is counted again in a wider ring.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._backend import Backend
from .._contract import Algebra
from . import _kbest_kernels

USE_KERNEL = True  # GPU operands take the tn_kbest kernel (k <= 4); False: the array-operation product
# True: large GPU steps take a tiled kernel, its tile chosen by the step's shape (see tiling); False: every
# step one thread per output; a tile name of _kbest_kernels.TILES ("s", "n"): that tile for every step
# (what benchmarks/kbest_kernel.py measures each tile with)
TILED: bool | str = True
CHUNK_ELEMENTS = 1 << 22  # pairwise sums materialized at once (host); a device takes DEVICE_CHUNK
DEVICE_CHUNK = 1 << 26
# A GPU step with few outputs and a long sum (a network's last steps: 2^26 terms into one entry took 6.0 s
# on an H100, one thread summing them all; 2^15 terms into one took 3.1 ms on the H200, session 73) is cut
# along the sum: where its kernel would run fewer than SPLIT_THREADS threads and each sum has SPLIT_MIN_K
# terms or more, into chunks of at least SPLIT_CHUNK terms computed as a batch of products, whose partial
# results are merged by products with a unit column of up to MERGE_GROUP entries (a launch a level).
SPLIT_THREADS = 1 << 16
SPLIT_MIN_K = 1 << 11
SPLIT_CHUNK = 1 << 6
MERGE_GROUP = 64
FLOAT_EXACT = {8: 1 << 53, 4: 1 << 24}  # float counts (by bytes) below these are exact (module docstring)
FLOAT_PASSES = (4, 8)  # CountingMax(k > 1)'s first passes (solving.sizes.counting), before the integer rings


class KBestAlgebra(Algebra):
    """k best distinct values per entry (parts: k value arrays, then k count arrays when ``counts``)."""

    # Its products run at 1-6% of the max-plus GEMM rate, by the kernel a step's shape takes: on a GPU its
    # networks take an order of their own, ranked by :func:`lazykern.tn._cost.kbest_step_seconds`.
    plan_rank = "kbest"

    k = 1
    counts = False
    modulus = 0  # counts modulo this prime; 0: int64 arithmetic (modulo 2^64)
    floats = 0  # float counts of this many bytes, exact below FLOAT_EXACT[floats]; 0: int64 counts modulo 2^64
    reduced = False  # the operands' counts lie in [0, modulus) already (0/1 masks): prepare takes them as they are
    strided = False

    @classmethod
    def prepare(cls, be: Backend, parts: tuple[Any, ...], position: int) -> tuple[Any, ...]:
        """A plain operand (values, and counts when counting) as k-best parts: its one value first. An
        operand of all ``nparts`` parts is one already (a step's result computed on the host,
        :mod:`lazykern.tn._host_steps`: k values, then k counts in [0, modulus)), taken as it is."""
        want = 2 if cls.counts else 1
        if len(parts) == cls.nparts and len(parts) != want:
            return tuple(parts)
        if len(parts) != want:
            what = "values and counts" if cls.counts else "values"
            raise ValueError(f"k-best operand {position} must be {want} array(s): {what}")
        values = parts[0]
        shape = tuple(int(n) for n in values.shape)
        out = [values] + [constant(be, values, shape, -math.inf)] * (cls.k - 1)
        if cls.counts:
            count = parts[1] % cls.modulus if cls.modulus and not cls.reduced else parts[1]
            if cls.floats and be.dtype(count) != np.dtype(f"f{cls.floats}"):
                raise TypeError(
                    f"k-best operand {position}: counts must be float{8 * cls.floats}, not {be.dtype(count)}"
                )
            out += [count] + [constant(be, count, shape, 0)] * (cls.k - 1)
        return tuple(out)

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        v = like[0]
        out = [self.be.full(v, shape, 0.0)] + [self.be.full(v, shape, -math.inf)] * (self.k - 1)
        if self.counts:
            c = like[self.k]
            out += [self.be.full(c, shape, 1)] + [self.be.full(c, shape, 0)] * (self.k - 1)
        return tuple(out)

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("k-best contractions keep no argmax; a configuration comes from the tropical algebra")
        k = self.k
        if USE_KERNEL and not self.be.on_host and self.be.xp is not np and 1 <= k <= _kbest_kernels.KB_MAX:
            split = self._split_sum(A, B)
            if split is not None:
                return split, None
            launched = _kbest_kernels.launch(
                self.be, A, B, k, self.counts, self.modulus, tiled=TILED, floats=self.floats
            )
            return launched, None
        ops = Ops(self.be)
        av, bv = ops.stack(A[:k]), ops.stack(B[:k])  # (b, M, K, k), (b, K, N, k)
        ac: Any = ops.stack(A[k:]) if self.counts else None
        bc: Any = ops.stack(B[k:]) if self.counts else None
        batch = max(int(av.shape[0]), int(bv.shape[0]))
        M, K, N = int(av.shape[1]), int(av.shape[2]), int(bv.shape[2])
        budget = CHUNK_ELEMENTS if self.be.on_host else DEVICE_CHUNK
        pairs = list(zip(*(p.tolist() for p in kept_pairs(k))))  # (i, j) whose sums can be among the k best
        rows = max(1, min(M, budget // max(batch * N * len(pairs), 1)))
        step = max(1, min(K, budget // max(batch * rows * N * len(pairs), 1)))
        blocks_v: list[Any] = []
        blocks_c: list[Any] = []
        for m0 in range(0, M, rows):
            m1 = min(M, m0 + rows)
            acc_v = ops.full(av, (batch, m1 - m0, N, k), -math.inf)
            acc_c = ops.full(ac, (batch, m1 - m0, N, k), 0) if self.counts else None
            for k0 in range(0, K, step):
                k1 = min(K, k0 + step)
                a, b = av[:, m0:m1, k0:k1], bv[:, k0:k1]
                sv = ops.flat(ops.stack([a[:, :, :, None, i] + b[:, None, :, :, j] for i, j in pairs]))
                sc = None
                if self.counts:
                    x, y = ac[:, m0:m1, k0:k1], bc[:, k0:k1]
                    c = ops.stack([x[:, :, :, None, i] * y[:, None, :, :, j] for i, j in pairs])
                    sc = ops.flat(c % self.modulus if self.modulus else c)
                acc_v, acc_c = self.best(ops, ops.cat(acc_v, sv), ops.cat(acc_c, sc) if self.counts else None)
            blocks_v.append(acc_v)
            blocks_c.append(acc_c)
        values = ops.cat(*blocks_v, axis=1) if len(blocks_v) > 1 else blocks_v[0]
        out = [ops.contiguous(values[..., i]) for i in range(k)]
        if self.counts:
            counts = ops.cat(*blocks_c, axis=1) if len(blocks_c) > 1 else blocks_c[0]
            out += [ops.contiguous(counts[..., i]) for i in range(k)]
        return tuple(out), None

    def _split_sum(self, A: tuple[Any, ...], B: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """The product of a step whose kernel would run few threads (:func:`_threads`) over long sums, cut
        along the sum: C chunks as a batch of C products (this algebra's own bmm), then the C partial
        results merged by products with a unit column (:meth:`_merged`): the k best of all, counts of equal
        values summed, the same numbers as one sum in another order of exact additions. None for any other
        step (one whose operands' batches differ, too: a broadcast operand is not cut)."""
        a0, b0 = A[0], B[0]
        batch, M, K, N = int(a0.shape[0]), int(a0.shape[1]), int(a0.shape[2]), int(b0.shape[2])
        if int(b0.shape[0]) != batch or not splits(batch, M, N, K):
            return None
        chunks = _divisor(K, min(K // SPLIT_CHUNK, -(-SPLIT_THREADS // _threads(batch, M, N, K))))
        if chunks < 2:
            return None
        L = K // chunks
        ops = Ops(self.be)
        a = tuple(
            ops.contiguous(ops.swap(x.reshape(batch, M, chunks, L), 1, 2)).reshape(batch * chunks, M, L) for x in A
        )
        b = tuple(x.reshape(batch * chunks, L, N) for x in B)
        parts, _ = self.bmm(a, b, False)  # (batch * chunks, M, N) each (cut again only where still few threads)
        return self._merged(parts, batch, chunks, M, N)

    def _merged(self, parts: tuple[Any, ...], batch: int, chunks: int, M: int, N: int) -> tuple[Any, ...]:
        """Parts (batch * chunks, M, N) merged over the chunks into (batch, M, N): levels of products of
        groups of up to MERGE_GROUP chunks with a unit column (the chunks as the sum of a step whose rows
        are the M * N entries: a strided view, no copy), each level one launch of the kernels."""
        ops = Ops(self.be)
        MN = M * N
        while chunks > 1:
            group = _divisor(chunks, MERGE_GROUP)
            group = chunks if group < 2 else group  # no small divisor: the rest in one level
            rest = chunks // group
            a = tuple(ops.swap(ops.contiguous(x).reshape(batch * rest, group, MN), 1, 2) for x in parts)
            parts, _ = self.bmm(a, self._unit_column(parts, group), False)  # (batch * rest, MN, 1)
            chunks = rest
        return tuple(ops.contiguous(x).reshape(batch, M, N) for x in parts)

    def _unit_column(self, like: tuple[Any, ...], n: int) -> tuple[Any, ...]:
        """The unit of this algebra as (1, n, 1) parts (value 0 then -inf, count 1 then 0, for every kind
        of count the parts hold), kept per shape and dtype (:func:`constant`)."""
        k, shape = self.k, (1, n, 1)
        out = [constant(self.be, like[0], shape, 0.0)] + [constant(self.be, like[0], shape, -math.inf)] * (k - 1)
        for first in range(k, len(like), k):  # counts (and a paired algebra's residues)
            out += [constant(self.be, like[first], shape, 1)] + [constant(self.be, like[first], shape, 0)] * (k - 1)
        return tuple(out)

    def best(self, ops: Ops, values: Any, counts: Any, axes: tuple[int, ...] = (-1,)) -> tuple[Any, Any]:
        """The k largest distinct values over ``axes`` (the last by default), with the counts of each
        summed: k passes, each the largest value left below the previous one (no sort: k is small). The
        results hold the other axes, in order, then the k."""
        vals, cnts = [], []
        left = values
        for i in range(self.k):
            top = ops.amax(left, axes)  # the reduced axes kept, of one entry: it broadcasts against values
            vals.append(top)
            if self.counts:
                total = ops.sum(ops.where(values == top, counts, 0), axes)
                total = total % self.modulus if self.modulus else total
                cnts.append(ops.where(top == -math.inf, 0, total))
            if i + 1 < self.k:  # the last pass leaves nothing below its value to look for
                left = ops.where(values < top, values, -math.inf)
        gone = {a % len(values.shape) for a in axes}
        shape = tuple(int(n) for a, n in enumerate(values.shape) if a not in gone)
        out = ops.stack([v.reshape(shape) for v in vals])
        return out, ops.stack([c.reshape(shape) for c in cnts]) if self.counts else None

    def rows(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any]) -> tuple[Any, ...]:
        raise NotImplementedError("k-best steps take the batched product (strided = False)")

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        """Two slices' results merged: the k best of both."""
        ops = Ops(self.be)
        k = self.k
        v = ops.cat(ops.stack(X[:k]), ops.stack(Y[:k]))
        c = ops.cat(ops.stack(X[k:]), ops.stack(Y[k:])) if self.counts else None
        bv, bc = self.best(ops, v, c)
        out = [ops.contiguous(bv[..., i]) for i in range(k)]
        if self.counts:
            out += [ops.contiguous(bc[..., i]) for i in range(k)]
        return tuple(out)


class PairedKBestAlgebra(KBestAlgebra):
    """k best values with two counts each: modulo 2^64 and modulo the prime ``modulus`` (parts: k
    values, k int64 counts, k residues). A CRT count needs both passes once counts may pass 2^63
    (:func:`lazykern.tn._crt.solve`'s ``pair``): one product gives both, the values and their
    choices computed once. On a GPU the ``tn_kbest`` paired kernel (k <= ``PAIRED_KMAX``); on the host
    the two rings' products side by side."""

    paired = True

    @classmethod
    def prepare(cls, be: Backend, parts: tuple[Any, ...], position: int) -> tuple[Any, ...]:
        k = cls.k
        wide = algebra(k, True).prepare(be, parts, position)
        residue = wide[k] if cls.reduced else wide[k] % cls.modulus
        return wide + (residue,) + wide[k + 1 :]  # the residues' zero padding is the counts' own

    def _rings(self) -> tuple[KBestAlgebra, KBestAlgebra]:
        wide = algebra(self.k, True)(self.semiring, self.be, self.grad)
        narrow = algebra(self.k, True, self.modulus)(self.semiring, self.be, self.grad)
        return wide, narrow

    def _split(self, X: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        k = self.k
        return X[: 2 * k], X[:k] + X[2 * k :]

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        wide, narrow = self._rings()
        a, b = self._split(like)
        return wide.unit(a, shape) + narrow.unit(b, shape)[self.k :]

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("k-best contractions keep no argmax; a configuration comes from the tropical algebra")
        k = self.k
        if USE_KERNEL and not self.be.on_host and self.be.xp is not np and 1 <= k <= PAIRED_KMAX:
            split = self._split_sum(A, B)
            if split is not None:
                return split, None
            return _kbest_kernels.launch(self.be, A, B, k, True, self.modulus, paired=True, tiled=TILED), None
        wide, narrow = self._rings()
        (a1, a2), (b1, b2) = self._split(A), self._split(B)
        out1, _ = wide.bmm(a1, b1, False)
        out2, _ = narrow.bmm(a2, b2, False)
        return out1 + out2[k:], None

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        wide, narrow = self._rings()
        (x1, x2), (y1, y2) = self._split(X), self._split(Y)
        return wide.add(x1, y1) + narrow.add(x2, y2)[self.k :]


def best_on_host(
    algebra: type[KBestAlgebra], values: np.ndarray, counts: np.ndarray | None, axes: tuple[int, ...] = (-1,)
) -> tuple[Any, Any]:
    """:meth:`KBestAlgebra.best` of ``algebra`` over NumPy arrays (k best distinct values over ``axes``,
    counts summed): the host's steps of a GPU solve (:mod:`lazykern.tn._host_steps`)."""
    found = _on_host.get(algebra)
    if found is None:
        found = _on_host[algebra] = algebra("maxplus", _HOST)
    return found.best(Ops(_HOST), values, counts, axes)


def kept_pairs(k: int) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) of the pairs of two k-best entries whose sum x_i + y_j can be among the k best of a product:
    those with i + j < k. Each entry's values are distinct and sorted from the largest down, so
    x_0 + y_j > x_1 + y_j > ... > x_i + y_j and x_0 + y_0 > ... > x_0 + y_j: i + j distinct sums lie above
    x_i + y_j, which is therefore never among k best distinct values when i + j >= k (an -inf sum
    counts nothing: the writer zeroes the counts of -inf). k (k + 1) / 2 pairs of k^2.

    >>> kept_pairs(2)
    (array([0, 0, 1]), array([0, 1, 0]))
    """
    found = _kept.get(k)
    if found is None:
        i, j = np.nonzero(np.add.outer(np.arange(k), np.arange(k)) < k)
        found = _kept[k] = (i, j)
    return found


_kept: dict[int, tuple[np.ndarray, np.ndarray]] = {}


_HOST = Backend("numpy", np)
_on_host: dict[type[KBestAlgebra], KBestAlgebra] = {}  # one instance per class (a few: k, counts, ring)


def tiling(batch: int, M: int, N: int, K: int) -> str:
    """The tile shape of the GPU kernel a (batch, M, K) x (batch, K, N) k-best step takes ("": one thread
    per output)."""
    return _kbest_kernels.chosen(TILED, batch, M, N, K)


def splits(batch: int, M: int, N: int, K: int) -> bool:
    """Whether a GPU step (batch, M, K) x (batch, K, N) is cut along its sum (:meth:`KBestAlgebra._split_sum`):
    its kernel would run fewer than SPLIT_THREADS threads, each over SPLIT_MIN_K terms or more."""
    return K >= SPLIT_MIN_K and _threads(batch, M, N, K) < SPLIT_THREADS


def _threads(batch: int, M: int, N: int, K: int) -> int:
    """The threads the GPU kernel of a (batch, M, K) x (batch, K, N) step runs: one per output, or a
    block per output tile of its tiled kernel (:func:`tiling`)."""
    tile = tiling(batch, M, N, K)
    if not tile:
        return batch * M * N
    tx, ty, tm, tn, _ = _kbest_kernels.TILES[tile]
    return batch * -(-M // (ty * tm)) * -(-N // (tx * tn)) * tx * ty


def _divisor(n: int, most: int) -> int:
    """The largest divisor of ``n`` (a product of label extents: small primes) that is at most ``most``,
    1 at least: the divisors of its small prime factors (and of what is left) pruned at ``most``."""
    found, left = [1], n
    for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61):
        while left % p == 0:
            left //= p
            found = sorted({d for f in found for d in (f, f * p) if d <= most})
    if left > 1:
        found += [f * left for f in found if f * left <= most]
    return max(found)


def constant(be: Backend, like: Any, shape: tuple[int, ...], value: float) -> Any:
    """An array of ``shape`` filled with ``value`` (``like``'s dtype and device), one per kind kept for
    every operand's padding: a network of 300 tensors otherwise fills 1200 small arrays per call, each
    a launch. Leaves are only read (a step writes over its own intermediates only), so they may share it."""
    device = None if be.on_host or be.xp is np else be.device_of(like)
    key = (be.name, device, shape, str(be.dtype(like)), value)
    found = _constants.get(key)
    if found is None:
        if len(_constants) >= _CONSTANTS_KEPT:
            _constants.pop(next(iter(_constants)))  # the oldest
        found = _constants[key] = be.full(like, shape, value)
    return found


_constants: dict[tuple[Any, ...], Any] = {}
_CONSTANTS_KEPT = 64

PAIRED_KMAX = _kbest_kernels.PAIRED_KMAX
PAIRED = True  # CountingMax(k <= PAIRED_KMAX) past int64: the int64 and first prime passes as one (False: in turn)

_algebras: dict[tuple[int, bool, int, bool, int], type[KBestAlgebra]] = {}
_paired: dict[tuple[int, int, bool], type[PairedKBestAlgebra]] = {}


def paired_algebra(k: int, modulus: int, reduced: bool = False) -> type[PairedKBestAlgebra]:
    """The k-best algebra with counts modulo 2^64 and modulo the prime ``modulus`` together.
    ``reduced``: the caller's counts are 0 or 1 (masks), their own residues: no ``% modulus`` launch
    per operand (see :func:`algebra`)."""
    key = (int(k), int(modulus), bool(reduced))
    found = _paired.get(key)
    if found is None:
        if k < 1 or not 1 < modulus < 1 << 31:
            raise ValueError(f"paired k-best algebra needs k >= 1 and a prime below 2^31, got k={k}, modulus={modulus}")
        attrs = {"k": int(k), "counts": True, "modulus": int(modulus), "nparts": 3 * int(k), "reduced": bool(reduced)}
        name = f"KBest{k}CountingPaired{modulus}{'Reduced' if reduced else ''}"
        found = _paired[key] = type(name, (PairedKBestAlgebra,), attrs)
    return found


def algebra(
    k: int, counts: bool = False, modulus: int = 0, reduced: bool = False, floats: int = 0
) -> type[KBestAlgebra]:
    """The k-best algebra (``counts``: with int64 counts, modulo ``modulus`` when it is not 0; float counts
    of ``floats`` bytes (8 or 4), exact below :data:`FLOAT_EXACT`, when it is not 0).
    ``reduced``: the caller's counts are 0 or 1 (masks), already residues modulo any prime, so
    :meth:`KBestAlgebra.prepare` skips the ``% modulus`` it otherwise launches per operand and per
    pass. Only a caller that built the counts from boolean masks may say so: a count outside
    [0, modulus) then goes into the product unreduced."""
    key = (int(k), bool(counts), int(modulus), bool(reduced), int(floats))
    found = _algebras.get(key)
    if found is None:
        if k < 1 or not 0 <= modulus < 1 << 31:
            raise ValueError(f"k-best algebra needs k >= 1 and a modulus below 2^31, got k={k}, modulus={modulus}")
        if floats and (floats not in FLOAT_EXACT or modulus or not counts or isinstance(floats, bool)):
            raise ValueError(f"float k-best counts take floats=8 or 4, counts=True and no modulus, got floats={floats}")
        name = f"KBest{k}{'Counting' if counts else ''}{modulus or ''}{f'Floats{floats}' if floats else ''}"
        name += "Reduced" if reduced else ""
        nparts = k * (2 if counts else 1)
        attrs = {
            "k": int(k),
            "counts": bool(counts),
            "modulus": int(modulus),
            "nparts": nparts,
            "reduced": bool(reduced),
            "floats": int(floats),
        }
        found = _algebras[key] = type(name, (KBestAlgebra,), attrs)
    return found


class Ops:
    """The array operations of the k-best product, for NumPy, CuPy and torch (last axis unless said)."""

    def __init__(self, be: Backend) -> None:
        self.be = be
        self.xp = be.xp
        self.torch = be.name == "torch"

    def stack(self, parts: Any) -> Any:
        return self.xp.stack(list(parts), dim=-1) if self.torch else self.xp.stack(list(parts), axis=-1)

    def cat(self, *arrays: Any, axis: int = -1) -> Any:
        return self.xp.cat(list(arrays), dim=axis) if self.torch else self.xp.concatenate(list(arrays), axis=axis)

    def full(self, like: Any, shape: tuple[int, ...], value: Any) -> Any:
        return self.be.full(like, shape, value)

    def flat(self, s: Any) -> Any:
        """(b, m, kc, N, pairs) -> (b, m, N, kc * pairs)."""
        moved = s.permute(0, 1, 3, 2, 4) if self.torch else s.transpose(0, 1, 3, 2, 4)
        return moved.reshape(*moved.shape[:3], -1)

    def amax(self, x: Any, axes: tuple[int, ...]) -> Any:
        """The largest over ``axes``, kept as axes of one entry."""
        return self.xp.amax(x, dim=axes, keepdim=True) if self.torch else x.max(axis=axes, keepdims=True)

    def sum(self, x: Any, axes: tuple[int, ...]) -> Any:
        """The sum over ``axes``, kept as axes of one entry."""
        return self.xp.sum(x, dim=axes, keepdim=True) if self.torch else x.sum(axis=axes, keepdims=True)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        if self.torch:  # torch.where wants tensors (or a Python scalar of the other's kind) on both sides
            like = a if hasattr(a, "dtype") else b
            a, b = (x if hasattr(x, "dtype") else self.xp.full_like(like, x) for x in (a, b))
        return self.xp.where(cond, a, b)

    def contiguous(self, x: Any) -> Any:
        return self.be.contiguous(x)

    def swap(self, x: Any, i: int, j: int) -> Any:
        """A view of ``x`` with axes ``i`` and ``j`` swapped."""
        return x.transpose(i, j) if self.torch else self.xp.swapaxes(x, i, j)
