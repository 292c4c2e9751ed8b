"""Geometry-seeded contraction orders: their cost at published scale, and exact answers through them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lazykern.tn import networks as nw
from lazykern.tn import orders
from lazykern.tn.einsum import contraction_plan

from ._spin_oracles import brute_force, transfer_matrix


def test_square_lattice_sweep_has_a_2_to_the_L_boundary():
    """32 x 32 (PRL 126 090506's largest lattice): the sweep keeps 2^32 entries (16 GiB in float32,
    fits an 80 GB GPU) and costs 10^13.04 multiply-adds (3 spins a step; 1 a step: 10^12.92 in three
    times the passes over the boundary), no search needed."""
    sg = nw.square_lattice(32)
    plan = nw.plan(sg, memory_limit=2**32)
    assert plan.largest == 2**32 and not plan.sliced
    assert math.log10(plan.flops) < 13.05
    one = contraction_plan(
        *sg.network()[:1], (), dict.fromkeys(range(sg.n), 2), optimize=orders.sweep_path(sg.network()[0], sg.order)
    )
    assert one.largest == 2**32 and math.log10(one.flops) < 12.93


@pytest.mark.parametrize("L", [4, 6, 9])
def test_every_group_size_gives_the_exact_answers(L):
    sg = nw.square_lattice(L, seed=L, field=0.2 if L == 6 else 0.0)
    E0, count = transfer_matrix(sg, L)
    labels, tensors = sg.network()
    sizes = dict.fromkeys(range(sg.n), 2)
    for group in (1, 2, 3):
        path = orders.sweep_path(labels, sg.order, group)
        plan = contraction_plan(labels, (), sizes, optimize=path)
        assert plan.largest <= 2 ** (L + group + 1)
        assert nw.ground_state_energy(sg, optimize=plan) == pytest.approx(E0, abs=1e-9)
        assert nw.degeneracy(sg, optimize=plan) == (pytest.approx(E0, abs=1e-9), count)
        E, spins = nw.ground_state(sg, optimize=plan, checkpoint=True)
        assert E == pytest.approx(E0, abs=1e-9) and sg.energy(spins) == pytest.approx(E0, abs=1e-9)


def test_a_sweep_over_memory_is_refined_and_sliced_by_cotengra():
    pytest.importorskip("cotengra")
    sg = nw.chimera(1, 2, 4, seed=5)
    E0, count, _ = brute_force(sg)
    plan = nw.plan(sg, memory_limit=8, max_time=0.5)
    assert plan.largest <= 8 and plan.sliced
    assert nw.ground_state_energy(sg, optimize=plan) == E0
    assert nw.degeneracy(sg, optimize=plan) == (E0, count)
    E, spins = nw.ground_state(sg, optimize=plan)
    assert E == E0 == sg.energy(spins)


def test_chimera_sweep_holds_one_chain_link():
    """512-qubit chimera: vertical spins of a row of cells, then its horizontal chains one at a time:
    2^33 entries and 2^41.8 multiply-adds (cell by cell: 2^36 and 2^45.3)."""
    sg = nw.chimera(8, 8, 4)
    plan = nw.plan(sg, memory_limit=2**33)
    assert plan.largest == 2**33 and not plan.sliced and math.log2(plan.flops) < 41.9


def test_chimera_and_lattices_know_their_order():
    assert nw.square_lattice(3).order == tuple(range(9))
    chip = nw.chimera(2, 3, 4)
    assert sorted(chip.order) == list(range(chip.n)) and chip.order != tuple(range(chip.n))  # across the short side
    assert nw.random_regular(10, 3).order is None


def test_sweep_arguments():
    with pytest.raises(ValueError, match="group"):
        orders.sweep_path([(0,)], [0], 0)
    assert orders.ssa_to_positions([(0, 1), (2, 3)], 3) == [(0, 1), (0, 1)]
    assert np.isfinite(
        contraction_plan([(0, 1), (1,)], (), {0: 2, 1: 2}, optimize=orders.sweep_path([(0, 1), (1,)], [1, 0])).flops
    )


def test_ssa_to_positions_matches_popping_a_live_list():
    """Random SSA paths (pairs and triples) against the definition: each step's positions in the live
    list before it pops them, the result appended last."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        count = int(rng.integers(1, 25))
        ids, next_id, ssa = list(range(count)), count, []
        while len(ids) > 1:
            step = tuple(int(i) for i in rng.choice(ids, size=min(len(ids), int(rng.integers(2, 4))), replace=False))
            ssa.append(step)
            ids = [i for i in ids if i not in step] + [next_id]
            next_id += 1
        live, want = list(range(count)), []
        for n, step in enumerate(ssa, start=count):
            want.append(tuple(sorted(live.index(i) for i in step)))
            live = [i for i in live if i not in step] + [n]
        assert orders.ssa_to_positions(ssa, count) == want


def _relabelled(sg: nw.SpinGlass, seed: int, positions: bool) -> nw.SpinGlass:
    """The same graph and couplings as a user's edge list: spins renumbered at random, no order."""
    perm = np.random.default_rng(seed).permutation(sg.n)
    pos = np.empty_like(sg.positions)
    pos[perm] = sg.positions
    h = np.empty_like(sg.h)
    h[perm] = sg.h  # spin i is now spin perm[i]
    return nw.SpinGlass(sg.n, perm[sg.edges], sg.J, h, pos if positions else None, sg.name)


@pytest.mark.parametrize("graph", [(nw.square_lattice, 16), (nw.square_lattice, 20), (nw.chimera, 3)])
def test_any_numbering_plans_within_twice_the_librarys_plan(graph):
    """Plan quality must not depend on the numbering: a relabelled copy, with or without positions,
    plans within 2x of the library's own instance (multiply-adds and largest intermediate)."""
    make, size = graph
    base = make(size)
    best = nw.plan(base, memory_limit=2**40)
    for seed, positions in [(1, True), (2, False), (3, False)]:
        plan = nw.plan(_relabelled(base, seed, positions), memory_limit=2**40)
        assert plan.flops <= 2 * best.flops and plan.largest <= 2 * best.largest, (seed, positions)


def test_the_graph_order_sweeps_a_lattice_along_its_anti_diagonals():
    """From distances alone a 20 x 20 lattice is swept with a 20-spin boundary at its widest, and
    along anti-diagonals: 5x fewer boundary entries summed than row by row."""
    sg = _relabelled(nw.square_lattice(20), 4, positions=False)
    order = orders.graph_order(sg.n, sg.edges)
    assert orders.boundary_sizes(sg.n, sg.edges, order).max() == 20
    rows = np.argsort(np.random.default_rng(4).permutation(sg.n))  # the relabelled row-major order
    assert orders.sweep_score(sg.n, sg.edges, order) < orders.sweep_score(sg.n, sg.edges, rows) - 2


def test_disconnected_parts_are_swept_one_after_another():
    # Two 8 x 8 lattices, spins interleaved (their numbering's sweep holds 16 open): each part is
    # swept whole, then the other, never more than one part's 8 (+1 in a step) open.
    one = nw.square_lattice(8)
    edges = np.concatenate([2 * one.edges, 2 * one.edges + 1])
    order = orders.graph_order(128, edges)
    assert sorted(order) == list(range(128))
    assert orders.boundary_sizes(128, edges, range(128)).max() == 16
    assert orders.boundary_sizes(128, edges, order).max() <= 9


def test_a_shuffled_lattice_gives_exact_answers_through_its_derived_order():
    sg = nw.square_lattice(6, seed=11, field=0.1)
    E0, count = transfer_matrix(sg, 6)
    copy = _relabelled(sg, 5, positions=False)
    assert nw.ground_state_energy(copy) == pytest.approx(E0, abs=1e-9)
    assert nw.degeneracy(copy) == (pytest.approx(E0, abs=1e-9), count)
    E, spins = nw.ground_state(copy)
    assert E == pytest.approx(E0, abs=1e-9) and copy.energy(spins) == pytest.approx(E0, abs=1e-9)


def _tighten_by_recount(adjacent, order, window):
    """tighten's definition, each candidate's closes and opens recounted at each step."""
    left = {v: len(adjacent[v]) for v in order}
    pending, done, out = list(order), set(), []
    while pending:
        keys = []
        for k, v in enumerate(pending[:window]):
            closes = sum(1 for u in adjacent[v] if u in done and left[u] == 1)
            opens = 1 if any(u not in done for u in adjacent[v]) else 0
            keys.append((opens - closes, k))
        v = pending.pop(min(keys)[1])
        done.add(v)
        out.append(v)
        for u in adjacent[v]:
            left[u] -= 1
    return out


def _part_orders_by_sorting(adjacent, part, anchors):
    """The coordinate sweeps' definition: Python's stable sort by tuples of anchor distances."""
    vertices = sorted(part)
    dists = [orders._distances(adjacent, a) for a in anchors]
    for i, di in enumerate(dists):
        for j, dj in enumerate(dists):
            if i != j:
                rest = [d for k, d in enumerate(dists) if k not in (i, j)]
                yield sorted(vertices, key=lambda v: (di[v] - dj[v], di[v] + dj[v], *(d[v] for d in rest)))
                yield sorted(vertices, key=lambda v: (di[v] + dj[v], di[v] - dj[v], *(d[v] for d in rest)))
                yield sorted(vertices, key=lambda v: (di[v], dj[v], *(d[v] for d in rest)))


def _graphs():
    rng = np.random.default_rng(5)
    lattices = (nw.square_lattice(5, seed=5), nw.square_lattice(12, seed=12), nw.chimera(3, 3, 4, seed=1))
    out = [(sg.n, sg.edges) for sg in lattices]
    for n in (7, 30, 90):
        for p in (0.05, 0.2):
            e = np.argwhere(np.triu(rng.random((n, n)) < p, 1))
            out.append((n, rng.permutation(n)[e].reshape(-1, 2)))
    doubled = np.concatenate([out[0][1], out[0][1][:9]])  # repeated edges count twice, as in the network
    return out + [(25, doubled)]


@pytest.mark.parametrize("index", range(10))
def test_tighten_and_the_coordinate_sweeps_equal_their_definitions(index):
    """The incremental tighten (closes and opens kept up to date) and the array sorts of the coordinate
    sweeps give exactly the orders of their definitions, ties included: random graphs, lattices, a
    chimera and repeated edges."""
    n, edges = _graphs()[index]
    adjacent = orders._adjacency(n, edges)
    rng = np.random.default_rng(index)
    for order in (list(range(n)), rng.permutation(n).tolist()):
        for window in (1, 4, 16):
            assert orders.tighten(adjacent, order, window) == _tighten_by_recount(adjacent, order, window)
    part = orders._distances(adjacent, 0)
    made = list(orders._part_orders(adjacent, part))
    if len(part) > 2:
        anchors = _anchors_by_definition(adjacent, part)
        assert made == list(_part_orders_by_sorting(adjacent, part, anchors))


def _anchors_by_definition(adjacent, part):
    vertices = sorted(part)
    u = max(part, key=lambda v: (part[v], -len(adjacent[v]), -v))
    anchors, dists = [u], [orders._distances(adjacent, u)]
    while len(anchors) < orders._ANCHORS:
        gap = {v: min(d[v] for d in dists) for v in vertices}
        far = max(vertices, key=lambda v: (gap[v], -len(adjacent[v]), -v))
        if gap[far] == 0:
            break
        anchors.append(far)
        dists.append(orders._distances(adjacent, far))
    return anchors
