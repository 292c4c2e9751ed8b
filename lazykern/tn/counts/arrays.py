"""Small reads and casts of count arrays on any backend (NumPy, CuPy, torch, Numba device arrays): a
dtype cast, an array on the host, and the exact largest |x| and least x (integers as Python ints).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._backend import Backend


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
