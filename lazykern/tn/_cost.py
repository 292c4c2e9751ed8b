"""A contraction plan's cost as the device sees it: predicted seconds and peak bytes, from the plan alone.

Multiply-adds alone rank plans wrongly: on an H100 the boundary sweep of a 32 x 32 lattice ran at 13%
of the tropical GEMM rate (each step streams a 16 GiB boundary through a few multiply-adds per entry)
while opt_einsum's greedy order, with ten times the multiply-adds, ran at 86%. So a step costs the
larger of its multiply-adds at the GEMM rate and its bytes at the copy bandwidth, plus a fixed cost
per launch; the rates are measured figures, kept here and nowhere else.

The peak is the largest set of arrays alive at once as :meth:`lazykern.tn.contraction.executor.Executor.run`
executes the plan: every live intermediate, plus during a step its operands' layout copies and its
result, plus the argmax of every step whose choice is kept for backtracking (int32 per entry, and
the value beside it: a product allocates both in one buffer, which a kept index view holds).

>>> steps = [Step(flops=2**20, operands=(2**10, 2**10), result=2**10, depends=False)]
>>> seconds(steps, nslices=1, itemsize=4, rates=H100_F32) > 0
True
>>> peak_bytes(steps, leaves=2 * 2**10, entry_bytes=4, keep=0)
21504
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from typing import NamedTuple


class Rates(NamedTuple):
    """What a device sustains: tropical multiply-adds per second on large steps, bytes per second
    streamed by memory-bound steps, and seconds of fixed cost per step (launch and host work);
    ``overhead``: seconds of Python per step on the public path beyond ``step`` (layout ops, array
    creation, the product call), which binds only on tiny networks: :func:`latency` adds it, the
    ranking of plans (:func:`seconds`) does not, as it is the same for plans of as many steps."""

    macs: float
    bytes: float
    step: float
    overhead: float = 0.0


# H100 SXM, float32: 12.2 T tropical MAC/s is the measured max-plus GEMM at 4096^3 (DESIGN.md); the
# bandwidth is what the 32 x 32 row sweep achieved (10^13.04 multiply-adds of memory-bound steps,
# 1.1e13 bytes moved by this model's count in 7.0 s: 1.6e12 B/s, main 91cb78a); a step's host and launch cost is about
# 40 us through einsum's executor (a 3008-step 8 x 8 sweep: ~0.1 s). Through the public API with
# defaults (module=cupy) an 8 x 8 lattice's 175 steps took 57-64 ms on the H100 (benchmarks/results/
# spin-glass-defaults-h100-2026-11-25-s35-merged.json): ~0.34 ms a step, 0.3 ms of it the overhead.
H100_F32 = Rates(macs=12.2e12, bytes=1.6e12, step=40e-6, overhead=3e-4)
# float64 has no native max: 3.2 T MAC/s measured for the fmax chain; the kernels avoid fmax's NaN
# path, but no f64 contraction rate has been measured yet, so the chain's figure is used.
H100_F64 = Rates(macs=3.2e12, bytes=1.6e12, step=40e-6, overhead=3e-4)
# NumPy on one core of the CPU machine (tropical bmm through the reference kernels): the 39, 95, 175
# and 279 steps of 4 x 4 to 10 x 10 lattices took 130-195 us each (7.6, 17, 25, 36 ms), all of it
# per-step Python; this is the public path already, so no overhead beside it.
HOST = Rates(macs=3e8, bytes=4e9, step=1.6e-4)
# Moving the tensors to the device: a copy's fixed cost and the PCIe rate (H100 SXM, pinned or not:
# the network's leaves are two arrays, SpinGlass.network).
COPY_SECONDS = 2e-5
PCIE_BYTES = 2.5e10


# Bytes the pool holds beyond the model's arrays: the 32 x 32 row sweep peaked at 60.7 GB on the H100
# where this model counts 51.5 GB (rounding, blocks freed while the next step's were in flight).
POOL_MARGIN = 1.2
# The margin where every array of WHOLE_BYTES or more is a device allocation of its own (a counting
# sweep's boundary on CuPy, tn._backend.Backend._whole): those are exactly what the model counts, and the
# pool holds only the small arrays beside them (the 32 x 32 count at 12 bytes an entry: 72 GiB predicted
# of an H100's 79 GiB free, which 1.2 refused).
WHOLE_MARGIN = 1.02


# k-best products (CountingMax(k > 1)) on the H200, k = 2 with float32 values and counts (16 bytes an entry):
# multiply-adds a second by the kernel a step takes (:mod:`.algebras._kbest_kernels`): the 32 x 32 tile,
# the 64 x 16 one, one thread per output (K * N of 64 or more), one thread per output of a thin step;
# fitted to 300 steps of 13 orders of 3-regular graphs (100 to 200 vertices) and King's 12 x 12 timed
# alone (benchmarks/results/s73-h200, call 2). The merge's instructions bind them: bytes seldom do.
KBEST_MACS = {"s": 0.76e12, "n": 0.49e12, "": 0.37e12, "thin": 0.12e12}
KBEST_BYTES = 4.4e12
KBEST_ENTRY = 16
KBEST_STEP = 1.5e-4  # a k-best step's launch and Python through the executor (session 65: 0.47 ms with counts)


def kbest_step_seconds(batch: int, M: int, K: int, N: int, moved: int, split: bool) -> float:
    """Predicted seconds of a k-best step (batch, M, K) x (batch, K, N) moving ``moved`` entries: its
    multiply-adds at the rate of the kernel its shape takes (either operand first: the better), or its
    bytes, plus a step's fixed cost; ``split``: the step is cut along its sum (few threads, long sums:
    :meth:`.algebras.kbest.KBestAlgebra._split_sum`), its chunks one thread per output."""
    from .algebras import _kbest_kernels

    flops = batch * M * K * N
    if split:
        rate = KBEST_MACS[""]
    else:
        tiles = {_kbest_kernels.tiling(batch, M, N, K), _kbest_kernels.tiling(batch, N, M, K)}
        thin = "thin" if K * min(M, N) < 64 else ""
        rate = max(KBEST_MACS[t or thin] for t in tiles)
    return max(flops / rate, moved * KBEST_ENTRY / KBEST_BYTES) + KBEST_STEP


def rates_for(on_host: bool, itemsize: int) -> Rates:
    """The figures for a device kind and an entry size (bytes of the value part)."""
    if on_host:
        return HOST
    return H100_F64 if itemsize >= 8 else H100_F32


class Step(NamedTuple):
    """One step of a plan: multiply-adds per slice, entries of each operand and of the result
    (per slice), whether it depends on the sliced labels (else it runs once for all slices), and
    the entries of its operands that outlive it: the results of slice-independent steps that a
    sliced plan's executor keeps for the later slices; ``leaves``: which operands are the network's
    own tensors (alive throughout: the caller holds them); ``bits``: how an executor with
    bit-addressed kernels (the counting algebra's) runs it: 0 as any step, 1 its large operand read
    where it lies (no copy), 2 also the result written over that operand (nothing allocated);
    ``origins``: the step that made each operand (-1: a leaf), which :func:`arena_peak` follows;
    ``tile``: a bit-addressed step's spins summed out and brought in, which name its kernel."""

    flops: int
    operands: tuple[int, ...]
    result: int
    depends: bool
    pinned: int = 0
    leaves: tuple[bool, ...] = ()
    bits: int = 0
    origins: tuple[int, ...] = ()
    tile: tuple[int, int] = (0, 0)


def step_seconds(step: Step, itemsize: int, rates: Rates) -> float:
    """Predicted seconds of one run of ``step``: multiply-adds or bytes, whichever binds, plus launch."""
    moved = (sum(step.operands) + step.result) * itemsize
    return max(step.flops / rates.macs, moved / rates.bytes) + rates.step


def seconds(steps: Sequence[Step], nslices: int, itemsize: int, rates: Rates) -> float:
    """Predicted seconds of the whole contraction (steps that depend on no sliced label run once)."""
    return sum(step_seconds(s, itemsize, rates) * (nslices if s.depends else 1) for s in steps)


def latency(
    steps: Sequence[Step], nslices: int, itemsize: int, rates: Rates, copies: int = 0, nbytes: int = 0
) -> float:
    """Predicted seconds of the contraction through the public path: :func:`seconds` plus each run
    of a step's ``rates.overhead``, plus ``copies`` transfers of ``nbytes`` in all (0 on the host)."""
    runs = sum(nslices if s.depends else 1 for s in steps)
    moved = copies * COPY_SECONDS + nbytes / PCIE_BYTES if copies else 0.0
    return seconds(steps, nslices, itemsize, rates) + runs * rates.overhead + moved


def peak_bytes(
    steps: Sequence[Step],
    leaves: int,
    entry_bytes: int,
    keep: float,
    saved: Collection[int] = (),
    inplace: bool = False,
    host: bool = False,
) -> int:
    """Bytes alive at the worst moment of one slice's run: ``leaves`` (entries of the operands),
    every live intermediate, one layout copy of each operand of the step and its result, and the
    int32 argmax of the steps with at most ``keep`` result entries (0: none kept) with their values
    (one buffer: on the H100 a 22 x 22 lattice's kept choices held twice the int32 figure). ``entry_bytes``:
    bytes per entry of every array (value and count together for the counting algebra). ``saved``:
    indices of the steps whose results stay alive after their use, as the backtracking's checkpoints
    (counted from their step on, twice until their use: a bound, not the exact figure).

    Intermediates die at their one use (each is an operand of exactly one later step), except a sliced
    plan's slice-independent results kept for the later slices (``Step.pinned``). Slices run one after
    another, so the peak does not grow with their number. Arrays are counted as the pool allocates
    them (whole 512-byte units). ``inplace``: the executor runs the steps marked ``bits`` bit-addressed (no
    copy of the large operand; ``bits`` 2: the result written over it). ``host``: plus the NumPy kernels'
    temporaries (:func:`host_scratch`)."""
    scratch = host_scratch(steps, entry_bytes) if host else 0
    return with_saved(*peak_profile(steps, leaves, entry_bytes, keep, inplace), saved) + scratch


# The NumPy kernels (tn/_reference_einsum.py) hold temporaries beside a step's result: measured with
# tracemalloc, bmm up to 7.6 and count_bmm 5.1 times the result's bytes, plus the products of one K chunk
# (CHUNK_ELEMENTS entries, 18-24 bytes of temporaries each per 8-16 byte entry).
HOST_RESULT_COPIES = 8
HOST_CHUNK_COPIES = 3
HOST_CHUNK_ELEMENTS = 1 << 22  # _reference_einsum.CHUNK_ELEMENTS (products materialized per K chunk)


def host_scratch(steps: Sequence[Step], entry_bytes: int) -> int:
    """Bytes of the NumPy kernels' temporaries at the largest step: what the host path holds beyond the
    arrays :func:`peak_profile` counts."""
    entries = (HOST_RESULT_COPIES * s.result + HOST_CHUNK_COPIES * min(s.flops, HOST_CHUNK_ELEMENTS) for s in steps)
    return max(entries, default=0) * entry_bytes


def peak_profile(
    steps: Sequence[Step], leaves: int, entry_bytes: int, keep: float, inplace: bool = False
) -> tuple[list[int], list[int]]:
    """(bytes alive at each step's worst moment, bytes of each step's result) of :func:`peak_bytes`
    with no checkpoint: :func:`with_saved` adds any set of them in one pass."""

    def held(entries: int, size: int) -> int:  # bytes the pool hands out: whole 512-byte units
        return -(-entries * size // _UNIT) * _UNIT

    live = held(leaves, entry_bytes) + 2 * _UNIT  # the two leaf arrays (bonds, fields) as allocated
    kept = 0
    profile, results = [], []
    for s in steps:
        operands = sum(held(m, entry_bytes) for m in s.operands)
        result = held(s.result, entry_bytes)
        argmax = held(s.result, 4 + entry_bytes) if s.result <= keep else 0
        fresh = operands + result
        if inplace and s.bits:  # the large operand is read where it lies (and written over, in place)
            fresh -= held(max(s.operands), entry_bytes) + (result if s.bits == 2 else 0)
        profile.append(live + fresh + kept + argmax)  # live (operands included), copies, result
        results.append(result)
        freed = sum(
            held(m, entry_bytes) for m, leaf in zip(s.operands, s.leaves or (False,) * len(s.operands)) if not leaf
        )
        live += result - freed + held(s.pinned, entry_bytes)
        kept += argmax
    return profile, results


def arena_peak(steps: Sequence[Step], leaves: int, entry_bytes: int, capacity: int) -> int:
    """Bytes alive at the worst moment of a run holding its boundary in an arena: :func:`arena_run`'s peak."""
    return arena_run(steps, leaves, entry_bytes, capacity)[0]


def arena_run(steps: Sequence[Step], leaves: int, entry_bytes: int, capacity: int) -> tuple[int, frozenset[int]]:
    """(bytes alive at the worst moment, steps whose results the arena holds) of an unsliced run whose
    bit-addressed steps keep their boundary in one arena of ``capacity`` entries (:mod:`lazykern.tn._arena`),
    by the executor's rules: a step marked ``bits`` whose large operand is the arena's term writes its
    result over it; one whose large
    operand is elsewhere, while the arena holds no live term, writes its result into the arena (allocated
    at the first such step and held to the end); any other step allocates its result and a layout copy
    of each operand as :func:`peak_profile` counts, and frees the arena's term if it read it. A bit step
    copies its small operand (Y's layout), nothing else. The arena is one block, allocated once: the
    pool's margin (blocks of many sizes freed while others are in flight) is not added to it, so it is
    counted here as its bytes / POOL_MARGIN, and POOL_MARGIN x this peak is the arena plus the margin
    on the rest (a chimera 8 x 8 x 4 sweep: 64 GiB + 1.2 x 4.25 GiB)."""

    def held(entries: int) -> int:
        return -(-entries * entry_bytes // _UNIT) * _UNIT

    live = held(leaves) + 2 * _UNIT
    occupant: int | None = None  # the step whose result the arena holds
    allocated = False
    peak = 0
    resident: set[int] = set()  # steps whose results live in the arena
    for n, s in enumerate(steps):
        origins = s.origins or (-1,) * len(s.operands)
        big = max(range(len(s.operands)), key=lambda i: (s.operands[i], -i)) if s.operands else 0
        inside = occupant is not None and len(s.operands) == 2 and origins[big] == occupant
        claim = not inside and occupant is None and len(s.operands) == 2 and s.result <= capacity
        if s.bits and (inside or (claim and origins[big] not in resident)):
            if not allocated:
                live += int(held(capacity) / POOL_MARGIN)
                allocated = True
            small = [m for i, m in enumerate(s.operands) if i != big]
            peak = max(peak, live + sum(held(m) for m in small))
            occupant = n
            resident.add(n)
        else:
            peak = max(peak, live + sum(held(m) for m in s.operands) + held(s.result))
            live += held(s.result)
            if occupant is not None and occupant in origins:
                occupant = None
        live -= sum(held(m) for m, o in zip(s.operands, origins) if o >= 0 and o not in resident)
    return int(peak), frozenset(resident)


def with_saved(profile: Sequence[int], results: Sequence[int], saved: Collection[int]) -> int:
    """The peak of :func:`peak_profile`'s run when the results of the steps in ``saved`` stay alive
    (from the step after each on): the largest of each stretch between two checkpoints plus the
    checkpoints before it, one slice's max a stretch (priced a hundred times by an argmax's split)."""
    extra = peak = start = 0
    for n in sorted(saved):
        if n >= len(profile):
            break
        peak = max(peak, max(profile[start : n + 1]) + extra)
        extra += results[n]
        start = n + 1
    if start < len(profile):
        peak = max(peak, max(profile[start:]) + extra)
    return int(peak)


class ArgmaxPeak:
    """Bytes at the worst moment of an argmax run and its backtracking, for any set of checkpoints:
    the run's own peak (kept argmax and checkpoints counted from their step on), or a backtracking
    segment redoing a step as large as the run's while every kept argmax and checkpoint is alive.
    ``bare``: :func:`peak_profile` of the run keeping no argmax, when the caller has it (the same for
    every ``keep``: an argmax's split prices a dozen of them)."""

    def __init__(
        self,
        steps: Sequence[Step],
        leaves: int,
        entry_bytes: int,
        keep: float,
        host: bool = False,
        bare: tuple[list[int], list[int]] | None = None,
    ) -> None:
        self.scratch = host_scratch(steps, entry_bytes) if host else 0  # as for peak_bytes
        profile, self.results = bare or peak_profile(steps, leaves, entry_bytes, -1)
        argmax = [-(-s.result * (4 + entry_bytes) // _UNIT) * _UNIT if s.result <= keep else 0 for s in steps]
        # peak_profile with this keep: each step's kept argmax from its step on
        self.profile = [bytes_then + kept for bytes_then, kept in zip(profile, itertools.accumulate(argmax))]
        self.segment = max(profile, default=0) + sum(argmax)

    def __call__(self, saved: Collection[int]) -> int:
        checkpoints = sum(self.results[n] for n in saved)
        return max(with_saved(self.profile, self.results, saved), self.segment + checkpoints) + self.scratch


_UNIT = 512  # CuPy's pool rounds every allocation up to this
