"""Unsigned 128-bit counts that saturate (``counting.cu``'s RING 3, ``lk_u128``): one pass whose counts
are exact wherever they read back below 2^128 - 1 (SAT), with no bound on them known beforehand.

A count past int64 otherwise takes a pass of float64 counts (a proven interval for each) and passes modulo
primes for the bits that interval leaves: a 32 x 32 lattice's count (about 2^115) took 12 then 16 bytes an
entry in two passes over its 2^32-entry boundary, 28 bytes in all. Here it is one pass of 20 (values and 16).
The kernel's sums and products give SAT wherever their exact value reaches it, and SAT absorbs every sum and
every product but by 0: a count below SAT had no saturated term, so it is exact. A count that reads SAT is
refused here (:func:`exact_or_none`), and the caller counts the other way.

Where the values are small integers (a +-J lattice's: every partial sum within +-32766, proven by the sum of
each operand's largest |value|), they ride as int16 beside the counts (:func:`short_fits`): 18 bytes an entry,
so a 32 x 32 count's 2^32-entry boundary takes 72 GiB and fits an 80 GB GPU, where 20 bytes (80 GiB) do not.

The counts are held in arrays of 16-byte items: complex128, the one 16-byte dtype NumPy and CuPy both
have. No entry is ever read as a number, only moved (copies, views, a kernel's loads and stores): each item
is the count's low 64-bit word, then its high one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _reference_einsum

U128 = np.dtype("complex128")
SAT = (1 << 128) - 1
SHORT = np.dtype("int16")  # values beside the counts where every sum provably stays within +-REACH
SHORT_INF = 32767  # +-SHORT_INF: +-infinity (counting.cu's lk_vadd)
REACH = SHORT_INF - 1
_WORD = (1 << 64) - 1


def words(xp: Any, x: Any) -> Any:
    """The 16-byte items of nonnegative integer counts ``x`` (an int64 array of ``xp``'s, or NumPy's
    object array of Python ints, each below 2^128)."""
    x = xp.asarray(x)
    out = xp.zeros((*x.shape, 2), dtype=np.uint64)
    if x.dtype == object:
        if x.size and (bool((x < 0).any()) or bool((x > SAT).any())):
            raise ValueError("128-bit counts are integers from 0 to 2^128 - 1")
        out[..., 0] = (x & _WORD).astype(np.uint64)
        out[..., 1] = (x >> 64).astype(np.uint64)
    else:
        out[..., 0] = x.astype(np.uint64)
    return out.view(U128)[..., 0]


def ones(xp: Any, n: int) -> Any:
    """n counts of 1, as items (the block :func:`.arrays.ones_like` keeps)."""
    return words(xp, xp.ones(n, dtype=np.int64))


def integers(x: np.ndarray) -> np.ndarray:
    """The counts held in ``x`` (16-byte items on the host) as an object array of Python ints (SAT where
    saturated)."""
    w = np.ascontiguousarray(x).view(np.uint64).reshape(*x.shape, 2).astype(object)
    return np.asarray(w[..., 1] << 64 | w[..., 0], dtype=object)  # a 0-d array, not a bare int, for one count


def short_fits(values: list[np.ndarray], semiring: str) -> bool:
    """Whether values ``values`` (each operand's, on the host) may ride as int16 (:data:`SHORT`): no NaN,
    infinities only of the semiring's zero (-inf for max-plus, +inf for min-plus), finite values integers
    whose sum of each operand's largest |value| (a bound on every partial sum) is at most :data:`REACH`."""
    zero = -np.inf if semiring == "maxplus" else np.inf
    reach = 0.0
    for v in values:
        if v.dtype.kind != "f" or np.isnan(v).any():
            return False
        finite = np.isfinite(v)
        if not (v[~finite] == zero).all():
            return False
        kept = v[finite]
        if kept.size and (not (kept == np.round(kept)).all()):
            return False
        reach += float(np.abs(kept).max()) if kept.size else 0.0
        if reach > REACH:
            return False
    return True


def to_short(v: np.ndarray) -> np.ndarray:
    """Values that :func:`short_fits` passed as int16, +-infinity as +-SHORT_INF."""
    return np.where(np.isfinite(v), v, np.sign(v) * SHORT_INF).astype(SHORT)


def from_short(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """int16 values back in ``dtype``, +-SHORT_INF as +-infinity."""
    out = v.astype(dtype)
    infinite = np.abs(v.astype(np.int32)) == SHORT_INF
    out[infinite] = np.sign(out[infinite]) * np.inf
    return out


def count_bmm(
    Av: np.ndarray, Ac: np.ndarray, Bv: np.ndarray, Bc: np.ndarray, semiring: str, modulus: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The host's counting product (:func:`.._reference_einsum.count_bmm`), also of 128-bit counts: formed
    exactly in Python ints, then SAT wherever the exact count reaches it (what the kernel's saturating sums
    and products give: every count is a sum of products of nonnegative counts)."""
    if Ac.dtype != U128:
        return _reference_einsum.count_bmm(Av, Ac, Bv, Bc, semiring, modulus)
    short = Av.dtype == SHORT
    if short:  # what the kernel's lk_vadd does: +-SHORT_INF absorbs as +-infinity
        Av, Bv = from_short(Av, np.dtype(np.float64)), from_short(Bv, np.dtype(np.float64))
    v, c = _reference_einsum.count_bmm(Av, integers(Ac), Bv, integers(Bc), semiring)
    return to_short(v) if short else v, words(np, np.minimum(c.astype(object), SAT) if c.size else c.astype(object))


def exact_or_none(x: np.ndarray) -> np.ndarray | None:
    """The exact counts held in ``x`` (host 16-byte items), or None where any saturated."""
    counts = integers(x)
    return None if bool((counts == SAT).any()) else counts
