"""Sum-product modulo small primes through the float64 matrix product (BLAS on the host, cuBLAS on a GPU).

Residues below p < 2^21 are held as float64; a product of two is below 2^42 and a sum of up to
``K_CHUNK`` = 2^10 such products below 2^52, so every partial sum of a chunk's matrix product is an
integer float64 holds exactly, whatever order the library sums in (FMA of integers is exact). Each
chunk is reduced modulo p before the next is added. The float64 GEMM runs at the device's FP64 rate
(tensor cores on an H100), far above a tropical kernel's, which is what makes a polynomial's many
evaluations affordable.

Parts: one array per prime (``moduli``), each the residues of the same numbers modulo its prime.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._backend import Backend
from .._contract import Algebra

PRIME_BELOW = 1 << 21  # residues below this: products below 2^42
K_CHUNK = 1 << 10  # products summed before a reduction: below 2^52, exact in float64


class ModularAlgebra(Algebra):
    """Residues modulo each of ``moduli`` (float64 parts), multiplied by chunked float64 GEMM."""

    moduli: tuple[int, ...] = ()
    strided = False

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
        xp = self.be.xp
        out = []
        for a, b, p in zip(A, B, self.moduli):
            K = int(a.shape[2])
            acc = None
            for k0 in range(0, max(K, 1), K_CHUNK):
                part = xp.matmul(a[:, :, k0 : k0 + K_CHUNK], b[:, k0 : k0 + K_CHUNK])
                acc = part % p if acc is None else (acc + part % p) % p
            out.append(self.be.contiguous(acc))
        return tuple(out), None

    def rows(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any]) -> tuple[Any, ...]:
        raise NotImplementedError("modular steps take the batched product (strided = False)")

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple((x + y) % p for x, y, p in zip(X, Y, self.moduli))


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
