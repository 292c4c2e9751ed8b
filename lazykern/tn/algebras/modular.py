"""Sum-product modulo small primes through the float64 matrix product (BLAS on the host, cuBLAS on a GPU).

Residues below p < 2^21 are held as float64; a product of two is below 2^42 and a sum of up to
``K_CHUNK`` = 2^10 such products below 2^52, so every partial sum of a chunk's matrix product is an
integer float64 holds exactly, whatever order the library sums in (FMA of integers is exact). Each
chunk is reduced modulo p before the next is added. The float64 GEMM runs at the device's FP64 rate
(tensor cores on an H100), far above a tropical kernel's, which is what makes a polynomial's many
evaluations affordable.

Parts: one array per prime (``moduli``), each the residues of the same numbers modulo its prime.
A small step (at most ``STACKED_ENTRIES`` results over all primes) whose parts lie equally spaced in one
allocation (a network's tables put in one transfer, a step's results, a copy's parts) runs as one
product over a leading prime axis and one reduction by a column of the primes: a network of hundreds
of small steps is bound by its launches, and each prime's own product and reduction multiplied them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._backend import Backend
from .._contract import Algebra

PRIME_BELOW = 1 << 21  # residues below this: products below 2^42
K_CHUNK = 1 << 10  # products summed before a reduction: below 2^52, exact in float64
# Entries of the chunks' results up to which a product's chunks run as one (grouped): 256 MiB of float64.
GROUPED_ENTRIES = 1 << 25
# Entries of a step's results (all primes) up to which its primes run as one product: a larger step is
# bound by its arithmetic, and its primes one by one hold one prime's temporaries at a time.
STACKED_ENTRIES = 1 << 24
# A product over K = 1 (an outer product) as a broadcast multiply: cuBLAS's batched GEMM ran
# (2176, 4, 1) x (2176, 1, 16384) at 230 GB/s on the H200, 24 of a 180 ms polynomial (session 79).
OUTER_BY_BROADCAST = True


class ModularAlgebra(Algebra):
    """Residues modulo each of ``moduli`` (float64 parts), multiplied by chunked float64 GEMM."""

    moduli: tuple[int, ...] = ()
    strided = False
    _primes: Any = None  # the primes as a column on the algebra's device (:meth:`_column`)

    @classmethod
    def prepare(cls, be: Backend, parts: tuple[Any, ...], position: int) -> tuple[Any, ...]:
        if len(parts) != len(cls.moduli) or any(be.dtype(p) != np.float64 for p in parts):
            raise ValueError(f"modular operand {position}: one float64 residue array per modulus ({len(cls.moduli)})")
        return parts

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        one = self.be.full(like[0], shape, 1.0)
        return (one,) * len(self.moduli)

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("modular contractions keep no argmax")
        r = len(self.moduli)
        if r > 1 and self.be.name != "torch":
            batch = max(int(A[0].shape[0]), int(B[0].shape[0]))
            if r * batch * int(A[0].shape[1]) * int(B[0].shape[2]) <= STACKED_ENTRIES:
                a, b = stacked(self.be, A), stacked(self.be, B)
                if a is not None and b is not None:
                    acc = self._product(a, b, self._column())
                    return tuple(acc[i] for i in range(r)), None
        out = [self.be.contiguous(self._product(a, b, p)) for a, b, p in zip(A, B, self.moduli)]
        return tuple(out), None

    def _product(self, a: Any, b: Any, p: Any) -> Any:
        """(a @ b) mod p, by chunks of K_CHUNK products, each reduced before the next is added; ``p`` a
        prime or a column of primes against a leading prime axis of ``a`` and ``b``. Where the result is
        small, ``g`` chunks run as one product over an axis of them (:func:`grouped`): a step that sums
        2^26 entries into a few (a network's last) took 65536 products of one chunk each, launch-bound."""
        xp = self.be.xp
        K = int(a.shape[-1])
        if K == 1 and OUTER_BY_BROADCAST:  # an outer product: a broadcast multiply, reduced in place
            return _remainder(xp, xp.multiply(a, b), p)
        g = grouped(a.shape, b.shape, K)
        acc = None
        k0 = 0
        while k0 < max(K, 1):
            if g > 1 and K - k0 >= 2 * K_CHUNK:
                n = min(g, (K - k0) // K_CHUNK)
                part = _chunks_product(xp, a[..., k0 : k0 + n * K_CHUNK], b[..., k0 : k0 + n * K_CHUNK, :], n, p)
                k0 += n * K_CHUNK
            else:  # a chunk's sums (below 2^52) plus residues (below 2^21) stay below 2^53: reduced once, after
                part = xp.matmul(a[..., k0 : k0 + K_CHUNK], b[..., k0 : k0 + K_CHUNK, :])
                k0 += K_CHUNK
            acc = _remainder(xp, part if acc is None else _added(xp, acc, part), p)
        return acc

    def _column(self) -> Any:
        """The primes as a (primes, 1, 1, 1) float64 array on the algebra's device, made once."""
        if self._primes is None:
            host = np.array(self.moduli, dtype=np.float64).reshape(-1, 1, 1, 1)
            self._primes = host if self.be.on_host else self.be.from_host(host)
        return self._primes

    def rows(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any]) -> tuple[Any, ...]:
        raise NotImplementedError("modular steps take the batched product (strided = False)")

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple((x + y) % p for x, y, p in zip(X, Y, self.moduli))


def grouped(a_shape: tuple[int, ...], b_shape: tuple[int, ...], K: int) -> int:
    """How many K_CHUNK chunks of a product of ``a_shape`` (..., M, K) by ``b_shape`` (..., K, N) run
    as one: as many as keep the chunks' results (one per chunk) within GROUPED_ENTRIES, 1 for a result
    that large alone (its chunks' products are large enough to run one by one)."""
    lead = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    result = int(np.prod(lead, dtype=np.int64)) * int(a_shape[-2]) * int(b_shape[-1])
    return max(1, min(-(-K // K_CHUNK), GROUPED_ENTRIES // max(result, 1)))


def _chunks_product(xp: Any, a: Any, b: Any, n: int, p: Any) -> Any:
    """(a @ b) mod p for a K of ``n`` chunks: one product over an axis of the chunks (each chunk's sums
    below 2^52, exact), each reduced, then summed over that axis (n residues: below 2^53 while n < 2^32,
    exact) and reduced once more."""
    lead, M, N = a.shape[:-2], a.shape[-2], b.shape[-1]
    ac = xp.moveaxis(a.reshape(*lead, M, n, K_CHUNK), -2, -3)  # (..., n, M, K_CHUNK)
    bc = b.reshape(*b.shape[:-2], n, K_CHUNK, N)  # (..., n, K_CHUNK, N)
    column = getattr(p, "shape", ())  # a column of primes against the leading prime axis: one more axis
    q = p.reshape(*column[:1], *([1] * (ac.ndim - 1))) if column != () else p
    parts = _remainder(xp, xp.matmul(ac, bc), q)
    return _remainder(xp, parts.sum(axis=-3), p)


def _remainder(xp: Any, x: Any, p: Any) -> Any:
    """x mod p, written over x where the shapes allow (x is a product of this step's own)."""
    if getattr(p, "shape", ()) == () or tuple(x.shape) == tuple(np.broadcast_shapes(x.shape, p.shape)):
        return xp.remainder(x, p, out=x)
    return xp.remainder(x, p)


def _added(xp: Any, acc: Any, part: Any) -> Any:
    if tuple(acc.shape) == tuple(np.broadcast_shapes(acc.shape, part.shape)):
        return xp.add(acc, part, out=acc)
    return acc + part


def stacked(be: Backend, parts: tuple[Any, ...]) -> Any | None:
    """The parts as one array with a leading axis over them, a view (no copy): where they share dtype,
    shape and strides and lie equally spaced in memory (views of one allocation, as a network's tables
    put in one transfer, or the parts of a step's result). Parts that are one array give a leading axis
    of 1 (broadcast against the other operand's). None otherwise (and on torch, not needed there)."""
    first = parts[0]
    shape, strides, dtype = tuple(int(n) for n in first.shape), be.strides(first), be.dtype(first)
    if 0 in shape or any(
        tuple(int(n) for n in p.shape) != shape or be.strides(p) != strides or be.dtype(p) != dtype for p in parts[1:]
    ):
        return None
    host = be.xp is np  # the host, or a device route run on NumPy arrays (tests)
    if host:
        at = [int(p.ctypes.data) for p in parts]
    elif be.name == "cupy":
        at = [be.pointer(p) for p in parts]
    else:
        return None
    step = at[1] - at[0]
    if step < 0 or step % dtype.itemsize or any(y - x != step for x, y in zip(at, at[1:])):
        return None
    count = 1 if step == 0 else len(parts)
    if host:
        return np.lib.stride_tricks.as_strided(first, (count, *shape), (step, *first.strides), writeable=False)
    return be.xp.ndarray((count, *shape), dtype=first.dtype, memptr=first.data, strides=(step, *first.strides))


_algebras: dict[tuple[int, ...], type[ModularAlgebra]] = {}


def algebra(*moduli: int) -> type[ModularAlgebra]:
    """The sum-product modulo each of ``moduli`` (primes below 2^21), one float64 part each."""
    moduli = tuple(int(p) for p in moduli)
    found = _algebras.get(moduli)
    if found is None:
        if not moduli or any(not 2 <= p < PRIME_BELOW for p in moduli):
            raise ValueError(f"modular algebra: primes below 2^21, at least one, got {list(moduli)}")
        attrs = {"moduli": moduli, "nparts": len(moduli)}
        found = _algebras[moduli] = type("Modulo" + "x".join(map(str, moduli)), (ModularAlgebra,), attrs)
    return found
