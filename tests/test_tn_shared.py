"""The steps every pass of an exact count shares (lazykern/tn/_shared.py): run once, counts unchanged."""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
import pytest

from lazykern.tn import _backend, _contract, _crt, _shared, counting
from lazykern.tn import networks as nw

from ._spin_oracles import transfer_matrix
from .test_tropical_counting import _free_rows
from .test_tropical_einsum import device_route  # the GPU route on the host


def _counted_passes():
    """(patch, calls): counting.contract_network recorded with the moduli and path length of each pass."""
    calls = []
    real = counting.contract_network

    def counted(labels, output, operands, **kw):
        calls.append((kw["algebra"].moduli, len(kw["optimize"].path), len(operands)))
        return real(labels, output, operands, **kw)

    return mock.patch.object(counting, "contract_network", counted), calls


@pytest.mark.parametrize("small", [4, 16, 64, 1 << 12])
def test_prime_passes_run_the_shared_steps_once_and_count_exactly(small):
    """A count past 2^63 on the GPU route: every prime pass runs the shorter plan (the shared steps' results
    as leaves), and the count is the transfer method's big integer, whatever the size of a shared step."""
    sg = _free_rows(10, 7, seed=2)
    E0, count = transfer_matrix(sg, 10)
    patch, calls = _counted_passes()
    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
        mock.patch.object(counting, "residues_per_pass", lambda net, plan: 2),
        mock.patch.object(_shared, "SMALL", small),
        patch,
    ):
        assert nw.degeneracy(sg, memory_limit=2**28) == (E0, count)
    full = len(sg.labels()) - 1  # one step per tensor after the first
    assert calls and all(moduli for moduli, _, _ in calls)
    assert all(steps < full for _, steps, _ in calls)  # shorter in every pass
    assert len({(steps, leaves) for _, steps, leaves in calls}) == 1  # one shorter plan, made once


def test_shared_steps_match_the_full_plan_on_random_networks():
    """Counts past int64 of random +-1 networks on the GPU route: the passes with shared steps give the
    very counts of the full plan run in every pass (the sharing switched off)."""
    rng = np.random.default_rng(3)
    for trial in range(4):
        sg = _free_rows(10, 6, seed=int(rng.integers(1 << 30)))  # 60 free spins, and ties below them
        J = np.where(rng.random(len(sg.J)) < 0.3, 0.0, sg.J)
        sg = nw.SpinGlass(sg.n, sg.edges, J)
        E0, count = transfer_matrix(sg, 10)
        assert count >= 2**63, trial
        with (
            device_route(),
            mock.patch.object(_contract, "STRIDED_MIN", 0),
            mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
            mock.patch.object(_shared, "SMALL", 32),
        ):
            shared = nw.degeneracy(sg, memory_limit=2**28)
            with mock.patch.object(counting, "_share", lambda net, plan, inputs, operands: (inputs, operands, plan)):
                full = nw.degeneracy(sg, memory_limit=2**28)
        assert shared == full == (E0, count), trial


def test_a_step_whose_counts_may_pass_int64_is_not_shared():
    """The int64 counts of shared steps are exact only below 2^63: a step whose bound (the operands' largest
    counts times the sizes it sums out) reaches it runs in every pass instead, as do the steps that read it."""
    labels = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f")]
    sizes = dict.fromkeys("abcde", 2) | {"f": 16}
    path = [(0, 1), (0, 1), (1, 2), (0, 1)]  # ac; ce; (ac)(ce) -> ae; (ef)(ae) -> af, of 32 entries
    small = _shared.split(labels, ("a", "f"), sizes, path, [1] * 5, small=8)
    assert small is not None and small.shared == [True, True, True, False]
    assert small.path == ((0, 1),) and small.sources == [("leaf", 4), ("step", 2)]
    big = _shared.split(labels, ("a", "f"), sizes, path, [1, 1, 2**62, 1, 1], small=8)  # d summed: 2^63
    assert big is not None and big.shared == [True, False, False, False]
    assert big.path == ((0, 1), (0, 2), (0, 1))
    assert big.sources == [("leaf", 2), ("leaf", 3), ("step", 0), ("leaf", 4)]
    assert _shared.split(labels, ("a", "f"), sizes, path, [1] * 5, small=1 << 12) is None  # all shared: no gain
    assert _shared.split(labels, ("a", "f"), sizes, path, [1] * 5, small=2) is None  # none shared


def test_shorter_path_reads_the_same_terms_as_the_plan():
    """The shorter plan's every step reads the terms the plan's step reads (leaves, shared results, or its
    own earlier results), on sweeps of random lattices."""
    rng = np.random.default_rng(11)
    for _ in range(3):
        sg = nw.square_lattice(7, seed=int(rng.integers(1 << 30)))
        labels = sg.labels()
        sizes = dict.fromkeys(range(sg.n), 2)
        plan, _ = nw._sweep(sg, labels, sizes, nw._cost.rates_for(False, 4), 4)
        cut = _shared.split(labels, (), sizes, plan.path, [1] * len(labels), small=64)
        assert cut is not None
        live = [("leaf", i) for i in range(len(labels))]
        reads = []
        for n, step in enumerate(plan.path):
            picked = [live[i] for i in step]
            for i in sorted(step, reverse=True):
                live.pop(i)
            live.append(("step", n))
            if not cut.shared[n]:
                reads.append((n, picked))
        now = list(cut.sources)
        for (n, picked), step in zip(reads, cut.path, strict=True):
            assert [now[i] for i in step] == picked
            for i in sorted(step, reverse=True):
                now.pop(i)
            now.append(("step", n))
        assert now == [("step", len(plan.path) - 1)]


def test_shared_steps_keep_the_crt_primes_in_order():
    """The passes after the shared steps still take the primes in order, two a pass, to the stopping rule."""
    sg = _free_rows(10, 7, seed=2)
    patch, calls = _counted_passes()
    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
        mock.patch.object(counting, "residues_per_pass", lambda net, plan: 2),
        patch,
    ):
        nw.degeneracy(sg, memory_limit=2**28)
    used = [q for moduli, _, _ in calls for q in moduli]
    assert used == list(itertools.islice(_crt.primes(), len(used)))
