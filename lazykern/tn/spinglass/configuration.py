"""A ground state: E_0 and one configuration reaching it, by backtracking or by autograd."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _exact, _instance, _procs
from ..einsum import contract_network, network_argmax
from .answers import item, warn_rounded
from .instance import SpinGlass, fitted_network
from .routing import planned, route


@_procs.scoped
def ground_state(
    sg: SpinGlass,
    *,
    module: Any = np,
    dtype: Any = None,
    optimize: Any = "auto",
    checkpoint: bool | int | None = None,
    slices: Sequence[int] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    method: str = "backtrack",
    devices: Sequence[int] | str | None = None,
) -> tuple[float, np.ndarray]:
    """(E_0, spins): the ground-state energy and one configuration reaching it (int8 +-1).

    ``method``: "backtrack" reads the argmax of the contraction steps (by default the device's free
    memory beside the contraction is split between kept argmax, checkpoints of values and the
    segments recomputed from them, each step recomputed about once; ``checkpoint=True``: keeps
    no argmax and recomputes by segments; ``False``: keeps all); "autograd" (``module=torch``)
    differentiates the contraction with the tropical gradient rule: d(-E_0)/d(vertex tensor i) is 1
    at the ground state's s_i.
    ``devices`` (backtrack only): the slices' optima are found over several GPUs, as for
    :func:`lazykern.tropical.argmax_einsum`.

    E_0 is exact as for :func:`ground_state_energy`; where the couplings had to be rounded it is the
    configuration's own energy (:meth:`SpinGlass.energy`), a state within the rounding of the optimum.
    """
    memory_limit = _instance.check_memory_limit(memory_limit)
    max_time = _instance.check_max_time(max_time)
    module = _instance.array_module(module)
    fit = sg.fitted(module, dtype)
    dtype = fit.dtype
    warn_rounded(fit, "ground_state", "may be returned in its place: the state is the rounded couplings' optimum")
    if method not in ("backtrack", "autograd"):
        raise ValueError(f"method must be 'backtrack' or 'autograd', got {method!r}")
    if method == "backtrack":  # autograd differentiates torch tensors: it stays on the device
        module, optimize = route(sg, module, dtype, optimize, slices, devices, memory_limit, dtype.itemsize)
    labels, tensors = fitted_network(sg, fit, module)
    how = planned(sg, optimize, slices, module=module, dtype=dtype, memory_limit=memory_limit, max_time=max_time)
    if method == "autograd":
        if devices is not None:
            raise ValueError(
                "devices= spreads slices over threads and worker processes, which autograd does not follow: "
                "use method='backtrack'"
            )
        best, spins = _ground_state_autograd(sg, labels, tensors, how, slices, memory_limit)
        return _energy_of(sg, fit, best, spins), spins
    best, assignment = network_argmax(
        labels,
        (),
        tensors,
        optimize=how,
        checkpoint=checkpoint,
        slices=slices,
        memory_limit=memory_limit,
        devices=devices,
    )
    spins = np.array([1 - 2 * assignment[i] for i in range(sg.n)], dtype=np.int8)
    return _energy_of(sg, fit, best, spins), spins


def _energy_of(sg: SpinGlass, fit: _exact.Fitted, best: Any, spins: np.ndarray) -> int | float:
    """E_0 from the contraction's optimum ``best`` (-E_0 in units), or the configuration's own energy
    where the couplings were rounded."""
    if fit.exact:
        return fit.answer(-item(best))
    energy: int | float = sg.energy(spins)
    return energy


def _ground_state_autograd(
    sg: SpinGlass,
    labels: list[tuple[int, ...]],
    tensors: list[Any],
    optimize: Any,
    slices: Sequence[Any],
    memory_limit: int | None,
) -> tuple[float, np.ndarray]:
    if not hasattr(tensors[0], "requires_grad"):
        raise TypeError("method='autograd' differentiates torch tensors: pass module=torch")
    vertex = tensors[len(sg.edges) :]
    for v in vertex:
        v.requires_grad_(True)
    out = contract_network(labels, (), tensors, optimize=optimize, slices=slices, memory_limit=memory_limit)
    out.backward()
    grads = np.stack([v.grad.detach().cpu().numpy() for v in vertex])
    return out.item(), np.where(grads[:, 0] > grads[:, 1], 1, -1).astype(np.int8)
