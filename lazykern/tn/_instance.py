"""A spin-glass instance as the user gives it, checked once: one clear ValueError for a bad input,
never a KeyError eight frames down in a contraction. Also the choices that follow from the
couplings alone: the value dtype that keeps every partial sum exact, and the array module.

>>> n, edges, J, h, pos = check(3, [(0, 1), (1, 2)], [1, -1])
>>> edges.tolist(), h.tolist(), pos is None
([[0, 1], [1, 2]], [0.0, 0.0, 0.0], True)
>>> value_dtype(J, h, None)
dtype('float32')
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from ..errors import LazykernWarning, warn_user

MODULES = ("numpy", "cupy", "torch")
_MANTISSA = {np.dtype("float32"): 24, np.dtype("float64"): 53}
_DYADIC_DIGITS = 30  # couplings are tried as multiples of 2^-k for k up to this


def check(
    n: Any, edges: Any, J: Any, h: Any = None, positions: Any = None
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(n, edges (m, 2) int64, J (m,) float64, h (n,) float64, positions (n, d) float64 or None),
    copies; ValueError naming the first thing wrong and what to do about it."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"n (the number of spins) must be an integer, got {n!r}")
    n = int(n)
    if n <= 0:
        raise ValueError(f"n (the number of spins) must be at least 1, got {n}")
    edges = _edges(n, edges)
    J = _reals("J", J, (len(edges),), "one coupling per edge")
    h = np.zeros(n) if h is None else _reals("h", h, (n,), "one field per spin")
    if positions is not None:
        positions = _reals("positions", positions, None, "one row of coordinates per spin")
        if positions.ndim != 2 or positions.shape[0] != n:
            raise ValueError(f"positions must have shape (n, 2) or (n, 3) with n = {n}, got {positions.shape}")
    return n, edges, J, h, positions


def check_order(n: int, order: Any) -> tuple[int, ...] | None:
    """A spin order: every spin exactly once."""
    if order is None:
        return None
    out = tuple(int(i) for i in order)
    if sorted(out) != list(range(n)):
        raise ValueError(f"order must list every spin 0..{n - 1} exactly once; got {len(out)} entries")
    return out


def _edges(n: int, edges: Any) -> np.ndarray:
    e = np.array(edges)
    if e.size == 0:
        e = e.reshape(0, 2)
    if e.ndim == 2 and e.shape[1] == 3:
        raise ValueError(
            f"edges has shape {e.shape}: a weighted edge list (i, j, J). Pass the pairs and the couplings "
            "apart, SpinGlass(n, edges[:, :2], edges[:, 2]), or use SpinGlass.from_edges(edges)"
        )
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"edges must have shape (m, 2), one (i, j) pair of spins per coupling; got {e.shape}")
    if e.dtype.kind not in "iuf":
        raise ValueError(f"edges must hold spin indices (integers), got dtype {e.dtype}")
    if e.dtype.kind == "f":
        bad = ~np.isfinite(e) | (e != np.round(e))
        if bad.any():
            k = int(np.argwhere(bad)[0][0])
            raise ValueError(f"edge {k} is {e[k].tolist()}: spin indices must be integers")
    e = e.astype(np.int64)
    outside = (e < 0) | (e >= n)
    if outside.any():
        k = int(np.argwhere(outside)[0][0])
        raise ValueError(f"edge {k} is {e[k].tolist()}: spins are numbered 0..{n - 1} (n = {n})")
    loops = e[:, 0] == e[:, 1]
    if loops.any():
        k = int(np.flatnonzero(loops)[0])
        raise ValueError(
            f"edge {k} is {e[k].tolist()}, a self loop: J s_i s_i is a constant; drop it (or add to a field h)"
        )
    pairs = np.sort(e, axis=1)
    _, first, counts = np.unique(pairs, axis=0, return_index=True, return_counts=True)
    if len(first) < len(e):
        twice = pairs[first[np.flatnonzero(counts > 1)[0]]]
        rows = np.flatnonzero((pairs == twice).all(axis=1)).tolist()
        raise ValueError(
            f"spins {twice.tolist()} are coupled by edges {rows}: give each pair once, with the sum of its "
            "couplings as J"
        )
    return e


def _reals(name: str, x: Any, shape: tuple[int, ...] | None, what: str) -> np.ndarray:
    a = np.array(x)
    if a.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold real numbers, got dtype {a.dtype}")
    a = a.astype(np.float64)
    if shape is not None and a.shape != shape:
        raise ValueError(f"{name} must have shape {shape} ({what}), got {a.shape}")
    bad = ~np.isfinite(a)
    if bad.any():
        k = tuple(int(i) for i in np.argwhere(bad)[0])
        where = k[0] if len(k) == 1 else k
        raise ValueError(f"{name}[{where}] is {a[k]}: couplings, fields and positions must be finite numbers")
    return a


def check_finite(J: np.ndarray, h: np.ndarray) -> None:
    """Again at solve time: the arrays are the user's to change after the instance was made."""
    for name, a in (("J", J), ("h", h)):
        bad = ~np.isfinite(a)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name}[{k}] is {a[k]}: couplings and fields must be finite numbers")


def exact_scale(J: np.ndarray, h: np.ndarray) -> int | None:
    """The smallest k with every coupling and field a multiple of 2^-k (k <= 30), or None."""
    both = np.concatenate([J, h])
    for k in range(_DYADIC_DIGITS + 1):
        scaled = both * 2.0**k
        if np.all(scaled == np.round(scaled)):
            return k
    return None


def exact_in(dtype: np.dtype, J: np.ndarray, h: np.ndarray) -> bool:
    """Whether every partial sum of the network's values is exact in ``dtype``: every value is a
    multiple of 2^-k and sum(|J|) + sum(|h|), times 2^k, stays below 2^mantissa."""
    k = exact_scale(J, h)
    if k is None:
        return False
    total = (float(np.abs(J).sum()) + float(np.abs(h).sum())) * 2.0**k
    if dtype.kind == "f":
        return total < 2.0 ** _MANTISSA[dtype]
    return k == 0 and total < float(np.iinfo(dtype).max)  # no sum saturates (min/max stand for -inf/+inf)


def value_dtype(J: np.ndarray, h: np.ndarray, dtype: Any, warn: bool = True) -> np.dtype:
    """The dtype of the network's values. None: float32 when every partial sum is exact in it
    (+-J, small integers, halves ...), else float64. An integer dtype with couplings it cannot hold
    (fractions, or sums that would saturate) is a ValueError; float32 with sums it rounds warns
    (the energy is then float32's rounding of the truth, and a ground state closer than that to
    another may be missed)."""
    check_finite(J, h)
    if dtype is None:
        return np.dtype(np.float32) if exact_in(np.dtype(np.float32), J, h) else np.dtype(np.float64)
    d: np.dtype = np.dtype(dtype)
    if d.kind in "iu":
        if not exact_in(d, J, h):
            raise ValueError(
                f"dtype {d} cannot hold these couplings and fields exactly (fractions, or sums past its "
                "range): leave dtype unset (float32 or float64 is chosen to be exact) or pass float64"
            )
        return d
    if warn and d == np.float32 and not exact_in(d, J, h):
        warn_user(
            "dtype float32 rounds the sums of these couplings and fields: the energy is float32's rounding "
            "of the truth and a near-degenerate ground state may be missed; leave dtype unset for float64",
            LazykernWarning,
        )
    return d


def array_module(module: Any) -> Any:
    """``module`` as the array module itself: a name in :data:`MODULES` is imported."""
    if isinstance(module, str):
        if module not in MODULES:
            raise ValueError(f"module must be numpy, cupy or torch (the module or its name), got {module!r}")
        try:
            return importlib.import_module(module)
        except ImportError as exc:
            raise ValueError(f"module={module!r}: {module} is not installed here ({exc})") from None
    name = getattr(module, "__name__", None)
    if name not in MODULES:
        raise ValueError(f"module must be numpy, cupy or torch (the module or its name), got {module!r}")
    return module
