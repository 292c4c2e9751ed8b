"""Exact integer counts from passes of one plan (:func:`exact`): one int64 pass where a bound proves it
holds every count, else passes modulo primes, in rounds over devices (threads or worker processes), the
counts rebuilt by the Chinese remainder theorem (:mod:`lazykern.tn._crt`), each round profiled.
"""

from __future__ import annotations

import functools
import gc
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import DeviceMemoryError, ReconstructionError
from ...launch._threads import run_each
from .. import _crt, _procs, _spread
from .._backend import Backend
from .arrays import to_dtype, to_host
from .bounds import count_bound

log = logging.getLogger("lazykern")


def exact(
    be: Backend,
    labels: Sequence[Sequence[Any]],
    output: Sequence[Any],
    operands: Sequence[Any],
    sizes: dict[Any, int],
    run: Callable[..., tuple[Any, ...]],
    residues: Callable[[], int] = lambda: 2,
    lanes: Sequence[int] | None = None,
    wide: Callable[[], bool] = lambda: True,
    remote: Callable[[tuple[int, ...]], tuple[Any, ...]] | None = None,
    home: int | None = None,
    rounds: bool = True,
    upper: Callable[[], _crt.Known | None] | None = None,
    saturating: Callable[[], tuple[Any, Any] | None] | None = None,
) -> tuple[Any, Any]:
    """Exact integer counts from passes ``run(moduli)`` of one plan, each the finished contraction
    (values, counts...) in the algebra :func:`.algebra.algebra` (*moduli) (``()``: int64 counts modulo 2^64),
    wherever the passes run (one device, ``devices=`` groups, Dask workers): every group of a pass
    counts in the same rings and adds in them, so a pass gives the counts modulo each of its moduli,
    and :func:`.._crt.solve` rebuilds the integers (``residues()`` primes a pass, asked only then). One pass when the
    :func:`count_bound` proves int64 holds every count (the result left where ``run`` gives it). Otherwise
    the int64 pass comes first only where it fits the plan (``wide()``, asked only then): a plan fit
    for narrower residue passes (a 32 x 32 lattice's 2^32-entry boundary on an 80 GB GPU) is not
    sliced for it, the residues alone rebuild the counts.

    The primes are those a proven bound on every |count| needs: :func:`count_bound` (the product of the
    summed labels' sizes and the operands' largest counts: 2^n for n spins, far above most counts), or,
    tighter, ``upper()`` where given (one pass of float64 counts, :func:`float_bound`), asked only when
    :func:`count_bound` passes int64. A count that bound proves below 2^63 is then the int64 pass alone.
    Before either, ``saturating()`` where given: one pass of 128-bit counts (:mod:`.wide`), its answer
    where no count saturated (None: it did not run, or some count reached 2^128 - 1, and the passes above
    follow).

    ``lanes`` (two GPUs or more): passes run in rounds, one whole pass per device at once
    (``run(moduli, device)``, with that device current; :func:`.._crt.solve`): the first round the int64
    pass beside prime passes, later rounds as many prime passes as there are lanes; the primes are
    combined in order, so the counts are the same. A pass of fewer slices than devices (a 32 x 32
    lattice's sweep: one) cannot be split over them without running its steps twice: a round is the unit
    that scales. ``rounds=False`` (a plan
    with slices enough for every device): rounds for the first passes only (all of them needed), later
    passes one after the other with their slices spread (no pass computed ahead in vain). With ``remote(moduli)`` (the
    arguments of :func:`lazykern.tn._proc_worker.counting_pass`) and GPU operands
    (:func:`.._spread.in_processes`), the pass on ``home`` runs here and the others in their devices'
    worker processes; else each on a thread of this process.
    """
    given = [op[1] for op in operands if isinstance(op, tuple)]  # the others count 1 per entry
    bound = count_bound(be, given, labels, output, sizes)
    bounded = 0.0  # seconds of the float64 pass that bounds the counts
    known: _crt.Known | None = None
    if bound >= 1 << 63 and saturating is not None:
        answer = saturating()
        if answer is not None:
            return answer
    if bound >= 1 << 63 and upper is not None:
        began = time.perf_counter()
        known = upper()
        bounded = time.perf_counter() - began
        log.debug(
            "counting: counts proven at most %s, within intervals %s wide (float64 pass), %s by the operands alone",
            None if known is None else known.top,
            None if known is None or known.lower is None else known.span,
            bound,
        )
        bound = bound if known is None else min(bound, known.top)
        if known is not None and known.lower is not None and known.span == 0 and bound < 1 << 63:
            return known.values, to_dtype(be, known.counts, "int64")  # every count exact in that pass alone
    if bound < 1 << 63:
        values, counts = run(())  # exact in int64, left where the operands are
        return values, counts

    profile: list[dict[str, Any]] = []  # each round's passes (moduli, device) and wall seconds

    def on_host(moduli: tuple[int, ...], device: int | None = None) -> tuple[Any, list[Any]]:
        """One pass alone (a round of one), timed for the profile."""
        began = time.perf_counter()
        try:
            return _on_host(moduli, device)
        finally:
            profile.append(_round([moduli], [device], time.perf_counter() - began))

    def _on_host(moduli: tuple[int, ...], device: int | None = None) -> tuple[Any, list[Any]]:
        with be.on_device(device):
            try:
                values, *counts = run(moduli) if device is None else run(moduli, device)
                return to_host(be, values), [to_host(be, c) for c in counts]
            except DeviceMemoryError as exc:
                if len(moduli) < 2:
                    raise
                # Several residues a pass were chosen by the predicted peak; where the device disagrees,
                # the same moduli in narrower passes give the same residues.
                log.warning("counting: a pass of %d residues did not fit (%s); one residue a pass", len(moduli), exc)
        # Out of the handler: the failed pass's arrays, held by its traceback, are freed before the next.
        gc.collect()
        parts = [_on_host((p,), device) for p in moduli]
        return parts[0][0], [c for _, (c,) in parts]

    together = None
    if lanes is not None and len(lanes) >= 2:
        devices = list(lanes)

        def together(groups: Sequence[tuple[int, ...]]) -> list[tuple[Any, list[Any]]]:
            """Pass i of ``groups`` whole on device ``lanes[i]``, all at once."""
            assigned = list(zip(groups, devices))
            began = time.perf_counter()
            try:
                if remote is not None and _spread.in_processes(be):
                    return _in_processes(assigned, _on_host, remote, home)
                # a thread of each pass's own, all joined before an error of one is raised
                return run_each([functools.partial(_on_host, m, d) for m, d in assigned], "lazykern-passes")
            finally:
                profile.append(_round(list(groups), devices[: len(groups)], time.perf_counter() - began))

    lower, span = (None, 0) if known is None else (known.lower, known.span)
    try:
        values, counts = _crt.solve(
            on_host,
            bound,
            residues(),
            together,
            wide=wide(),
            lanes=len(lanes or ()),
            every_round=rounds,
            lower=lower,
            span=span,
        )
        if lower is not None and not _crt.same_values(values, to_host(be, known.values)):
            raise ReconstructionError(
                "the counting passes found other optimal values than the float64 pass that bounded their counts: "
                "the contraction is not deterministic; report it with the network"
            )
        return values, counts
    finally:
        _log_rounds(profile, bound, bounded, None if lower is None else span)


def _round(moduli: list[tuple[int, ...]], devices: Sequence[int | None], seconds: float) -> dict[str, Any]:
    """One round of counting passes for the profile: each pass's moduli (none: int64) and device."""
    return {"passes": [{"moduli": list(m), "device": d} for m, d in zip(moduli, devices)], "seconds": round(seconds, 4)}


def _log_rounds(rounds: list[dict[str, Any]], bound: int, bound_seconds: float, span: int | None = None) -> None:
    """The counting passes' profile, logged (``spread_profile``): rounds, their passes and wall seconds, and the
    seconds of the float64 pass that bounded the counts before them (0: none ran), with the bits of that bound
    and, where the pass gave each count's interval, of the interval's width (``span_bits``: the moduli pass
    it). A round runs one whole pass per device at once, so the passes a count needs set its scaling over
    devices."""
    if not rounds:
        return
    primes = sum(len(p["moduli"]) for r in rounds for p in r["passes"])
    log.debug(
        "counting: %d primes in %d rounds, %.3f s",
        primes,
        len(rounds),
        sum(r["seconds"] for r in rounds),
        extra={"spread_profile": {"kind": "counting rounds", "rounds": rounds, "primes": primes,
                                  "bound_bits": bound.bit_length(), "bound_seconds": round(bound_seconds, 4),
                                  "span_bits": None if span is None else span.bit_length()}},
    )  # fmt: skip


def _in_processes(
    assigned: list[tuple[tuple[int, ...], int]],
    on_host: Callable[[tuple[int, ...], int], tuple[Any, list[Any]]],
    remote: Callable[[tuple[int, ...]], tuple[Any, ...]],
    home: int | None,
) -> list[tuple[Any, list[Any]]]:
    """Passes ``(moduli, device)``: the one on ``home`` (else the first) in this process, each other in its
    device's worker process (:mod:`.._procs`, ``remote(moduli)``: the arguments of
    :func:`lazykern.tn._proc_worker.counting_pass`). A pass of several residues that does not fit its device
    is run again here, one residue a pass, as :func:`exact` does for its own."""
    mine = next((i for i, (_, d) in enumerate(assigned) if d == home), 0)
    others = [i for i in range(len(assigned)) if i != mine]
    calls = [(assigned[i][1], _spread.WORKER, "counting_pass", remote(assigned[i][0])) for i in others]
    try:
        answers = _procs.run(calls, lambda: on_host(*assigned[mine]))
    except DeviceMemoryError as exc:
        if all(len(moduli) < 2 for moduli, _ in assigned):
            raise
        log.warning("counting: a round of passes did not fit (%s); one residue a pass, one pass at a time", exc)
        gc.collect()
        return [on_host(moduli, device) for moduli, device in assigned]
    results: list[tuple[Any, list[Any]]] = [answers[0]] * len(assigned)
    for i, answer in zip(others, answers[1:]):
        results[i] = answer
    return results
