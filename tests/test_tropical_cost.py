"""A plan's predicted seconds and peak bytes (lazykern.tn._cost), and the memory rules built on them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lazykern.errors import DeviceMemoryError
from lazykern.tn import _cost
from lazykern.tn import networks as nw
from lazykern.tn._backend import Backend
from lazykern.tn.contraction import executor
from lazykern.tn.einsum import (
    Algebra,
    ContractionPlan,
    build_network,
    contract_network,
    contraction_plan,
    network_argmax,
    plan_steps,
)

from ._spin_oracles import transfer_matrix


def _steps(sg: nw.SpinGlass, plan: ContractionPlan) -> list[_cost.Step]:
    return plan_steps(sg.labels(), (), dict.fromkeys(range(sg.n), 2), plan.path, plan.sliced)


def _leaves(sg: nw.SpinGlass) -> int:
    return 4 * len(sg.edges) + 2 * sg.n


def test_peak_counts_live_intermediates_copies_result_and_kept_argmax():
    u = 128  # entries of one 512-byte pool unit in float32
    # Two leaves of 8u entries -> a result of 4u; then that result with a third leaf of 2u -> 2u.
    steps = [_cost.Step(32 * u, (8 * u, 8 * u), 4 * u, False), _cost.Step(8 * u, (4 * u, 2 * u), 2 * u, False)]
    # Step 1: leaves 18u (+ one unit of rounding per leaf array) + copies 16u + result 4u.
    assert _cost.peak_bytes(steps, leaves=18 * u, entry_bytes=4, keep=0) == (38 * u) * 4 + 1024
    # Keeping every argmax adds int32 per result entry and the value in its buffer, held to the end.
    assert _cost.peak_bytes(steps, leaves=18 * u, entry_bytes=4, keep=math.inf) == (38 * u) * 4 + 1024 + (4 * u) * 8
    assert _cost.peak_bytes(steps, leaves=18 * u, entry_bytes=12, keep=0) == (38 * u) * 12 + 1024  # value + count
    # A sliced plan's cached operand stays: 4u pinned after step 2 changes nothing before it.
    later = _cost.Step(1, (2 * u,), 40 * u, True)
    free = _cost.peak_bytes([*steps, later], leaves=18 * u, entry_bytes=4, keep=0)
    held = _cost.peak_bytes([steps[0], steps[1]._replace(pinned=4 * u), later], leaves=18 * u, entry_bytes=4, keep=0)
    assert held - free == 4 * u * 4
    # A checkpoint (the backtracking keeps step 1's values) stays alive after its use, to the end.
    saved = _cost.peak_bytes([*steps, later], leaves=18 * u, entry_bytes=4, keep=0, saved={0})
    assert saved - free == 4 * u * 4


def test_a_step_costs_its_bound_resource_and_slices_repeat_only_what_depends_on_them():
    rates = _cost.Rates(macs=1e12, bytes=1e12, step=0.0)
    compute = _cost.Step(10**12, (1, 1), 1, True)
    memory = _cost.Step(1, (10**11, 0), 10**11, False)
    assert _cost.step_seconds(compute, 4, rates) == pytest.approx(1.0)
    assert _cost.step_seconds(memory, 4, rates) == pytest.approx(0.8)
    assert _cost.seconds([compute, memory], 3, 4, rates) == pytest.approx(3.8)


def test_predicted_time_prefers_the_cheaper_sweep_of_a_lattice():
    """The order from the graph sweeps a 32 x 32 lattice along its anti-diagonals: the same 2^32
    boundary at its widest, 8x fewer multiply-adds than row by row, so less predicted time."""
    sg = nw.square_lattice(32)
    plan = nw.plan(sg, memory_limit=2**32, dtype=np.float32, module=np)
    assert plan.largest == 2**32 and math.log10(plan.flops) < 12.2


def _device(monkeypatch, free: int) -> None:
    """The NumPy backend reporting ``free`` bytes as a GPU does: every memory rule then applies."""
    monkeypatch.setattr(Backend, "free_bytes", lambda self: free)


def test_a_contraction_over_free_memory_is_refused_with_its_figures(monkeypatch):
    sg = nw.square_lattice(6, seed=2)
    labels, tensors = sg.network()
    _device(monkeypatch, 2000)
    with pytest.raises(DeviceMemoryError, match=r"needs .* GiB .* at its peak .* free"):
        contract_network(labels, (), tensors, optimize="greedy")


def test_the_peak_with_checkpoints_is_the_step_by_step_one_and_one_bare_profile_prices_every_keep():
    sg = nw.square_lattice(9, seed=2)
    plan = nw.plan(sg, memory_limit=2**20)
    steps = _steps(sg, plan)
    bare = _cost.peak_profile(steps, _leaves(sg), 4, -1)
    rng = np.random.default_rng(0)
    for keep in (-1, 8, 2**10, math.inf):
        profile, results = _cost.peak_profile(steps, _leaves(sg), 4, keep)
        ours = _cost.ArgmaxPeak(steps, _leaves(sg), 4, keep, bare=bare)
        assert ours.profile == profile and ours.results == results
        for _ in range(10):
            saved = {int(n) for n in rng.choice(len(steps), int(rng.integers(0, 6)), replace=False)}
            extra = peak = 0
            for n, bytes_then in enumerate(profile):  # each checkpoint alive from the step after its own
                peak = max(peak, bytes_then + extra)
                extra += results[n] if n in saved else 0
            assert _cost.with_saved(profile, results, saved) == peak
            assert ours(saved) == _cost.ArgmaxPeak(steps, _leaves(sg), 4, keep)(saved)


def test_the_default_plan_is_sliced_until_its_peak_fits(monkeypatch):
    sg = nw.square_lattice(12, seed=4)
    E0, _ = transfer_matrix(sg, 12)
    entry = np.dtype(sg.resolve(np, None, warn=False)[1]).itemsize  # the default dtype follows the couplings
    unsliced = nw.plan(sg, memory_limit=2**20)
    need = _cost.peak_bytes(_steps(sg, unsliced), _leaves(sg), entry, 0)
    free = int(need * _cost.POOL_MARGIN * 0.75)
    _device(monkeypatch, free)
    fitted = nw.plan(sg)
    uncached = [s._replace(pinned=0) for s in _steps(sg, fitted)]  # the run drops the slices' cache where it must
    assert fitted.sliced and _cost.peak_bytes(uncached, _leaves(sg), entry, 0) * _cost.POOL_MARGIN <= free
    assert nw.ground_state_energy(sg) == pytest.approx(E0)


def test_argmax_keeps_the_choices_that_fit_and_recomputes_the_rest(monkeypatch):
    sg = nw.square_lattice(6, seed=9, field=0.3)
    E0, _ = transfer_matrix(sg, 6)
    labels, tensors = sg.network()
    plan = nw.plan(sg, memory_limit=2**20)
    steps = _steps(sg, plan)
    everything = _cost.peak_bytes(steps, _leaves(sg), 8, math.inf)
    _device(monkeypatch, int(everything * _cost.POOL_MARGIN) - 1)
    net = build_network(labels, (), tensors, "maxplus", Algebra)
    keep = net.keep_that_fits(plan)
    assert 0 < keep < max(s.result for s in steps)
    best, assignment = network_argmax(labels, (), tensors, optimize=plan)
    spins = np.array([1 - 2 * assignment[i] for i in range(sg.n)])
    assert -best == pytest.approx(E0) and sg.energy(spins) == pytest.approx(E0)


def test_memory_limit_holds_for_every_strategy_and_costly_slicing_says_so():
    sg = nw.square_lattice(8, seed=1)
    labels = sg.labels()
    sizes = dict.fromkeys(range(sg.n), 2)
    for optimize in ("greedy", "auto"):
        plan = contraction_plan(labels, (), sizes, optimize=optimize, memory_limit=2**5)
        assert plan.largest <= 2**5
    with pytest.warns(UserWarning, match="times the"):
        contraction_plan(labels, (), sizes, optimize=list(nw.plan(sg).path), memory_limit=2**3)


@pytest.mark.gpu
def test_measured_peak_is_under_the_predicted_one():
    cupy = pytest.importorskip("cupy")
    sg = nw.square_lattice(22, seed=3)
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    base = pool.used_bytes()
    peak = [base]

    def malloc(size: int):  # the pool's own allocator, recording its high-water mark of bytes in use
        mem = pool.malloc(size)
        peak[0] = max(peak[0], pool.used_bytes())
        return mem

    plan = nw.plan(sg, module=cupy, dtype=np.float32)
    cupy.cuda.set_allocator(malloc)
    try:
        E = nw.ground_state_energy(sg, module=cupy, dtype=np.float32, optimize=plan)
        peak, kept = [base], peak  # the energy's peak in kept; now the configuration's, every argmax kept
        E2, spins = nw.ground_state(sg, module=cupy, dtype=np.float32, optimize=plan, checkpoint=False)
    finally:
        cupy.cuda.set_allocator(pool.malloc)
    steps = _steps(sg, plan)
    assert kept[0] - base <= _cost.peak_bytes(steps, _leaves(sg), 4, 0)
    assert peak[0] - base <= _cost.peak_bytes(steps, _leaves(sg), 4, math.inf)
    assert E == E2 == sg.energy(spins)


def test_a_long_contraction_logs_its_progress(monkeypatch, caplog):
    """Progress goes to the lazykern logger at INFO (slices, steps, time left), never to stdout."""
    import logging

    monkeypatch.setattr(executor, "PROGRESS_EVERY", 0.0)  # every step counts as long here
    sg = nw.square_lattice(4, seed=1)
    labels, tensors = sg.network()
    with caplog.at_level(logging.INFO, logger="lazykern"):
        contract_network(labels, (), tensors, optimize=list(nw.plan(sg).path), slices=[5])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("contraction: slice")]
    assert lines and "slice 2 of 2" in lines[-1] and "s left" in lines[-1]


def test_latency_adds_the_public_paths_per_step_overhead_and_the_copies():
    steps = [_cost.Step(flops=8, operands=(4, 4), result=4, depends=True)] * 10
    bare = _cost.seconds(steps, 3, 4, _cost.H100_F32)
    assert _cost.latency(steps, 3, 4, _cost.H100_F32) == pytest.approx(bare + 30 * _cost.H100_F32.overhead)
    moved = _cost.latency(steps, 3, 4, _cost.H100_F32, copies=2, nbytes=10**6)
    copies = 2 * _cost.COPY_SECONDS + 1e6 / _cost.PCIE_BYTES
    assert moved - _cost.latency(steps, 3, 4, _cost.H100_F32) == pytest.approx(copies)
    # The host's step figure is measured on its public path already.
    assert _cost.latency(steps, 1, 4, _cost.HOST) == _cost.seconds(steps, 1, 4, _cost.HOST)
