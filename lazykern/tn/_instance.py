"""A spin-glass instance as the user gives it, checked once: one clear ValueError for a bad input,
never a KeyError eight frames down in a contraction. Also the choices that follow from the
couplings alone: the value dtype that keeps every partial sum exact, and the array module.

>>> n, edges, J, h, pos = check(3, [(0, 1), (1, 2)], [1, -1])
>>> edges.tolist(), h.tolist(), pos is None
([[0, 1], [1, 2]], [0, 0, 0], True)
>>> value_dtype(J, h, None)
dtype('float32')
"""

from __future__ import annotations

import importlib
import math
import warnings
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import LazykernWarning, NumberTypeError, shown
from . import _exact

MODULES = ("numpy", "cupy", "torch")


def check(
    n: Any, edges: Any, J: Any, h: Any = None, positions: Any = None
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(n, edges (m, 2) int64, J (m,), h (n,), positions (n, d) float64 or None), copies; J and h are
    float64, or int64 (object arrays of Python ints past int64) where they were given as integers, so
    they are solved exactly and answered as ints; extended floats (np.longdouble) at their exact value.
    ValueError naming the first thing wrong (a NaN or infinite coupling or field by its position) and
    what to do about it; TypeError for a bool given as a coupling or field."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"n (the number of spins) must be an integer, got {n!r}")
    n = int(n)
    if n <= 0:
        raise ValueError(f"n (the number of spins) must be at least 1, got {n}")
    edges = _edges(n, edges)
    J = _reals("J", J, (len(edges),), "one coupling per edge", integers=True)
    if h is None:  # no field: zeros of J's kind (integer couplings keep integer answers)
        h = np.zeros(n, dtype=np.int64 if J.dtype.kind in "iuO" else np.float64)
    else:
        h = _reals("h", h, (n,), "one field per spin", integers=True)
    if positions is not None:
        positions = _reals("positions", positions, None, "one row of coordinates per spin")
        if positions.ndim != 2 or positions.shape[0] != n:
            raise ValueError(f"positions must have shape (n, 2) or (n, 3) with n = {n}, got {positions.shape}")
    return n, edges, J, h, positions


def check_memory_limit(memory_limit: Any) -> int | None:
    """``memory_limit`` (entries of the largest intermediate) as an int, or None: TypeError for a string
    ("1GB") or anything else that is not a count, ValueError for one below 1."""
    if memory_limit is None:
        return None
    whole = isinstance(memory_limit, (float, np.floating)) and float(memory_limit).is_integer()
    if isinstance(memory_limit, (bool, np.bool_)) or not (isinstance(memory_limit, (int, np.integer)) or whole):
        raise TypeError(
            f"memory_limit is a number of entries (an int such as 2**30), not {memory_limit!r}; leave it unset "
            "to size it to the memory"
        )
    if memory_limit < 1:
        raise ValueError(f"memory_limit must be a positive number of entries, got {shown(memory_limit)}")
    return int(memory_limit)


def check_max_time(max_time: Any) -> float | None:
    """``max_time`` (seconds an order search may take) as a float, or None (the default): TypeError for
    what is not a real number (a string, a bool), ValueError for one that is not finite and positive."""
    if max_time is None:
        return None
    if isinstance(max_time, (bool, np.bool_)) or not isinstance(max_time, (int, float, np.integer, np.floating)):
        raise TypeError(f"max_time is a number of seconds (such as 5.0), not {type(max_time).__name__}")
    try:
        seconds = float(max_time)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(
            f"max_time must be a finite positive number of seconds, got {seconds!r}; leave it unset for the default"
        )
    return seconds


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
    if e.dtype == object and e.size:  # pairs cut from a weighted list whose couplings were Python ints past int64
        e = np.array(e.tolist())
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


def _reals(name: str, x: Any, shape: tuple[int, ...] | None, what: str, integers: bool = False) -> np.ndarray:
    """Real numbers as float64; with ``integers``, exactly as given: integers stay integers (int64, or an
    object array of Python ints past int64), and Python numbers that float64 would round (an int past
    2^53 beside a float, a Fraction, a Decimal, an np.longdouble as an int or a Fraction) stay an object
    array of those numbers (:mod:`._exact` reads each exactly). TypeError for bools."""
    if isinstance(x, np.ma.MaskedArray):
        raise ValueError(
            f"{name} is a masked array: its mask would be ignored; pass {name}.filled(value) or drop those entries"
        )
    a = np.array(x)
    if integers and (a.dtype.kind == "O" or isinstance(x, (list, tuple))):  # Python numbers (not a tensor)
        a = _python_numbers(name, a, x)
    elif integers and a.dtype.kind in "iu":
        a = _integers(a)
    elif a.dtype.kind == "b":
        raise NumberTypeError(f"{name} is an array of bools, not numbers: write them as 1 and 0 (or +-1)")
    elif a.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold real numbers, got dtype {a.dtype}")
    elif integers and a.dtype.itemsize > 8:
        a = _wide_floats(a)
    else:
        a = a.astype(np.float64)
    if shape is not None and a.shape != shape:
        raise ValueError(f"{name} must have shape {shape} ({what}), got {a.shape}")
    bad = _not_finite(a)
    if bad is not None:
        where = bad[0] if len(bad) == 1 else bad
        raise ValueError(f"{name}[{where}] is {a[bad]}: couplings, fields and positions must be finite numbers")
    return a


_FLOAT64_WHOLE = 1 << 53  # ints up to this are exact as float64


def _python_numbers(name: str, a: np.ndarray, given: Any) -> np.ndarray:
    """``a`` (NumPy's reading of ``given``: Python numbers, or an object array) exactly: every element
    looked at, since NumPy turns [2**63 + 1000, -2**63] into rounded floats and [1, True] into ints, and
    float() would round an np.longdouble."""
    o = np.array(given, dtype=object) if a.dtype.kind != "O" else a
    if a.dtype.kind not in "iufbO":
        raise ValueError(f"{name} must hold real numbers, got dtype {a.dtype}")
    flat = [wide(v) if is_wide(v) else v for v in o.ravel().tolist()]  # extended floats at their exact value
    ints = floats = exact = 0
    for k, v in enumerate(flat):
        if isinstance(v, (bool, np.bool_)):
            raise NumberTypeError(f"{name}[{k}] is {v!r}, a bool, not a number: write it as 1 or 0")
        if isinstance(v, (int, np.integer)):
            ints += 1
        elif isinstance(v, (float, np.floating)):
            floats += 1
        elif isinstance(v, (Fraction, Decimal)):
            exact += 1
        else:
            raise ValueError(f"{name}[{k}] is {v!r}: {name} must hold real numbers")
    if not flat or ints == len(flat):
        return _integers(_reshaped(flat, o.shape)) if flat else a.astype(np.float64)
    big = any(isinstance(v, (int, np.integer)) and abs(int(v)) > _FLOAT64_WHOLE for v in flat)
    if exact or (big and floats):
        return _reshaped([int(v) if isinstance(v, np.integer) else float(v) if isinstance(v, np.floating) else v
                          for v in flat], o.shape)  # fmt: skip
    return np.array(flat, dtype=np.float64).reshape(o.shape)  # floats, and ints float64 holds exactly


def is_wide(v: Any) -> bool:
    """A NumPy float wider than float64 (np.longdouble where it has more bits): float(v) would round it."""
    return isinstance(v, np.floating) and v.dtype.itemsize > 8


def wide(v: np.floating[Any]) -> int | Fraction | float:
    """An extended float at its exact value: a Python int where it is whole, else a Fraction; NaN and inf as
    Python floats, refused by name with the other non-finite numbers."""
    if not np.isfinite(v):
        return float(v)
    numerator, denominator = v.as_integer_ratio()
    return numerator if denominator == 1 else Fraction(numerator, denominator)


def _wide_floats(a: np.ndarray) -> np.ndarray:
    """An array of extended floats (np.longdouble) exactly: int64 (or Python ints past it) when every value is
    whole, else an object array of Python ints and Fractions (:mod:`._exact` reads each exactly)."""
    flat = [wide(v) for v in a.ravel()]
    if all(isinstance(v, int) for v in flat):
        return _integers(_reshaped(flat, a.shape))
    return _reshaped(flat, a.shape)


def _reshaped(flat: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    """Python objects as an object array of ``shape``, each kept as it is (np.array would convert them)."""
    out = np.empty(shape, dtype=object)
    out.ravel()[:] = flat
    return out


def _integers(a: np.ndarray) -> np.ndarray:
    """Integers (an integer array, or an object array of ints) as int64, or as Python ints (object)
    where a value is past int64."""
    if a.dtype.kind in "iu":
        if a.dtype == np.uint64 and a.size and int(a.max()) > np.iinfo(np.int64).max:
            return a.astype(object)
        return a.astype(np.int64)
    ints = np.empty(a.shape, dtype=object)
    ints.ravel()[:] = [int(v) for v in a.ravel().tolist()]
    low, high = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    return ints.astype(np.int64) if all(low <= v <= high for v in ints.ravel()) else ints


def _not_finite(a: np.ndarray) -> tuple[int, ...] | None:
    """The index of the first inf or NaN in ``a`` (floats, or an object array of numbers), else None."""
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a)
    elif a.dtype.kind == "O":
        bad = np.array([not _finite(v) for v in a.ravel().tolist()], dtype=bool)
        bad = bad.reshape(a.shape)
    else:
        return None
    if not bad.any():
        return None
    return tuple(int(i) for i in np.argwhere(bad)[0])


def _finite(v: Any) -> bool:
    """Whether a number in an object array is finite (a float's or a Decimal's NaN and infinities are not)."""
    if isinstance(v, Decimal):
        return v.is_finite()
    return not isinstance(v, float) or math.isfinite(v)


def check_unchanged(n: int, edges: np.ndarray, J: np.ndarray, h: np.ndarray) -> None:
    """Again at solve time, as :func:`check_finite`: edges changed in place after the instance was made
    (a spin index out of range, a self loop, a pair twice) or J and h of another length are refused by
    name, not met as an IndexError or a reshape deep in a contraction."""
    _edges(n, edges)
    if J.shape != (len(edges),) or h.shape != (n,):
        raise ValueError(
            f"J has shape {J.shape} and h {h.shape} for {len(edges)} edges and {n} spins: the instance was "
            "changed after it was made; make a new SpinGlass"
        )


def check_finite(J: np.ndarray, h: np.ndarray) -> None:
    """Again at solve time: the arrays are the user's to change after the instance was made."""
    for name, a in (("J", J), ("h", h)):
        bad = _not_finite(a)
        if bad is not None:
            raise ValueError(f"{name}[{bad[0]}] is {a[bad]}: couplings and fields must be finite numbers")


def fitted(
    J: np.ndarray, h: np.ndarray, dtype: Any, host: bool, floats_only: bool, warn: bool = True, objects: bool = False
) -> _exact.Fitted:
    """The values the network of couplings ``J`` and fields ``h`` is contracted in (:func:`._exact.fit`):
    exact sums in the narrowest dtype that holds them, or each number rounded (float couplings past
    62 bits of numerators, or a float dtype too narrow); ValueError for non-finite numbers, sums past
    float64's range, and integer dtypes (or integer couplings) that cannot hold the sums."""
    check_finite(J, h)
    numbers = _exact.classify(J, h)
    if warn:
        return _exact.fit(numbers, dtype, host, floats_only, objects)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)
        return _exact.fit(numbers, dtype, host, floats_only, objects)


def values(J: np.ndarray, h: np.ndarray, dtype: Any, host: bool) -> tuple[np.dtype, tuple[np.ndarray, ...]]:
    """(dtype, (J, h)) of the couplings and fields themselves, for a network the caller contracts
    (:func:`._exact.as_values`: exact where ``dtype`` holds every number and partial sum); ValueError for
    non-finite numbers and sums past float64's range, as :func:`fitted`."""
    check_finite(J, h)
    return _exact.as_values(_exact.classify(J, h), dtype, host)


def value_dtype(J: np.ndarray, h: np.ndarray, dtype: Any, warn: bool = True) -> np.dtype:
    """The dtype of the network's values on the host (:func:`fitted`): float32 when every partial sum
    of the couplings' exact numerators fits it (+-J, small integers, halves, decimals such as 0.1),
    float64, int64, or float64 with rounded couplings."""
    return fitted(J, h, dtype, True, False, warn).dtype


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
