"""Exact integers from counts taken modulo several numbers: the Chinese remainder theorem.

A count of a tropical contraction is a sum of products of integers chosen by the values alone, so
the same contraction in any ring Z/m gives the exact count modulo m. :func:`solve` runs such passes,
modulo 2^64 (int64 arithmetic that wraps) and then modulo 31-bit primes taken down from 2^31 - 1
(every residue fits int32, every product of two fits 64 bits), and combines them into Python ints
in the symmetric range (-M/2, M/2] of the moduli's product M. It stops when M > 2 * bound, for a
proven ``bound`` on every |count|: the answer is then the only one possible.

A stopping rule without a bound (GenericTensorNetworks.jl's ``big_integer_solve``: stop when two
successive reconstructions agree) is not used: it is wrong whenever the count's residue modulo the
moduli so far is also its residue after the next prime, which a count of 2^64 * (2^31 - 1) ground
states is (count modulo 2^64 and modulo 2^64 * (2^31 - 1) are both 0: it answered 0). The callers
prove a tight bound first instead (:func:`lazykern.tn.counting.count_network`: one float64 pass, its
rounding bounded).

>>> _, counts = solve(lambda ms: (np.zeros(()), [np.array(2**70 % p) for p in ms or (2**64,)]), bound=2**100)
>>> int(counts)
1180591620717411303424
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import ReconstructionError

INT64_MODULUS = 1 << 64
_INT64_SAFE = 1 << 63  # |count| below this: the int64 pass is the count itself

# moduli (primes; (): 2^64 in int64) -> (values, one count array per modulus (the int64 counts for ())) on the host
Pass = Callable[[tuple[int, ...]], tuple[Any, Sequence[Any]]]


def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for n < 3.3 * 10^24 (bases 2 to 41)."""
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    if n in small:
        return True
    if any(n % p == 0 for p in small):
        return False
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def primes(start: int = (1 << 31) - 1) -> Iterator[int]:
    """Primes from ``start`` down (2^31 - 1 is itself prime), as Julia's ``prevprime`` walks."""
    n = start
    while n > 2:
        if is_prime(n):
            yield n
        n -= 1


def combine(x: Any, M: int, r: Any, p: int) -> Any:
    """The residues modulo M * p of what is ``x`` modulo M (entries in [0, M)) and ``r`` modulo p."""
    inverse = pow(M % p, -1, p)
    return x + M * (((r - x) % p) * inverse % p)


def symmetric(x: Any, M: int) -> Any:
    """Residues in [0, M) as the integers of (-M/2, M/2] they stand for."""
    return np.where(x > M // 2, x - M, x) if isinstance(x, np.ndarray) else (x - M if x > M // 2 else x)


def primes_for(M: int, bound: int, span: int | None = None) -> list[int]:
    """The primes (from 2^31 - 1 down) that take the moduli's product ``M`` past 2 * ``bound`` (counts in
    (-bound, bound]), or past ``span`` where given (counts each known to lie in an interval that wide:
    :func:`in_interval`), in order."""
    target = 2 * bound if span is None else span
    out: list[int] = []
    for p in primes():
        if M > target:
            return out
        out.append(p)
        M *= p
    raise ReconstructionError(f"no product of primes passes {target}")  # unreachable: primes are endless


def in_interval(x: Any, M: int, lower: Any) -> Any:
    """The integers at least ``lower`` (entrywise) and below ``lower`` + M that are ``x`` modulo M: the counts,
    where each is known to lie in [lower, lower + M)."""
    return lower + (x - lower) % M


class Known(NamedTuple):
    """What one float64 pass proved about every count (:func:`lazykern.tn.counting.count_network`): none
    exceeds ``top`` in magnitude; each lies in [lower, lower + span] where ``lower`` is given (Python ints,
    entrywise: nonnegative counts of the plan the prime passes run); ``values`` and ``counts``: that pass's
    results, where it left them (its counts are exact where ``span`` is 0)."""

    top: int
    lower: Any
    span: int
    values: Any
    counts: Any


def same_values(a: Any, b: Any) -> bool:
    """Whether two passes found the same optimal values (NaN equal to NaN where both are floats)."""
    a, b = np.asarray(a), np.asarray(b)
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f" and b.dtype.kind == "f"))


# Passes that run at once, one per lane (device): their results in the order of their moduli.
Together = Callable[[Sequence[tuple[int, ...]]], Sequence[tuple[Any, Sequence[Any]]]]
# The int64 pass and the first prime pass computed at once (as one contraction in a paired algebra).
PairedPasses = Callable[[tuple[int, ...], tuple[int, ...]], tuple[tuple[Any, Sequence[Any]], tuple[Any, Sequence[Any]]]]
PAIRED_RESIDUES = 2  # the first prime pass's primes beside the int64 pass: the same bytes per entry (4 + 4 vs 8)


def solve(
    run: Pass,
    bound: int,
    residues: int = 1,
    together: Together | None = None,
    wide: bool = True,
    lanes: int = 2,
    pair: PairedPasses | None = None,
    every_round: bool = True,
    lower: Any = None,
    span: int = 0,
) -> tuple[Any, Any]:
    """(values, exact counts) from passes ``run(moduli)``; ``bound``: no |count| exceeds it (proven: it says
    which primes the counts need, :func:`primes_for`); ``lower`` (Python ints, entrywise, where known) and
    ``span``: every count lies in [lower, lower + span] (proven), so moduli past ``span`` rebuild it
    (:func:`in_interval`), fewer than 2 * ``bound`` needs; ``residues``: the most primes a pass carries after
    the first (int64) one; ``wide``: whether that int64 pass runs (False: primes alone, where a pass of
    int64 counts would not fit the device, so ``bound`` must need more than int64).

    ``together(moduli_groups)``: the results of ``run`` for each group, computed at once (``lanes`` of
    them: one per device). When ``bound`` needs primes, passes go out in rounds of ``lanes``: the first
    round the int64 pass (where it runs) beside prime passes of :data:`PAIRED_RESIDUES` primes (count
    arrays as wide as the int64 pass's: they take as long), later rounds up to ``lanes`` passes sharing
    the primes still needed. The primes are combined in their order, so the counts are the same however
    the passes ran. ``pair(int64, first)`` (without ``together``): the first round alone, the int64 pass
    and one prime pass at once (one contraction in a paired algebra); later passes one by one.
    ``every_round=False``: ``together`` for the first round only (the int64 pass and the first primes,
    all needed), later passes one by one through ``run`` (which may spread a pass's slices itself).

    Counts come back as an int64 array when ``bound`` proves they fit (one pass), else as an
    object array of Python ints (one Python int for a scalar contraction)."""
    if not wide and bound < _INT64_SAFE:
        raise ValueError("counts bounded below 2^63 are one int64 pass: wide=False is for larger ones")
    if together is not None:
        first_lanes, lanes = lanes, (lanes if every_round else 1)
    else:
        first_lanes, lanes = (2, 1) if pair is not None else (1, 1)
    if together is None and pair is not None:
        paired = pair

        def together(groups: Sequence[tuple[int, ...]]) -> Sequence[tuple[Any, Sequence[Any]]]:
            return list(paired(*groups))

    target = 2 * bound if lower is None else span  # the moduli's product must pass it
    needed = primes_for(INT64_MODULUS if wide else 1, bound, None if lower is None else span)
    taken = 0
    ahead: list[tuple[tuple[int, ...], tuple[Any, Sequence[Any]]]] = []
    values: Any = None
    x: Any = 0
    M = 1

    def take(width: int) -> tuple[int, ...]:
        nonlocal taken
        group = tuple(needed[taken : taken + width])
        taken += len(group)
        return group

    def round_of(groups: list[tuple[int, ...]]) -> list[tuple[tuple[int, ...], tuple[Any, Sequence[Any]]]]:
        results = together(groups) if together is not None and len(groups) > 1 else [run(g) for g in groups]
        return list(zip(groups, results))

    if wide:
        if first_lanes > 1 and bound >= _INT64_SAFE:
            width = max(min(residues, PAIRED_RESIDUES), 1)
            primed_groups = [take(width) for _ in range(first_lanes - 1)]
            (_, (values, (counts,))), *ahead = round_of([(), *(g for g in primed_groups if g)])
        else:
            values, (counts,) = run(())
        counts = np.asarray(counts).astype(np.int64)
        if bound < _INT64_SAFE:
            return values, counts
        x = counts.astype(object) % INT64_MODULUS  # the int64 bits as residues in [0, 2^64)
        M = INT64_MODULUS
    while M <= target:
        if not ahead:
            width = max(1, min(residues, -(-(len(needed) - taken) // lanes)))
            ahead = round_of([g for g in (take(width) for _ in range(lanes)) if g])
        moduli, (more, counts_mod) = ahead.pop(0)
        if values is None:
            values = more
        elif not same_values(more, values):
            raise ReconstructionError(
                f"the counting pass modulo {moduli} found other optimal values than the pass modulo 2^64: the "
                "contraction is not deterministic; report it with the network"
            )
        for p, r in zip(moduli, counts_mod, strict=True):
            x, M = combine(x, M, np.asarray(r).astype(np.int64).astype(object), p), M * p
    return values, symmetric(x, M) if lower is None else in_interval(x, M, lower)
