"""How a count's passes are laid out: how many residues a pass carries (:func:`residues_per_pass`, by the
plan's predicted peak against the free memory), whether the int64 pass comes first, and the plan's small
steps over leaves run once on the host for every prime pass (:func:`share`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .. import _cost, _shared, _upload
from ..einsum import build_network
from . import wide
from .algebra import CountingAlgebra
from .arrays import to_host
from .kernels import RESIDUES_MAX

log = logging.getLogger("lazykern")


def share(net: Any, plan: Any, inputs: Sequence[Any], operands: Sequence[Any]) -> tuple[Any, Any, Any]:
    """(labels, operands, plan) of a prime pass: ``plan``'s small steps over leaves run once here with int64
    counts (:mod:`.._shared`), their results leaves of a shorter plan; the network as given where no step is
    shared (on the host, for a sliced plan, or with operands' own counts, whose bound is not read here).

    The shared steps run on the host: each is a product of a few hundred entries, where a device pays a
    launch or two and the Python around them (a 32 x 32 lattice's 2687 steps: 1.73 s on an H100 machine,
    the device idle meanwhile; 0.66 s through the executor in NumPy on a 2-core CPU, 0.11-0.18 s by broadcast
    NumPy, :func:`.._shared.run_counts`, where every value is finite). Values are exact integers in their
    dtype (:mod:`.._exact`) and counts exact in int64 below the bound, so the host's results are the device's."""
    if net.be.on_host or plan.nslices > 1 or any(isinstance(op, tuple) for op in operands):
        return inputs, operands, plan
    labels = [t.labels for t in net.leaves]
    cut = _shared.split(labels, net.output, net.sizes, plan.path, [1] * len(labels))
    if cut is None:
        return inputs, operands, plan
    on_host = build_network(
        inputs, net.output, _upload.download(operands, lambda x: to_host(net.be, x)), net.alg.semiring, CountingAlgebra
    )
    leaves = [t.parts for t in on_host.leaves]
    if all(len(t.labels) == len(set(t.labels)) for t in on_host.leaves) and all(
        np.isfinite(p[0]).all() for p in leaves
    ):  # a few broadcast NumPy operations a step, not the general executor's Python (its results are the same)
        labels_now, done = _shared.run_counts(cut, plan.path, labels, leaves, net.output, net.alg.semiring)
        new_labels = [tuple(inputs[i]) if kind == "leaf" else labels_now[k] for k, (kind, i) in enumerate(cut.sources)]
        new_operands: list[Any] = [
            operands[i] if kind == "leaf" else done[k] for k, (kind, i) in enumerate(cut.sources)
        ]
    else:
        new_labels, new_operands = _shared.run_shared(on_host, plan, cut, operands, inputs)
    first = net.leaves[0].parts[0]
    home = None if isinstance(first, np.ndarray) else net.be.device_of(first)  # NumPy: the GPU route's tests
    at = [k for k, op in enumerate(new_operands) if isinstance(op, tuple)]  # the shared results
    with net.be.on_device(home):  # the shared results where the leaves are, each dtype's in one copy
        copied = _upload.upload([np.asarray(p) for k in at for p in new_operands[k]], net.be.from_host)
    for j, k in enumerate(at):
        new_operands[k] = (copied[2 * j], copied[2 * j + 1])
    log.info("counting: %d of %d steps run once for every pass", sum(cut.shared), len(plan.path))
    return new_labels, new_operands, replace(plan, path=cut.path)


# int16 values beside 128-bit counts (:func:`short_values`): on since their GPU tests passed (session 72,
# benchmarks/results/s72-h200); False sends every 128-bit pass float32 values (20 bytes an entry, not 18).
SHORT_VALUES = True


def short_values(be: Any, operands: Sequence[Any], semiring: str) -> list[Any] | None:
    """``operands`` (arrays, or (values, counts) pairs) with their values as int16 where every sum provably
    stays within +-32766 (:func:`.wide.short_fits`), for a pass of 128-bit counts at 18 bytes an entry, not
    20; None where not (or where :data:`SHORT_VALUES` is off). The values are read on the host (one copy per device
    buffer) and put back in one copy per dtype."""
    if not SHORT_VALUES:
        return None
    values = [op[0] if isinstance(op, tuple) else op for op in operands]
    host = _upload.download(values, lambda x: to_host(be, x))
    if not wide.short_fits(host, semiring):
        return None
    first = values[0] if values else None
    home = None if first is None or isinstance(first, np.ndarray) else be.device_of(first)
    with be.on_device(home):
        short = _upload.upload([wide.to_short(h) for h in host], be.from_host)
    return [(s, *op[1:]) if isinstance(op, tuple) else s for s, op in zip(short, operands)]


def int64_first(net: Any, plan: Any, value: int) -> bool:
    """Whether a count past int64 starts with the int64 pass (counts modulo 2^64): where it fits, except on a
    GPU where two residues a pass fit as well. Two primes ride in the int64 pass's bytes (4 + 4 against 8 an
    entry) and give as many bits (62 against 64), the int64 kernels are the slower (80 registers against 64:
    3.03 s against 2.71 s of a 32 x 32 pass's bit-addressed steps on an H100, 2026-11-28)."""
    if not fits_memory(net, plan, value + 8):
        return False
    return net.be.on_host or residues_per_pass(net, plan) < 2


def residues_per_pass(net: Any, plan: Any) -> int:
    """How many residues (int32 count arrays beside the values) a pass of ``plan`` carries: as many as
    fit the free device memory by the plan's predicted peak (:func:`.._cost.peak_bytes` counts every
    count array), up to RESIDUES_MAX, at least one (a plan that does not fit even that is refused
    by the pass's memory guard, with the figures); on the host the same within the available RAM
    (RESIDUES_MAX where unknown)."""
    if net.be.budget_bytes() is None:
        return RESIDUES_MAX
    value = net.be.dtype(net.leaves[0].parts[0]).itemsize
    fits = [r for r in range(2, RESIDUES_MAX + 1) if fits_memory(net, plan, value + 4 * r)]
    return max(fits, default=1)


def fits_memory(net: Any, plan: Any, entry_bytes: int) -> bool:
    """Whether a pass of ``plan`` with ``entry_bytes`` an entry fits the free device memory (the host: its
    available RAM; yes where unknown), by the network's margin (:meth:`~lazykern.tn.contraction.network.Network.margin`:
    on CuPy a sweep's boundaries are allocations of their own, outside the pool), or with its boundary held in
    one buffer (:meth:`~lazykern.tn.contraction.network.Network.arena_run`, which the pass then takes). Under
    the pool's margin alone (1.05) the H100's 32 x 32 passes of 12 bytes an entry ran out of memory with 77.3 GB
    in use, their predicted peak, the pool holding the freed 2^31-entry boundary's blocks cut up (2026-11-28).
    In one buffer an 80 GB H100 holds the 32 x 32 boundary with three residues (16 bytes an entry, 64 GiB),
    where two boundaries at a step (96 GiB) do not fit."""
    free = net.be.budget_bytes()
    if free is None or net.peak(plan, entry_bytes=entry_bytes) * net.margin(plan, entry_bytes) <= free:
        return True
    arena = net.arena_run(plan, entry_bytes)
    return arena is not None and arena[1] * _cost.POOL_MARGIN <= free
