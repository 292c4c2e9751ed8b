"""The backtracking's recomputation priced from the plan (tn/_recompute.py), and checkpoint=None's
split of the free memory that follows from it, exact against the transfer matrix."""

from __future__ import annotations

import importlib
import logging
import math

import numpy as np
import pytest

from lazykern.errors import DeviceMemoryError
from lazykern.tn import _cost, _recompute
from lazykern.tn import networks as nw
from lazykern.tn._backend import Backend
from lazykern.tn.contraction import argmax
from lazykern.tn.contraction.network import Network

from ._spin_oracles import transfer_matrix

einsum_module = importlib.import_module("lazykern.tn.einsum")  # lazykern.tn.einsum is the function


def _priced(sg: nw.SpinGlass, keep: float, save: frozenset[int], budget: float) -> tuple[int, int]:
    plan = nw.plan(sg, memory_limit=2**20)
    return _recompute.recomputed(sg.labels(), dict.fromkeys(range(sg.n), 2), plan.path, keep, save, budget, 8)


def test_kept_choices_checkpoints_and_a_segment_budget_each_cut_the_recomputation():
    sg = nw.square_lattice(10, seed=5)
    plan = nw.plan(sg, memory_limit=2**20)
    assert _priced(sg, math.inf, frozenset(), 0) == (0, 0)  # every choice kept: nothing redone
    nothing = _priced(sg, -1, frozenset(), 0)  # one step per segment: the quadratic walk
    bounded = _priced(sg, -1, frozenset(), 2**12)
    unbounded = _priced(sg, -1, frozenset(), math.inf)
    assert nothing[0] > bounded[0] > unbounded[0] == 1
    assert nothing[1] > 3 * bounded[1] and unbounded[1] == plan.flops  # one segment: the run once more
    halfway = frozenset({len(plan.path) // 2})
    assert _priced(sg, -1, halfway, 2**12)[1] < bounded[1]


def test_checkpoint_none_splits_the_free_memory_by_the_predicted_recomputation(monkeypatch):
    sg = nw.square_lattice(11, seed=6, J="gaussian", field=0.2)
    E0, _ = transfer_matrix(sg, 11)
    labels, tensors = sg.network()
    plan = nw.plan(sg, memory_limit=2**20)
    net = einsum_module.build_network(labels, (), tensors, "maxplus", einsum_module.Algebra)
    free = int(net.peak(plan, -1) * _cost.POOL_MARGIN * 1.3)  # not every choice fits: some are redone
    monkeypatch.setattr(Backend, "free_bytes", lambda self: free)
    keep, save, budget = net.backtracking(plan, free)
    assert keep < max(s.result for s in einsum_module.plan_steps(labels, (), net.sizes, plan.path, {}))
    assert (net.argmax_peak(plan, keep)(save) + budget) * _cost.POOL_MARGIN <= free * 1.0001
    most = net.keep_that_fits(plan)
    alone = net.checkpoints(plan, most, free)
    ours = _recompute.recomputed(labels, net.sizes, plan.path, keep, save, budget, 8)[1]
    spare = net.segment_bytes(plan, most, alone, free)
    assert ours <= _recompute.recomputed(labels, net.sizes, plan.path, most, alone, spare, 8)[1]
    E, spins = nw.ground_state(sg, optimize=plan)
    assert E == pytest.approx(E0, abs=1e-9) and sg.energy(spins) == pytest.approx(E0, abs=1e-9)
    assert np.all(np.abs(spins) == 1)


@pytest.mark.slow
def test_a_32x32_configuration_is_planned_to_fit_an_h100_and_redo_about_one_contraction(monkeypatch):
    """Issue 44's row priced on the CPU (no contraction runs): the +-J 32 x 32 lattice from a shuffled
    edge list, float32, 79 GB free as on the H100. The plan (2^32 entries, 10^12 multiply-adds) leaves
    no room for a 16 GiB checkpoint beside the run and anything else; the searched split keeps small
    choices, checkpoints of 2 to 8 GiB on both sides of the largest boundaries and the sweep's small
    tensors, and recomputes 1.3 contractions in 633 steps (the even shares before it: 1.8 contractions
    in 8928 steps, at 0.34 ms a step the larger part of the time)."""
    base = nw.square_lattice(32, seed=32)
    perm = np.random.default_rng(7).permutation(base.n)
    h = np.empty_like(base.h)
    h[perm] = base.h
    sg = nw.SpinGlass(base.n, perm[base.edges], base.J, h)
    free = 79 * 10**9
    monkeypatch.setattr(Backend, "free_bytes", lambda self: free)
    monkeypatch.setattr(_cost, "rates_for", lambda on_host, itemsize: _cost.H100_F32)  # priced as on the H100
    labels, tensors = sg.network(dtype=np.float32)
    plan = nw.plan(sg, dtype=np.float32, memory_limit=2**32)  # the H100's plan: the sweep, unsliced
    net = einsum_module.build_network(labels, (), tensors, "maxplus", einsum_module.Algebra)
    keep, save, budget = net.backtracking(plan, free)
    segments, redone, runs = net.priced(plan)[1].redone(keep, save, budget, net.entry_bytes)
    assert (segments, redone) == _recompute.recomputed(
        labels, net.sizes, plan.path, keep, save, budget, net.entry_bytes
    )
    peak = net.argmax_peak(plan, keep)(save)
    figures = (plan.largest, plan.flops, keep, len(save), peak, budget, segments, redone, runs)
    assert plan.nslices == 1 and plan.largest <= 2**32 and (peak + budget) * _cost.POOL_MARGIN <= free, figures
    # 1.27 contractions in 633 steps when written
    assert redone <= 1.5 * plan.flops and runs <= len(plan.path) // 3, figures


def _walked(tree: _recompute.Tree, keep: float, save: frozenset[int], budget: float, entry_bytes: int) -> tuple:
    """The backtracking's walk step by step (as :func:`lazykern.tn.contraction.argmax._backtrack` runs it): every step
    of a segment visited, the labels chosen so far fixed; the oracle of Tree.redone's grouped walk."""
    steps, entries, result = tree.steps, tree.entries, tree.result
    chosen: set = set()
    found: dict[int, int] = {}
    segments = flops = runs = 0
    walk = [len(steps) - 1]
    while walk:
        n = walk.pop()
        if result[n] > keep and n not in found:
            segments += 1
            costs: dict[int, int] = {}
            below = [n]
            while below:
                m = below.pop()
                labels, gone, children = steps[m]
                flops += entries((labels | gone) - chosen)
                runs += 1
                if result[m] > keep:
                    costs[m] = entries(labels - chosen) * (4 + entry_bytes)
                below.extend(c for c in children if c not in save)
            spent = sum(found.values())
            found[n] = costs.pop(n)
            for m, cost in sorted(costs.items(), key=lambda item: item[1]):
                if spent + cost > budget:
                    break
                found[m] = cost
                spent += cost
        found.pop(n, None)
        chosen |= steps[n][1]
        walk.extend(steps[n][2])
    return segments, flops, runs


@pytest.mark.parametrize("L, seed", [(7, 1), (10, 5), (12, 3)])
def test_the_grouped_walk_prices_as_the_step_by_step_walk(L, seed):
    sg = nw.square_lattice(L, seed=seed)
    plan = nw.plan(sg, memory_limit=2**20)
    tree = _recompute.Tree(sg.labels(), dict.fromkeys(range(sg.n), 2), plan.path)
    rng = np.random.default_rng(L)
    for _ in range(40):
        keep = float(rng.choice([-1, 4, 64, 2**8, 2**12]))
        budget = float(rng.choice([0, 2**8, 2**12, 2**16, math.inf]))
        save = frozenset(int(n) for n in rng.choice(len(plan.path) - 1, int(rng.choice([0, 1, 3, 10])), replace=False))
        assert tree.redone(keep, save, budget, 8) == _walked(tree, keep, save, budget, 8), (keep, budget, save)
        sides = tree.sides(keep)
        assert tree.redone(keep, save | sides, budget, 8) == _walked(tree, keep, save | sides, budget, 8)


def test_the_grouped_walk_prices_labels_of_any_size_as_the_step_by_step_walk():
    rng = np.random.default_rng(11)
    sizes = {i: int(rng.choice([1, 2, 3, 4])) for i in range(14)}
    inputs = [tuple(int(x) for x in rng.choice(14, 3, replace=False)) for _ in range(12)]
    plan = einsum_module.contraction_plan(inputs, (), sizes, optimize="greedy")
    tree = _recompute.Tree(inputs, sizes, plan.path)
    for keep in (-1, 8, 64):
        for budget in (0, 2**8, math.inf):
            for save in (frozenset(), frozenset({0, 3}), tree.sides(keep)):
                assert tree.redone(keep, save, budget, 8) == _walked(tree, keep, save, budget, 8)


def test_the_sides_leave_a_segment_the_steps_without_a_kept_choice():
    """Kept as checkpoints, the steps right under a large one with no large one below spare every
    segment the small steps beside the boundary: it runs about one step per large step it redoes."""
    sg = nw.square_lattice(10, seed=5)
    plan = nw.plan(sg, memory_limit=2**20)
    tree = _recompute.Tree(sg.labels(), dict.fromkeys(range(sg.n), 2), plan.path)
    keep = 2**6
    sides = tree.sides(keep)
    large = [n for n, r in enumerate(tree.result) if r > keep]
    parents = {c: n for n, (_, _, children) in enumerate(tree.steps) for c in children}
    assert sides and all(tree.result[parents[n]] > keep >= tree.result[n] for n in sides)
    for n in sides:  # no large step under a side
        below = list(tree.steps[n][2])
        while below:
            m = below.pop()
            assert tree.result[m] <= keep
            below.extend(tree.steps[m][2])
    segments, flops, runs = tree.redone(keep, frozenset(), math.inf, 8)
    spared = tree.redone(keep, sides, math.inf, 8)
    assert spared[0] == segments and spared[1] < flops and spared[2] == len(large) < runs / 3


def test_searched_checkpoints_redo_less_than_even_shares_within_the_same_memory(monkeypatch):
    sg = nw.square_lattice(14, seed=2)
    labels, tensors = sg.network(dtype=np.float32)
    plan = nw.plan(sg, memory_limit=2**20)
    net = einsum_module.build_network(labels, (), tensors, "maxplus", einsum_module.Algebra)
    free = int(net.peak(plan, -1) * _cost.POOL_MARGIN * 1.25)
    monkeypatch.setattr(Backend, "free_bytes", lambda self: free)
    tree = net.priced(plan)[1]
    keep = 2**6
    room = free / _cost.POOL_MARGIN
    peak = net.argmax_peak(plan, keep)
    searched = net.checkpoints(plan, keep, free)
    even = net.checkpoints(plan, keep, None)  # the host's rule: even shares of the run's time
    while even and peak(even) > room:
        even = frozenset(sorted(even)[::2])
    assert peak(searched) <= room
    seconds = net.redo_seconds(plan)

    def cost(save: frozenset[int]) -> float:
        _, flops, runs = tree.redone(keep, save, room - peak(save), net.entry_bytes)
        return seconds(flops, runs)

    assert cost(searched) < cost(even)
    E, spins = nw.ground_state(sg, optimize=plan, module=np)
    assert sg.energy(spins) == E


def test_a_split_the_device_refuses_is_planned_once_more_with_a_largest_intermediate_left_aside(monkeypatch, caplog):
    """The split's peak is predicted; the pool may hold more. A DeviceMemoryError inside the default split's
    run is answered once: planned again with the plan's largest intermediate left aside, with a warning."""
    sg = nw.square_lattice(10, seed=4)
    E0, _ = transfer_matrix(sg, 10)
    labels, tensors = sg.network()
    plan = nw.plan(sg, memory_limit=2**20)
    net = einsum_module.build_network(labels, (), tensors, "maxplus", einsum_module.Algebra)
    free = int(net.peak(plan, -1) * _cost.POOL_MARGIN * 3)
    monkeypatch.setattr(Backend, "free_bytes", lambda self: free)
    planned, runs = [], []
    split, run = Network.backtracking, argmax._argmax_run

    def backtracking(self, plan, room):
        planned.append(room)
        return split(self, plan, room)

    def refused_once(*args, **kwargs):
        runs.append(len(runs))
        if len(runs) == 1:
            raise DeviceMemoryError("the device refused an allocation (a test's)")
        return run(*args, **kwargs)

    monkeypatch.setattr(Network, "backtracking", backtracking)
    monkeypatch.setattr(argmax, "_argmax_run", refused_once)
    with caplog.at_level(logging.WARNING, logger="lazykern"):
        E, spins = nw.ground_state(sg, optimize=plan)
    assert planned == [free, free - plan.largest * net.entry_bytes] and runs == [0, 1]
    assert "refused the split" in caplog.text
    assert E == pytest.approx(E0, abs=1e-9) and sg.energy(spins) == pytest.approx(E0, abs=1e-9)
    monkeypatch.setattr(argmax, "_argmax_run", lambda *a, **k: (_ for _ in ()).throw(DeviceMemoryError("no")))
    with pytest.raises(DeviceMemoryError):  # refused twice: the error, not a third try
        nw.ground_state(sg, optimize=plan)


@pytest.mark.gpu
@pytest.mark.parametrize("room", [1.3, 1.8])
def test_on_a_gpu_segments_stay_under_the_predicted_peak_and_reach_the_ground_state(monkeypatch, room):
    """A 20 x 20 lattice on CuPy with the free memory reported as 1.3 or 1.8 times the run's own peak: the
    defaults keep some choices, checkpoints (the searched ones and the sweep's small tensors) and
    segments; the pool's high-water mark stays under the predicted peak plus the segment budget, and
    the configuration's energy is the transfer matrix's."""
    cupy = pytest.importorskip("cupy")
    sg = nw.square_lattice(20, seed=20)
    E0, _ = transfer_matrix(sg, 20)
    labels, tensors = sg.network(dtype=np.float32, module=cupy)
    plan = nw.plan(sg, module=cupy, dtype=np.float32)
    net = einsum_module.build_network(labels, (), tensors, "maxplus", einsum_module.Algebra)
    free = int(net.peak(plan, -1) * _cost.POOL_MARGIN * room)
    monkeypatch.setattr(Backend, "free_bytes", lambda self: free)
    keep, save, budget = net.backtracking(plan, free)
    assert net.priced(plan)[1].sides(keep) <= save
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    base = pool.used_bytes()
    peak = [base]

    def malloc(size: int):
        mem = pool.malloc(size)
        peak[0] = max(peak[0], pool.used_bytes())
        return mem

    cupy.cuda.set_allocator(malloc)
    try:
        E, spins = nw.ground_state(sg, module=cupy, dtype=np.float32, optimize=plan)
    finally:
        cupy.cuda.set_allocator(pool.malloc)
    assert E == E0 == sg.energy(spins)
    assert peak[0] - base <= net.argmax_peak(plan, keep)(save) + budget, (keep, len(save), budget)
