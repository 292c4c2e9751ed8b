"""The boundary sweep a spin glass is contracted along: its vertex order and grouping, kept per graph for
the process and, for large networks, in the lazykern store.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from .. import _cost, _plan_store, orders
from ..einsum import ContractionPlan, plan_steps
from .instance import SpinGlass


def boundary_sweep(
    sg: SpinGlass, labels: list[tuple[int, ...]], sizes: dict[int, int], rates: _cost.Rates, itemsize: int
) -> tuple[ContractionPlan, list[_cost.Step]]:
    """The boundary sweep along :func:`lazykern.tn.orders.graph_order` absorbing 1 to 3 spins a
    step, whichever :mod:`.._cost` predicts quickest on the device: 3 spins a step costs a third more
    multiply-adds on a square lattice but passes over the boundary a third as often as 1 (and K, N <= 8
    keeps tropical.bmm's row kernel). Returned with its steps as :mod:`.._cost` prices them. Kept per
    graph for the process (a script solving many couplings of one lattice sweeps it once), and from
    SWEEP_STORED_FROM tensors in the lazykern store (the next process replays it, costs checked)."""
    positions = getattr(sg, "positions", None)
    where = None if positions is None else np.asarray(positions).tobytes()
    key: tuple[Any, ...] = (sg.n, sg.edges.tobytes(), sg.order, where, rates, itemsize)
    found = kept_sweeps.get(key)
    if found is not None:
        return found
    if len(kept_sweeps) >= _SWEEPS_KEPT:
        kept_sweeps.clear()
    store = None
    if len(labels) >= SWEEP_STORED_FROM:  # its search takes a tenth of a second or more: kept in the store
        digest = hashlib.sha256(repr((where, sg.order, rates, itemsize, SWEEP_FORMAT)).encode()).hexdigest()
        store = _plan_store.key(labels, (), sizes, 0, None, rank=f"sweep:{digest}")
        kept: list[list[_cost.Step]] = []

        def costs(path: list[tuple[int, ...]], sliced: list[Any]) -> tuple[int, int]:
            kept.append(plan_steps(labels, (), sizes, path, {}))
            return max((s.result for s in kept[-1]), default=1), sum(s.flops for s in kept[-1])

        stored = _plan_store.load(store, labels, costs)
        if stored is not None and not stored[1]:  # replayed by load: kept[-1] are its steps
            largest, flops = max((s.result for s in kept[-1]), default=1), sum(s.flops for s in kept[-1])
            kept_sweeps[key] = ContractionPlan(tuple(stored[0]), {}, largest, flops), kept[-1]
            return kept_sweeps[key]
    order = vertex_order(sg)
    best = None
    for group in (1, 2, 3):
        path = orders.sweep_path(labels, order, group)
        steps = plan_steps(labels, (), sizes, path, {})
        one = 2 ** len(labels[0]) if labels else 1  # a network of one tensor (one spin, no coupling) has no step
        largest = max((s.result for s in steps), default=one)
        plan = ContractionPlan(tuple(path), {}, largest, sum(s.flops for s in steps))
        score = _cost.seconds(steps, 1, itemsize, rates)
        if best is None or score < best[0]:
            best = (score, plan, steps)
        if score - len(steps) * rates.step < _WORK_NEGLIGIBLE * score:
            # Every grouping has as many steps (one per tensor), so grouping saves at most the work
            # beside their fixed cost: on a tiny network nothing worth the 2 ms each grouping takes.
            break
    if store is not None:
        _plan_store.save(store, labels, best[1].path, [], (best[1].largest, best[1].flops))
    kept_sweeps[key] = best[1], best[2]
    return kept_sweeps[key]


def arena_sweep(
    sg: SpinGlass,
    labels: list[tuple[int, ...]],
    sizes: dict[int, int],
    rates: _cost.Rates,
    itemsize: int,
    leaves: int,
    free: int,
) -> ContractionPlan | None:
    """The quickest (by :mod:`.._cost`) unsliced sweep (1 to 3 spins a step) whose run with its
    boundary in one buffer (:func:`.._cost.arena_peak`) fits ``free`` bytes with the pool's margin; None
    when none does. The groupings differ here: a sweep of 3 spins a step has steps the bit-addressed
    kernel cannot take (more than 8 batch spins), which hold two boundaries (chimera 8 x 8 x 4 from an
    edge list: 2 spins a step fits an 80 GB GPU, 3 do not, 1 grows a 2^35 boundary)."""
    order = vertex_order(sg)
    best = None
    for group in (1, 2, 3):
        path = orders.sweep_path(labels, order, group)
        steps = plan_steps(labels, (), sizes, path, {})
        largest = max((s.result for s in steps), default=1)
        if _cost.arena_peak(steps, leaves, itemsize, largest) * _cost.POOL_MARGIN > free:
            continue
        score = _cost.seconds(steps, 1, itemsize, rates)
        if best is None or score < best[0]:
            best = (score, ContractionPlan(tuple(path), {}, largest, sum(s.flops for s in steps)))
    return None if best is None else best[1]


def vertex_order(sg: SpinGlass) -> tuple[int, ...]:
    """The vertex order the sweep follows, from the graph (sg.order is one candidate): any numbering
    sweeps as well. Kept per graph for the process, as the sweeps are."""
    positions = getattr(sg, "positions", None)
    where = None if positions is None else np.asarray(positions).tobytes()
    key = (sg.n, sg.edges.tobytes(), sg.order, where)
    found = kept_orders.get(key)
    if found is None:
        if len(kept_orders) >= _SWEEPS_KEPT:
            kept_orders.clear()
        found = kept_orders[key] = orders.graph_order(sg.n, sg.edges, positions, sg.order)
    return found


kept_orders: dict[tuple[Any, ...], tuple[int, ...]] = {}
kept_sweeps: dict[tuple[Any, ...], tuple[ContractionPlan, list[_cost.Step]]] = {}
_WORK_NEGLIGIBLE = 0.1  # share of a sweep's predicted time under which its grouping is not searched
_SWEEPS_KEPT = 64
# Tensors from which a sweep's choice (order and grouping) is kept in the lazykern store (lazykern.tn._plan_store),
# keyed by the network's structure, positions, order hint, rates and entry size: a 32 x 32 lattice's (3008
# tensors) took 0.26 s of every fresh process to find again. The stored path is replayed and its costs checked.
SWEEP_STORED_FROM = 1000
SWEEP_FORMAT = 1  # bump when orders.graph_order or the groupings change: stored sweeps then miss
