"""The graph polynomial sum_s count(s) x^s, exactly: evaluations modulo primes, interpolation, CRT.

P(x) = sum over feasible configurations of x^size is, at a point x of Z/p, one sum-product
contraction of the tensors x^size (0 where forbidden) modulo p (:mod:`.modular`: float64 GEMM, primes
below 2^21). All the points ride in one contraction as an extra label carried by every tensor (a
batch of evaluations), and every prime the answer needs in one pass as the algebra's parts: no
coefficient exceeds the number of feasible configurations, bounded from above first (a float64 count
with its rounding bounded, :mod:`.floatsum`), so :func:`primes_needed` says how many. The D + 1 values
at x = 1 .. D + 1 (D: the largest size less the smallest, both found exactly first by the tropical
algebra, the largest in the same pass as that count) give the coefficients modulo p by Newton interpolation, and
the Chinese remainder theorem the integers, once the primes' product passes that bound (proven: two
successive reconstructions that agree prove nothing, :mod:`lazykern.tn._crt`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import ReconstructionError
from .. import _crt
from .modular import PRIME_BELOW

DEGREE_MAX = 1 << 14  # points ride in every tensor: a degree past this is refused, not tried
POINTS = "polynomial points"  # the label of the evaluation points (problem variables are ints)
_MAX_PRIMES = 200  # 2^4000: far past any count a contractible network has


def powers_modulo(exponents: np.ndarray, mask: np.ndarray, points: np.ndarray, moduli: Sequence[int]) -> np.ndarray:
    """float64 (len(moduli), len(points)) + exponents.shape: points ** exponents modulo each of ``moduli``,
    0 where not ``mask`` (:func:`all_powers_modulo` of one table)."""
    return all_powers_modulo([exponents], [mask], points, moduli)[0]


def all_powers_modulo(
    exponents: Sequence[np.ndarray], masks: Sequence[np.ndarray], points: np.ndarray, moduli: Sequence[int]
) -> list[np.ndarray]:
    """:func:`powers_modulo` of every table of a network at once: one float64 array (len(moduli),
    len(points)) + shape per table, every prime together.

    ``exponents``: int64 arrays, or object arrays of Python ints (sizes past int64), >= 0 where masked in.
    Each distinct exponent of all the tables is raised once, by square-and-multiply, after reducing it
    modulo p - 1 (:func:`_reduced`): the work and memory grow with the number of distinct exponents, never
    with their size (an entry of exponent 2^45 that no feasible configuration reaches costs 45 squarings),
    nor with the number of tables (a network's few hundred tables, one pass: 225 passes of 70 us each were
    16 ms of a 180 ms polynomial, session 79)."""
    safe = [np.where(m, e, 0) for e, m in zip(exponents, masks)]
    if not safe:
        return []
    flat = np.concatenate([s.ravel() for s in safe])
    distinct, where = np.unique(flat, return_inverse=True)
    reduced = np.array([[_reduced(int(e), p) for e in distinct.tolist()] for p in moduli], dtype=np.int64)
    table = _square_and_multiply(points, reduced, np.array(moduli, dtype=np.int64))
    out: list[np.ndarray] = []
    start = 0
    for s, m in zip(safe, masks):
        at = where[start : start + s.size].reshape(s.shape)
        start += s.size
        out.append((table[:, :, at] * m).astype(np.float64))
    return out


def _reduced(e: int, p: int) -> int:
    """An exponent f in [0, p - 1] with x^f = x^e modulo the prime p for every x: e itself when 0, else
    ((e - 1) mod (p - 1)) + 1 (Fermat: x^(p-1) = 1 for x not a multiple of p; a multiple stays 0 for
    every exponent of at least 1)."""
    return 0 if e == 0 else (e - 1) % (p - 1) + 1


def _square_and_multiply(points: np.ndarray, exponents: np.ndarray, moduli: np.ndarray) -> np.ndarray:
    """int64 (len(moduli), len(points), exponents.shape[1]): points ** exponents[i] modulo moduli[i], for
    exponents (len(moduli), distinct) in [0, p - 1] (every product of two residues fits int64)."""
    p = moduli.reshape(-1, 1, 1)
    base = points.astype(np.int64).reshape(1, -1, 1) % p
    e = exponents[:, None, :]
    out = np.ones((len(moduli), len(points), exponents.shape[1]), dtype=np.int64)
    while e.any():
        out = np.where(e & 1, out * base % p, out)
        base = base * base % p
        e = e >> 1
    return out


def interpolate(values: Sequence[int], p: int) -> np.ndarray:
    """Coefficients c_0 .. c_D modulo p of the polynomial of degree <= D taking ``values`` at
    x = 1 .. D + 1 (Newton's divided differences, then expanded); int64 entries in [0, p)."""
    y = np.array([int(v) % p for v in values], dtype=np.int64)
    D = len(y) - 1
    points = np.arange(1, D + 2, dtype=np.int64)
    coef = y.copy()
    for j in range(1, D + 1):  # at equally spaced points x_i - x_{i-j} = j
        inv = pow(j, -1, p)
        coef[j:] = (coef[j:] - coef[j - 1 : -1]) % p * inv % p
    poly = np.zeros(D + 1, dtype=np.int64)
    poly[0] = coef[D]
    for i in range(D - 1, -1, -1):  # poly = poly * (x - x_i) + coef[i]
        shifted = np.concatenate(([0], poly[:-1]))
        poly = (shifted - points[i] * poly % p + p) % p
        poly[0] = (poly[0] + coef[i]) % p
    return poly


def primes_needed(bound: int) -> int:
    """How many primes of :func:`reconstruct` (taken down from 2^21) multiply past ``bound``."""
    product, count = 1, 0
    for p in _crt.primes(PRIME_BELOW - 1):
        if product > bound:
            return max(count, 1)
        product, count = product * p, count + 1
    raise ReconstructionError(f"no product of primes below 2^21 passes {bound}")  # unreachable: primes are endless


# one pass: moduli -> the evaluations, an array (len(moduli), points) of residues in [0, p)
Pass = Callable[[tuple[int, ...]], np.ndarray]


def reconstruct(run: Pass, points: int, shift: int, bound: int, residues: int) -> list[int]:
    """The exact coefficients c_0 .. c_{points-1} (all >= 0, none above ``bound``) of R(x) = Q(x) / x^shift
    from passes ``run(moduli)`` evaluating Q at x = 1 .. points modulo each prime."""
    x: Any = np.zeros(points, dtype=object)
    M = 1
    left = itertools.islice(_crt.primes(PRIME_BELOW - 1), _MAX_PRIMES)
    inverses = np.arange(1, points + 1)
    while moduli := tuple(itertools.islice(left, max(1, residues))):
        evaluations = run(moduli)
        for p, values in zip(moduli, evaluations, strict=True):
            scale = [pow(int(v), -shift, p) for v in inverses]  # divide by x^shift: x is invertible mod p
            r = interpolate([int(v) * s % p for v, s in zip(values, scale)], p)
            x, M = _crt.combine(x, M, r.astype(object), p), M * p
            if M > bound:  # the only coefficients in [0, bound] with these residues
                return [int(c) for c in x]
    raise ReconstructionError(f"polynomial coefficients did not settle after {_MAX_PRIMES} primes")
