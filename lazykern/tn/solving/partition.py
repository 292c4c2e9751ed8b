"""``PartitionFunction``: log Z by exact offsets. Each entry holds its best size in units of a power
of two beside its log weight relative to it, so no float ever holds beta times a size; log Z is summed
exactly at the end, and refused past float64's range."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ...errors import LazykernWarning, ReconstructionError, warn_user
from .. import _tables
from ..algebras import scaledsum
from .context import Context
from .values import to_host


def partition_function(tab: _tables.Tables, beta: float, goal: str, ctx: Context, plus: Fraction = Fraction(0)) -> Any:
    """log sum exp(+-beta * size) over feasible configurations (the sign: + for a "max" goal), by exact
    offsets (:mod:`..algebras.scaledsum`): an entry holds its best t, +-size in units of a power of two
    (:func:`_log_terms`), and its log weight relative to it, so no float ever holds beta times a size and
    log Z = beta * best + l is summed exactly at the end. Sizes whose exact sums are integers of that unit
    below 2^53 (integers and short decimals below 2^53 units, 1e22 beside -1e22) give log Z to float64's
    precision of itself; other sizes (1/3 beside 2^60) ride as float64 sums, with a warning where beta
    times their rounding is large against log Z. A log Z past float64's range is a ValueError, never
    +-inf. ``plus``: the exact log Z of other independent parts, added before the rounding, the range
    check and the warning (:func:`.apart.apart`: small components solved on the host)."""
    if goal not in ("max", "min"):
        raise ValueError(f"the problem's goal must be 'max' or 'min', got {goal!r}")
    if not tab.feasible:
        return -math.inf
    scale = Fraction(beta) if goal == "max" else -Fraction(beta)
    terms, quantum, base, whole, rounding = _log_terms(tab, (scale > 0) - (scale < 0))
    worth = abs(scale) * tab.unit * quantum  # the log weight of one unit of t
    if whole:
        # whole units: past 2^64 every entry below its best weighs exp(-2^64) = 0 as with the true worth
        c = float(min(worth, Fraction(2**64)))
    else:
        c = nearest_float(worth)
        if c == math.inf:
            raise ValueError(
                f"PartitionFunction: |beta| = {_tables.figure(abs(scale))} times sizes of up to "
                f"{_tables.figure(Fraction(tab.magnitude()) * tab.unit)} gives log-weights past what float64 holds "
                "even relative to each other; scale the weights or beta down"
            )
    ones = [np.where(m, 0.0, -math.inf) for m in tab.mask]
    operands = [(ctx.put(t), ctx.put(z)) for t, z in zip(terms, ones)]
    s, logw = ctx.contract(tab, tab.labels, (), operands, "maxplus", scaledsum.algebra(c))
    best, log_weight = float(to_host(s).item()), float(to_host(logw).item())
    if best == -math.inf:  # no feasible configuration (t never overflows: its sums stay below 2^1000)
        return -math.inf
    if not math.isfinite(log_weight):
        raise ReconstructionError(f"PartitionFunction: a feasible best size with log weight {log_weight}; report it")
    whole_sum = scale * tab.unit * (Fraction(tab.offset) + base) + worth * Fraction(best) + Fraction(log_weight)
    whole_sum += plus
    answer = nearest_float(whole_sum)
    if not math.isfinite(answer):
        raise past_range(tab, scale)
    # Each configuration's t and the best are off by up to ``rounding``, and the steps' differences of
    # them round as much again: log Z by up to about 4 times that, times the worth of a unit.
    error = 4 * rounding * worth
    if error > Fraction(1e-9) * max(Fraction(1), abs(whole_sum)):
        size = _tables.figure(Fraction(tab.magnitude()) * tab.unit)
        off = _tables.figure(rounding * quantum * tab.unit)
        warn_user(
            f"PartitionFunction: sizes up to {size} are summed in float64, which rounds each sum by up to about "
            f"{off}; |beta| = {_tables.figure(abs(scale))} times that leaves log Z = {answer!r} off by up to about "
            f"{_tables.figure(error)}: it may be off by that much (integer or short-decimal weights whose sums "
            "stay below 2^53 units give log Z to float64's precision)",
            LazykernWarning,
        )
    return answer


def _log_terms(tab: _tables.Tables, sign: int) -> tuple[list[np.ndarray], Fraction, Fraction, bool, Fraction]:
    """Each table's t = ``sign`` * (size - its best) / q in float64 (-inf where forbidden), q (in
    ``tab.unit``) a power of two; the tables' best sizes summed (exact, moved out of the contraction:
    log-weights of 10^400 and -10^400 that cancel leave t of 0); whether every t is a whole number; and
    how far a configuration's float64 sum of t may lie from its exact value (in units of t). Where every
    allowed t is a whole number of some power of two and the tables' largest |t| summed stays below 2^53
    of it, q is that power: every t and partial sum is an integer below 2^53, exact. Else q keeps those
    sums below 2^1000 (float64's range, whatever the contraction adds): each t rounds once (Python ints)
    or not at all (floats), and each of a configuration's additions by up to 2^-53 of the sum. ``sign`` 0
    (beta 0): every t is 0."""
    sizes, base = [], Fraction(0)
    for m, s in zip(tab.mask, tab.size):
        moved, best = _less_best(s, m, sign) if sign else (s, Fraction(0))
        sizes.append(moved)
        base += best
    allowed = [s[m] for m, s in zip(tab.mask, sizes)]
    if sign == 0 or not any(bool(np.any(a != 0)) for a in allowed):
        return [np.where(m, 0.0, -math.inf) for m in tab.mask], Fraction(1), base, True, Fraction(0)
    reach = sum((_largest_abs(a) for a in allowed), Fraction(0))  # no sum of one entry per table passes it
    low = min(_lowest_bit(a) for a in allowed if np.any(a != 0))
    if reach / Fraction(2) ** low < 2**53:
        terms = [np.where(m, _shifted(s, low) * sign, -math.inf) for m, s in zip(tab.mask, sizes)]
        return terms, Fraction(2) ** low, base, True, Fraction(0)
    shift = max(0, reach.numerator.bit_length() - reach.denominator.bit_length() + 1 - 1000)  # reach < 2^(1000 + it)
    q = Fraction(2) ** shift
    shifted = [_shifted(s, shift) for s in sizes]
    rounding = (len(shifted) - 1) * reach / q / 2**53
    for a, m, s in zip(shifted, tab.mask, sizes):
        if s.dtype == object:  # each Python int rounded once: by this much at most
            errors = (abs(Fraction(x) - Fraction(y) / q) for x, y in zip(a[m].tolist(), s[m].tolist()))
            rounding += max(errors, default=Fraction(0))
    terms = [np.where(m, a * sign, -math.inf) for a, m in zip(shifted, tab.mask)]
    return terms, q, base, False, rounding


def _less_best(size: np.ndarray, mask: np.ndarray, sign: int) -> tuple[np.ndarray, Fraction]:
    """``size`` less its best allowed entry (the largest for ``sign`` 1, the smallest for -1), and that
    entry; ``size`` itself and 0 where a float subtraction would round (the table then keeps its sizes)."""
    allowed = size[mask]
    if not allowed.size:
        return size, Fraction(0)
    best = allowed.max() if sign > 0 else allowed.min()
    if size.dtype == object:
        return np.asarray(size - best, dtype=object), Fraction(int(best))  # a 0-d array stays an array
    with np.errstate(over="ignore", invalid="ignore"):
        moved = np.asarray(size - best, dtype=np.float64)
        back = moved - size  # TwoSum: the subtraction's rounding error, exactly (0: exact)
        error = (size - (moved - back)) + (-best - back)
    if not np.all(np.isfinite(moved[mask])) or np.any(error[mask] != 0):
        return size, Fraction(0)
    return moved, Fraction(float(best))


def _largest_abs(values: np.ndarray) -> Fraction:
    """The largest |x| of ``values`` (floats or Python ints), exact; 0 for none. NaN or inf is a ValueError."""
    if not values.size:
        return Fraction(0)
    if values.dtype == object:
        return Fraction(max(abs(int(x)) for x in values.ravel().tolist()))
    if not np.all(np.isfinite(values)):
        raise ValueError("PartitionFunction: a size is NaN or infinite; every weight must be a finite number")
    return Fraction(float(np.abs(values).max()))


def _lowest_bit(values: np.ndarray) -> int:
    """The exponent of the lowest bit set in any nonzero entry of ``values`` (floats or Python ints)."""
    if values.dtype == object:
        return min((x & -x).bit_length() - 1 for x in (int(v) for v in values.ravel().tolist()) if x)
    x = values[values != 0].astype(np.float64)
    mantissa, exponent = np.frexp(x)  # x = mantissa * 2^exponent, mantissa of 53 bits at most
    whole = np.abs(np.ldexp(mantissa, 53)).astype(np.int64)
    _, lowest = np.frexp((whole & -whole).astype(np.float64))  # a power of two 2^j: frexp gives j + 1
    return int((exponent - 53 + lowest - 1).min())


def _shifted(values: np.ndarray, shift: int) -> np.ndarray:
    """``values`` (floats or Python ints) times 2^-``shift`` in float64, correctly rounded."""
    if values.dtype != object:
        return np.ldexp(values.astype(np.float64), -shift)
    scaled = (Fraction(int(x)) / Fraction(2) ** shift for x in values.ravel().tolist())
    return np.array([x.numerator / x.denominator for x in scaled], dtype=np.float64).reshape(values.shape)


def nearest_float(x: Any) -> float:
    """The float nearest ``x`` (an int, Fraction or float), +-inf past float64's range."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def past_range(tab: _tables.Tables, scale: Fraction, why: str = "") -> ValueError:
    """The refusal of a log Z past float64's range (never answered as +-inf or NaN)."""
    size = _tables.figure(Fraction(tab.magnitude()) * tab.unit)
    return ValueError(
        f"PartitionFunction: log Z is past float64's range (1.8e308): sizes reach {size} and |beta| is "
        f"{_tables.figure(abs(scale))}{' ' + why if why else ''}; scale the weights or beta down"
    )
