"""Unsigned 128-bit counts that saturate (``counting.cu``'s RING 3, ``lk_u128``): one pass whose counts
are exact wherever they read back below 2^128 - 1 (SAT), with no bound on them known beforehand.

A count past int64 otherwise takes a pass of float64 counts (a proven interval for each) and passes modulo
primes for the bits that interval leaves: a 32 x 32 lattice's count (about 2^115) took 12 then 16 bytes an
entry in two passes over its 2^32-entry boundary, 28 bytes in all. Here it is one pass of 20 (values and 16).
The kernel's sums and products give SAT wherever their exact value reaches it, and SAT absorbs every sum and
every product but by 0: a count below SAT had no saturated term, so it is exact. A count that reads SAT is
refused here (:func:`exact_or_none`), and the caller counts the other way.

The counts are held in arrays of 16-byte items: complex128, the one 16-byte dtype NumPy and CuPy both
have. No entry is ever read as a number, only moved (copies, views, a kernel's loads and stores): each item
is the count's low 64-bit word, then its high one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _reference_einsum
from .._backend import Backend

U128 = np.dtype("complex128")
SAT = (1 << 128) - 1
_WORD = (1 << 64) - 1
ONES_CACHED = 1 << 16  # entries: counts of 1 up to this many are views of one block per device
_ones: dict[int, Any] = {}


def words(xp: Any, x: Any) -> Any:
    """The 16-byte items of nonnegative integer counts ``x`` (an int64 array of ``xp``'s, or NumPy's
    object array of Python ints, each below 2^128)."""
    x = xp.asarray(x)
    out = xp.zeros((*x.shape, 2), dtype=np.uint64)
    if x.dtype == object:
        flat = [int(v) for v in x.reshape(-1)]
        if any(v < 0 or v > SAT for v in flat):
            raise ValueError("128-bit counts are integers from 0 to 2^128 - 1")
        out[..., 0] = np.array([v & _WORD for v in flat], dtype=np.uint64).reshape(x.shape)
        out[..., 1] = np.array([v >> 64 for v in flat], dtype=np.uint64).reshape(x.shape)
    else:
        out[..., 0] = x.astype(np.uint64)
    return out.view(U128)[..., 0]


def integers(x: np.ndarray) -> np.ndarray:
    """The counts held in ``x`` (16-byte items on the host) as an object array of Python ints (SAT where
    saturated)."""
    w = np.ascontiguousarray(x).view(np.uint64).reshape(*x.shape, 2)
    out = np.empty(x.shape, dtype=object)
    flat = out.reshape(-1)
    for i, (lo, hi) in enumerate(w.reshape(-1, 2).tolist()):
        flat[i] = hi << 64 | lo
    return out


def ones(be: Backend, shape: tuple[int, ...]) -> Any:
    """Counts of 1 shaped ``shape`` on ``be``'s current device (a small one a view of one block per device,
    as :func:`.arrays.ones_like`)."""
    n = math.prod(int(k) for k in shape)
    if be.xp is np or n > ONES_CACHED:
        return words(be.xp, be.xp.ones(shape, dtype=np.int64))
    key = int(be.xp.cuda.runtime.getDevice())
    block = _ones.get(key)
    if block is None:
        block = _ones[key] = words(be.xp, be.xp.ones(ONES_CACHED, dtype=np.int64))
    return block[:n].reshape(shape)


def count_bmm(
    Av: np.ndarray, Ac: np.ndarray, Bv: np.ndarray, Bc: np.ndarray, semiring: str, modulus: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The host's counting product (:func:`.._reference_einsum.count_bmm`), also of 128-bit counts: formed
    exactly in Python ints, then SAT wherever the exact count reaches it (what the kernel's saturating sums
    and products give: every count is a sum of products of nonnegative counts)."""
    if Ac.dtype != U128:
        return _reference_einsum.count_bmm(Av, Ac, Bv, Bc, semiring, modulus)
    v, c = _reference_einsum.count_bmm(Av, integers(Ac), Bv, integers(Bc), semiring)
    return v, words(np, np.minimum(c.astype(object), SAT) if c.size else c.astype(object))


def exact_or_none(x: np.ndarray) -> np.ndarray | None:
    """The exact counts held in ``x`` (host 16-byte items), or None where any saturated."""
    counts = integers(x)
    return None if any(int(v) == SAT for v in counts.reshape(-1)) else counts
