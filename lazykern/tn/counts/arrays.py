"""Small reads and casts of count arrays on any backend (NumPy, CuPy, torch, Numba device arrays): a
dtype cast, an array on the host, and the exact largest |x| and least x (integers as Python ints).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._backend import Backend

ONES_CACHED = 1 << 16  # entries: counts of 1 up to this many are views of one block per device and dtype
_ones: dict[tuple[int, str], Any] = {}


def ones_like(
    be: Backend, like: Any, shape: tuple[int, ...], dtype: Any, make: Callable[[Any, int], Any] | None = None
) -> Any:
    """Counts of 1 shaped ``shape`` beside values ``like``. On CuPy a small one is a view of one block per
    device and dtype, not an allocation and a fill of its own (a 32 x 32 lattice's 3007 leaves: about 0.1 s
    of launches on an H200 machine); a count array of a leaf is only read (the executor writes over
    intermediates it owns, never over a leaf), as :meth:`.algebra.CountingAlgebra.prepare` already lets the
    residues of a pass share one array of ones. ``make(xp, n)``: n ones of ``dtype`` where a fill of 1 is not
    them (128-bit counts' items, :func:`.wide.words`)."""
    n = math.prod(int(k) for k in shape)
    if be.name != "cupy" or be.xp is np or n > ONES_CACHED:
        return be.full(like, shape, 1, dtype) if make is None else make(be.xp, n).reshape(shape)
    key = (int(be.xp.cuda.runtime.getDevice()), np.dtype(dtype).str)
    block = _ones.get(key)
    if block is None:
        block = _ones[key] = be.xp.ones(ONES_CACHED, dtype=dtype) if make is None else make(be.xp, ONES_CACHED)
    return block[:n].reshape(shape)


def to_dtype(be: Backend, x: Any, dtype: str) -> Any:
    if be.name == "torch":
        return x.to(getattr(be.xp, dtype))
    return x.astype(dtype)


def max_abs(be: Backend, x: Any) -> int | float:
    """max |x|, exactly (a Python int for integers; 0 for an empty array). From the extremes, not
    abs(): int64's abs(-2^63) wraps."""
    if math.prod(int(n) for n in x.shape) == 0:
        return 0
    if hasattr(x, "copy_to_host"):  # a Numba array: read on the host
        x, be = x.copy_to_host(), Backend("numpy", np)
    big, small = be.item(x.max()), be.item(x.min())
    largest: int | float = max(abs(big), abs(small))
    return largest


def min_value(be: Backend, x: Any) -> int | float:
    """min(x) (0 for an empty array), read as :func:`max_abs` reads."""
    if math.prod(int(n) for n in x.shape) == 0:
        return 0
    if hasattr(x, "copy_to_host"):
        x, be = x.copy_to_host(), Backend("numpy", np)
    least: int | float = be.item(x.min())
    return least


def to_host(be: Backend, x: Any) -> np.ndarray:
    if isinstance(x, (np.ndarray, np.generic)):  # NumPy's, whatever the backend (the GPU route on the host)
        return np.asarray(x)
    if hasattr(x, "copy_to_host"):  # results handed back as Numba arrays
        host: np.ndarray = x.copy_to_host()
        return host
    return be.to_host(x)
