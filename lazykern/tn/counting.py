"""Counting tropical numbers: (value, count) pairs, so one contraction gives an optimum and
how many assignments reach it (a spin glass's ground-state energy and degeneracy).

(a, m) (+) (b, n) is the better value with its count, or (a, m + n) on a tie;
(a, m) (x) (b, n) = (a + b, m * n). Values are float32/float64 (max-plus or min-plus).
Integer counts are exact, never wrapped: :func:`einsum` counts modulo 2^64 and, when a count may not fit in
int64, on a GPU first in one pass of 128-bit counts that saturate (:mod:`.counts.wide`: exact wherever a
count reads back below 2^128 - 1), else (or past that) modulo 31-bit primes, and rebuilds every count by the
Chinese remainder theorem (:mod:`._crt`). A prime pass carries several residues (value, count mod p_1, ...,
count mod p_R): the values are read and computed once for R residues, and R is as large as the plan's
predicted peak lets it be (:func:`residues_per_pass`); where even the int64 pass would not fit the plan (a
32 x 32 lattice's 2^32-entry boundary on an 80 GB GPU), the primes alone rebuild the counts.
float64 counts (weights) add and multiply as floats.

>>> import numpy as np
>>> from lazykern.tropical import counting
>>> v, c = counting.einsum("i,i->", np.array([1.0, 3.0, 3.0]), np.array([0.0, 0.0, 0.0]))
>>> float(v), int(c)
(3.0, 2)

The GPU kernels (``counting.cu``) are their own lazily compiled
:class:`~lazykern.families.family.KernelFamily`, ``tropical_counting``: a product of any shape
(one thread per output entry, every operand read through element strides), the row kernel of a
sweep's strided steps (:mod:`._strided`: one thread per row of the boundary, read once in place,
K, N <= 8), and the bit-addressed step over binary labels (``lk_count_bits``: the boundary read where
it lies in any axis order, and a step that brings in as many spins as it sums out written over it,
so a counting sweep holds one boundary), each with 1 to RESIDUES_MAX count arrays in one launch, one
fragment per (semiring, value dtype, count dtype, residues, tile); NumPy operands use the NumPy kernel.

This module holds the public functions and re-exports the names of :mod:`.counts`, where each stage lives:
the kernels (:mod:`.counts.kernels`) and their launches (:mod:`.counts.launch`), the algebra
(:mod:`.counts.algebra`), bounds (:mod:`.counts.bounds`), the passes' layout (:mod:`.counts.passes`) and
the exact counts they rebuild (:mod:`.counts.exact`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import DeviceMemoryError, LazykernWarning, warn_user
from . import _crt, _procs, _spread
from .counts import arrays, bounds, passes
from .counts.algebra import CountingAlgebra, SaturatingCounting, algebra
from .counts.bounds import INTERVAL_ENTRIES_MAX, count_bound, float_counts, plan_roundings, proven
from .counts.exact import exact
from .counts.kernels import (
    BITS_SIGNATURE,
    COUNT_DTYPES,
    RESIDUES_MAX,
    ROWS_KMAX,
    ROWS_SIGNATURE,
    SIGNATURE,
    THREADS,
    VALUE_DTYPES,
    family,
    kernel_name,
    make_family,
)
from .counts.launch import count_bmm
from .counts.passes import residues_per_pass
from .counts.wide import exact_or_none, from_short
from .einsum import ContractionPlan, build_network, contract_network, parse

__all__ = [
    "BITS_SIGNATURE", "COUNT_DTYPES", "INTERVAL_ENTRIES_MAX", "RESIDUES_MAX", "ROWS_KMAX", "ROWS_SIGNATURE",
    "SIGNATURE", "THREADS", "VALUE_DTYPES", "CountingAlgebra", "algebra", "contract_network", "count_bmm",
    "count_bound", "count_network", "einsum", "exact", "family", "float_counts", "kernel_name", "make_family",
    "plan_roundings", "proven", "residues_per_pass",
]  # fmt: skip

log = logging.getLogger("lazykern")
# A count past int64 on a GPU is first one pass of 128-bit counts that saturate (:mod:`.counts.wide`), where
# it may run; False: the float64 pass and the primes only (what a count past 2^128 - 1 takes)
WIDE_PASS = True


def einsum(
    subscripts: str,
    *operands: Any,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    slices: Sequence[Any] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: Sequence[int] | str | None = None,
) -> tuple[Any, Any]:
    """(values, counts) of the counting contraction. An operand is an array (every entry counts
    once) or a pair (values, counts); counts are int64 or float64. Arguments as for
    :func:`lazykern.tn.einsum` (with ``devices``, the groups' results are added in the counting
    semiring: counts of tied values sum).

    Integer counts are exact: when every count provably fits in int64 (the product of the summed
    labels' sizes and of each operand's largest |count| is below 2^63) one pass gives them as an
    int64 array on the operands' device; otherwise further passes modulo primes rebuild them
    (:mod:`._crt`) and the result comes back on the host: values as a NumPy array, counts as a
    NumPy object array of Python ints (a Python int for a scalar result). float64 counts are
    floats: they round past 2^53 (a warning says when)."""
    inputs, output = parse(subscripts, len(operands))
    return count_network(
        inputs,
        output,
        operands,
        semiring=semiring,
        optimize=optimize,
        slices=slices,
        memory_limit=memory_limit,
        max_time=max_time,
        devices=devices,
    )


def _check_integer_values(net: Any) -> None:
    """Integer values are summed as they are (no saturation, no MIN/MAX standing for -inf/+inf as in
    :func:`lazykern.tn.einsum`): refused, before anything runs, where a sum of one entry per operand could
    pass the dtype (2^63 - 1 + 2^63 - 1 wrapped to -2) or where an operand holds the dtype's bounds."""
    dtype = net.be.dtype(net.leaves[0].parts[0]) if net.leaves else np.dtype(np.float64)
    if dtype.kind not in "iu":
        return
    info = np.iinfo(dtype)
    reach = 0
    for t in net.leaves:
        host = net.be.to_host(t.parts[0])
        if host.size == 0:
            continue
        if bool(((host == info.min) | (host == info.max)).any()):
            raise ValueError(
                f"counting.einsum: an operand holds {dtype}'s bound ({info.min} or {info.max}), which integer "
                "counting values do not read as -inf/+inf; pass float64 values with -inf/+inf"
            )
        reach += max(abs(int(host.min())), abs(int(host.max())))
    if reach > info.max:
        raise ValueError(
            f"counting.einsum: {dtype} values whose sums may reach {reach}, past {dtype}'s {info.max}: they would "
            "wrap; pass smaller values, or float64 values (exact below 2^53)"
        )


@_procs.scoped
def count_network(
    inputs: Sequence[Sequence[Any]],
    output: Sequence[Any],
    operands: Sequence[Any],
    *,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    slices: Sequence[Any] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: Sequence[int] | str | None = None,
) -> tuple[Any, Any]:
    """:func:`einsum` with any hashable labels, as :func:`lazykern.tn.einsum.contract_network`."""
    net = build_network(inputs, output, operands, semiring, CountingAlgebra)
    _check_integer_values(net)
    if any(net.be.dtype(t.parts[1]).kind == "f" for t in net.leaves):  # weights: one pass of floats
        wide = [c for c in (op[1] for op in operands if isinstance(op, tuple)) if net.be.dtype(c).kind in "iu"]
        if any(arrays.max_abs(net.be, c) >= 2**53 for c in wide):
            warn_user(
                "counting.einsum: int64 counts past 2^53 beside float64 counts round to float64: every count is "
                "taken as float64 when any is; pass int64 counts everywhere for exact integers",
                LazykernWarning,
            )
        floats: tuple[Any, Any] = contract_network(
            inputs,
            output,
            bounds.float_counts(net.be, operands, magnitudes=False),
            semiring=semiring,
            optimize=optimize,
            slices=slices,
            memory_limit=memory_limit,
            max_time=max_time,
            algebra=CountingAlgebra,
            devices=devices,
        )
        largest = float(arrays.max_abs(net.be, floats[1]))
        if largest >= 2.0**53:
            warn_user(
                f"counting.einsum: float64 counts up to {largest:.6g} round past 2^53; pass int64 counts "
                "(or plain arrays) for exact integers",
                LazykernWarning,
            )
        return floats
    plan = net.plan(optimize, slices, memory_limit, max_time)  # planned once, for the int64 counts
    shorter: list[tuple[Any, Any, Any]] = []  # the prime passes' (labels, operands, plan): made at the first

    def run(moduli: tuple[int, ...], device: int | None = None) -> tuple[Any, ...]:
        """One pass: its slices over ``devices``, or the whole pass on ``device`` (paired passes). A prime
        pass on one device runs the plan's shared steps' results (:mod:`._shared`), made at the first."""
        how: tuple[Any, Any, Any] = (inputs, operands, plan)
        if moduli and device is None and devices is None:
            if not shorter:
                shorter.append(passes.share(net, plan, inputs, operands))
            how = shorter[0]
        out: tuple[Any, ...] = contract_network(
            how[0],
            output,
            how[1],
            semiring=semiring,
            optimize=how[2],
            algebra=algebra(*moduli),
            devices=devices if device is None else [device],
        )
        return out

    value = net.be.dtype(net.leaves[0].parts[0]).itemsize

    def upper() -> _crt.Known | None:
        """What one pass of float64 counts (:func:`float_counts`) proves about every count: of what a prime
        pass runs (the shared steps' exact int64 results as leaves, :func:`.counts.passes.share`), each count's interval
        (:func:`.algebras.floatsum.interval`; its lower end where every count is nonnegative), or, where
        its 8-byte counts do not fit the memory, of the whole network by a plan of its own (sliced to fit:
        other steps, so a bound on every |count| alone)."""
        same = passes.fits_memory(net, plan, value + 8)  # the plan the prime passes run
        if not same:
            floats = bounds.float_counts(net.be, operands)
            whole = build_network(inputs, output, floats, semiring, CountingAlgebra)
            mine = whole.plan("auto" if isinstance(optimize, ContractionPlan) else optimize, (), memory_limit, max_time)
            how: tuple[Any, Any, Any] = (inputs, operands, mine)
        else:
            if devices is None and not shorter:
                shorter.append(passes.share(net, plan, inputs, operands))
            how = shorter[0] if devices is None else (inputs, operands, plan)
            floats = bounds.float_counts(net.be, how[1])
        try:
            with np.errstate(over="ignore", invalid="ignore"):  # past 2^1024 the bound is inf: None, said below
                values, counts = contract_network(
                    how[0], output, floats, semiring=semiring, optimize=how[2], algebra=CountingAlgebra, devices=devices
                )
        except DeviceMemoryError as exc:
            log.warning("counting: no float64 pass to bound the counts (%s); the operands' bound sets the primes", exc)
            return None
        return bounds.proven(
            net.be, operands, values, counts, bounds.plan_roundings(how[0], output, net.sizes, how[2]), same
        )

    def saturating() -> tuple[Any, Any] | None:
        """One pass of 128-bit counts (:mod:`.counts.wide`) of what a prime pass runs, where it may: a CuPy
        pass on one device, unsliced, every count given a nonnegative integer, its 16-byte counts fitting
        the memory beside the values, int16 ones where every sum provably fits them (18 bytes an entry, not
        20). Its answer where no count saturated (values and counts on the host, as the passes modulo primes
        give them); None otherwise, said in the log."""
        given = [op[1] for op in operands if isinstance(op, tuple)]
        why = (
            "off" if not WIDE_PASS
            else f"{net.be.name} arrays" if net.be.name != "cupy"
            else f"devices={devices!r}" if devices is not None
            else f"{plan.nslices} slices" if plan.nslices > 1
            else "negative counts given" if any(arrays.min_value(net.be, c) < 0 for c in given)
            else None
        )  # fmt: skip
        if why is None and not passes.fits_memory(net, plan, (2 if passes.SHORT_VALUES else value) + 16):
            why = "16-byte counts do not fit the memory"
        if why is not None:
            log.debug("counting: no pass of 128-bit counts (%s)", why)
            return None
        if not shorter:
            shorter.append(passes.share(net, plan, inputs, operands))
        how = shorter[0]
        short = passes.short_values(net.be, how[1], semiring)
        if short is None and not passes.fits_memory(net, plan, value + 16):
            log.debug("counting: no pass of 128-bit counts (values need %d bytes, which do not fit)", value)
            return None
        try:
            values, counts = contract_network(
                how[0], output, how[1] if short is None else short, semiring=semiring, optimize=how[2],
                algebra=SaturatingCounting,
            )  # fmt: skip
        except DeviceMemoryError as exc:
            log.warning("counting: no pass of 128-bit counts (%s); counting modulo primes", exc)
            return None
        held = exact_or_none(arrays.to_host(net.be, counts))
        if held is None:
            log.info("counting: a 128-bit count saturated; counting modulo primes")
            return None
        values = arrays.to_host(net.be, values)
        if short is not None:
            values = from_short(values, net.be.dtype(net.leaves[0].parts[0]))
        return values, held[()] if held.ndim == 0 else held

    labels = [t.labels for t in net.leaves]
    spread = _spread.resolve(devices, net.be)
    lanes = spread if spread is not None and len(spread) >= 2 and not net.be.on_host else None
    host: list[Any] = []

    def remote(moduli: tuple[int, ...]) -> tuple[Any, ...]:
        """The arguments of a worker's pass (the operands copied to the host once)."""
        if not host:
            host.extend(
                tuple(arrays.to_host(net.be, p) for p in op) if isinstance(op, tuple) else arrays.to_host(net.be, op)
                for op in operands
            )
        return (tuple(map(tuple, inputs)), tuple(output), host, semiring, moduli, net.be.name, plan)

    return exact(
        net.be,
        labels,
        output,
        operands,
        net.sizes,
        run,
        lambda: passes.residues_per_pass(net, plan),
        lanes,
        lambda: passes.int64_first(net, plan, value),
        remote,
        net.be.device_of(net.leaves[0].parts[0]) if lanes is not None else None,
        rounds=lanes is not None and plan.nslices < len(lanes),
        upper=upper,
        saturating=saturating,
    )
