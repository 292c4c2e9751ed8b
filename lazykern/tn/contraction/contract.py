"""A network contracted to its value (:func:`contract_network`: planned, guarded, run here or spread over devices), and
the pieces workers run: :func:`contract_slices`, :func:`contract_range`, :func:`build_network`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from .. import _procs, _spread
from .._contract import Algebra, Term
from .executor import NONE, Progress
from .inputs import Label
from .network import Network
from .plan import ContractionPlan
from .ship import ship

log = logging.getLogger("lazykern")


@_procs.scoped
def contract_network(
    inputs: Sequence[Sequence[Label]],
    output: Sequence[Label],
    operands: Sequence[Any],
    *,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    slices: Sequence[Label] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    algebra: type[Algebra] = Algebra,
    devices: _spread.Devices = None,
) -> Any:
    """:func:`einsum` with any hashable labels (``inputs``: one label sequence per operand).

    ``algebra`` is the number system: :class:`Algebra` (one array per operand) or the
    counting algebra of :mod:`lazykern.tn.counting` (a (value, count) pair each)."""
    net = Network.build(inputs, output, operands, semiring, algebra)
    spread = _spread.resolve(devices, net.be)
    if spread is not None and net.alg.grad:
        raise ValueError(
            "devices= spreads slices over threads and worker processes, which autograd does not follow: drop devices= "
            "or pass tensors that do not require grad"
        )
    plan = net.plan(optimize, slices, memory_limit, max_time)
    if spread is not None and plan.nslices == 1 and (net.be.on_host or _home(net) in spread):
        # One slice runs where its operands are: no worker, no copy (and it may take the arena). The record says
        # so where a spread was asked for: the other devices get nothing of a plan of one slice.
        log.debug(
            "tn spread: one slice (largest intermediate %d entries): run on the operands' device, not spread",
            plan.largest,
            extra={"spread_profile": {"kind": "one slice, local", "nslices": 1, "largest": int(plan.largest),
                                      "devices": list(spread), "home": _home(net)}},
        )  # fmt: skip
        spread = None
    # Slices reuse the results no sliced label reaches, unless keeping them would not fit the device.
    cached = bool(plan.sliced) and net.fits(plan, 0, cached=True)
    building: list[threading.Thread] = []
    if spread is None:
        net.use_arena(plan)
        building = net.prefetch(plan)
    try:
        with net.memory_guard(plan, 0, cached=cached):
            if spread is not None:
                return net.finish(_spread.contract(net, plan, spread, contract_slices, ship=ship))
            return net.finish(contract_slices(net, plan, 0, plan.nslices, {} if cached else None))
    finally:
        for thread in building:  # the run's own builds end with it (each one its steps would have waited for)
            thread.join()


def _home(net: Network) -> int | None:
    """The GPU ordinal the operands live on."""
    return net.be.device_of(net.leaves[0].parts[0])


def contract_range(net: Network, plan: ContractionPlan, start: int, stop: int) -> Term:
    """Slices ``start`` to ``stop`` of ``net`` along ``plan``, as :func:`contract_network` runs its own
    (slice-independent steps reused where they fit, under this device's memory guard): a worker's group."""
    cached = bool(plan.sliced) and net.fits(plan, 0, cached=True)
    with net.memory_guard(plan, 0, cached=cached):
        return contract_slices(net, plan, start, stop, {} if cached else None)


def build_network(
    inputs: Sequence[Sequence[Label]],
    output: Sequence[Label],
    operands: Sequence[Any],
    semiring: str,
    algebra: type[Algebra],
) -> Network:
    """The network :func:`contract_network` contracts (for callers that run :func:`contract_slices`
    themselves, such as the Dask workers of :mod:`lazykern.scale.dask`)."""
    return Network.build(inputs, output, operands, semiring, algebra)


def contract_slices(net: Network, plan: ContractionPlan, start: int, stop: int, cache: dict[int, Term] | None) -> Term:
    """The semiring sum of slices ``start`` to ``stop`` (their numbering in :meth:`ContractionPlan.slice_values`)
    of ``net`` contracted along ``plan``: the seam where slices can be spread over devices or workers,
    each summing a range and the ranges' results added with the algebra's ``add``. ``cache`` keeps the
    results of the steps no sliced label reaches across the slices of one caller (None: no reuse)."""
    result = None
    progress = Progress(stop - start)
    for values in plan.slice_values(start, stop):
        out = net.run(plan, values, keep=NONE, cache=cache, progress=progress)
        progress.slice_done()
        result = out if result is None else Term(net.alg.add(result.parts, out.parts), out.labels)
    if result is None:
        raise ValueError(f"slices {start} to {stop} of a plan with {plan.nslices} hold none")
    return result
