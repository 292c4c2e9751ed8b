"""The k-best product on the GPU: a lazily compiled family (``tn_kbest``), one fragment per instantiation.

``kbest.cu`` (after ``counting.cu``'s ring helpers) holds two templates: ``lk_kbest_bmm``, one thread
per output entry, its k best values and counts in registers, and ``lk_kbest_tiled``, which stages tiles
of A and B in shared memory (as the tropical GEMM does) for a block of threads that each keep a few
outputs' k best in registers: every staged entry serves a whole tile row or column, not one output.
A fragment fixes the value dtype, k (1 to ``KB_MAX``), the counts (none, modulo 2^64, or residues modulo
a prime) and the tiling (none, or a tile shape of :data:`TILES`); a user compiles only those asked for.
:func:`launch` runs one on device arrays (:func:`tiling` picks which); :mod:`.kbest` calls it for GPU
operands.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from ...families.family import KernelFamily
from ...families.per_device import Loaded

if TYPE_CHECKING:
    from ...store.cache import KernelCache

KB_MAX = 4  # parts one launch reads (four pointers per operand and per kind)
THREADS = 256
_MAX_BLOCKS = 132 * 32
_MAX_TILE_BLOCKS = 1 << 20  # the tiled kernel's blocks walk the tiles past this
VALUES: dict[str, tuple[str, np.dtype]] = {
    "f32": ("float", np.dtype("float32")),
    "f64": ("double", np.dtype("float64")),
}
# ring name -> (counting.cu's RING, counts, the counts' C type): none, modulo 2^64, modulo a prime, float64 or
# float32 counts (RING 0: exact where the result is below 2^53 / 2^24, see kbest.FLOAT_EXACT)
RINGS = {
    "v": (1, False, "long long"),
    "i64": (1, True, "long long"),
    "m": (2, True, "long long"),
    "f8": (0, True, "double"),
    "f4": (0, True, "float"),
}
PAIRED_KMAX = KB_MAX // 2  # k of the paired kernels ("p": counts modulo 2^64 and modulo a prime at once)
_COUNTS = np.dtype(np.int64)  # counts and residues of the integer rings
_FLOAT_COUNTS: dict[int, np.dtype[Any]] = {8: np.dtype(np.float64), 4: np.dtype(np.float32)}  # rings "f8", "f4"
SIGNATURE = ["ptr"] * (6 * KB_MAX) + ["int64", "int32", "int32", "int32"] + ["int64"] * 8 + ["uint64"]
# tile shapes of lk_kbest_tiled: name -> (TX, TY, TM, TN, BK), TX * TY == THREADS; a block computes
# BM = TY * TM rows by BN = TX * TN columns. "s": square 32 x 32. (A narrow 64 x 8 tile for steps of 8
# columns ran at 0.66-0.85x the one-thread-per-output kernel on the H100: such steps keep that one.)
# "n": 64 rows by 16 columns, for steps of 16 to 31 columns (CountingMax(2) of a 3-regular 200-vertex graph
# has one, 2048 x 4096 x 16: 14.6 ms one thread per output, 10.1 ms with "n", 20.7 ms with "s" on the H200,
# session 72; its K tile keeps k = 4 with float64 values and int64 counts within 48 KB of shared memory).
# A 64 x 64 tile of 4 x 4 outputs a thread was no quicker than "s" on the largest steps (41.7 ms against
# 40.8) and slower on the others: the k-best merge's instructions bound these kernels, not shared memory.
TILES: dict[str, tuple[int, int, int, int, int]] = {"s": (16, 16, 2, 2, 8), "n": (16, 16, 4, 1, 8)}
TILED_MIN_MACS = 1 << 16  # below this a step is one launch's latency whichever kernel runs it


def kernel_name(
    k: int, value: np.dtype, counts: bool, modulus: int, paired: bool = False, tile: str = "", floats: int = 0
) -> str:
    """``kbest{k}_{f32|f64}_{v|i64|m|f8|f4|p}[_t{tile}]``: values only, counts modulo 2^64, modulo a prime,
    float counts of ``floats`` bytes, or modulo 2^64 and a prime (paired); one thread per output, or tiled
    with the tile shape ``tile`` of :data:`TILES`."""
    v = next(name for name, (_, d) in VALUES.items() if d == value)
    ring = "p" if paired else "v" if not counts else f"f{floats}" if floats else ("m" if modulus else "i64")
    return f"kbest{k}_{v}_{ring}" + (f"_t{tile}" if tile else "")


def tiling(batch: int, M: int, N: int, K: int) -> str:
    """The tile shape for a (batch, M, K) x (batch, K, N) step, "" for one thread per output: a tile
    whose rows or columns would be mostly outside the matrix wastes its threads, and a small step
    gains nothing from staging: "s" from 32 rows and 32 columns, "n" (64 x 16) from 64 rows and 16
    columns, one thread per output below (8 columns: see :data:`TILES`)."""
    if batch * M * N * K < TILED_MIN_MACS:
        return ""
    if M >= 32 and N >= 32:
        return "s"
    return "n" if M >= 64 and N >= 16 else ""


def chosen(tiled: bool | str, batch: int, M: int, N: int, K: int) -> str:
    """The tile a step takes: by its shape (:func:`tiling`) for True, none for False, else the one named."""
    return tiling(batch, M, N, K) if tiled is True else tiled or ""


def preamble() -> str:
    """The family's preamble: ``counting.cu``'s ring helpers, then ``kbest.cu``."""
    counting = resources.files("lazykern.tn").joinpath("counting.cu").read_text(encoding="utf-8")
    return counting + "\n" + resources.files(__package__).joinpath("kbest.cu").read_text(encoding="utf-8")


def source(
    name: str, value: str, k: int, ring: int, counts: bool, paired: bool, tile: str, ctype: str = "long long"
) -> str:
    """The ``extern "C"`` kernel ``name``: its pointers gathered into arrays, then one call of the template
    (``lk_kbest_tiled`` with the tile shape ``tile``, or ``lk_kbest_bmm``); ``ctype``: its counts' C type."""
    groups = ("av", "ac", "bv", "bc", "cv", "cc")
    params = ", ".join(
        f"{'' if g[0] == 'c' else 'const '}{value if g[1] == 'v' else ctype} *{g}{q}"
        for g in groups
        for q in range(KB_MAX)
    )
    arrays = "".join(
        f"    {'' if g[0] == 'c' else 'const '}{value if g[1] == 'v' else ctype} *const {g}[{KB_MAX}] = "
        f"{{{', '.join(f'{g}{q}' for q in range(KB_MAX))}}};\n"
        for g in groups
    )
    args = f"{value}, {ctype}, {k}, {ring}, {'true' if counts else 'false'}, {'true' if paired else 'false'}"
    template = "lk_kbest_bmm"
    if tile:
        template = "lk_kbest_tiled"
        args += ", " + ", ".join(str(x) for x in TILES[tile])
    return (
        f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}({params}, long long total, '
        "int M, int N, int K, long long sa, long long ars, long long acs, long long sb, long long brs, "
        "long long bcs, long long sc, long long ldc, unsigned long long mod) {\n"
        f"{arrays}"
        f"    {template}<{args}>(av, ac, bv, bc, cv, cc, total, M, N, K, sa, ars, acs, sb, brs, bcs, sc, ldc, "
        "mod);\n}\n"
    )


def make_family(cache: KernelCache | None = None) -> KernelFamily:
    fam = KernelFamily("tn_kbest", preamble(), options=("-std=c++17",), cache=cache)
    for vt, vd in VALUES.values():
        for k in range(1, KB_MAX + 1):
            rings = list(RINGS.items()) + ([("p", (1, True, "long long"))] if k <= PAIRED_KMAX else [])
            for rname, (ring, counts, ctype) in rings:
                paired = rname == "p"
                floats = int(rname[1]) if rname[0] == "f" else 0
                for tile in ("", *TILES):
                    name = kernel_name(k, vd, counts, 1 if rname == "m" else 0, paired, tile, floats)
                    fam.add(name, source(name, vt, k, ring, counts, paired, tile, ctype), signature=SIGNATURE)
    return fam


_loaded = Loaded(make_family)
family = _loaded.family  # the process's ``tn_kbest`` family, made on first use


def launch(
    be: Any,
    A: tuple[Any, ...],
    B: tuple[Any, ...],
    k: int,
    counts: bool,
    modulus: int,
    paired: bool = False,
    tiled: bool | str = True,
    floats: int = 0,
) -> tuple[Any, ...]:
    """The k-best product of device operands: parts (k values [, k counts [, k residues modulo ``modulus``
    when ``paired``]]) of (b|1, M, K) and (b|1, K, N), each operand's parts read through one set of
    strides (copied to contiguous where they differ); ``tiled``: a large step takes a tiled kernel (a
    tile name of :data:`TILES`: every step takes that one);
    ``floats``: float counts of that many bytes (8 or 4; ``modulus`` 0)."""
    out, call = arguments(be, A, B, k, counts, modulus, paired, tiled, floats)
    if call is not None:
        launch_into(_loaded, out[0], call)
    return out


def launch_into(loaded: Loaded, out: Any, call: tuple[str, int, tuple[Any, ...]]) -> None:
    """Launch ``call`` (kernel name, blocks, arguments) of ``loaded``'s family, THREADS a block, on the device
    and stream of ``out``, an array it writes: the one launch of the tensor networks' algebra kernels."""
    from ...tropical import _arrays

    name, blocks, args = call
    at, stream = _arrays.device_and_stream(out, "C")
    loaded.launch(name, at, stream, blocks, THREADS, args)


def arguments(
    be: Any,
    A: tuple[Any, ...],
    B: tuple[Any, ...],
    k: int,
    counts: bool,
    modulus: int,
    paired: bool = False,
    tiled: bool | str = True,
    floats: int = 0,
) -> tuple[tuple[Any, ...], tuple[str, int, tuple[Any, ...]] | None]:
    """The result's parts (allocated through ``be``) and the launch that fills them: (kernel name, blocks,
    arguments), None for an empty result. Addresses come from ``be.pointer``; nothing is launched."""
    (A, (sa, ars, acs)), (B, (sb, brs, bcs)) = alike(be, A), alike(be, B)
    batch = max(int(A[0].shape[0]), int(B[0].shape[0]))
    M, K, N = int(A[0].shape[1]), int(A[0].shape[2]), int(B[0].shape[2])
    out: tuple[Any, ...] = be.empty_parts(A, (batch, M, N))  # one allocation per dtype, the parts its views
    if batch * M * N == 0:
        return out, None
    sa, sb = (sa if int(A[0].shape[0]) > 1 else 0), (sb if int(B[0].shape[0]) > 1 else 0)

    value = be.dtype(A[0])

    def pointers(parts: tuple[Any, ...], name: str, dtype: np.dtype) -> list[Any]:
        for q, x in enumerate(parts):  # the kernel reads every part as the dtype its name says
            if be.dtype(x) != dtype:
                raise TypeError(f"k-best part {name}{q} is {be.dtype(x)}; this kernel reads {dtype}")
        ptrs = [be.pointer(x) for x in parts]
        return ptrs + [ptrs[0]] * (KB_MAX - len(ptrs))  # the kernel reads only the first k

    groups = []
    count_dtype = _FLOAT_COUNTS[floats] if floats else _COUNTS
    for parts, name in ((A, "A"), (B, "B"), (out, "C")):
        groups.append(pointers(parts[:k], f"{name}v", value))
        groups.append(pointers(parts[k:], f"{name}c", count_dtype) if counts else groups[-1])
    tile = chosen(tiled, batch, M, N, K)
    if tile:  # the kernel's first size is the batch; a block per output tile
        tx, ty, tm, tn, _ = TILES[tile]
        first_size = batch
        blocks = min(batch * -(-M // (ty * tm)) * -(-N // (tx * tn)), _MAX_TILE_BLOCKS)
    else:  # the number of outputs; a thread per output
        first_size = batch * M * N
        blocks = min(-(-first_size // THREADS), _MAX_BLOCKS)
    sizes = (first_size, M, N, K, sa, ars, acs, sb, brs, bcs, M * N, N, np.uint64(modulus))
    name = kernel_name(k, value, counts, modulus, paired, tile, floats)
    return out, (name, blocks, (*(p for g in groups for p in g), *sizes))


def alike(be: Any, parts: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """The parts with one set of strides (the kernel reads them all through it), and those strides
    (each part's read once)."""
    first = be.strides(parts[0])
    if all(be.strides(p) == first for p in parts[1:]):
        return parts, first
    parts = tuple(be.contiguous(p) for p in parts)
    return parts, be.strides(parts[0])
