"""The contraction plan the solvers use for a spin glass: the sweep, opt_einsum's greedy order where it is
faster, a cotengra search, or a sliced plan fitted to the device's memory.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from .. import _arena, _cost, _instance
from .._backend import backend_of
from .._planner import DEFAULT_MAX_TIME
from ..einsum import ContractionPlan, contraction_plan, fit_in_place, fit_to_memory, plan_steps
from .instance import SpinGlass, to_module
from .sweeps import arena_sweep, boundary_sweep

log = logging.getLogger("lazykern")


def plan(
    sg: SpinGlass,
    *,
    module: Any = np,
    dtype: Any = None,
    count_dtype: Any = None,
    optimize: Any = "auto",
    memory_limit: int | None = None,
    max_time: float | None = None,
) -> ContractionPlan:
    """The contraction plan the solvers use for ``sg`` (pass it back as ``optimize=`` to reuse it).

    ``optimize="auto"``: the boundary sweep along a vertex order found from the graph itself
    (:func:`lazykern.tn.orders.graph_order`: ``sg.order``, the numbering, the axes of
    ``sg.positions`` and coordinates read off graph distances compete, so any numbering of the
    same graph plans alike) when its largest intermediate fits ``memory_limit`` entries (opt_einsum's
    greedy order instead where the device would run that faster: :mod:`lazykern.tn._cost`),
    else that sweep with the labels sliced that most of its oversized intermediates carry.
    ``optimize="cotengra"`` refines the sweep and searches
    afresh for ``max_time`` seconds (the plan is stored). Anything else is passed to
    :func:`lazykern.tropical.contraction_plan`. ``memory_limit`` defaults to what fits the
    device of ``module``: the plan is sliced until its predicted peak (``count_dtype`` counted in
    for :func:`degeneracy`) fits the free memory.
    """
    memory_limit = _instance.check_memory_limit(memory_limit)
    max_time = _instance.check_max_time(max_time)
    return make_plan(
        sg,
        module=module,
        dtype=dtype,
        count_dtype=count_dtype,
        optimize=optimize,
        memory_limit=memory_limit,
        max_time=max_time,
    )


def make_plan(
    sg: SpinGlass,
    *,
    module: Any = np,
    dtype: Any = None,
    count_dtype: Any = None,
    optimize: Any = "auto",
    memory_limit: int | None = None,
    max_time: float | None = None,
    arena: bool = False,
) -> ContractionPlan:
    """:func:`plan`; ``arena``: for :func:`ground_state_energy`, whose executor can hold the boundary
    in one buffer (:mod:`.._arena`): where the unsliced sweep's run holding two boundaries at a step
    would not fit, an unsliced sweep that fits so is taken (:func:`arena_sweep`), not a sliced one."""
    start = time.monotonic()
    module, dtype = sg.resolve(module, dtype, warn=False)  # the solvers warned
    labels = sg.labels()
    sizes = dict.fromkeys(range(sg.n), 2)
    be, _ = backend_of(to_module(np.zeros(1, dtype=dtype), module))
    itemsize = np.dtype(dtype).itemsize
    entry = itemsize + (0 if count_dtype is None else np.dtype(count_dtype).itemsize)
    rates = _cost.rates_for(be.on_host, itemsize)
    sweep, sweep_steps = boundary_sweep(sg, labels, sizes, rates, itemsize)

    def steps_of(p: ContractionPlan) -> list[_cost.Step]:  # the sweep's are kept with it: not priced twice
        return sweep_steps if p is sweep else plan_steps(labels, (), sizes, p.path, p.sliced)

    def seconds(p: ContractionPlan) -> float:
        return _cost.seconds(steps_of(p), p.nslices, itemsize, rates)

    def make(limit: int) -> ContractionPlan:
        how = optimize
        if how == "auto":
            if sweep.largest <= limit:
                return _faster(sweep, seconds(sweep), labels, sizes, limit, seconds)
            return contraction_plan(labels, (), sizes, optimize=list(sweep.path), memory_limit=limit)  # sliced
        budget = DEFAULT_MAX_TIME if max_time is None else float(max_time)
        left = max(budget - (time.monotonic() - start), min(budget, 0.5))  # the budget covers the sweep too
        return contraction_plan(
            labels,
            (),
            sizes,
            optimize=how,
            memory_limit=limit,
            max_time=left if how == "cotengra" else max_time,
            initial=sweep.path if how == "cotengra" else None,
        )

    if memory_limit is not None:
        return make(memory_limit)
    leaves = 4 * len(sg.edges) + 2 * sg.n

    counting = count_dtype is not None and not be.on_host  # counting runs its bit-addressed steps on a device

    def fit(width: int) -> ContractionPlan:
        def peak(p: ContractionPlan) -> int:  # without the slices' cache, which the executor drops if it does not fit
            steps = [s._replace(pinned=0) for s in steps_of(p)]
            return _cost.peak_bytes(steps, leaves, width, 0, inplace=counting, host=be.host_ram)

        # In place, a counting sweep holds one boundary, not the four arrays be.memory_limit assumes.
        return (fit_in_place if counting else fit_to_memory)(make, be.memory_limit(width), peak, be.budget_bytes())

    exact = counting and np.dtype(count_dtype).kind in "iu" and sg.n >= _INT64_SPINS
    if exact:
        # Counts past int64 are rebuilt from residues modulo primes (int32 each): a plan fit for one
        # residue a pass may be sliced less than one fit for the int64 pass, which counting.exact then
        # leaves out. Unsliced, it is the very plan (the passes' widths are counting.exact's to choose),
        # and the int64 fit (slicing searched for at its width) is not needed at all.
        narrow = fit(itemsize + 4)
        if narrow.nslices == 1:
            return narrow
        wide = fit(entry)
        return narrow if narrow.nslices < wide.nslices else wide
    free = be.budget_bytes()
    if arena and optimize == "auto" and free is not None and _arena.capable("maxplus", np.dtype(dtype), be):
        # Where the sweep's two boundaries at a step (the row kernel's) do not fit, one held in place may:
        # unsliced, not a sweep sliced thousands of times (chimera 8 x 8 x 4 on an 80 GB GPU).
        steps = [s._replace(pinned=0) for s in sweep_steps]
        if _cost.peak_bytes(steps, leaves, entry, 0) * _cost.POOL_MARGIN > free:
            found = arena_sweep(sg, labels, sizes, rates, itemsize, leaves, free)
            if found is not None:
                log.info(
                    "%s: unsliced, its boundary of up to %d entries held in one buffer",
                    sg.name or "spins",
                    found.largest,
                )
                return found
    return fit(entry)


_INT64_SPINS = 63  # spins from which a count of +-1 assignments may pass 2^63: residues rebuild it


def _faster(
    sweep: ContractionPlan,
    took: float,
    labels: list[tuple[int, ...]],
    sizes: dict[int, int],
    limit: int,
    seconds: Any,
) -> ContractionPlan:
    """The sweep (predicted to take ``took`` seconds), or opt_einsum's greedy order when it fits
    ``limit`` and is predicted faster (a graph with no thin direction, such as a random regular one).
    Greedy takes ~0.3 ms a tensor to find, so it is tried only where the sweep would take several
    times that."""
    if took <= _GREEDY_WORTH * _GREEDY_SECONDS_PER_TENSOR * len(labels):
        return sweep
    greedy = contraction_plan(labels, (), sizes, optimize="greedy", memory_limit=2**62)
    if greedy.largest <= limit and seconds(greedy) < took:
        return greedy
    return sweep


_GREEDY_SECONDS_PER_TENSOR = 3e-4  # opt_einsum's greedy path on a 32 x 32 lattice: 0.82 s for 3008 tensors
_GREEDY_WORTH = 5
