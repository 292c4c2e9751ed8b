"""The counting algebra: (value, count) arrays contracted in the (max/min, +) x (+, *) semiring, int64
counts modulo 2^64 (or float64 weights), and its variants modulo 1 to RESIDUES_MAX primes (:func:`algebra`),
each step on the host's reference or the GPU's kernels (:mod:`.launch`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...launch import _device
from .._backend import Backend
from .._contract import Algebra
from . import wide
from .arrays import ones_like, to_dtype
from .kernels import RESIDUES_MAX, VALUE_DTYPES, family, kernel_name
from .launch import count_bmm, launch_arena, launch_bits, launch_product, launch_rows
from .reference import bits_reference


class CountingAlgebra(Algebra):
    """(value, count) arrays; the product is :func:`count_bmm`. Integer counts are int64, counted
    modulo 2^64; :func:`algebra` gives the variant that counts modulo primes: (value, count modulo
    p_1, ..., count modulo p_R), int32 residues, R counts carried through one contraction."""

    nparts = 2
    counting = True
    moduli: tuple[int, ...] = ()  # (): the counts' own arithmetic (int64 modulo 2^64, or floats)

    @classmethod
    def prepare(cls, be: Backend, parts: tuple[Any, ...], position: int) -> tuple[Any, ...]:
        ones = len(parts) == 1
        if ones:  # every entry counts once (made in the pass's count type: modulo p, int32 residues)
            made = be.xp.int32 if cls.moduli else _int64(be)
            parts = (parts[0], ones_like(be, parts[0], tuple(parts[0].shape), made))
        if len(parts) != 2:
            raise ValueError(f"counting operand {position} must be an array or a (values, counts) pair")
        value, count = be.dtype(parts[0]), be.dtype(parts[1])
        counts_allowed = (np.int32,) if ones and cls.moduli else (np.int64, np.float64)
        # int64 values on the host: exact sums past 2^53 (the NumPy product adds them as integers)
        host_int = be.on_host and value in (np.int64, np.dtype(object))  # int64 or Python ints
        if (value not in (d for _, d in VALUE_DTYPES.values()) and not host_int) or count not in counts_allowed:
            raise TypeError(
                f"counting operand {position} has values {value} and counts {count}; "
                "values must be float32/float64 (or int64 on the host) and counts int64/float64"
            )
        if tuple(parts[0].shape) != tuple(parts[1].shape):
            raise ValueError(f"counting operand {position}: values {parts[0].shape} and counts {parts[1].shape} differ")
        if not cls.moduli:
            return parts
        if ones:  # 1 is 1 modulo every prime: one array of ones serves every residue
            return (parts[0],) + (parts[1],) * len(cls.moduli)
        if count.kind == "f":
            raise TypeError(f"counting operand {position}: counts modulo a prime must be integers, got {count}")
        return (parts[0], *(to_dtype(be, parts[1] % p, "int32") for p in cls.moduli))

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        one = self.be.full(like[1], shape, 1)
        return (self.be.full(like[0], shape, 0),) + (one,) * (len(like) - 1)

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("counting contractions keep no argmax; use tropical.argmax_einsum for a configuration")
        if not self.moduli:
            return count_bmm(self.be, *A, *B, self.semiring), None
        # a product of any shape, one residue at a time (the values, the same each time, from the first)
        first = count_bmm(self.be, A[0], A[1], B[0], B[1], self.semiring, self.moduli[0])
        more = [
            count_bmm(self.be, A[0], a, B[0], b, self.semiring, p, values=first[0])[1]
            for a, b, p in zip(A[2:], B[2:], self.moduli[1:])
        ]
        return (*first, *more), None

    def rows(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any]) -> tuple[Any, ...]:
        """A strided step (:mod:`.._strided`): X's values and counts read in place through the layout's
        strides, Y's contiguous (batch, con, right), the result in X's axis order; every residue in
        one launch of the row kernel."""
        batch, M, N, K = lay["dims"]
        shape = tuple(lay["out_shape"])
        out = tuple(self.be.empty(x, shape, whole=True) for x in X)  # a boundary: outside the pool
        strides = (lay["a"], (K * N if batch > 1 else 0, N, 1), lay["c"])
        if self.be.xp is np:  # the GPU route on the host (tests): the reference, residue by residue
            for q, (xc, yc, oc) in enumerate(zip(X[1:], Y[1:], out[1:])):
                p = self.moduli[q] if self.moduli else 0
                launch_product(self.be, (X[0], xc), (Y[0], yc), (out[0], oc), lay["dims"], strides, self.semiring, p)
            return out
        launch_rows(self.be, X, Y, out, lay["dims"], strides, self.semiring, self.moduli)
        return out

    def bits(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any], inplace: bool) -> tuple[Any, ...]:
        """A bit-addressed step (:func:`lazykern.tn._strided.bits_layout`): X's values and counts read
        where they lie, Y contiguous (batch, con, right); the result over X's own arrays (``inplace``)
        or in new ones. Every residue in one launch."""
        shape = (2,) * len(lay["out"])
        out = X if inplace else tuple(self.be.empty(x, shape, whole=True) for x in X)  # a boundary: outside the pool
        if self.be.xp is np:  # the GPU route on the host (tests): the kernel's addressing in NumPy
            bits_reference(X, Y, out, lay, self.semiring, self.moduli)
        else:
            launch_bits(self.be, X, Y, out, lay, self.semiring, self.moduli)
        return out

    def arena_step(self, X: tuple[Any, ...], Y: tuple[Any, ...], out: tuple[Any, ...], lay: dict[str, Any]) -> None:
        """An arena's step (:func:`lazykern.tn._arena.layout`): values and every residue in one launch of the
        direct kernel, the result at ``out``'s addresses (views of the arena's buffers, maybe X's own)."""
        if self.be.xp is np:  # the GPU route on the host (tests): the kernel's addressing in NumPy
            bits_reference(X, Y, out, lay, self.semiring, self.moduli, (lay["holes_in"], lay["holes_out"]))
        else:
            launch_arena(self.be, X, Y, out, lay, self.semiring, self.moduli)

    def prefetch(
        self, like: tuple[Any, ...], tiles: Sequence[tuple[int, int]], kind: str = "bits"
    ) -> list[threading.Thread]:
        """The bit-addressed kernels of ``tiles`` for operands like ``like`` (values, then one count array
        per residue), built in threads at once (:meth:`KernelFamily.prefetch`): the threads, to join.
        ``kind``: ``arena`` for an arena's direct kernels."""
        if self.be.on_host or self.be.xp is np:  # the GPU route on the host (tests) runs the reference
            return []
        value, count, residues = self.be.dtype(like[0]), self.be.dtype(like[1]), len(like) - 1
        names = [
            kernel_name(self.semiring, value, count, rows=f"{kind}{kb}{nb}", residues=residues) for kb, nb in tiles
        ]
        return family.prefetch(names, arch=_device.arch(self.be.device_of(like[0]) or 0))

    def prefetch_arena(self, like: tuple[Any, ...], tiles: Sequence[tuple[int, int]]) -> list[threading.Thread]:
        return self.prefetch(like, tiles, "arena")

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        """Combine two slices: the better value, counts added where both reach it."""
        v = self.be.fmax(X[0], Y[0], self.semiring == "minplus")
        zero = self.be.full(X[1], tuple(X[1].shape), 0)
        mine, theirs = X[0] == v, Y[0] == v
        counts = []
        for q, (xc, yc) in enumerate(zip(X[1:], Y[1:])):
            x, y = self.be.where(mine, xc, zero), self.be.where(theirs, yc, zero)
            if self.moduli:
                counts.append(to_dtype(self.be, (to_dtype(self.be, x, "int64") + y) % self.moduli[q], "int32"))
            else:
                with np.errstate(over="ignore"):  # int64 counts are counted modulo 2^64
                    counts.append(x + y)
        return (v, *counts)


class SaturatingCounting(CountingAlgebra):
    """(value, unsigned 128-bit count) arrays whose sums and products saturate at 2^128 - 1 (:mod:`.wide`):
    one pass of them gives every count exactly that reads back below it. Counts given must be nonnegative
    integers (:func:`lazykern.tn.counting.count_network` runs this pass only then); a pass of one device
    and no slices (two slices' counts are not added here). Values may be int16 (:func:`.wide.short_fits`)."""

    values_also = (wide.SHORT,)

    @classmethod
    def prepare(cls, be: Backend, parts: tuple[Any, ...], position: int) -> tuple[Any, ...]:
        if len(parts) not in (1, 2) or be.dtype(parts[0]) not in (*(d for _, d in VALUE_DTYPES.values()), wide.SHORT):
            raise TypeError(f"counting operand {position}: float32/float64 or int16 values, and integer counts")
        if len(parts) == 1:  # every entry counts once
            return (parts[0], ones_like(be, parts[0], tuple(parts[0].shape), wide.U128, wide.ones))
        values, counts = parts
        if tuple(values.shape) != tuple(counts.shape) or be.dtype(counts) not in (np.int64, wide.U128):
            raise TypeError(f"counting operand {position}: int64 counts shaped as the values, got {counts.dtype}")
        return parts if be.dtype(counts) == wide.U128 else (values, wide.words(be.xp, counts))

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        return (self.be.full(like[0], shape, 0), ones_like(self.be, like[0], shape, wide.U128, wide.ones))

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        raise NotImplementedError("128-bit counts run unsliced on one device: slices' counts are not added")


_algebras: dict[tuple[int, ...], type[CountingAlgebra]] = {(): CountingAlgebra}


def algebra(*moduli: int) -> type[CountingAlgebra]:
    """The counting algebra modulo each of ``moduli`` (primes below 2^31: int32 residues, one count
    array each, at most RESIDUES_MAX; none: int64 counts). ``algebra(0)`` is ``algebra()``."""
    moduli = tuple(int(p) for p in moduli if p != 0)
    found = _algebras.get(moduli)
    if found is None:
        bad = [p for p in moduli if not 2 <= p < 1 << 31]
        if bad or len(moduli) > RESIDUES_MAX:
            raise ValueError(f"counts are taken modulo 1 to {RESIDUES_MAX} primes below 2^31, got {list(moduli)}")
        name = "CountingModulo" + "x".join(str(p) for p in moduli)
        attrs = {"moduli": moduli, "nparts": 1 + len(moduli)}
        found = _algebras[moduli] = type(name, (CountingAlgebra,), attrs)
    return found


def _int64(be: Backend) -> Any:
    return be.xp.int64
