"""The kernels a property's passes launch on a GPU, built ahead in threads: with an empty store each kernel
was built at its first launch, one after another (a 100-vertex SizeMax built seven, 3.7 s; a 150-vertex
CountingMax(2) three more, 1.9 s, on the H200, session 81). Started before the order search and the host's
first steps, they build beside them and beside each other. Only for networks large enough to launch them
(:data:`AHEAD_VARIABLES`); a kernel a run then does not launch stays built and stored, unused."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .. import _components, _kit, _tables
from .. import properties as Q
from ..algebras import kbest
from . import top_two
from .context import Context
from .values import value_dtype

# Free variables from which a network's steps are large enough to run on the device (smaller ones run on
# the host first, :mod:`.._host_steps`, and may launch none of these kernels).
AHEAD_VARIABLES = 48


def start(tab: _tables.Tables, prop: Q.Property, ctx: Context) -> list[threading.Thread]:
    """Start building the kernels ``prop``'s passes over ``tab`` launch on the caller's GPU: the max-plus
    kit (:func:`.._kit.start`) for one best size, for CountingMax(2), whose best values are max-plus
    products, and the top-two kernels (:func:`.._kit.start_top2`) where its pass runs; for the partition
    function the float64 kit and the scaled-sum kernels (:func:`.._kit.start_scaledsum`). The threads, for the
    caller to join before it returns; none on the host, across devices or for small networks (what is left
    once the small components are set apart, as :func:`.apart.apart` sets them)."""
    if ctx.xp.__name__ not in ("cupy", "torch") or ctx.devices is not None:
        return []
    key = (ctx.xp.__name__, _current_device(ctx.xp), type(prop).__name__, getattr(prop, "k", 1))
    if key in _started:
        return []
    parts = _components.split(tab)  # small components are counted on the host (.apart): only the rest launches
    if parts is not None:
        if parts.rest is None:
            return []
        tab = parts.rest
    if not tab.feasible or len(tab.free) < AHEAD_VARIABLES:
        return []
    _started.add(key)
    return _threads(tab, prop, ctx)


# What this process has started ahead, by array module, device and property: once is enough (the kernels then
# stay loaded), and a repeated call skips the 1 ms of reading the tables' dtypes that naming them takes.
_started: set[tuple[str, int, str, int]] = set()


def _current_device(xp: Any) -> int:
    """The ordinal of the GPU ``xp`` (cupy or torch) allocates on now."""
    return int(xp.cuda.current_device() if xp.__name__ == "torch" else xp.cuda.runtime.getDevice())


def _threads(tab: _tables.Tables, prop: Q.Property, ctx: Context) -> list[threading.Thread]:
    if isinstance(prop, (Q.SizeMax, Q.SizeMin)) and prop.k == 1:
        return _kit.start(ctx.xp, value_dtype(tab, tropical_only=True), "maxplus")
    if isinstance(prop, (Q.CountingMax, Q.CountingMin)) and prop.k == 2 and top_two.ROUTE:
        dtype = top_two.pass_dtype(tab, value_dtype(tab, tropical_only=False))
        if dtype is not None:
            return _kit.start(ctx.xp, dtype, "maxplus") + _kit.start_top2(ctx.xp, dtype, kbest.FLOAT_PASSES[0])
    if isinstance(prop, Q.PartitionFunction):  # best t by the max-plus product in float64, then the scaled sums
        return _kit.start(ctx.xp, np.float64, "maxplus") + _kit.start_scaledsum(ctx.xp)
    return []
