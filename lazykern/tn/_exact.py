"""Exact numbers for tensor networks: the integers a network's values become, so that sums and ties are exact.

A max-plus contraction adds values and compares sums: in floating point a sum rounds, and two states
whose energies are equal can compare unequal (J = -0.1, h = (-0.1, -0.2): float64 splits a tie) or two
that differ can merge (2^53 + 1 rounds to 2^53). So every set of numbers is first written as integer
numerators times one unit, exactly where possible:

* integers (int arrays, Python ints, floats that are whole numbers): unit 1;
* decimals of at most :data:`DECIMAL_DIGITS` significant digits (any float whose shortest repr has that
  few: ``0.1`` means 1/10) and other floats taken at their exact binary value: the unit is 1 over the
  least common denominator;
* integers past int64: Python ints in NumPy object arrays, on the host only (exact and slow);
* otherwise (float numerators that would need more than 62 bits, or a dtype of fewer bits was asked
  for): each number is *rounded* to a multiple of a power of two, fine enough that the rounded sums are
  exact in the dtype. Ties are then decided exactly between rounded energies: two energies closer
  than :attr:`Fitted.tolerance` may tie or split. Nothing is exact, and the callers say so.

The bound on every partial sum is the sum of |numerators|: a dtype holds the contraction exactly when
that bound does (float32: 2^24, float64: 2^53, an integer dtype: below its extremes, which stand for
-inf/+inf). The answer is scaled back exactly (:meth:`Fitted.answer`): an ``int`` when every input had
an integer dtype, else the float nearest the exact value.

>>> f = fit(classify(np.array([-0.1]), np.array([-0.1, -0.2])), None, host=True)
>>> f.dtype, f.values[0].tolist(), f.values[1].tolist(), f.unit
(dtype('float32'), [-1.0], [-1.0, -2.0], Fraction(1, 10))
>>> f.answer(-2.0)
-0.2
"""

from __future__ import annotations

import dataclasses
import math
import sys
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import LazykernWarning, warn_user

DECIMAL_DIGITS = 9  # a float whose shortest repr has at most this many significant digits is that decimal
_INT64_BITS = 62  # numerators summing below 2^62: int64 holds every partial sum with room to spare
_MANTISSA = {np.dtype(np.float32): 24, np.dtype(np.float64): 53}
# the sum of |values| must stay below float64's largest number (less a margin for the float sum's own
# rounding): then no partial sum, and no energy, overflows to inf
_FLOAT_LIMIT = sys.float_info.max * (1 - 2.0**-30)


@dataclasses.dataclass(frozen=True)
class Numbers:
    """Arrays of numbers, classified. ``exact``: ``numerators`` (int64 or object arrays of Python ints)
    times ``unit`` are the numbers exactly, and ``bound`` is the sum of their |numerators|; otherwise
    ``numerators`` are the floats as given. ``integral``: every input array had an integer dtype (the
    answers are ints). ``magnitude``: the sum of |numbers| (a float). ``spread``: 0 when every number is
    an integer, a short decimal or an exact fraction; else the sum of the ulps of the floats taken at
    their binary value (1/3 as a float is not 1/3): two energies that close may be equal in the numbers
    the caller meant."""

    numerators: tuple[np.ndarray, ...]
    unit: Fraction
    bound: int
    exact: bool
    integral: bool
    magnitude: float
    count: int
    big: tuple[np.ndarray, ...] | None = None  # not exact in 62 bits: the exact numerators as Python ints
    spread: float = 0.0

    def fits(self, dtype: np.dtype) -> bool:
        """Whether ``dtype`` holds every partial sum of the numerators exactly (object: Python ints)."""
        if not self.exact:
            return False
        if dtype.kind == "O":
            return True
        if dtype.kind == "f":
            return self.bound < 1 << _MANTISSA[dtype]
        return self.bound < int(np.iinfo(dtype).max)


@dataclasses.dataclass(frozen=True)
class Fitted:
    """Numbers as a network holds them: ``values`` (one array per input, in ``dtype``) times ``unit``.
    ``exact``: the values are the numbers; otherwise each was rounded to a multiple of ``unit`` and
    ``tolerance`` bounds how far a rounded sum of them lies from the true one, twice (two energies
    that close may compare either way)."""

    values: tuple[np.ndarray, ...]
    unit: Fraction
    dtype: np.dtype
    exact: bool
    integral: bool
    tolerance: float
    spread: float = 0.0  # Numbers.spread: > 0 where a float was taken at its binary value

    def answer(self, value: Any) -> int | float:
        """A contraction's result (a whole number of units, in any numeric type) as the caller's number:
        an exact int for integer inputs, else the float nearest the exact value."""
        whole = int(value)  # exact: every partial sum of whole numbers stayed whole in the dtype
        if whole != value:
            raise ArithmeticError(f"a sum of whole numbers of units came out as {value!r}: report it with the instance")
        exact = whole * self.unit
        if self.integral:
            return int(exact)
        return exact.numerator / exact.denominator  # true division of ints: correctly rounded


def classify(*arrays: np.ndarray) -> Numbers:
    """The numbers of ``arrays`` (float64, integer, or object arrays of Python numbers: ints, floats,
    Fractions, Decimals; finite) as integer numerators and one unit, exactly; ValueError when the sum of
    |numbers| reaches float64's range (a partial sum could overflow to inf), unless every number is an
    integer (Python ints hold any sum: the solvers answer ints)."""
    count = sum(int(a.size) for a in arrays)
    flat = [a.ravel() for a in arrays]
    magnitude = _magnitude(flat)
    if not magnitude < _FLOAT_LIMIT and not all(a.dtype.kind in "iu" or _all_ints(a) for a in flat):
        raise ValueError(_overflow(magnitude))  # integers of any size stay Python ints: no float to overflow
    if all(a.dtype.kind in "iu" for a in flat) and magnitude < 2.0 ** (_INT64_BITS - 1):
        whole = [a.astype(np.int64) for a in flat]  # the common case (+-J, small integers): no Python loop
        bound = sum(int(np.abs(a).sum()) for a in whole)
        return _numbers(whole, Fraction(1), bound, magnitude, count, arrays, 0.0)
    if all(a.dtype.kind == "f" for a in flat) and magnitude < 2.0 ** (_INT64_BITS - 1):
        if all(bool(np.all(a == np.floor(a))) for a in flat):  # whole floats: exact as int64
            whole = [a.astype(np.int64) for a in flat]
            bound = sum(int(np.abs(a).sum()) for a in whole)
            return _numbers(whole, Fraction(1), bound, magnitude, count, arrays, 0.0)
    memo: dict[Any, tuple[Fraction, float]] = {}  # a float's decimal is worked out once per distinct value
    values = [[memo[x] if x in memo else memo.setdefault(x, _rational(x)) for x in a.tolist()] for a in flat]
    unit_denominator = math.lcm(1, *(v.denominator for a in values for v, _ in a))
    nums = [np.array([int(v * unit_denominator) for v, _ in a], dtype=object) for a in values]
    bound = sum(abs(int(v)) for a in nums for v in a)
    spread = math.fsum(ulp for a in values for _, ulp in a)
    return _numbers(nums, Fraction(1, unit_denominator), bound, magnitude, count, arrays, spread)


def _rational(x: Any) -> tuple[Fraction, float]:
    """(the exact number ``x`` stands for, the ulp of a float taken at its binary value, else 0): an int, a
    Fraction or a Decimal as itself, a float as the decimal it was written as (at most DECIMAL_DIGITS
    significant digits in its shortest repr: 0.1 is 1/10) or else its exact binary value."""
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{x!r} is a bool, not a number")
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x)), 0.0
    if isinstance(x, (Fraction, Decimal)):
        return Fraction(x), 0.0
    f = float(x)
    d = Decimal(repr(f))
    if len(d.normalize().as_tuple().digits) <= DECIMAL_DIGITS:
        return Fraction(d), 0.0
    if f == math.floor(f):  # a whole number of more digits: the integer it is
        return Fraction(int(f)), 0.0
    return Fraction(f), math.ulp(f)


def rational(x: Any) -> Fraction | None:
    """The exact number a solve reads ``x`` (an int, a float, a Fraction or a Decimal) as, or None for a float
    taken at its binary value (not a short decimal: it warns where that may split a tie)."""
    q, ulp = _rational(x)
    return None if ulp else q


def _magnitude(flat: list[np.ndarray]) -> float:
    """The sum of |numbers| as a float (inf past float64's range)."""
    total = 0.0
    for a in flat:
        if a.dtype.kind == "O":
            try:
                total += float(sum(abs(Fraction(v) if isinstance(v, Decimal) else v) for v in a.tolist()))
            except OverflowError:
                return float("inf")
        else:
            with np.errstate(over="ignore"):  # an overflow is the answer (inf)
                total += float(np.abs(a.astype(np.float64)).sum())
    return total


def _numbers(
    nums: list[np.ndarray],
    unit: Fraction,
    bound: int,
    magnitude: float,
    count: int,
    arrays: tuple[np.ndarray, ...],
    spread: float,
) -> Numbers:
    """Exact when the numerators sum below 2^62 (kept as int64 then), or when every number is exactly what
    the caller meant (integers, short decimals, fractions: kept as Python ints, :func:`fit` refuses what no
    dtype holds, it never rounds them); otherwise (floats at their binary value, past 62 bits) the numbers
    as floats, to be rounded, and their exact numerators in ``big``."""
    shapes = [a.shape for a in arrays]
    integral = all(unit == 1 and (a.dtype.kind in "iu" or _all_ints(a)) for a in arrays if a.size)
    exact = bound < 1 << _INT64_BITS or spread == 0
    if exact:
        kind = np.int64 if bound < 1 << _INT64_BITS else object
        out = tuple(np.asarray(a, dtype=kind).reshape(s) for a, s in zip(nums, shapes))
        return Numbers(out, unit, bound, exact, integral, magnitude, count, spread=spread)
    out = tuple(np.asarray(a, dtype=np.float64).reshape(s) for a, s in zip(arrays, shapes))
    big = tuple(np.asarray(a, dtype=object).reshape(s) for a, s in zip(nums, shapes))
    return Numbers(out, unit, bound, exact, integral, magnitude, count, big, spread)


def _all_ints(a: np.ndarray) -> bool:
    """An object array of Python (or NumPy) ints only: integer input, answered as ints."""
    return a.dtype.kind == "O" and all(isinstance(v, (int, np.integer)) for v in a.ravel().tolist())


def exact_sum(values: list[Any]) -> float:
    """The float nearest the exact sum of ``values``, each read as :func:`classify` reads it (a short
    decimal as that decimal, a whole float as its integer, another float at its binary value): 0.1 + 0.2
    gives 0.3, and 2^52 + 1.0, 0.5 and -2^52 give 1.5 where float64's running sum gives 2.0."""
    total = sum((_rational(x)[0] for x in values), Fraction(0))
    try:
        return total.numerator / total.denominator  # true division of ints: correctly rounded
    except OverflowError:  # past float64's range, as the float sum would be
        return math.inf if total > 0 else -math.inf


def warn_binary_floats(spread: float, what: str, separated: str) -> None:
    """A LazykernWarning where a float was taken at its binary value (``spread`` > 0, :class:`Numbers`):
    two ``what`` within ``spread`` of each other may be equal in the numbers the caller meant (1/3 + 2/3
    as floats need not be 1), and ``separated`` tells them apart all the same."""
    if spread > 0:
        warn_user(
            f"some of these numbers are floats that are not short decimals (like 1/3, or a random float): each "
            f"is taken at its exact binary value. Two {what} within {spread:.3g} of each other may be equal in "
            f"the numbers you meant, and {separated} tells them apart: exact for the binary values only. "
            "Give integers, short decimals (0.25, 1.5) or fractions.Fraction values for exact ties",
            LazykernWarning,
        )


def _overflow(magnitude: float) -> str:
    return (
        f"the couplings and fields sum to {magnitude:.6g} in absolute value, past float64's range "
        f"(1.8e308): an energy could overflow to inf. Scale them down (the ground states do not change)"
    )


def fit(numbers: Numbers, dtype: Any, host: bool, floats_only: bool = False, objects: bool = False) -> Fitted:
    """The dtype and values a network of ``numbers`` is contracted in.

    ``dtype`` None: the narrowest of float32, float64 and (on the host, or where ``floats_only`` is
    False) int64 that holds every partial sum exactly, then on the host object (Python ints) for
    numbers that are what the caller meant (integers, short decimals, fractions: never rounded, so a
    ValueError on a device where no dtype holds them); failing that, floats taken at their binary value
    are rounded in float64 (:class:`Fitted`'s tolerance). ``objects`` (on the host, for a network small
    enough that Python ints cost no more than its per-step overhead): those floats are summed exactly as
    Python ints too, instead of rounded. A given dtype (float32, float64, int32, int64, object on the
    host) is used when it holds the sums; an integer dtype that cannot is a ValueError; a float dtype
    that cannot rounds, with a warning (leave dtype unset for exact sums)."""
    if dtype is None:
        kinds: list[np.dtype[Any]] = [np.dtype(np.float32), np.dtype(np.float64)]
        if host or not floats_only:
            kinds.append(np.dtype(np.int64))
        if host and numbers.spread == 0:  # past int64: Python ints in NumPy's object arrays (slow, exact)
            kinds.append(np.dtype(object))
        for d in kinds:
            if numbers.fits(d):
                return _exactly(numbers, d)
        if host and objects and numbers.big is not None:
            return _python_ints(numbers)
        if numbers.spread == 0:
            what = "integer" if numbers.integral else "exact (integer or decimal)"
            raise ValueError(
                f"{what} couplings and fields whose numerators sum to 2^{math.log2(max(numbers.bound, 1)):.1f} "
                f"units of {numbers.unit}: past what the solvers hold exactly on a device (float64: below 2^53); "
                "pass module='numpy' (int64, then Python ints), or round the couplings yourself"
            )
        return _rounded(numbers, np.dtype(np.float64))
    d = _given_dtype(dtype, host)
    if numbers.fits(d):
        return _exactly(numbers, d)
    if d.kind == "O" and numbers.big is not None:
        return _python_ints(numbers)
    if d.kind in "iuO" or numbers.integral:
        raise ValueError(
            f"dtype {d} cannot hold these couplings and fields exactly (fractions, or sums past its range"
            f"{', and integers are never rounded' if numbers.integral else ''}): leave dtype unset "
            "(the narrowest exact one is chosen)"
        )
    warn_user(
        f"dtype {d} rounds the sums of these couplings and fields: the energy is {d}'s rounding "
        "of the truth and a near-degenerate ground state may be missed; leave dtype unset for exact sums",
        LazykernWarning,
    )
    return _rounded(numbers, d)


def _given_dtype(dtype: Any, host: bool) -> np.dtype:
    """``dtype`` as a network's values take it: float32, float64, int32, int64, or object on the host."""
    d: np.dtype[Any] = np.dtype(dtype)
    allowed = [np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64)] + ([np.dtype(object)] if host else [])
    if d not in allowed:
        raise TypeError(
            f"dtype must be float32, float64, int32 or int64{' (or object: Python ints)' if host else ''}, got {d}"
        )
    return d


def as_values(numbers: Numbers, dtype: Any, host: bool) -> tuple[np.dtype, tuple[np.ndarray, ...]]:
    """(dtype, arrays) of the numbers themselves, not numerators of a unit (:func:`fit` gives those to
    the solvers): for a network the caller contracts, exact wherever the dtype holds every number and
    every partial sum of them (:func:`_holds`).

    ``dtype`` None: the narrowest exact one of float32, float64 and, on the host, int64 and object
    (Python ints, for integers past int64). Where none is: integers are a ValueError (they are never
    rounded; on the host one always holds them); otherwise float64, with a LazykernWarning where an entry
    is not its number (decimals such as 0.1, which no binary float holds, and fractions), silently where
    only sums round (floats taken at their binary value, Gaussian couplings: each held as given). A given
    ``dtype`` as :func:`fit` takes it (TypeError for others; object holds Python ints, or Fractions for
    non-integers): one that cannot hold the numbers exactly is a ValueError for an integer dtype, integer
    inputs or numbers past its range, else it rounds, with a LazykernWarning."""
    narrowest = _narrowest(numbers, host)
    if dtype is None and narrowest is not None:
        return narrowest, _entries(numbers, narrowest)
    exact = "pass dtype=object with module=numpy: exact Fractions and Python ints (slower)"
    if dtype is None:
        if numbers.unit == 1:
            raise ValueError(
                f"integer couplings and fields whose sums reach 2^{math.log2(max(numbers.bound, 1)):.1f}: past "
                "float64's exact integers (2^53), and a device's network holds floats; pass module='numpy' (int64, "
                "or Python ints past it)"
            )
        d = np.dtype(np.float64)
        values = _entries(numbers, d)
        if not _each_held(numbers, values):
            warn_user(_rounds(d, exact), LazykernWarning)
        return d, values
    d = _given_dtype(dtype, host)
    if _holds(numbers, d):
        return d, _entries(numbers, d)
    advice = f"leave dtype unset (it picks {narrowest})" if narrowest is not None else exact
    if d.kind in "iu" or numbers.integral:
        why = "they are not all integers" if numbers.unit != 1 else "their sums pass its range"
        never = ", and integers are never rounded" if numbers.integral else ""
        raise ValueError(f"dtype {d} cannot hold these couplings and fields exactly ({why}{never}): {advice}")
    largest = float(np.finfo(d).max)
    if not numbers.magnitude < largest:  # inf is no rounding
        raise ValueError(
            f"dtype {d} cannot hold these couplings and fields: the sum of their |values|, {numbers.magnitude:.6g}, "
            f"passes its range ({largest:.6g}), so an entry or a sum would be inf: {advice}"
        )
    warn_user(_rounds(d, advice), LazykernWarning)
    return d, _entries(numbers, d)


def _narrowest(numbers: Numbers, host: bool) -> np.dtype | None:
    """The first of float32, float64 and, on the host, int64 and object (for integers: Python ints) that
    holds the numbers exactly (:func:`_holds`), else None."""
    kinds: list[np.dtype[Any]] = [np.dtype(np.float32), np.dtype(np.float64)]
    if host:
        kinds += [np.dtype(np.int64)] + ([np.dtype(object)] if numbers.unit == 1 else [])
    return next((d for d in kinds if _holds(numbers, d)), None)


def _holds(numbers: Numbers, d: np.dtype) -> bool:
    """Whether ``d`` holds every number (numerator times unit) and every partial sum of them exactly:
    object always; an integer dtype integers whose |sum| stays below its extremes; a float dtype
    multiples of a power-of-two unit whose numerators sum below 2^mantissa, within its range."""
    if d.kind == "O":
        return True
    if not numbers.fits(d):
        return False
    unit = numbers.unit
    if d.kind in "iu":
        return unit == 1
    info = np.finfo(d)
    binary = unit.numerator == 1 and unit.denominator & (unit.denominator - 1) == 0
    return (
        binary
        and unit >= Fraction(float(info.smallest_subnormal))
        and numbers.bound * unit <= Fraction(float(info.max))
    )


def _entries(numbers: Numbers, d: np.dtype) -> tuple[np.ndarray, ...]:
    """The numbers in ``d``: exact where :func:`_holds`, else each rounded."""
    if d.kind == "O":
        exact = numbers.numerators if numbers.exact else numbers.big
        assert exact is not None
        return tuple(_objects(a, numbers.unit) for a in exact)
    if not numbers.exact:  # floats as given (float64)
        return tuple(a.astype(d) for a in numbers.numerators)
    if numbers.unit == 1:  # whole numbers: NumPy's conversion is exact where d holds them, else rounds
        return tuple(a.astype(d) for a in numbers.numerators)
    return tuple(_as_float(a, numbers.unit).astype(d) for a in numbers.numerators)


def _each_held(numbers: Numbers, values: tuple[np.ndarray, ...]) -> bool:
    """Whether every entry of ``values`` is its number exactly (only sums of them may round)."""
    exact = numbers.numerators if numbers.exact else numbers.big
    assert exact is not None
    pairs = (zip(a.ravel().tolist(), b.ravel().tolist()) for a, b in zip(values, exact))
    return all(Fraction(v) == int(k) * numbers.unit for each in pairs for v, k in each)


def _objects(a: np.ndarray, unit: Fraction) -> np.ndarray:
    """Numerators times ``unit`` as Python ints (a whole unit) or Fractions, in an object array."""
    out = np.empty(a.shape, dtype=object)
    out.ravel()[:] = [int(v) * unit if unit != 1 else int(v) for v in a.ravel().tolist()]
    return out


def _rounds(d: np.dtype, advice: str) -> str:
    return (
        f"the network's tensors in {d} round these couplings and fields (or their sums): their contraction is "
        f"{d}'s rounding of max_s(-E), not the energy the solvers answer exactly; {advice}"
    )


def _exactly(numbers: Numbers, d: np.dtype) -> Fitted:
    values = tuple(np.asarray(a).astype(d) for a in numbers.numerators)
    return Fitted(values, numbers.unit, d, True, numbers.integral, 0.0, numbers.spread)


def _python_ints(numbers: Numbers) -> Fitted:
    assert numbers.big is not None
    return Fitted(numbers.big, numbers.unit, np.dtype(object), True, numbers.integral, 0.0, numbers.spread)


def _rounded(numbers: Numbers, d: np.dtype) -> Fitted:
    """Each number rounded to a multiple of 2^e, the smallest e for which the rounded numerators sum
    below 2^mantissa: every partial sum is then exact in ``d`` and ties are decided exactly between
    the rounded energies."""
    floats = [np.asarray(a, dtype=np.float64) if not numbers.exact else _as_float(a, numbers.unit)
              for a in numbers.numerators]  # fmt: skip
    bits = _MANTISSA[d]
    e = math.frexp(numbers.magnitude + numbers.count)[1] - bits
    while True:
        nums = [np.round(np.ldexp(a, -e)) for a in floats]  # scaling by 2^-e is exact
        if sum(float(np.abs(a).sum()) for a in nums) < 2.0 ** (bits - 1):  # a bit spare: the float sum rounds
            break
        e += 1
    unit = Fraction(2) ** e
    # each number moved by at most half a unit; an energy sums ``count`` of them; two energies compared
    tolerance = float(numbers.count * unit)
    return Fitted(tuple(a.astype(d) for a in nums), unit, d, False, False, tolerance, numbers.spread)


def _as_float(a: np.ndarray, unit: Fraction) -> np.ndarray:
    return np.array([float(int(v) * unit) for v in np.asarray(a).ravel()], dtype=np.float64).reshape(a.shape)
