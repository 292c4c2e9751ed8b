"""A problem's constraint and objective tables as the tensors of one network, before any algebra.

Each table over some variables becomes (mask, size) over the same variables: mask True where every
constraint allows the entry, size the sum of the objectives there. Fixed variables are sliced out of
every table (a constraint that then forbids everything makes the whole problem infeasible; an
objective left with no variable is a constant). Tables over the same variables are merged, and a
table whose variables all lie in a larger table is folded into it, so the planner sees one tensor per
interaction (a vertex weight rides on one of its edges). A free variable that no table mentions gets
an all-allowed table of size 0 (it still multiplies the counts by its flavors).

The algebras then map (mask, size) to their numbers: the tropical value size (or -inf), a count 1 (or
0), x^size, exp(beta * size).

Float weights written as short decimals (0.1, 2.75: any float whose shortest repr has at most
:data:`._exact.DECIMAL_DIGITS` significant digits) are exact too: every objective becomes an integer
numerator of one ``unit`` (1/10, 1/100, ...) before any sum, so 0.1 + 0.2 ties 0.3 as it does on paper
(float64 would split the tie and count each side once). Other floats (1/3), and decimals whose sums
would need more units than the property holds exactly (1.0 beside 1e-300: 10^300 units of 1e-300), are
summed as floats, with a warning that ties within rounding may split.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import LazykernWarning, warn_user
from . import _exact

_FLOAT64_EXACT = 1 << 53  # sums of numerators below this are exact in every algebra (counts use float64 values)


@dataclass
class Tables:
    """The merged tables of a problem with ``fixed`` variables sliced out.

    ``labels[t]``: the free variables of tensor t (sorted); ``mask[t]``, ``size[t]``: arrays of shape
    (flavors,) * len(labels[t]); ``size`` entries are Python ints (object arrays) when every objective
    is integer, else float64; ``offset``: the constant size of the fixed variables' objectives;
    ``feasible``: False when a constraint over fixed variables alone forbids them. ``unit``: what one
    unit of ``size`` (and ``offset``) is worth; ``floats``: the weights were floats (decimals made
    exact integers of ``unit``), so sizes are answered as floats; ``floated``: why float weights are
    summed as floats instead (their exact sums pass what the property holds), "" where they are not."""

    num_variables: int
    flavors: int
    fixed: dict[int, int]
    free: tuple[int, ...]
    labels: list[tuple[int, ...]]
    mask: list[np.ndarray]
    size: list[np.ndarray]
    integer: bool
    offset: Any = 0
    feasible: bool = True
    order: Any = None  # the contraction order every algebra's network of these tables takes (the solver's)
    # the orders of algebras that rank orders otherwise on a GPU (Algebra.plan_rank: the k-best ones), by rank
    ranked: dict[str, Any] = dataclasses.field(default_factory=dict)
    unit: Fraction = Fraction(1)
    floats: bool = False
    floated: str = ""  # why float weights are summed as floats (past the exact range), "" where they are not
    tolerance: Fraction = Fraction(0)  # how far a size may lie from the exact one (weights put on a grid)

    def answer(self, numerator: Any) -> Any:
        """A size of whole units (``offset`` not added) as the problem's size: an exact int for integer
        weights, else the float nearest the exact value."""
        total = int(numerator) + self.offset
        if not self.floats:
            return total
        exact = total * self.unit
        return exact.numerator / exact.denominator  # true division of ints: correctly rounded

    def size_bounds(self) -> tuple[Any, Any]:
        """(smallest, largest) size any configuration could reach by the tables alone (each table's own
        extremes over its allowed entries, summed): a bound, not the optimum."""
        low = high = self.offset
        for m, s in zip(self.mask, self.size):
            allowed = s[m]
            if allowed.size:
                low, high = low + allowed.min(), high + allowed.max()
        return low, high

    def magnitude(self) -> Any:
        """A bound on |size| of every configuration and every partial sum of one (exactness of a dtype)."""
        total = abs(self.offset)
        for m, s in zip(self.mask, self.size):
            allowed = s[m]
            if allowed.size:
                total += max(abs(allowed.min()), abs(allowed.max()))
        return total

    def configurations(self, labels: Sequence[Any], values: np.ndarray) -> np.ndarray:
        """:meth:`configuration` of many assignments at once, variable-major: int64 (variables, assignments),
        the fixed values and each row of ``values`` (labels, assignments) at its label's variable."""
        columns = np.zeros((self.num_variables, values.shape[1]), dtype=np.int64)
        for v, f in self.fixed.items():
            columns[v] = f
        if len(labels):
            columns[list(labels)] = values
        return columns

    def configuration(self, assignment: Mapping[Any, int]) -> np.ndarray:
        """One int64 entry per variable: the fixed values and ``assignment`` of the free ones (keyed by
        variable index: the network's labels)."""
        config = np.zeros(self.num_variables, dtype=np.int64)
        for v, f in itertools.chain(self.fixed.items(), assignment.items()):
            config[v] = f
        return config


def build(problem: Any, fixed: Mapping[int, int], exact_below: int | None = None, grid: bool = False) -> Tables:
    """The merged tables of ``problem`` with the variables of ``fixed`` set (checked here).

    ``exact_below``: the most units (exclusive) the caller's property sums exactly; float weights whose
    exact numerators would reach it (over the entries the constraints allow, fixed vertices sliced out)
    are summed as floats instead, with a warning. None: no limit (a property that reads no size).
    ``grid``: instead of float sums, each merged table's entries are rounded to a grid of whole units
    coarse enough to sum exactly (:func:`_on_grid`): sizes then lie within a stated tolerance of the exact
    ones, ties closer than it may merge (the warning says so), and no property loses a size to a float sum
    rounding two partial sums into one (a k-best list kept two, then had one: it skipped a real size)."""
    n, flavors = int(problem.num_variables), int(problem.num_flavors)
    fixed = _check_fixed(dict(fixed), n, flavors)
    integer = bool(problem.integer_weights)
    masks: dict[tuple[int, ...], Any] = {}
    feasible = True
    for table in problem.constraints():
        labels, values = _sliced(table, fixed, flavors, "constraint")
        if not labels:
            feasible = feasible and bool(values)
            continue
        allowed = values.astype(bool)
        masks[labels] = allowed if labels not in masks else masks[labels] & allowed
    objectives = [_sliced(table, fixed, flavors, "objective") for table in problem.objectives()]
    free = tuple(v for v in range(n) if v not in fixed)
    if integer:
        return _merged(n, flavors, fixed, free, masks, objectives, True, feasible)
    numbers = _classified([values for _, values in objectives])
    if numbers is None or not (
        numbers.exact or grid
    ):  # a grid takes the exact numerators (``big``) whatever they reach
        _warn_not_decimal(numbers)
        return _merged(n, flavors, fixed, free, masks, objectives, False, feasible, _NOT_DECIMAL)
    exact_numerators = numbers.numerators if numbers.exact or numbers.big is None else numbers.big
    nums = [np.asarray(a, dtype=object) for a in exact_numerators]
    exact = [(labels, a) for (labels, _), a in zip(objectives, nums)]
    tab = _merged(n, flavors, fixed, free, masks, exact, True, feasible, unit=numbers.unit, floats=True)
    reach = int(tab.magnitude())  # over allowed entries only: a forbidden entry is never summed
    limit = _FLOAT64_EXACT if numbers.spread else exact_below
    if limit == _FLOAT64_EXACT and not _binary(numbers.unit):
        # Sizes are answered as floats: below 2^52 units of 1/10 (any unit no power of two) float spacing
        # is under one unit, so distinct exact sizes stay distinct floats; near 2^53, 9e13 + 0.01 and
        # 9e13 + 0.02 are one float and a k-best list would show it twice.
        limit = _FLOAT64_EXACT >> 1
    if limit is None or reach < limit:
        _exact.warn_binary_floats(numbers.spread, "sizes", "every count, k-best list and set of configurations")
        return tab
    why = (
        _NOT_DECIMAL
        if numbers.spread
        else f"{'whole-number' if numbers.unit == 1 else 'decimal'} weights whose sums need up to {figure(reach)} "
        f"units of {figure(numbers.unit)}, past what this property holds exactly (below 2^{limit.bit_length() - 1})"
    )
    if grid:
        return _on_grid(tab, limit, why)
    if numbers.spread:
        _warn_not_decimal(numbers)
        return _merged(n, flavors, fixed, free, masks, objectives, False, feasible, _NOT_DECIMAL)
    _warn_past_exact(numbers, reach, limit)
    return _merged(n, flavors, fixed, free, masks, objectives, False, feasible, why)


def _on_grid(tab: Tables, limit: int, why: str) -> Tables:
    """``tab`` (exact numerators of ``tab.unit``) with every merged table's entries and the offset rounded
    (half to even) to whole multiples of 2^s units, s the least for which every sum stays below ``limit``
    units (half of it for a unit no power of two, whose multiples floats do not hold exactly): sums of the
    rounded entries are exact, each within half a grid step a table of the exact one."""
    rounded = len(tab.size) + 1  # the tables and the offset: each rounds by half a step at most
    room = (limit if _binary(tab.unit) else limit >> 1) - 2 * rounded
    s = max(0, (int(tab.magnitude()) // max(room, 1)).bit_length())
    while int(tab.magnitude()) // (1 << s) + rounded >= room:
        s += 1
    size = [
        np.array([_half_even(int(x), s) for x in a.ravel().tolist()], dtype=object).reshape(a.shape) for a in tab.size
    ]
    step = tab.unit * (1 << s)
    tolerance = step * rounded / 2
    warn_user(
        f"{why}: every table's sizes are rounded to whole multiples of {figure(step)} so that they sum exactly; "
        f"a size may lie up to {figure(tolerance * 1001 / 1000)} from the exact one, and sizes up to "
        f"{figure(step * len(tab.size) * 1001 / 1000)} apart may tie (merged into one size, their counts and "
        f"configurations together), and sizes that are equal may come out up to {figure(step * rounded)} apart "
        "(two sizes in a k-best list, each with its own counts and configurations). Give integers or short "
        "decimals (0.25, 1.5) for exact sizes",
        LazykernWarning,
    )
    return dataclasses.replace(
        tab, size=size, offset=_half_even(int(tab.offset), s), unit=step, floated=why, tolerance=tolerance
    )


def _half_even(x: int, s: int) -> int:
    """x / 2^s rounded to the nearest integer, ties to even (exact, any size)."""
    q, r = divmod(x, 1 << s)
    return q + (2 * r > (1 << s) or (2 * r == (1 << s) and q % 2 == 1))


def _binary(unit: Fraction) -> bool:
    return unit.numerator == 1 and unit.denominator & (unit.denominator - 1) == 0


_NOT_DECIMAL = "weights that are not short decimals (floats at their binary value) beside sums past 2^53 units"


def _merged(
    n: int,
    flavors: int,
    fixed: dict[int, int],
    free: tuple[int, ...],
    masks: Mapping[tuple[int, ...], np.ndarray],
    objectives: list[tuple[tuple[int, ...], np.ndarray]],
    integer: bool,
    feasible: bool,
    floated: str = "",
    unit: Fraction = Fraction(1),
    floats: bool = False,
) -> Tables:
    """Tables of the constraints' ``masks`` and the sliced ``objectives`` (exact integers when
    ``integer``, else float64), merged and folded."""
    groups: dict[tuple[int, ...], list[Any]] = {labels: [m, None] for labels, m in masks.items()}
    offset: Any = 0
    for labels, values in objectives:
        values = _sizes(values, integer)
        if not labels:
            offset = offset + values.item() if integer else offset + float(values)
            continue
        entry = groups.setdefault(labels, [None, None])
        entry[1] = values if entry[1] is None else entry[1] + values
    for v in set(free) - {x for labels in groups for x in labels}:
        groups[(v,)] = [None, None]
    merged = _fold(groups, flavors, integer)
    if not merged:  # every variable fixed: one scalar tensor of size 0 carries the (empty) network
        merged[()] = [np.ones((), dtype=bool), np.zeros((), dtype=object if integer else np.float64)]
    order = sorted(merged, key=lambda t: (min(t, default=-1), t))
    mask = _consistent(order, [merged[t][0] for t in order], flavors)
    size = [np.where(m, s, _zero(integer)) for m, s in ((merged[t][0], merged[t][1]) for t in order)]
    return Tables(
        n, flavors, fixed, free, order, mask, size, integer, offset, feasible, unit=unit, floats=floats,
        floated=floated,
    )  # fmt: skip


def _consistent(labels: list[tuple[int, ...]], masks: list[np.ndarray], flavors: int) -> list[np.ndarray]:
    """``masks`` with every flavor of a variable that some table allows in no entry struck from every table
    holding that variable, until none is (unary consistency). Only configurations no table allows are
    struck, so no answer changes; but an entry one table allows and another forbids would otherwise stand
    in a table's sizes: its best size (a partition function's offset, a range that refuses or warns) could
    be a size no feasible configuration has (hostile round 6: a weight of -(2^55 - 2) on a set that a fixed
    set excludes made log Z off by 2 and CountingMax refuse sizes past 2^53 where every size was 0)."""
    masks = [np.asarray(m, dtype=bool) for m in masks]
    while True:
        possible: dict[int, np.ndarray] = {}
        for t, m in zip(labels, masks):
            for axis, v in enumerate(t):
                here = np.asarray(m.any(axis=tuple(a for a in range(m.ndim) if a != axis)))
                possible[v] = here if v not in possible else possible[v] & here
        struck = False
        for i, (t, m) in enumerate(zip(labels, masks)):
            for axis, v in enumerate(t):
                if not possible[v].all():
                    shape = [1] * m.ndim
                    shape[axis] = flavors
                    kept = m & possible[v].reshape(shape)
                    struck = struck or not np.array_equal(kept, m)
                    m = kept
            masks[i] = m
        if not struck:
            return masks


def _classified(tables: list[np.ndarray]) -> _exact.Numbers | None:
    """Float objective tables as exact integer numerators of one unit (each value the decimal it was
    written as, :func:`._exact.classify`, else its exact binary value; not ``exact`` for floats at their
    binary value past 62 bits), or None where every entry summed passes float64's range (the problem
    checked that no one size does)."""
    try:
        return _exact.classify(*tables)
    except ValueError:
        return None


def _warn_not_decimal(numbers: _exact.Numbers | None) -> None:
    """The one warning for floats at their binary value whose exact sums pass 2^53 units: summed as floats."""
    off = "" if numbers is None else f", up to about {numbers.magnitude * 2.0**-52:.3g} here"
    warn_user(
        "weights that are not short decimals (like 1/3), mixed with weights so large that their exact sum "
        f"passes 2^53 units, are summed as float64: sizes round at float64's precision{off}, so two sizes "
        "equal on paper may differ, two that differ may tie (merged into one size, their counts and "
        "configurations together) and a size may be off. Give short decimals (0.25, 1.5) or integers for "
        "exact sizes",
        LazykernWarning,
    )


def _warn_past_exact(numbers: _exact.Numbers, reach: int, limit: int) -> None:
    """The one warning for decimal (or whole) float weights whose numerators reach ``limit`` units: they
    are summed as floats instead."""
    warn_user(
        f"these float weights are exact as decimals (or whole numbers) in units of {figure(numbers.unit)}, "
        f"but their sizes need sums of up to {figure(reach)} units, past what this property holds exactly "
        f"(below 2^{limit.bit_length() - 1} units): sizes are summed in float64 instead and round at its "
        f"precision, up to about {numbers.magnitude * 2.0**-52:.3g} here, so two sizes equal on paper may "
        "differ and two that differ may tie (merged into one size, their counts and configurations together)",
        LazykernWarning,
    )


def figure(x: int | float | Fraction) -> str:
    """A finite number, exact or float, to 3 significant digits, past float64's range too (10^400)."""
    q = Fraction(x)
    return format(Decimal(q.numerator) / Decimal(q.denominator), ".3g")


def _check_fixed(fixed: dict[int, int], n: int, flavors: int) -> dict[int, int]:
    out = {}
    for v, f in fixed.items():
        if not (isinstance(v, (int, np.integer)) and 0 <= int(v) < n):
            raise ValueError(f"fixed variable {v!r} is not a variable index 0..{n - 1}")
        if not (isinstance(f, (int, np.integer)) and 0 <= int(f) < flavors):
            raise ValueError(f"fixed variable {v} has value {f!r}; its flavors are 0..{flavors - 1}")
        out[int(v)] = int(f)
    return out


def _sliced(table: Any, fixed: Mapping[int, int], flavors: int, what: str) -> tuple[tuple[int, ...], np.ndarray]:
    """The table's free variables (sorted) and its values over them, the fixed ones selected."""
    labels = tuple(int(v) for v in table.variables)
    values = np.asarray(table.values)
    if values.shape != (flavors,) * len(labels):
        raise ValueError(
            f"{what} table over variables {labels} has shape {values.shape}; expected {(flavors,) * len(labels)}"
        )
    if fixed and any(v in fixed for v in labels):
        values = np.asarray(values[tuple(fixed.get(v, slice(None)) for v in labels)])  # one entry of an object
        # array comes back as the Python number itself
        labels = tuple(v for v in labels if v not in fixed)
    if all(a < b for a, b in zip(labels, labels[1:])):  # sorted already (most tables): as they are
        return labels, values
    order = sorted(range(len(labels)), key=lambda i: labels[i])
    return tuple(labels[i] for i in order), np.transpose(values, order)


def _sizes(values: np.ndarray, integer: bool) -> np.ndarray:
    """Objective values as exact Python ints (object) or float64."""
    values = np.asarray(values)  # a table indexed down to one entry is a scalar, not an array
    if not integer:
        return np.asarray(values, dtype=np.float64)
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
            raise ValueError("the problem says its weights are integers, but an objective holds a non-integer")
    if values.dtype.kind in "iu":
        return values.astype(object)  # Python ints, exact
    if values.dtype.kind == "b" or (values.dtype.kind == "f" and (not values.size or np.abs(values).max() < 2**53)):
        return values.astype(np.int64).astype(object)  # exact: booleans, or floats of integer value below 2^53
    return np.vectorize(int, otypes=[object])(values) if values.size else values.astype(object)


def _zero(integer: bool) -> Any:
    return 0 if integer else 0.0


def _fold(groups: dict[tuple[int, ...], list[Any]], flavors: int, integer: bool) -> dict[tuple[int, ...], list[Any]]:
    """Each group as [mask, size] arrays over its variables, a group whose variables all lie in a
    larger one folded into the first such (broadcast along the axes it lacks). A group without a mask
    (every entry allowed) or without sizes (all zero) stays without until the end: folding it is no
    work (a graph's vertex sizes into its edge masks are half of all folds)."""
    full = {labels: [mask, size] for labels, (mask, size) in groups.items()}
    order = sorted(full, key=len)
    # The groups holding each variable, in ``order``: a host holds the small group's first variable, so
    # only those are scanned (a scan of every later group is quadratic: 30 ms at 150 vertices).
    holding: dict[int, list[int]] = {}
    for i, labels in enumerate(order):
        for v in labels:
            holding.setdefault(v, []).append(i)
    for i, small in enumerate(order):
        if not small:
            continue
        wanted = set(small)
        later = holding[small[0]]
        bigger = (order[j] for j in later[bisect.bisect_right(later, i) :] if len(order[j]) > len(small))
        host = next((big for big in bigger if wanted <= set(big)), None)
        if host is None:
            continue
        mask, size = full.pop(small)
        axes = [flavors if v in small else 1 for v in host]  # both sorted: the axes keep their order
        shape = (flavors,) * len(host)
        into = full[host]
        if mask is not None:
            mask = mask.reshape(axes)
            into[0] = np.broadcast_to(mask, shape).copy() if into[0] is None else into[0] & mask
        if size is not None:
            size = size.reshape(axes)
            into[1] = np.broadcast_to(size, shape).copy() if into[1] is None else into[1] + size
    for labels, entry in full.items():
        shape = (flavors,) * len(labels)
        if entry[0] is None:
            entry[0] = np.ones(shape, dtype=bool)
        if entry[1] is None:
            entry[1] = np.full(shape, _zero(integer), dtype=object if integer else np.float64)
    return full


def assignments(variables: tuple[int, ...], flavors: int) -> Iterator[dict[int, int]]:
    """Every assignment of ``variables``, the last varying fastest (NumPy's C order)."""
    for combo in itertools.product(range(flavors), repeat=len(variables)):
        yield dict(zip(variables, combo))
