"""The degeneracy: E_0 and the number of ground states, from counting contractions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import LazykernWarning, warn_user
from .. import _exact, _instance, _procs
from ..counting import CountingAlgebra, count_network
from ..einsum import contract_network
from .answers import item, warn_rounded
from .instance import SpinGlass, fitted_network, to_module
from .routing import planned, route


@_procs.scoped
def degeneracy(
    sg: SpinGlass,
    *,
    module: Any = np,
    dtype: Any = None,
    count_dtype: Any = None,
    optimize: Any = "auto",
    slices: Sequence[int] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: Sequence[int] | str | None = None,
) -> tuple[float, int | float]:
    """(E_0, number of ground states), from counting contractions. The count is an exact Python
    int (``count_dtype`` None or int64): counted modulo 2^64, which is the count itself for up to
    63 spins, and for more also modulo the 31-bit primes that a proven bound on the count needs
    (one pass of float64 counts, its rounding bounded, :func:`lazykern.tn.counting.count_network`),
    the Chinese remainder theorem giving the integer (:mod:`lazykern.tn._crt`; a +-J square lattice
    passes 2^63 ground states near L = 28). ``count_dtype=float64``: one pass
    of float counts, a float that rounds past 2^53 (with a warning); any integer type (or object)
    means the exact int. ``dtype``, ``devices`` as
    for :func:`ground_state_energy`; the device's counting kernels add float values only, so an
    integer dtype is refused there (int64 values count on the host).

    The count is exact only when the energies are (:mod:`lazykern.tn._exact`: integers, decimals, floats
    whose numerators fit 62 bits). Couplings that had to be rounded are counted with ties decided
    between the rounded energies, and a LazykernWarning names the tolerance: states whose energies lie
    that close to E_0 may be counted in or out."""
    memory_limit = _instance.check_memory_limit(memory_limit)
    max_time = _instance.check_max_time(max_time)
    module = _instance.array_module(module)
    fit = sg.fitted(module, dtype, count=True)
    dtype = fit.dtype
    if dtype.kind != "f" and (dtype not in (np.int64, object) or getattr(module, "__name__", "") != "numpy"):
        raise TypeError(
            f"degeneracy counts with float values (int64 or Python ints on the host), got dtype={dtype}: leave "
            "dtype unset "
            "(the narrowest exact one is chosen)"
        )
    warn_rounded(fit, "degeneracy", "may be counted in or out: the count is exact for the rounded couplings only")
    if fit.exact:
        _exact.warn_binary_floats(fit.spread, "energies", "the count")
    exact = count_dtype is None or count_dtype is int or np.dtype(count_dtype).kind in "iuO"
    if not exact and np.dtype(count_dtype) != np.float64:
        raise TypeError(
            f"count_dtype must be None or an integer type (an exact int) or float64, got {np.dtype(count_dtype)}"
        )
    counts = np.dtype(np.int64 if exact else count_dtype).itemsize
    module, optimize = route(sg, module, dtype, optimize, slices, devices, memory_limit, dtype.itemsize + counts)
    labels, tensors = fitted_network(sg, fit, module)
    how = planned(
        sg,
        optimize,
        slices,
        module=module,
        dtype=dtype,
        count_dtype=np.int64 if exact else count_dtype,
        memory_limit=memory_limit,
        max_time=max_time,
    )
    if exact:
        v, c = count_network(
            labels, (), tensors, optimize=how, slices=slices, memory_limit=memory_limit, devices=devices
        )
        return fit.answer(-item(v)), int(item(c))
    pairs = [(t, _ones_like(t, count_dtype, module)) for t in tensors]
    v, c = contract_network(
        labels,
        (),
        pairs,
        optimize=how,
        slices=slices,
        memory_limit=memory_limit,
        algebra=CountingAlgebra,
        devices=devices,
    )
    count = float(item(c))
    if count >= 2.0**53:
        warn_user(
            f"degeneracy: {count:.6g} ground states in float64 counts, which round past 2^53; "
            "leave count_dtype unset for the exact integer",
            LazykernWarning,
        )
    return fit.answer(-item(v)), count


def _ones_like(t: Any, dtype: Any, module: Any) -> Any:
    return to_module(np.ones(tuple(t.shape), dtype=dtype), module)
