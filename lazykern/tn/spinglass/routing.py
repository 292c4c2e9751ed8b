"""Where a spin glass is solved: vertex elimination on the host for tiny ones, NumPy where the host is
predicted to finish first, else the caller's device with a plan.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _cost, _exact, orders
from .._backend import DEFAULT_HOST_LIMIT
from ..einsum import ARENA_FASTER, ContractionPlan
from .instance import SpinGlass
from .planning import make_plan
from .sweeps import boundary_sweep, vertex_order

log = logging.getLogger("lazykern")


def tiny(
    sg: SpinGlass, fit: _exact.Fitted, optimize: Any, slices: Sequence[int], devices: Any, memory_limit: int | None
) -> bool:
    """Whether the defaults solve ``sg``'s energy by vertex elimination on the host (:mod:`.._eliminate`):
    a sweep whose boundaries hold at most 2^TINY_SWEEP entries in all, a few milliseconds of NumPy,
    where the general executor's per-step Python alone costs tens (and a GPU's launches more). The
    fitted values are whole numbers whose every partial sum is exact in their dtype (:mod:`.._exact`), so
    adding them in another order than the contraction's gives the very same energy; Python ints (an
    object dtype) keep the general executor."""
    if optimize != "auto" or slices or devices is not None or fit.dtype == object or sg.n == 0:
        return False
    order = vertex_order(sg)
    if orders.sweep_score(sg.n, sg.edges, order) > TINY_SWEEP:
        return False
    largest = 2 ** int(orders.boundary_sizes(sg.n, sg.edges, order).max(initial=0) + 1)  # with the next spin
    return memory_limit is None or largest <= memory_limit


TINY_SWEEP = 20.0  # log2 of boundary entries summed over the sweep (a 12 x 12 lattice: 19.2)

# log2 of a sweep's boundary entries summed past which the host is never predicted sooner than a GPU
# (:func:`route`: a 20 x 20 lattice's 26.2 already goes to the device; a 32 x 32's is 38.9).
DEVICE_SWEEP = 28.0


def stays_on_device(sg: SpinGlass, module: Any, optimize: Any, slices: Sequence[int], devices: Any) -> bool:
    """Whether :func:`route` keeps a GPU ``module`` whatever its search finds: the caller fixed the
    plan, or the network's sweep is far past what the host contracts sooner. Only speed rests on it:
    kernels built ahead for a network the route sends to the host are built and stored, unused."""
    if module is np:
        return False
    if optimize != "auto" or slices or devices is not None:
        return True
    return orders.sweep_score(sg.n, sg.edges, vertex_order(sg)) > DEVICE_SWEEP


def arena_tiles(sg: SpinGlass, dtype: np.dtype) -> list[tuple[int, int]]:
    """The tiles (spins out, spins in) of the bit-addressed steps of the sweep :func:`route` priced for
    ``sg`` (kept for the process), where its largest step is one the arena takes (ARENA_FASTER entries):
    their kernels can build before the run prices its plan. A guess that only decides what builds early."""
    sizes = dict.fromkeys(range(sg.n), 2)
    sweep, steps = boundary_sweep(sg, sg.labels(), sizes, _cost.rates_for(False, dtype.itemsize), dtype.itemsize)
    if sweep.largest < ARENA_FASTER:
        return []
    return sorted({s.tile for s in steps if s.bits})


def route(
    sg: SpinGlass,
    module: Any,
    dtype: np.dtype,
    optimize: Any,
    slices: Sequence[int],
    devices: Any,
    memory_limit: int | None,
    entry: int,
) -> tuple[Any, Any]:
    """(module, optimize) to solve ``sg`` with: numpy and the device's sweep when the host is predicted
    to finish first, else as given. On a tiny network the device's per-step Python and the copies
    outweigh its speed (an 8 x 8 lattice: ~60 ms on the H100, ~40 ms in NumPy); the algebra and dtype
    are the same, so the result is too, and the solvers return host values either way. Only for the
    defaults (``optimize="auto"``, no slices, no devices): what the caller fixed is kept. ``entry``:
    bytes per entry (value and count)."""
    if module is np or optimize != "auto" or slices or devices is not None:
        return module, optimize
    labels = sg.labels()
    sizes = dict.fromkeys(range(sg.n), 2)
    itemsize = dtype.itemsize
    sweep, steps = boundary_sweep(sg, labels, sizes, _cost.rates_for(False, itemsize), itemsize)  # plan() reuses it
    if sweep.largest > min(DEFAULT_HOST_LIMIT, memory_limit or DEFAULT_HOST_LIMIT):
        return module, optimize
    host = _cost.latency(steps, 1, entry, _cost.HOST)
    leaves = (4 * len(sg.edges) + 2 * sg.n) * entry
    device = _cost.latency(steps, 1, entry, _cost.rates_for(False, itemsize), copies=2, nbytes=leaves)
    if host >= device:
        return module, optimize
    log.info(
        "%s: contracting on the host (NumPy): predicted %.1f ms there, %.1f ms on %s (%d steps)",
        sg.name or f"{sg.n} spins", 1e3 * host, 1e3 * device, getattr(module, "__name__", module), len(steps),
    )  # fmt: skip
    return np, sweep


def planned(sg: SpinGlass, optimize: Any, slices: Sequence[int], **kw: Any) -> Any:
    """``optimize`` as the contraction takes it: a plan for ``sg`` unless the caller fixed the order."""
    if slices or isinstance(optimize, (ContractionPlan, list, tuple)) or hasattr(optimize, "search"):
        return optimize
    if optimize != "auto" and optimize != "cotengra":
        return optimize
    return make_plan(sg, optimize=optimize, **kw)
