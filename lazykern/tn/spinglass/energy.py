"""The ground-state energy E_0: one max-plus contraction (its small steps on the host first on a GPU)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _eliminate, _exact, _instance, _kit, _procs, _shared, _upload
from ..einsum import ContractionPlan, contract_network
from .answers import item, warn_rounded
from .instance import SpinGlass, fitted_network, to_module
from .routing import arena_tiles, planned, route, stays_on_device, tiny
from .sweeps import vertex_order

log = logging.getLogger("lazykern")


def host_first(sg: SpinGlass, fit: _exact.Fitted, module: Any, how: Any) -> tuple[list[Any], list[Any], Any]:
    """(labels, tensors on ``module``'s device, plan) of an energy: where ``how`` is an unsliced plan for a
    GPU, its small steps over leaves (:func:`.._shared.split`: each spin's field and couplings summed into
    the piece a boundary step absorbs, 2687 of a 32 x 32 sweep's 3007 steps) run on the host first
    (:func:`.._shared.run_values`), and the device gets their results in one copy and the plan's other steps."""
    labels, tensors = fitted_network(sg, fit, np)
    if getattr(module, "__name__", "") == "numpy":
        return labels, tensors, how
    if isinstance(how, ContractionPlan) and how.nslices == 1 and fit.dtype != object:
        sizes = dict.fromkeys(range(sg.n), 2)
        cut = _shared.split(labels, (), sizes, how.path, [1] * len(labels))
        if cut is not None:
            labels, tensors = _shared.run_values(cut, how.path, labels, tensors, (), "maxplus")
            how = dataclasses.replace(how, path=cut.path)
    return labels, _upload.upload(tensors, lambda x: to_module(x, module)), how


@_procs.scoped
def ground_state_energy(
    sg: SpinGlass,
    *,
    module: Any = np,
    dtype: Any = None,
    optimize: Any = "auto",
    slices: Sequence[int] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: Sequence[int] | str | None = None,
) -> float:
    """E_0 = min_s E(s), exactly (one max-plus contraction). ``module``: numpy (CPU), cupy or
    torch (GPU); ``optimize``, ``memory_limit``, ``max_time`` as for :func:`plan` (a plan, an
    explicit path or any :func:`lazykern.tn.einsum` strategy also work); ``slices``: spins
    to slice over explicitly. ``dtype`` None (the default) takes float32 where every partial sum
    is exact in it (+-J and small-integer couplings: integer energies far below 2^24), float64
    otherwise; an integer dtype that would truncate is a ValueError, a float32 that rounds warns.
    ``module`` may also be named ("numpy", "cupy", "torch"); with the defaults a network the host is
    predicted to contract sooner (:mod:`.._cost`: an 8 x 8 lattice, not a 20 x 20) runs in NumPy
    whatever ``module`` is, with the same dtype and result (logged at INFO). ``devices`` (``"all"`` or GPU
    ordinals) spreads the plan's slices over several GPUs, as for :func:`lazykern.tn.einsum`;
    a plan with no slices runs on the operands' GPU alone. On a CuPy GPU (``devices`` or not), where the
    sweep's steps would hold two boundaries that do not fit its free memory, the default plan is an unsliced sweep whose
    boundary is held in one buffer and written over in place (:mod:`.._arena`: chimera 8 x 8 x 4's
    2^34 float32 entries, 64 GiB, on an 80 GB GPU), not a sweep sliced thousands of times.

    Exact (:mod:`lazykern.tn._exact`): the couplings are contracted as integer numerators of one unit
    (integers as they are, decimals of up to 9 significant digits such as 0.1 scaled by a power of ten,
    other floats at their exact binary value), in the narrowest dtype that holds every partial sum. The
    energy is an ``int`` when J and h were given as integers, else the float nearest the exact value.
    Floats whose numerators would pass 62 bits (typically Gaussian couplings) are rounded to a multiple
    of a power of two first: the energy is then within (m + n) of those units of the truth."""
    memory_limit = _instance.check_memory_limit(memory_limit)
    max_time = _instance.check_max_time(max_time)
    module = _instance.array_module(module)
    fit = sg.fitted(module, dtype)
    dtype = fit.dtype
    warn_rounded(fit, "ground_state_energy", "may tie with it: E_0 is the rounded couplings' optimum")
    if tiny(sg, fit, optimize, slices, devices, memory_limit):
        log.info("%s: contracting on the host (NumPy) by vertex elimination", sg.name or f"{sg.n} spins")
        labels, tensors = fitted_network(sg, fit, np)
        return fit.answer(-_eliminate.sweep_max(labels, tensors, vertex_order(sg)))
    # The steps' kernels (an empty store's compiles) build beside the planning: beside the route's sweep
    # search too where the device is sure to be kept.
    early = stays_on_device(sg, module, optimize, slices, devices)
    building = _kit.start(module, dtype, "maxplus") if early else []
    try:
        module, optimize = route(sg, module, dtype, optimize, slices, devices, memory_limit, dtype.itemsize)
        if not early:
            building = _kit.start(module, dtype, "maxplus")
        if module is not np and optimize == "auto" and not slices and devices is None:
            building += _kit.start_arena(module, dtype, "maxplus", arena_tiles(sg, dtype))
        how = planned(
            sg,
            optimize,
            slices,
            module=module,
            dtype=dtype,
            memory_limit=memory_limit,
            max_time=max_time,
            arena=True,  # an unsliced plan runs on the operands' device whatever devices= says (contract_network)
        )
        labels, tensors, how = host_first(sg, fit, module, how)
        out = contract_network(
            labels, (), tensors, optimize=how, slices=slices, memory_limit=memory_limit, devices=devices
        )
    finally:
        _kit.join(building)
    return fit.answer(-item(out))
