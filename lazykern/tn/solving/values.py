"""Sizes as contraction values: the narrowest dtype that sums them exactly (or the refusal), each
table's sizes in it with the semiring zero where forbidden, a value read back as the problem's size, and
how many of k best sizes can occur at all (the cap that keeps a k-best algebra small)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .. import _tables

FLOAT32_EXACT = 1 << 24  # integer sizes whose every partial sum is below this ride in float32
FLOAT64_EXACT = 1 << 53
INT64_EXACT = 1 << 62  # int64 tropical values saturate at 2^63 - 1


def value_dtype(tab: _tables.Tables, tropical_only: bool) -> np.dtype:
    """The narrowest dtype in which every partial sum of sizes is exact (floats: float64)."""
    if not tab.integer:
        return np.dtype(np.float64)
    bound = int(tab.magnitude())
    if bound < FLOAT32_EXACT:
        return np.dtype(np.float32)
    if bound < FLOAT64_EXACT:
        return np.dtype(np.float64)
    if tropical_only and bound < INT64_EXACT:
        return np.dtype(np.int64)
    held = (
        "one best size, configuration or graph polynomial: sums in int64, below 2^62 units"
        if tropical_only
        else "k-best sizes, counts and configuration sets: sums in float64, below 2^53 units"
    )
    size = bound * tab.unit  # the problem's own units, not numerators (decimal weights count in 1/10s ...)
    shown = str(size) if tab.unit == 1 and bound < 10**24 else _tables.figure(size)
    units = "" if tab.unit == 1 else f" ({_tables.figure(bound)} units of {_tables.figure(tab.unit)})"
    raise ValueError(
        f"sizes reach {shown}{units}, past what this property holds exactly ({held}); scale the weights down"
    )


def _worst(dtype: np.dtype, largest: bool) -> Any:
    """The semiring zero: what a forbidden entry holds."""
    if dtype.kind == "f":
        return -math.inf if largest else math.inf
    info = np.iinfo(dtype)
    return info.min if largest else info.max


def size_values(tab: _tables.Tables, dtype: np.dtype, largest: bool, sign: int = 1) -> list[np.ndarray]:
    """Each tensor's sizes (times ``sign``) in ``dtype``, the semiring zero where it is forbidden. Float
    sizes carry the offset in the first tensor: a contraction's value is then the size it reports, and
    k best distinct values are k distinct sizes (added after, 1e300 + 1 and 1e300 + 0 were two values of
    one size: SizeMax(2) repeated it and ConfigsMax(2) lost a configuration)."""
    worst = _worst(dtype, largest)
    sizes = list(tab.size)
    if not tab.integer and tab.offset:
        sizes[0] = sizes[0] + float(tab.offset)
    return [np.where(m, s * sign, worst).astype(dtype) for m, s in zip(tab.mask, sizes)]


def as_size(tab: _tables.Tables, v: Any) -> Any:
    """A contraction's value as the problem's size: an exact int for integer weights (offset added), the
    float nearest the exact value for decimal ones, the value itself for float sums (:func:`size_values`
    folded the offset in)."""
    if tab.integer:
        return tab.answer(v if isinstance(v, (int, np.integer)) else int(round(float(v))))
    return float(v) + 0.0  # a negated 0.0 (a minimum's) reads as 0.0


def finite(v: Any, dtype: np.dtype) -> bool:
    if dtype.kind == "f":
        return bool(math.isfinite(float(v)))
    info = np.iinfo(dtype)
    return info.min < int(v) < info.max


def to_host(x: Any) -> Any:
    if hasattr(x, "copy_to_host"):
        x = x.copy_to_host()
    if hasattr(x, "get") and not isinstance(x, np.ndarray):  # a CuPy array
        x = x.get()
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def label_sizes(tab: _tables.Tables) -> dict[Any, int]:
    """Every variable's size in ``tab``'s networks: its flavors."""
    return dict.fromkeys((v for labels in tab.labels for v in labels), tab.flavors)


def k_cap(tab: _tables.Tables, k: int) -> int:
    """``k``, or fewer where fewer distinct sizes can occur (proven). A contraction sums one entry of each
    table in one order whatever the configuration, so one combination of the tables' entries gives one
    value, float sums included: there are no more values than the configurations of the free variables
    (flavors ** free), than the products of each table's distinct allowed sizes, nor, where the
    configurations are few, than the distinct combinations the feasible ones take. Sizes of whole units
    (integers, decimal numerators) sum exactly: no more than the whole numbers between the tables' bounds
    (:meth:`.._tables.Tables.size_bounds`) nor the distinct sums of one entry per table. A k-best algebra
    costs O(k^2) an entry: SizeMax(100000) of a path of 3 vertices has 3 sizes to find."""
    if k <= 1:  # one best size: nothing below it to cap (1.5 ms of unique sizes a 200-vertex call skipped)
        return 1
    # flavors ** bit_length(k) > k for flavors >= 2: no need to raise flavors to every free variable
    cap = min(k, int(tab.flavors ** min(len(tab.free), k.bit_length())))
    if not all(m.any() for m in tab.mask):
        return 1  # a table allows nothing: no size occurs
    distinct = _Distinct(tab)  # each table's sizes as first asked for: a small k is mostly settled by a few
    combinations = 1
    for d in distinct:
        combinations = min(combinations * len(d), cap)
        if combinations == cap:
            break
    cap = combinations
    if tab.integer and cap > 1:
        sums = _distinct_sums(distinct, cap)
        if sums is None:  # too many to count: the whole numbers between the bounds
            low, high = tab.size_bounds()
            sums = int(high - low) + 1
        cap = min(cap, sums)  # (the distinct sums are whole numbers between the bounds: no more of them)
    elif cap > 1 and tab.flavors ** len(tab.free) <= _ENUMERATED:
        cap = min(cap, _feasible_combinations(tab))
    return max(cap, 1)


class _Distinct:
    """Each table's distinct allowed sizes (a list), in table order, each computed the first time an
    iteration reaches it: a k-best cap mostly needs a few of a network's hundreds of tables."""

    def __init__(self, tab: _tables.Tables) -> None:
        self._tables = iter(zip(tab.mask, tab.size))
        self._done: list[list[Any]] = []

    def __iter__(self) -> Iterator[list[Any]]:
        i = 0
        while True:
            if i == len(self._done):
                nxt = next(self._tables, None)
                if nxt is None:
                    return
                self._done.append(np.unique(nxt[1][nxt[0]]).tolist())
            yield self._done[i]
            i += 1


_ENUMERATED = 1 << 14  # configurations few enough to enumerate on the host for a cap (milliseconds)
_SUM_WORK = 10**6  # additions spent at most on counting distinct sums for a cap


def _distinct_sums(values: Iterable[list[Any]], cap: int) -> int | None:
    """The number of distinct sums of one entry of each of ``values`` (exact numbers), ``cap`` once they
    reach it, or None where counting them would take more than ``_SUM_WORK`` additions."""
    sums = {0}
    work = 0
    for d in values:
        if len(d) == 1:  # a constant moves every sum alike
            continue
        work += len(sums) * len(d)
        if work > _SUM_WORK:
            return None
        sums = {a + b for a in sums for b in d}
        if len(sums) >= cap:
            return cap
    return len(sums)


def _feasible_combinations(tab: _tables.Tables) -> int:
    """The number of distinct combinations of the tables' allowed sizes that feasible configurations of
    the free variables take (every configuration enumerated)."""
    n = len(tab.free)
    column = {v: i for i, v in enumerate(tab.free)}
    configs = np.indices((tab.flavors,) * n).reshape(n, -1).T
    feasible = np.ones(len(configs), dtype=bool)
    ids = []
    for labels, m, s in zip(tab.labels, tab.mask, tab.size):
        entry = np.zeros(len(configs), dtype=np.int64)
        for v in labels:  # C order: the last label varies fastest
            entry = entry * tab.flavors + configs[:, column[v]]
        feasible &= m.ravel()[entry]
        _, which = np.unique(s.ravel(), return_inverse=True)
        ids.append(which.ravel()[entry])
    if not feasible.any():
        return 1
    return int(len(np.unique(np.stack(ids, axis=1)[feasible], axis=0)))
