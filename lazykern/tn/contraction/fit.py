"""A plan fitted to the memory it runs in (:func:`fit_to_memory`, :func:`fit_in_place`), and refused before it runs
where it cannot: sliced too deep (:func:`check_slicing`) or too large (:func:`memory_message`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ...errors import SlicingError
from .. import _cost
from .inputs import Label
from .paths import plan_steps
from .plan import ContractionPlan
from .slicing import COSTLY_SLICING

log = logging.getLogger("lazykern")


def check_slicing(
    inputs: Sequence[Sequence[Label]], output: Sequence[Label], sizes: dict[Label, int], plan: ContractionPlan
) -> None:
    """Refuse, before anything runs, a plan whose slicing makes the contraction take far longer than
    unsliced: each slice reruns the steps, and each run of a step costs Python and a launch whatever its
    size (K_18 with memory_limit=4: 2^16 slices of 170 steps, half an hour; memory_limit=1 on 16 spins:
    every spin sliced). Priced at the host's rates (:mod:`.._cost`), which rank plans alike on a device."""
    if not plan.sliced:
        return
    steps = plan_steps(inputs, output, sizes, plan.path, plan.sliced)
    runs = sum(plan.nslices if s.depends else 1 for s in steps)
    if runs <= _RUNS_ALWAYS_FINE:
        return
    took = _cost.seconds(steps, plan.nslices, 8, _cost.HOST)
    whole = plan_steps(inputs, output, sizes, plan.path, {})
    unsliced = _cost.seconds(whole, 1, 8, _cost.HOST)
    if took <= _SLICING_SLOWDOWN * unsliced or took <= _SECONDS_FINE:
        if took > _SLICING_SAID * unsliced and took > _SECONDS_SAID:
            from ...errors import LazykernWarning, warn_user

            warn_user(
                f"the plan slices {len(plan.sliced)} labels to fit its memory limit ({plan.largest} entries sliced): "
                f"{plan.nslices} slices of {len(steps)} steps, {runs} step runs, predicted {took:.3g} s on the host "
                f"against {unsliced:.3g} s unsliced. Raise memory_limit (or leave it unset: it is sized to the "
                "memory) if the memory allows",
                LazykernWarning,
            )
        return
    raise SlicingError(
        f"the plan slices {len(plan.sliced)} labels: {plan.nslices} slices of {len(steps)} steps, {runs} step "
        f"runs, predicted {took:.3g} s on the host against {unsliced:.3g} s unsliced (largest intermediate "
        f"{max((s.result for s in whole), default=1)} entries, {plan.largest} sliced). Raise memory_limit (or "
        "leave it unset: it is sized to the memory), or slice fewer labels"
    )


_RUNS_ALWAYS_FINE = 1 << 14  # step runs that take seconds at most, however they were sliced
_SLICING_SLOWDOWN = 64  # predicted slowdown from slicing past which it is refused ...
_SECONDS_FINE = 60.0  # ... when it also takes more than this (a minute is the caller's to spend on memory)
_SLICING_SAID = 4  # a slowdown past this, predicted to take more than _SECONDS_SAID, is said before it runs
_SECONDS_SAID = 1.0


def fit_to_memory(
    make: Callable[[int], ContractionPlan], limit: int, peak: Callable[[ContractionPlan], int], free: int | None
) -> ContractionPlan:
    """``make(limit)``, its largest intermediate halved (more slices) until its predicted peak fits
    ``free`` bytes with the pool's margin (None: the host, taken as it is). Stops where a halving
    no longer lowers the peak (the operands themselves fill the memory) or multiplies the cost by
    more than ``COSTLY_SLICING``: a plan that does not fit is returned as it is, and running it
    raises :class:`DeviceMemoryError` with the figures."""
    plan = make(limit)
    if free is None:
        return plan
    need = peak(plan)
    for _ in range(_FIT_TRIES):
        if need * _cost.POOL_MARGIN <= free or plan.largest <= 1:
            break
        limit = max(min(limit, plan.largest) // 2, 1)
        log.info("contraction plan: peak %.2f GiB over %.2f GiB free; replanning with intermediates <= %d entries",
                 need / 2**30, free / 2**30, limit)  # fmt: skip
        smaller = make(limit)
        if peak(smaller) >= need or smaller.flops > COSTLY_SLICING * plan.flops:
            break  # no lower, or at a cost the caller should decide on: the guard refuses it with figures
        plan, need = smaller, peak(smaller)
    return plan


_FIT_TRIES = 4  # halvings of the slicing target before the plan is left to be refused with its figures


def fit_in_place(
    make: Callable[[int], ContractionPlan], limit: int, peak: Callable[[ContractionPlan], int], free: int | None
) -> ContractionPlan:
    """:func:`fit_to_memory` for an executor whose steps run in place (one boundary held, not the four
    arrays ``limit`` was sized for): from four times ``limit`` first, and from ``limit`` as for any
    executor where that found no plan that fits (its halvings stop at a costly slicing)."""
    plan = fit_to_memory(make, limit * 4, peak, free)
    if free is None or peak(plan) * _cost.POOL_MARGIN <= free:
        return plan
    return fit_to_memory(make, limit, peak, free)


def memory_message(
    plan: ContractionPlan,
    need: int,
    free: int,
    host: bool = False,
    margin: float = _cost.POOL_MARGIN,
    argmax: bool = True,
) -> str:
    where, room = ("RAM", "of RAM is available (MemAvailable)") if host else ("device memory", "is free")
    return (
        f"the contraction needs {need / 2**30:.2f} GiB of {where} at its peak (plus "
        f"{100 * (margin - 1):.0f}% for the pool; largest intermediate {plan.largest} entries, "
        f"{plan.nslices} slices) but {free / 2**30:.2f} GiB {room}: pass a smaller memory_limit= "
        f"(entries of the largest intermediate; it slices more), a smaller dtype, "
        f"{'checkpoint=True for argmax, ' if argmax else ''}or free {where}"
    )
