"""Counting tropical numbers: (value, count) pairs, so one contraction gives an optimum and
how many assignments reach it (a spin glass's ground-state energy and degeneracy).

(a, m) (+) (b, n) is the better value with its count, or (a, m + n) on a tie;
(a, m) (x) (b, n) = (a + b, m * n). Values are float32/float64 (max-plus or min-plus).
Integer counts are exact, never wrapped: :func:`einsum` counts modulo 2^64 and, when a count may
not fit in int64, modulo 31-bit primes, and rebuilds every count by the Chinese remainder
theorem (:mod:`._crt`). A prime pass carries several residues (value, count mod p_1, ..., count
mod p_R): the values are read and computed once for R residues, and R is as large as the plan's
predicted peak lets it be (:func:`residues_per_pass`); where even the int64 pass would not fit the
plan (a 32 x 32 lattice's 2^32-entry boundary on an 80 GB GPU), the primes alone rebuild the counts.
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
"""

from __future__ import annotations

import functools
import gc
import itertools
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DeviceMemoryError, LazykernWarning, ReconstructionError, warn_user
from ..families.family import KernelFamily
from ..launch import _device
from ..launch._threads import run_each
from . import _crt, _procs, _reference_einsum, _shared, _spread, _upload
from ._backend import Backend
from ._contract import Algebra
from ._strided import BITS_MAX
from .algebras import floatsum
from .einsum import ContractionPlan, build_network, contract_network, parse, plan_steps

if TYPE_CHECKING:
    from ..store.cache import KernelCache

log = logging.getLogger("lazykern")

VALUE_DTYPES = {"f32": ("float", np.dtype("float32")), "f64": ("double", np.dtype("float64"))}
# counts: (C type, dtype, ring of counting.cu): float64 floats, int64 modulo 2^64, int32 residues modulo p
COUNT_DTYPES = {
    "i64": ("long long", np.dtype("int64"), 1),
    "f64": ("double", np.dtype("float64"), 0),
    "m32": ("int", np.dtype("int32"), 2),
}
THREADS = 256
_MAX_BLOCKS = 132 * 32
SIGNATURE = ["ptr"] * 6 + ["int64", "int32", "int32", "int32"] + ["int64"] * 8 + ["uint64"]
# the row kernel: values and 4 count pointers per operand (R of them read), sizes, strides, 4 moduli
ROWS_SIGNATURE = ["ptr"] * 15 + ["int64", "int64", "int32", "int32"] + ["int64"] * 6 + ["uint64"] * 4
# a row kernel's tile -> its K and N bound: 8 (the strided steps' bound, _strided.KMAX), 4 and 2 (a
# sweep's usual step: one spin out, one in). Fewer registers (sm_90, float32 values, one residue:
# 61, 48, 38; four: 128 with a spill, 86, 60) let more threads of a memory-bound step wait on loads.
ROWS_KMAX = {"rows": 8, "rows4": 4, "rows2": 2}
RESIDUES_MAX = 4  # residues one pass can carry (the row kernel's count pointers)
INTERVAL_ENTRIES_MAX = 1 << 20  # past this, a float64 pass reads its largest count alone (not each count's interval)
# the bit-addressed kernel: values and 4 count pointers of X, Y and C, the rows, batch bits, the bit
# masks and positions, 4 moduli
BITS_SIGNATURE = ["ptr"] * 15 + ["int64", "int32"] + ["uint64"] * 10


def kernel_name(semiring: str, value: np.dtype, count: np.dtype, rows: str = "", residues: int = 1) -> str:
    """``count[_rows|_rows4|_bitsKN]_{max|min}_{f32|f64}_{i64|f64|m32}[x R]``; int32 counts are residues
    modulo a prime, R of them (R > 1: a row kernel carrying one count array per prime); ``rows``: a row
    kernel's tile (ROWS_KMAX) or ``bitsKN`` (the bit-addressed step summing out K spins and bringing in
    N, 0 to 4 each), "" for the product of any shape."""
    v = next(k for k, (_, d) in VALUE_DTYPES.items() if d == value)
    c = next(k for k, (_, d, _) in COUNT_DTYPES.items() if d == count)
    more = f"x{residues}" if residues > 1 else ""
    return f"count{'_' + rows if rows else ''}_{'max' if semiring == 'maxplus' else 'min'}_{v}_{c}{more}"


def make_family(cache: KernelCache | None = None) -> KernelFamily:
    """The counting family: counting.cu plus one short fragment per instantiation (the product of
    any shape, and the row kernel of the strided steps with 1 to RESIDUES_MAX residues)."""
    preamble = resources.files(__package__).joinpath("counting.cu").read_text(encoding="utf-8")
    fam = KernelFamily("tropical_counting", preamble, options=("-std=c++17",), cache=cache)
    for semiring in ("maxplus", "minplus"):
        for vt, vd in VALUE_DTYPES.values():
            for ct, cd, ring in COUNT_DTYPES.values():
                _add_products(fam, semiring, vt, vd, ct, cd, ring)
                for residues in range(1, (RESIDUES_MAX if ring == 2 else 1) + 1):
                    for tile in ROWS_KMAX:
                        _add_rows(fam, semiring, vt, vd, ct, cd, ring, residues, tile)
    fam.add_generator(_bits_fragment, _bits_names)  # hundreds of them: each made when first asked for
    return fam


def _add_products(fam: KernelFamily, semiring: str, vt: str, vd: np.dtype, ct: str, cd: np.dtype, ring: int) -> None:
    """The product of any shape (``lk_count_bmm``: one thread per output entry)."""
    name = kernel_name(semiring, vd, cd)
    args = "av, ac, bv, bc, cv, cc, total, M, N, K, sa, ars, acs, sb, brs, bcs, sc, ldc, mod"
    code = (
        f'extern "C" __global__ void {name}(const {vt} *av, const {ct} *ac, const {vt} *bv, '
        f"const {ct} *bc, {vt} *cv, {ct} *cc, long long total, int M, int N, int K, long long sa, "
        "long long ars, long long acs, long long sb, long long brs, long long bcs, long long sc, "
        "long long ldc, unsigned long long mod) { lk_count_bmm"
        f"<{vt}, {ct}, {'true' if semiring == 'maxplus' else 'false'}, {ring}>({args}); }}\n"
    )
    fam.add(name, code, signature=SIGNATURE)


def _add_rows(
    fam: KernelFamily,
    semiring: str,
    vt: str,
    vd: np.dtype,
    ct: str,
    cd: np.dtype,
    ring: int,
    residues: int,
    tile: str,
) -> None:
    """The strided step's row kernel (``lk_count_rows``) carrying ``residues`` count arrays."""
    name = kernel_name(semiring, vd, cd, rows=tile, residues=residues)
    ptrs, arrays = _count_arrays(ct, "ac", "bc")
    code = (
        f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(const {vt} *av, const {vt} *bv, {vt} *cv, '
        f"{ptrs}, long long rows, long long M, int N, int K, long long sa, long long ars, long long acs, "
        "long long sb, long long sc, long long ldc, unsigned long long m0, unsigned long long m1, "
        "unsigned long long m2, unsigned long long m3) {\n"
        f"{arrays}"
        "    const unsigned long long mod[4] = {m0, m1, m2, m3};\n"
        f"    lk_count_rows<{vt}, {ct}, {'true' if semiring == 'maxplus' else 'false'}, {ring}, {ROWS_KMAX[tile]}, "
        f"{residues}>(av, ac, bv, bc, cv, cc, rows, M, N, K, sa, ars, acs, sb, sc, ldc, mod);\n"
        "}\n"
    )
    fam.add(name, code, signature=ROWS_SIGNATURE)


def _count_arrays(ct: str, a: str, b: str) -> tuple[str, str]:
    """A counting kernel's four count pointers per operand (``a``, ``b``) and result (``cc``): the
    parameter list, and the arrays the kernel body indexes by residue."""
    kinds = (("const ", a), ("const ", b), ("", "cc"))
    ptrs = ", ".join(f"{const}{ct} *{x}{q}" for const, x in kinds for q in range(4))
    arrays = "".join(f"    {const}{ct} *const {x}[4] = {{{x}0, {x}1, {x}2, {x}3}};\n" for const, x in kinds)
    return ptrs, arrays


def _bits_names() -> list[str]:
    """Every bit-addressed step's kernel (``lk_count_bits``): K, N spins 0 to BITS_MAX, each count ring."""
    names = []
    for semiring in ("maxplus", "minplus"):
        for _, vd in VALUE_DTYPES.values():
            for _, cd, ring in COUNT_DTYPES.values():
                for residues in range(1, (RESIDUES_MAX if ring == 2 else 1) + 1):
                    for kb, nb in itertools.product(range(BITS_MAX + 1), repeat=2):
                        names.append(kernel_name(semiring, vd, cd, rows=f"bits{kb}{nb}", residues=residues))
    return names


_BITS_NAME = re.compile(r"count_bits(\d)(\d)_(max|min)_(f32|f64)_(i64|f64|m32)(?:x(\d))?")


def _bits_fragment(name: str) -> tuple[str, list[str]] | None:
    """(code, signature) of the bit-addressed kernel ``name`` (:func:`kernel_name`), None for another name."""
    found = _BITS_NAME.fullmatch(name)
    if found is None:
        return None
    kb, nb, semiring, v, c, more = found.groups()
    vt, ct, ring = VALUE_DTYPES[v][0], COUNT_DTYPES[c][0], COUNT_DTYPES[c][2]
    residues = int(more or 1)
    if (
        max(int(kb), int(nb)) > BITS_MAX
        or not 1 <= residues <= (RESIDUES_MAX if ring == 2 else 1)
        or (more and residues == 1)
    ):
        return None
    ptrs, arrays = _count_arrays(ct, "xc", "yc")
    code = (
        f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(const {vt} *xv, const {vt} *yv, '
        f"{vt} *cv, {ptrs}, long long rows, int nb, unsigned long long holes_in, unsigned long long holes_out, "
        "unsigned long long conpos, unsigned long long batch_in, unsigned long long batch_out, "
        "unsigned long long rightpos, unsigned long long m0, unsigned long long m1, unsigned long long m2, "
        "unsigned long long m3) {\n"
        f"{arrays}"
        "    const unsigned long long mod[4] = {m0, m1, m2, m3};\n"
        f"    lk_count_bits<{vt}, {ct}, {'true' if semiring == 'max' else 'false'}, {ring}, {kb}, {nb}, "
        f"{residues}>(xv, xc, yv, yc, cv, cc, rows, nb, holes_in, holes_out, conpos, batch_in, batch_out, "
        "rightpos, mod);\n"
        "}\n"
    )
    return code, list(BITS_SIGNATURE)


family = make_family()


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
        if any(_largest(net.be, c) >= 2**53 for c in wide):
            warn_user(
                "counting.einsum: int64 counts past 2^53 beside float64 counts round to float64: every count is "
                "taken as float64 when any is; pass int64 counts everywhere for exact integers",
                LazykernWarning,
            )
        floats: tuple[Any, Any] = contract_network(
            inputs,
            output,
            float_counts(net.be, operands, magnitudes=False),
            semiring=semiring,
            optimize=optimize,
            slices=slices,
            memory_limit=memory_limit,
            max_time=max_time,
            algebra=CountingAlgebra,
            devices=devices,
        )
        largest = float(_largest(net.be, floats[1]))
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
                shorter.append(_share(net, plan, inputs, operands))
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
        pass runs (the shared steps' exact int64 results as leaves, :func:`_share`), each count's interval
        (:func:`.algebras.floatsum.interval`; its lower end where every count is nonnegative), or, where
        its 8-byte counts do not fit the memory, of the whole network by a plan of its own (sliced to fit:
        other steps, so a bound on every |count| alone)."""
        same = _fits(net, plan, value + 8)  # the plan the prime passes run
        if not same:
            floats = float_counts(net.be, operands)
            whole = build_network(inputs, output, floats, semiring, CountingAlgebra)
            mine = whole.plan("auto" if isinstance(optimize, ContractionPlan) else optimize, (), memory_limit, max_time)
            how: tuple[Any, Any, Any] = (inputs, operands, mine)
        else:
            if devices is None and not shorter:
                shorter.append(_share(net, plan, inputs, operands))
            how = shorter[0] if devices is None else (inputs, operands, plan)
            floats = float_counts(net.be, how[1])
        try:
            with np.errstate(over="ignore", invalid="ignore"):  # past 2^1024 the bound is inf: None, said below
                values, counts = contract_network(
                    how[0], output, floats, semiring=semiring, optimize=how[2], algebra=CountingAlgebra, devices=devices
                )
        except DeviceMemoryError as exc:
            log.warning("counting: no float64 pass to bound the counts (%s); the operands' bound sets the primes", exc)
            return None
        return proven(net.be, operands, values, counts, plan_roundings(how[0], output, net.sizes, how[2]), same)

    labels = [t.labels for t in net.leaves]
    spread = _spread.resolve(devices, net.be)
    lanes = spread if spread is not None and len(spread) >= 2 and not net.be.on_host else None
    host: list[Any] = []

    def remote(moduli: tuple[int, ...]) -> tuple[Any, ...]:
        """The arguments of a worker's pass (the operands copied to the host once)."""
        if not host:
            host.extend(
                tuple(_host(net.be, p) for p in op) if isinstance(op, tuple) else _host(net.be, op) for op in operands
            )
        return (tuple(map(tuple, inputs)), tuple(output), host, semiring, moduli, net.be.name, plan)

    return exact(
        net.be,
        labels,
        output,
        operands,
        net.sizes,
        run,
        lambda: residues_per_pass(net, plan),
        lanes,
        lambda: _int64_first(net, plan, value),
        remote,
        net.be.device_of(net.leaves[0].parts[0]) if lanes is not None else None,
        rounds=lanes is not None and plan.nslices < len(lanes),
        upper=upper,
    )


def proven(
    be: Backend, operands: Sequence[Any], values: Any, counts: Any, roundings: int, same: bool
) -> _crt.Known | None:
    """What a float64 pass (``values``, ``counts``: its results, ``roundings``: :func:`plan_roundings` of its
    plan) of ``operands`` (their counts' magnitudes, :func:`float_counts`) proves about the exact counts:
    every |count| at most the top of its interval (:func:`.algebras.floatsum.interval`), and, where every
    operand's counts are nonnegative and the pass ran the prime passes' plan (``same``), each count's own
    interval (read for up to INTERVAL_ENTRIES_MAX entries; past that, the largest count's alone)."""
    whole = same and math.prod(int(n) for n in counts.shape) <= INTERVAL_ENTRIES_MAX
    computed = _host(be, counts) if whole else np.asarray(float(_largest(be, counts)))
    found = floatsum.interval(computed, roundings)
    if found is None:
        return None
    lower, span = found
    top = int(max(lower.ravel().tolist(), default=0)) + span
    signed = any(_least(be, op[1]) < 0 for op in operands if isinstance(op, tuple))
    known = whole and not signed
    return _crt.Known(top, (lower if lower.ndim else lower[()]) if known else None, span, values, counts)


def plan_roundings(inputs: Sequence[Sequence[Any]], output: Sequence[Any], sizes: dict[Any, int], plan: Any) -> int:
    """:func:`.algebras.floatsum.path_roundings` of ``plan`` priced on this network's own labels and sizes (as
    :func:`~lazykern.tn.einsum.plan_flops`: a plan's own figures may be another network's): each step's sum
    length is its multiply-adds per result entry, the product of the labels it sums out; a plan of no steps
    sums the labels that are not in ``output`` at once."""
    steps = plan_steps(inputs, output, sizes, plan.path, dict(plan.sliced))
    sums = [-(-int(s.flops) // max(int(s.result), 1)) for s in steps]
    if not steps:
        sums = [math.prod(sizes[x] for x in {x for t in inputs for x in t} - set(output))]
    operands = [len(s.operands) for s in steps] or [len(inputs)]
    return floatsum.path_roundings(sums, operands, len(inputs), plan.nslices)


def float_counts(be: Backend, operands: Sequence[Any], magnitudes: bool = True) -> list[tuple[Any, Any]]:
    """``operands`` with float64 counts, 1 where an operand gives none; ``magnitudes``: each count's |count|.

    With magnitudes, their contraction (the same values, so the same optimal terms) sums products of these
    magnitudes, at least each exact |count| (the triangle inequality), in nonnegative float64 arithmetic
    whose rounding :func:`.algebras.floatsum.upper_bound` bounds: a proven upper bound on every |count| from
    one pass. Without, it is the float route's one pass (every operand's counts in one dtype: a product of
    int64 and float64 counts is taken in neither)."""
    out: list[tuple[Any, Any]] = []
    for op in operands:
        if isinstance(op, tuple):
            values, counts = op
            counts = _cast(be, counts, "float64")  # cast first: abs(-2^63) wraps in int64
            out.append((values, be.xp.abs(counts) if magnitudes else counts))
        else:
            out.append((op, be.full(op, tuple(op.shape), 1.0, be.xp.float64)))
    return out


def _share(net: Any, plan: Any, inputs: Sequence[Any], operands: Sequence[Any]) -> tuple[Any, Any, Any]:
    """(labels, operands, plan) of a prime pass: ``plan``'s small steps over leaves run once here with int64
    counts (:mod:`._shared`), their results leaves of a shorter plan; the network as given where no step is
    shared (on the host, for a sliced plan, or with operands' own counts, whose bound is not read here).

    The shared steps run on the host: each is a product of a few hundred entries, where a device pays a
    launch or two and the Python around them (a 32 x 32 lattice's 2687 steps: 1.73 s on an H100 machine,
    the device idle meanwhile; 0.66 s through the executor in NumPy on a 2-core CPU, 0.11-0.18 s by broadcast
    NumPy, :func:`._shared.run_counts`, where every value is finite). Values are exact integers in their
    dtype (:mod:`._exact`) and counts exact in int64 below the bound, so the host's results are the device's."""
    if net.be.on_host or plan.nslices > 1 or any(isinstance(op, tuple) for op in operands):
        return inputs, operands, plan
    labels = [t.labels for t in net.leaves]
    cut = _shared.split(labels, net.output, net.sizes, plan.path, [1] * len(labels))
    if cut is None:
        return inputs, operands, plan
    on_host = build_network(
        inputs, net.output, [_host(net.be, op) for op in operands], net.alg.semiring, CountingAlgebra
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


def _int64_first(net: Any, plan: Any, value: int) -> bool:
    """Whether a count past int64 starts with the int64 pass (counts modulo 2^64): where it fits, except on a
    GPU where two residues a pass fit as well. Two primes ride in the int64 pass's bytes (4 + 4 against 8 an
    entry) and give as many bits (62 against 64), the int64 kernels are the slower (80 registers against 64:
    3.03 s against 2.71 s of a 32 x 32 pass's bit-addressed steps on an H100, 2026-11-28)."""
    if not _fits(net, plan, value + 8):
        return False
    return net.be.on_host or residues_per_pass(net, plan) < 2


def residues_per_pass(net: Any, plan: Any) -> int:
    """How many residues (int32 count arrays beside the values) a pass of ``plan`` carries: as many as
    fit the free device memory by the plan's predicted peak (:func:`._cost.peak_bytes` counts every
    count array), up to RESIDUES_MAX, at least one (a plan that does not fit even that is refused
    by the pass's memory guard, with the figures); on the host the same within the available RAM
    (RESIDUES_MAX where unknown)."""
    if net.be.budget_bytes() is None:
        return RESIDUES_MAX
    value = net.be.dtype(net.leaves[0].parts[0]).itemsize
    fits = [r for r in range(2, RESIDUES_MAX + 1) if _fits(net, plan, value + 4 * r)]
    return max(fits, default=1)


def _fits(net: Any, plan: Any, entry_bytes: int) -> bool:
    """Whether a pass of ``plan`` with ``entry_bytes`` an entry fits the free device memory (the host: its
    available RAM; yes where unknown), by the network's margin (:meth:`~lazykern.tn.contraction.network.Network.margin`:
    on CuPy a sweep's boundaries are allocations of their own, outside the pool). Under the pool's margin
    alone (1.05) the H100's 32 x 32 passes of 12 bytes an entry ran out of memory with 77.3 GB in use, their
    predicted peak, the pool holding the freed 2^31-entry boundary's blocks cut up (2026-11-28)."""
    free = net.be.budget_bytes()
    return free is None or net.peak(plan, entry_bytes=entry_bytes) * net.margin(plan, entry_bytes) <= free


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
) -> tuple[Any, Any]:
    """Exact integer counts from passes ``run(moduli)`` of one plan, each the finished contraction
    (values, counts...) in the algebra :func:`algebra` (*moduli) (``()``: int64 counts modulo 2^64),
    wherever the passes run (one device, ``devices=`` groups, Dask workers): every group of a pass
    counts in the same rings and adds in them, so a pass gives the counts modulo each of its moduli,
    and :func:`._crt.solve` rebuilds the integers (``residues()`` primes a pass, asked only then). One pass when the
    :func:`count_bound` proves int64 holds every count (the result left where ``run`` gives it). Otherwise
    the int64 pass comes first only where it fits the plan (``wide()``, asked only then): a plan fit
    for narrower residue passes (a 32 x 32 lattice's 2^32-entry boundary on an 80 GB GPU) is not
    sliced for it, the residues alone rebuild the counts.

    The primes are those a proven bound on every |count| needs: :func:`count_bound` (the product of the
    summed labels' sizes and the operands' largest counts: 2^n for n spins, far above most counts), or,
    tighter, ``upper()`` where given (one pass of float64 counts, :func:`float_bound`), asked only when
    :func:`count_bound` passes int64. A count that bound proves below 2^63 is then the int64 pass alone.

    ``lanes`` (two GPUs or more): passes run in rounds, one whole pass per device at once
    (``run(moduli, device)``, with that device current; :func:`._crt.solve`): the first round the int64
    pass beside prime passes, later rounds as many prime passes as there are lanes; the primes are
    combined in order, so the counts are the same. A pass of fewer slices than devices (a 32 x 32
    lattice's sweep: one) cannot be split over them without running its steps twice: a round is the unit
    that scales. ``rounds=False`` (a plan
    with slices enough for every device): rounds for the first passes only (all of them needed), later
    passes one after the other with their slices spread (no pass computed ahead in vain). With ``remote(moduli)`` (the
    arguments of :func:`lazykern.tn._proc_worker.counting_pass`) and GPU operands
    (:func:`._spread.in_processes`), the pass on ``home`` runs here and the others in their devices'
    worker processes; else each on a thread of this process.
    """
    given = [op[1] for op in operands if isinstance(op, tuple)]  # the others count 1 per entry
    bound = count_bound(be, given, labels, output, sizes)
    bounded = 0.0  # seconds of the float64 pass that bounds the counts
    known: _crt.Known | None = None
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
            return known.values, _cast(be, known.counts, "int64")  # every count exact in that pass alone
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
                return _host(be, values), [_host(be, c) for c in counts]
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
        if lower is not None and not _crt.same_values(values, _host(be, known.values)):
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
    device's worker process (:mod:`._procs`, ``remote(moduli)``: the arguments of
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


def count_bound(
    be: Backend, counts: Sequence[Any], labels: Sequence[Sequence[Any]], output: Sequence[Any], sizes: dict[Any, int]
) -> int:
    """An upper bound on every |count| of the result: each is a sum over the assignments of the
    summed labels of a product of one count per operand (``counts``: the operands' counts that
    are not all 1)."""
    bound = math.prod(sizes[lab] for lab in {x for t in labels for x in t} - set(output))
    for c in counts:
        bound *= int(_largest(be, c))
    return bound


def _largest(be: Backend, x: Any) -> int | float:
    """max |x|, exactly (a Python int for integers; 0 for an empty array). From the extremes, not
    abs(): int64's abs(-2^63) wraps."""
    if math.prod(int(n) for n in x.shape) == 0:
        return 0
    if hasattr(x, "copy_to_host"):  # a Numba array: read on the host
        x, be = x.copy_to_host(), Backend("numpy", np)
    big, small = be.item(x.max()), be.item(x.min())
    largest: int | float = max(abs(big), abs(small))
    return largest


def _least(be: Backend, x: Any) -> int | float:
    """min(x) (0 for an empty array), read as :func:`_largest` reads."""
    if math.prod(int(n) for n in x.shape) == 0:
        return 0
    if hasattr(x, "copy_to_host"):
        x, be = x.copy_to_host(), Backend("numpy", np)
    least: int | float = be.item(x.min())
    return least


def _host(be: Backend, x: Any) -> np.ndarray:
    if isinstance(x, (np.ndarray, np.generic)):  # NumPy's, whatever the backend (the GPU route on the host)
        return np.asarray(x)
    if hasattr(x, "copy_to_host"):  # results handed back as Numba arrays
        host: np.ndarray = x.copy_to_host()
        return host
    return be.to_host(x)


class CountingAlgebra(Algebra):
    """(value, count) arrays; the product is :func:`count_bmm`. Integer counts are int64, counted
    modulo 2^64; :func:`algebra` gives the variant that counts modulo primes: (value, count modulo
    p_1, ..., count modulo p_R), int32 residues, R counts carried through one contraction."""

    nparts = 2
    counting = True
    moduli: tuple[int, ...] = ()  # (): the counts' own arithmetic (int64 modulo 2^64, or floats)

    @classmethod
    def prepare(cls, be: Backend, parts: tuple[Any, ...], position: int) -> tuple[Any, ...]:
        ones = len(parts) == 1
        if ones:  # every entry counts once (made in the pass's count type: modulo p, int32 residues)
            parts = (parts[0], be.full(parts[0], tuple(parts[0].shape), 1, be.xp.int32 if cls.moduli else _int64(be)))
        if len(parts) != 2:
            raise ValueError(f"counting operand {position} must be an array or a (values, counts) pair")
        value, count = be.dtype(parts[0]), be.dtype(parts[1])
        counts_allowed = (np.int32,) if ones and cls.moduli else (np.int64, np.float64)
        # int64 values on the host: exact sums past 2^53 (the NumPy product adds them as integers)
        host_int = be.on_host and value in (np.int64, np.dtype(object))  # int64 or Python ints
        if (value not in (d for _, d in VALUE_DTYPES.values()) and not host_int) or count not in counts_allowed:
            raise TypeError(
                f"counting operand {position} has values {value} and counts {count}; "
                "values must be float32/float64 (or int64 on the host) and counts int64/float64"
            )
        if tuple(parts[0].shape) != tuple(parts[1].shape):
            raise ValueError(f"counting operand {position}: values {parts[0].shape} and counts {parts[1].shape} differ")
        if not cls.moduli:
            return parts
        if ones:  # 1 is 1 modulo every prime: one array of ones serves every residue
            return (parts[0],) + (parts[1],) * len(cls.moduli)
        if count.kind == "f":
            raise TypeError(f"counting operand {position}: counts modulo a prime must be integers, got {count}")
        return (parts[0], *(_cast(be, parts[1] % p, "int32") for p in cls.moduli))

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        one = self.be.full(like[1], shape, 1)
        return (self.be.full(like[0], shape, 0),) + (one,) * (len(like) - 1)

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("counting contractions keep no argmax; use tropical.argmax_einsum for a configuration")
        if not self.moduli:
            return count_bmm(self.be, *A, *B, self.semiring), None
        # a product of any shape, one residue at a time (the values, the same each time, from the first)
        first = count_bmm(self.be, A[0], A[1], B[0], B[1], self.semiring, self.moduli[0])
        more = [
            count_bmm(self.be, A[0], a, B[0], b, self.semiring, p, values=first[0])[1]
            for a, b, p in zip(A[2:], B[2:], self.moduli[1:])
        ]
        return (*first, *more), None

    def rows(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any]) -> tuple[Any, ...]:
        """A strided step (:mod:`._strided`): X's values and counts read in place through the layout's
        strides, Y's contiguous (batch, con, right), the result in X's axis order; every residue in
        one launch of the row kernel."""
        batch, M, N, K = lay["dims"]
        shape = tuple(lay["out_shape"])
        out = tuple(self.be.empty(x, shape, whole=True) for x in X)  # a boundary: outside the pool
        strides = (lay["a"], (K * N if batch > 1 else 0, N, 1), lay["c"])
        if self.be.xp is np:  # the GPU route on the host (tests): the reference, residue by residue
            for q, (xc, yc, oc) in enumerate(zip(X[1:], Y[1:], out[1:])):
                p = self.moduli[q] if self.moduli else 0
                _launch(self.be, (X[0], xc), (Y[0], yc), (out[0], oc), lay["dims"], strides, self.semiring, p)
            return out
        _launch_rows(self.be, X, Y, out, lay["dims"], strides, self.semiring, self.moduli)
        return out

    def bits(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any], inplace: bool) -> tuple[Any, ...]:
        """A bit-addressed step (:func:`lazykern.tn._strided.bits_layout`): X's values and counts read
        where they lie, Y contiguous (batch, con, right); the result over X's own arrays (``inplace``)
        or in new ones. Every residue in one launch."""
        shape = (2,) * len(lay["out"])
        out = X if inplace else tuple(self.be.empty(x, shape, whole=True) for x in X)  # a boundary: outside the pool
        if self.be.xp is np:  # the GPU route on the host (tests): the kernel's addressing in NumPy
            _bits_reference(X, Y, out, lay, self.semiring, self.moduli)
        else:
            _launch_bits(self.be, X, Y, out, lay, self.semiring, self.moduli)
        return out

    def prefetch(self, like: tuple[Any, ...], tiles: Sequence[tuple[int, int]]) -> list[threading.Thread]:
        """The bit-addressed kernels of ``tiles`` for operands like ``like`` (values, then one count array
        per residue), built in threads at once (:meth:`KernelFamily.prefetch`): the threads, to join."""
        if self.be.on_host or self.be.xp is np:  # the GPU route on the host (tests) runs the reference
            return []
        value, count, residues = self.be.dtype(like[0]), self.be.dtype(like[1]), len(like) - 1
        names = [kernel_name(self.semiring, value, count, rows=f"bits{kb}{nb}", residues=residues) for kb, nb in tiles]
        return family.prefetch(names, arch=_device.arch(self.be.device_of(like[0]) or 0))

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        """Combine two slices: the better value, counts added where both reach it."""
        v = self.be.fmax(X[0], Y[0], self.semiring == "minplus")
        zero = self.be.full(X[1], tuple(X[1].shape), 0)
        mine, theirs = X[0] == v, Y[0] == v
        counts = []
        for q, (xc, yc) in enumerate(zip(X[1:], Y[1:])):
            x, y = self.be.where(mine, xc, zero), self.be.where(theirs, yc, zero)
            if self.moduli:
                counts.append(_cast(self.be, (_cast(self.be, x, "int64") + y) % self.moduli[q], "int32"))
            else:
                with np.errstate(over="ignore"):  # int64 counts are counted modulo 2^64
                    counts.append(x + y)
        return (v, *counts)


_algebras: dict[tuple[int, ...], type[CountingAlgebra]] = {(): CountingAlgebra}


def algebra(*moduli: int) -> type[CountingAlgebra]:
    """The counting algebra modulo each of ``moduli`` (primes below 2^31: int32 residues, one count
    array each, at most RESIDUES_MAX; none: int64 counts). ``algebra(0)`` is ``algebra()``."""
    moduli = tuple(int(p) for p in moduli if p != 0)
    found = _algebras.get(moduli)
    if found is None:
        bad = [p for p in moduli if not 2 <= p < 1 << 31]
        if bad or len(moduli) > RESIDUES_MAX:
            raise ValueError(f"counts are taken modulo 1 to {RESIDUES_MAX} primes below 2^31, got {list(moduli)}")
        name = "CountingModulo" + "x".join(str(p) for p in moduli)
        attrs = {"moduli": moduli, "nparts": 1 + len(moduli)}
        found = _algebras[moduli] = type(name, (CountingAlgebra,), attrs)
    return found


def _cast(be: Backend, x: Any, dtype: str) -> Any:
    if be.name == "torch":
        return x.to(getattr(be.xp, dtype))
    return x.astype(dtype)


def _int64(be: Backend) -> Any:
    return be.xp.int64


def count_bmm(
    be: Backend,
    Av: Any,
    Ac: Any,
    Bv: Any,
    Bc: Any,
    semiring: str = "maxplus",
    modulus: int = 0,
    values: Any = None,
) -> tuple[Any, Any]:
    """(b|1, M, K) x (b|1, K, N) counting product on the operands' backend, each operand read through
    its own strides (a transposed or permuted view is not copied unless its values and counts are laid
    out differently); the result is C-contiguous. ``modulus``: int32 counts are residues modulo it.
    ``values``: on a device, the (batch, M, N) array the values go to (another residue's product of the
    same operands wrote the same values there), so no second values array is held."""
    if be.on_host:
        return _reference_einsum.count_bmm(Av, Ac, Bv, Bc, semiring, modulus)
    if be.dtype(Av) != be.dtype(Bv) or be.dtype(Ac) != be.dtype(Bc):
        raise TypeError(f"counting operands differ in dtype: {be.dtype(Av)}/{be.dtype(Bv)} values")
    (Av, Ac), (Bv, Bc) = _alike(be, Av, Ac), _alike(be, Bv, Bc)
    batch = max(int(Av.shape[0]), int(Bv.shape[0]))
    M, K, N = int(Av.shape[1]), int(Av.shape[2]), int(Bv.shape[2])
    out = (be.empty(Av, (batch, M, N)) if values is None else values, be.empty(Ac, (batch, M, N)))  # all written
    if batch * M * N == 0:
        return out
    sa, sb = (s if int(x.shape[0]) > 1 else (0, *s[1:]) for x, s in ((Av, be.strides(Av)), (Bv, be.strides(Bv))))
    _launch(be, (Av, Ac), (Bv, Bc), out, (batch, M, N, K), (sa, sb, (M * N, N)), semiring, modulus)
    return out


def _alike(be: Backend, values: Any, counts: Any) -> tuple[Any, Any]:
    """Values and counts with the same element strides (the kernel reads both through one set)."""
    if be.strides(values) == be.strides(counts):
        return values, counts
    return be.contiguous(values), be.contiguous(counts)


def _launch(be: Backend, A: Any, B: Any, C: Any, dims: Any, strides: Any, semiring: str, modulus: int = 0) -> None:
    """C(b, i, j) = (+)_k A(b, i, k) (x) B(b, k, j) for (values, counts) triples, through element
    strides ((sa, ars, acs), (sb, brs, bcs), (sc, ldc)); a NumPy ``be`` that is not the host path
    (tests of the GPU route on the host) computes the same through the same strides."""
    batch, M, N, K = dims
    (sa, ars, acs), (sb, brs, bcs), (sc, ldc) = strides
    if be.xp is np:
        views = [
            _strided(x, shape, st)
            for x, shape, st in (
                (A[0], (batch, M, K), (sa, ars, acs)),
                (A[1], (batch, M, K), (sa, ars, acs)),
                (B[0], (batch, K, N), (sb, brs, bcs)),
                (B[1], (batch, K, N), (sb, brs, bcs)),
            )
        ]
        v, c = _reference_einsum.count_bmm(*(np.ascontiguousarray(x) for x in views), semiring, modulus)
        _strided(C[0], (batch, M, N), (sc, ldc, 1), True)[...] = v
        _strided(C[1], (batch, M, N), (sc, ldc, 1), True)[...] = c
        return
    from ..tropical import _arrays

    names = ("Av", "Ac", "Bv", "Bc", "Cv", "Cc")
    ops = [_arrays.as_operand(x, name) for x, name in zip((*A, *B, *C), names)]
    name = kernel_name(semiring, be.dtype(A[0]), be.dtype(A[1]))
    device = _device.resolve_or_current(_device.common([(n, o.device) for n, o in zip(names, ops)]))
    total = batch * M * N
    blocks = min(-(-total // THREADS), _MAX_BLOCKS)
    with _device.on(device):  # the operands' device, which need not be the current one
        kernel = family.get(name, arch=_device.arch(device))
        kernel[(blocks,), (THREADS,), ops[4].stream or 0](
            *(o.ptr for o in ops), total, M, N, K, sa, ars, acs, sb, brs, bcs, sc, ldc, np.uint64(modulus)
        )


def _launch_rows(
    be: Backend, A: Any, B: Any, C: Any, dims: Any, strides: Any, semiring: str, moduli: tuple[int, ...]
) -> None:
    """The row kernel: C(b, i, :) from A's row (b, i) read once through its strides and B (b, K, N)
    contiguous; values and every count array (one per modulus, or the one int64/float count) in one launch."""
    from ..tropical import _arrays

    batch, M, N, K = dims
    (sa, ars, acs), (sb, _, _), (sc, ldc) = strides
    names = ["Av", "Bv", "Cv"] + [f"{x}c{q}" for x in "ABC" for q in range(len(A) - 1)]
    arrays = [A[0], B[0], C[0], *A[1:], *B[1:], *C[1:]]
    ops = [_arrays.as_operand(x, name) for x, name in zip(arrays, names)]
    residues = len(A) - 1
    counts = [[o.ptr for o in ops[3 + q * residues : 3 + (q + 1) * residues]] for q in range(3)]
    padded = [c + [c[0]] * (4 - residues) for c in counts]  # the kernel reads only the first R
    mods = [*moduli, *[0] * (4 - len(moduli))]
    tile = min((t for t, kmax in ROWS_KMAX.items() if max(K, N) <= kmax), key=ROWS_KMAX.__getitem__)
    name = kernel_name(semiring, be.dtype(A[0]), be.dtype(A[1]), rows=tile, residues=residues)
    device = _device.resolve_or_current(_device.common([(n, o.device) for n, o in zip(names, ops)]))
    rows = batch * M
    blocks = max(min(-(-rows // THREADS), _MAX_BLOCKS), 1)
    with _device.on(device):
        kernel = family.get(name, arch=_device.arch(device))
        kernel[(blocks,), (THREADS,), ops[2].stream or 0](
            ops[0].ptr,
            ops[1].ptr,
            ops[2].ptr,
            *padded[0],
            *padded[1],
            *padded[2],
            rows,
            M,
            N,
            K,
            sa,
            ars,
            acs,
            sb,
            sc,
            ldc,
            *(np.uint64(m) for m in mods),
        )


def _bit_offsets(positions: list[int]) -> np.ndarray:
    """Where each assignment of some spins lies (C order over them: the first spin the highest bit)."""
    n = len(positions)
    return np.array([sum(1 << p for t, p in enumerate(positions) if (k >> (n - 1 - t)) & 1) for k in range(1 << n)])


def _spread_bits(r: np.ndarray, holes: list[int]) -> np.ndarray:
    """Each of ``r`` with a zero bit inserted at every position of ``holes``, lowest first."""
    for p in sorted(holes):
        r = ((r >> p) << (p + 1)) | (r & ((1 << p) - 1))
    return r


def _bits_reference(
    X: tuple[Any, ...], Y: tuple[Any, ...], out: tuple[Any, ...], lay: dict[str, Any], semiring: str, moduli: Any
) -> None:
    """What the bit-addressed kernel does, on NumPy arrays through its addressing (tests)."""
    rows = np.arange(lay["rows"], dtype=np.int64)
    a0 = _spread_bits(rows, lay["con"] + lay["batch_in"])[None, :, None] + _bit_offsets(lay["batch_in"])[:, None, None]
    c0 = _spread_bits(rows, lay["batch_out"] + lay["right_pos"])[None, :, None]
    c0 = c0 + _bit_offsets(lay["batch_out"])[:, None, None]
    read = a0 + _bit_offsets(lay["con"])[None, None, :]  # (batch, rows, K)
    write = c0 + _bit_offsets(lay["right_pos"])[None, None, :]  # (batch, rows, N)
    batch, K, N = len(lay["batch_in"]), len(lay["con"]), len(lay["right_pos"])
    results = []
    for q in range(len(X) - 1):
        p = moduli[q] if moduli else 0
        yv, yc = (y.reshape(1 << batch, 1 << K, 1 << N) for y in (Y[0], Y[1 + q]))
        xv, xc = X[0].reshape(-1)[read], X[1 + q].reshape(-1)[read]
        results.append(_reference_einsum.count_bmm(xv, xc, yv, yc, semiring, p))
    for q, (v, c) in enumerate(results):  # every result formed before any is written (X may be ``out``)
        out[1 + q].reshape(-1)[write] = c
        out[0].reshape(-1)[write] = v


def _launch_bits(
    be: Backend, X: tuple[Any, ...], Y: tuple[Any, ...], C: tuple[Any, ...], lay: dict[str, Any], semiring: str,
    moduli: tuple[int, ...],
) -> None:  # fmt: skip
    from ..tropical import _arrays

    residues = len(X) - 1
    names = ["Xv", "Yv", "Cv"] + [f"{x}c{q}" for x in "XYC" for q in range(residues)]
    arrays = [X[0], Y[0], C[0], *X[1:], *Y[1:], *C[1:]]
    ops = [_arrays.as_operand(x, name) for x, name in zip(arrays, names)]
    counts = [[o.ptr for o in ops[3 + q * residues : 3 + (q + 1) * residues]] for q in range(3)]
    padded = [c + [c[0]] * (4 - residues) for c in counts]  # the kernel reads only the first R
    mods = [*moduli, *[0] * (4 - len(moduli))]

    def packed(positions: list[int]) -> Any:  # np.uint64
        return np.uint64(sum(int(p) << (8 * t) for t, p in enumerate(positions)))

    def mask(positions: list[int]) -> Any:  # np.uint64
        return np.uint64(sum(1 << int(p) for p in positions))

    tile = f"bits{len(lay['con'])}{len(lay['right_pos'])}"
    name = kernel_name(semiring, be.dtype(X[0]), be.dtype(X[1]), rows=tile, residues=residues)
    device = _device.resolve_or_current(_device.common([(n, o.device) for n, o in zip(names, ops)]))
    blocks = max(min(-(-lay["rows"] // THREADS), _MAX_BLOCKS), 1)
    with _device.on(device):
        kernel = family.get(name, arch=_device.arch(device))
        kernel[(blocks,), (THREADS,), ops[2].stream or 0](
            ops[0].ptr,
            ops[1].ptr,
            ops[2].ptr,
            *padded[0],
            *padded[1],
            *padded[2],
            lay["rows"],
            len(lay["batch_in"]),
            mask(lay["con"] + lay["batch_in"]),
            mask(lay["batch_out"] + lay["right_pos"]),
            packed(lay["con"]),
            packed(lay["batch_in"]),
            packed(lay["batch_out"]),
            packed(lay["right_pos"]),
            *(np.uint64(m) for m in mods),
        )


def _strided(x: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...], writeable: bool = False) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(x, shape, tuple(s * x.itemsize for s in strides), writeable=writeable)
