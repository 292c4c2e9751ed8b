"""Exact counts from a float64 pass's intervals: each count lies in [lower, lower + span], proven from the
plan's roundings (:func:`lazykern.tn.algebras.floatsum.interval`), so a count the pass pins to one integer
needs no second pass, and a larger one needs moduli past the interval's width, not past twice the count."""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterator
from typing import Any
from unittest import mock

import numpy as np
import pytest

from lazykern.errors import ReconstructionError
from lazykern.tn import _crt, counting
from lazykern.tn import networks as nw
from lazykern.tn.algebras import floatsum
from lazykern.tn.counts import bounds


def test_interval_is_integer_arithmetic_on_the_computed_counts():
    lower, span = floatsum.interval(np.array([[0.0, 7.0], [2.0**70, 3.0]]), 1 << 20)
    c = 2**70
    assert lower.dtype == object and lower.shape == (2, 2)
    assert lower.tolist() == [[0, 7], [c - (c * 2**21 >> 53), 3]]
    assert span == (c * 2**21 >> 53) + (c * 2**22 >> 53)
    assert floatsum.interval(np.array(5.0), 1000)[1] == 0  # small counts: the pass is exact
    lower, span = floatsum.interval(np.array([2.0**53 - 1, 2.0**53]), 1 << 30)  # below 2^53 whatever the roundings
    assert lower[0] == 2**53 - 1 and lower[1] < 2**53 and span > 0
    for bad in ([np.inf], [-1.0], [0.5], [np.nan]):  # overflowed, signed, not a sum-product of integers
        assert floatsum.interval(np.array(bad), 100) is None
    assert floatsum.interval(np.array([1.0]), floatsum.ROUNDINGS_MAX + 1) is None


def test_path_roundings_compound_each_steps_sum_once():
    # two pair steps summing 4 and 8 terms an entry, three leaves, one slice: 4 + 1 + 8 + 1 + 3 + 1 + margin
    assert floatsum.path_roundings([4, 8], [2, 2], 3, 1) == 4 + 1 + 8 + 1 + 3 + 1 + 64
    # a step over three operands (taken pairwise) one more; a reduction of one operand as a pair's
    assert floatsum.path_roundings([4], [3], 3, 1) == floatsum.path_roundings([4], [2], 3, 1) + 1
    assert floatsum.path_roundings([4], [1], 1, 1) == floatsum.path_roundings([4], [2], 1, 1)


@contextlib.contextmanager
def _proofs() -> Iterator[list[Any]]:
    """What each float64 pass proved (:func:`lazykern.tn.counts.bounds.proven`), in a list, while inside."""
    seen: list[Any] = []
    real = bounds.proven

    def kept(*a: Any, **kw: Any) -> Any:
        seen.append(real(*a, **kw))
        return seen[-1]

    with mock.patch.object(bounds, "proven", kept):
        yield seen


def _brute(inputs, output, operands, sizes):
    """(values, counts) of the max-plus counting contraction by enumeration, in Python ints."""
    labels = sorted({x for t in inputs for x in t})
    best: dict[tuple[int, ...], tuple[float, int]] = {}
    for assign in itertools.product(*(range(sizes[x]) for x in labels)):
        at = dict(zip(labels, assign))
        value, count = 0.0, 1
        for t, (v, c) in zip(inputs, operands):
            idx = tuple(at[x] for x in t)
            value += float(v[idx])
            count *= int(c[idx])
        key = tuple(at[x] for x in output)
        old = best.get(key)
        if old is None or value > old[0]:
            best[key] = (value, count)
        elif value == old[0]:
            best[key] = (value, old[1] + count)
    return best


@pytest.mark.parametrize("mixed", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_every_interval_holds_the_exact_count_and_the_counts_are_exact(seed, mixed):
    """Random networks of large nonnegative int64 counts (products past 2^53 round in float64): each count
    lies in its proven interval, and the rebuilt counts are the brute force's. ``mixed``: small counts
    beside 2^60 and 0 (counts below 2^53 that the float64 pass pins, with rounded numbers off the optimum)."""
    rng = np.random.default_rng(seed)
    nlabels = int(rng.integers(3, 6))
    sizes = {x: int(rng.integers(2, 4)) for x in range(nlabels)}
    inputs = [tuple(int(x) for x in rng.choice(nlabels, size=int(rng.integers(1, 4)), replace=False)) for _ in range(4)]
    inputs.append(tuple(range(nlabels)))  # every label in some operand
    output = tuple(int(x) for x in rng.choice(nlabels, size=int(rng.integers(0, 2)), replace=False))
    operands = []
    for t in inputs:
        shape = tuple(sizes[x] for x in t)
        values = rng.integers(0, 2, shape).astype(np.float32)  # many ties
        big = rng.integers(2**50, 2**62, shape)
        if mixed:
            big = np.where(rng.random(shape) < 0.7, rng.integers(0, 4, shape), 2**60)
        operands.append((values, big))
    with _proofs() as seen:
        values, counts = counting.count_network(inputs, output, operands)
    truth = _brute(inputs, output, operands, sizes)
    got_counts = np.asarray(counts, dtype=object).reshape(-1)
    got_values = np.asarray(values).reshape(-1)
    keys = list(itertools.product(*(range(sizes[x]) for x in output)))
    assert [int(c) for c in got_counts] == [truth[k][1] for k in keys]
    assert got_values.tolist() == [truth[k][0] for k in keys]
    [known] = seen
    assert known.lower is not None and (mixed or known.span > 0)  # big counts round: a second pass rebuilt them
    lower = np.asarray(known.lower, dtype=object).reshape(-1)
    assert all(lo <= truth[k][1] <= lo + known.span for lo, k in zip(lower, keys))
    assert known.top >= max(t[1] for t in truth.values())


def test_a_count_the_float_pass_pins_is_one_pass_and_int64():
    calls = []
    real = counting.contract_network

    def counted(*a, **kw):
        calls.append(kw["algebra"].moduli)
        return real(*a, **kw)

    # 70 spins in a chain (2^70 assignments, so the operands' bound passes int64 and the float64 pass runs),
    # ferromagnetic but for 3 free bonds: 2^4 ground states, which that pass counts exactly
    J = [0 if i in (10, 30, 50) else -1 for i in range(69)]
    with mock.patch.object(counting, "contract_network", counted):
        E0, count = nw.degeneracy(nw.SpinGlass(70, [(i, i + 1) for i in range(69)], J))
    assert (E0, count) == (-66.0, 16) and type(count) is int
    assert calls == [()]  # the float64 pass alone: no int64 pass, no prime
    # the operands allow 2^124 (a float64 pass runs); the optimum's count is 35, pinned by that pass: int64
    A, B = (np.array([0.0, -1.0]), np.array([5, 2**62])), (np.array([0.0, -1.0]), np.array([7, 2**62]))
    calls.clear()
    with mock.patch.object(counting, "contract_network", counted):
        values, counts = counting.einsum("i,j->", A, B)
    assert counts.dtype == np.int64 and int(counts) == 35 and float(values) == 0.0 and calls == [()]


def test_signed_counts_get_a_bound_alone_and_stay_exact():
    rng = np.random.default_rng(5)
    A = (np.zeros((3, 4), np.float32), rng.integers(-(2**62), 2**62, (3, 4)))
    B = (np.zeros((4, 5), np.float32), rng.integers(-(2**62), 2**62, (4, 5)))
    with _proofs() as seen:
        _, counts = counting.einsum("ij,jk->ik", A, B)
    exact = [[sum(int(A[1][i, j]) * int(B[1][j, k]) for j in range(4)) for k in range(5)] for i in range(3)]
    assert [[int(x) for x in row] for row in counts] == exact
    [known] = seen
    assert known.lower is None and known.top >= max(abs(x) for row in exact for x in row)


def test_passes_that_disagree_with_the_float_pass_on_the_values_are_refused():
    real = counting.contract_network

    def shifted(*a, **kw):
        values, *counts = real(*a, **kw)
        return (values if counts[0].dtype == np.float64 else values + 1, *counts)  # all but the float64 pass

    A = (np.zeros((3, 4), np.float32), np.full((3, 4), 2**40))
    B = (np.zeros((4, 5), np.float32), np.full((4, 5), 2**40))
    with mock.patch.object(counting, "contract_network", shifted), pytest.raises(ReconstructionError, match="float64"):
        counting.einsum("ij,jk->ik", A, B)


def test_the_interval_rebuild_picks_the_one_integer_in_range():
    count = 2**100 + 987654321
    lower, span = count - 2**40, 2**41
    moduli = _crt.primes_for(1, 0, span)
    assert math.prod(moduli) > span and len(moduli) == 2  # 62 bits, where (-2^101, 2^101] needs 4 primes
    x, M = 0, 1
    for p in moduli:
        x, M = _crt.combine(x, M, count % p, p), M * p
    assert _crt.in_interval(x, M, lower) == count


@pytest.mark.gpu
def test_the_gpu_counts_through_intervals():
    """On the device (CuPy): a 14 x 14 lattice's count pinned by the float64 pass alone, and a 14 x 14
    lattice with 5 free rows (2^70 times the rest: past int64) rebuilt from moduli past its interval's
    width, both the transfer matrix's."""
    pytest.importorskip("cupy")
    from ._spin_oracles import transfer_matrix

    sg = nw.square_lattice(14, seed=4)
    J = np.where((sg.edges < 5 * 14).any(axis=1), 0.0, sg.J)
    free = nw.SpinGlass(sg.n, sg.edges, J)
    for instance in (sg, free):
        with _proofs() as seen:
            got = nw.degeneracy(instance, module="cupy")
        assert got == transfer_matrix(instance, 14) and type(got[1]) is int
        [known] = seen
        assert known.lower is not None and (known.span == 0) == (instance is sg)
