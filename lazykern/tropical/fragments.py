"""Names and source text of every tropical kernel, generated, never compiled here.

Naming scheme (stable: the CLI warms by these names and the cache is keyed by them)::

    [bmm_]{semiring}_{dtype}[_argmax][_{layout}][_{tile}]
    backward_{a|b}_{f32|f64}

* ``semiring``: ``maxplus``, ``minplus``, ``maxmul``; ``dtype``: ``f32``, ``f64``, ``i32``, ``i64``.
* ``bmm_``: batched over ``grid.y`` (batch strides, 0 broadcasts a 2-D operand).
* ``layout``: how A and B are read: ``nn`` (both row-major, the default, no suffix),
  ``nt`` (B is the transposed view of a row-major (N, K) array), ``tn``, ``tt``.
* ``tile``: none for the large register-blocked tile, ``s`` for a 32x32 tile
  (small problems), ``t`` for a 128x16 tile (tall, skinny outputs: N <= 16).

Products with K and N at most ``ROWS_MAX`` (8) use one thread per output row::

    {semiring}_{dtype}[_argmax]_r      (K, N <= 8)
    {semiring}_{dtype}[_argmax]_r4     (K, N <= 4: fewer registers, more rows in flight)

They take element strides at run time, so one kernel serves every layout and both
``matmul`` and ``bmm`` (no ``bmm_`` or layout variants).

Tall-K products with few output tiles (64 x 4096 x 64, 256^3) split K::

    {semiring}_{dtype}[_argmax][_{layout}]_splitk
    reduce_{semiring}_{dtype}[_argmax]

The ``splitk`` kernel (a 64x64 tile, batched signature plus ``splits, kslice``)
writes one partial product per K slice into a workspace; ``reduce`` folds the
slices (argmax: the first slice that attains the result). Both serve ``matmul``
and ``bmm``.

Examples: ``maxplus_f32``, ``maxplus_f32_argmax``, ``maxplus_f32_nt``,
``bmm_minplus_i32_argmax_tn_s``, ``maxplus_f32_r``, ``maxplus_f32_splitk``, ``backward_a_f32``.
"""

from __future__ import annotations

import dataclasses
import itertools

SEMIRINGS = ("maxplus", "minplus", "maxmul")
SEMIRING_ID = {"maxplus": "lk::MAXPLUS", "minplus": "lk::MINPLUS", "maxmul": "lk::MAXMUL"}
DTYPES = {"f32": "float", "f64": "double", "i32": "int", "i64": "lk::i64"}
NUMPY_DTYPES = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64"}
GRAD_DTYPES = ("f32", "f64")
LAYOUTS = ("nn", "nt", "tn", "tt")


@dataclasses.dataclass(frozen=True)
class TileShape:
    """Block tile BM x BN, K step BK, TM x TN outputs per thread."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    min_blocks: int = 1  # __launch_bounds__ occupancy hint: 2 caps registers at 128
    group: int = 1  # block rows walked together (L2 reuse), see lk::Tile

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def template_args(self) -> str:
        group = f", {self.group}" if self.group != 1 else ""
        return f"lk::Tile<{self.bm}, {self.bn}, {self.bk}, {self.tm}, {self.tn}{group}>"


# (tile, dtype, argmax) -> shape; "" is the large tile, measured on an H100
# (benchmarks/tile_sweep.py, 4096^3 max-plus):
#   f32 128x128x16 8x8, 1 block/SM (213 registers, no spills): 12.25 T MAC/s.
#   i32 the same with 2 blocks/SM and groups of 8 block rows: 12.57 (a few spills,
#       outside the fast inner loop; 1 block/SM gave 9.67).
#   f64 (and i64 by analogy) 64x64x16 4x4, 2 blocks/SM: 4.64 (128x64x8: 2.50).
# argmax (in-place tiled; integers on the fast ring), round 3 of the sweep:
#   f32 32x64x16 4x4, 4 blocks/SM: 8.69 (71% of plain; 64x64x16 mb2 8.12, 64x64x8 7.27).
#   i32 64x64x16 4x4, 2 blocks/SM, groups of 8 (one VIADDMNMX per product, range
#       check at the shared-memory store): 8.84, round 4 (6.07 before the check moved).
#       Round 6, packed argmax (lk::IntPackRing, operands within 2^22 / 4095 for
#       max-times): 11.67 (min-plus 11.68, max-times 9.07); larger tiles were faster
#       packed (128x128x16 8x8 mb1 12.30) but spill in the fallback rings, which then ran
#       4.94 instead of 8.79 on operands beyond the packed range: this tile keeps both.
#   f64 32x64x8 4x4, 4 blocks/SM: 3.36 (64x64x16 mb2 3.32, 64x64x8 mb2 3.25).
#   i64 64x64x16 4x4, 2 blocks/SM: 2.23 (32x64x8 mb4 2.13, the per-k loop 0.95).
_LARGE = {
    "f32": TileShape(128, 128, 16, 8, 8, 1),
    "i32": TileShape(128, 128, 16, 8, 8, 2, 8),
    "f64": TileShape(64, 64, 16, 4, 4, 2),
    "i64": TileShape(64, 64, 16, 4, 4, 2),
}
_LARGE_ARGMAX = {
    "f32": TileShape(32, 64, 16, 4, 4, 4),
    "i32": TileShape(64, 64, 16, 4, 4, 2, 8),
    "f64": TileShape(32, 64, 8, 4, 4, 4),
    "i64": TileShape(64, 64, 16, 4, 4, 2),
}
# integer max-times on its fast ring (IMAD + IMNMX), round 4: i32 128x128x16 8x8 with
# 1 block/SM (214 registers, no spills) 11.83 vs the max-plus tile (mb2 g8, spills) 10.80.
_LARGE_MAXMUL = {"i32": TileShape(128, 128, 16, 8, 8, 1)}
_SMALL = TileShape(32, 32, 8, 2, 2)
_TALL = TileShape(128, 16, 4, 4, 2)
# split-K: 64x64 output tiles (a 64-row or 64-column output wastes no block, and
# split_k counts blocks of 64x64), 2 blocks/SM; argmax takes the f32 argmax tile,
# and 64x64x8 for the 64-bit types (the 64x64 tile with fewer registers).
_SPLITK = TileShape(64, 64, 16, 4, 4, 2)
_SPLITK_ARGMAX_64 = TileShape(64, 64, 8, 4, 4, 2)
TILES = ("", "s", "t", "splitk")

GEMM_SIGNATURE = ("ptr", "ptr", "ptr", "ptr", "int32", "int32", "int32", "int64", "int64", "int64")
BMM_SIGNATURE = GEMM_SIGNATURE + ("int32", "int64", "int64", "int64")
SPLITK_SIGNATURE = BMM_SIGNATURE + ("int32", "int32")
REDUCE_SIGNATURE = ("ptr", "ptr", "ptr", "ptr", "int64", "int32", "int32", "int32")
REDUCE_THREADS = 256
ROWS_SIGNATURE = ("ptr", "ptr", "ptr", "ptr", "int32", "int32", "int32") + ("int64",) * 5 + ("int32",) + ("int64",) * 3
ROWS_MAX = 8  # K and N bound of the row kernels
ROWS_KMAX = {"r": 8, "r4": 4}  # row tile -> KMAX (K, N bound); KMAX 4 uses 40 registers instead of 56
ROWS_THREADS = 256
BACKWARD_SIGNATURE = ("ptr", "ptr", "ptr", "int32", "int32", "int32", "int32", "int64", "int32")
BACKWARD_THREADS = 256
BACKWARD_SMEM_BYTES = 32768  # lk::BwdChunk: shared memory for one block's gradient sums
BACKWARD_STRIP = 8  # lk::BwdChunk::W: grad_B columns per block


@dataclasses.dataclass(frozen=True)
class GemmSpec:
    """Everything that decides one forward instantiation."""

    semiring: str
    dtype: str
    argmax: bool = False
    layout: str = "nn"
    tile: str = ""
    batched: bool = False

    @property
    def name(self) -> str:
        parts = ["bmm"] if self.batched else []
        parts += [self.semiring, self.dtype]
        if self.argmax:
            parts.append("argmax")
        if self.layout != "nn":
            parts.append(self.layout)
        if self.tile:
            parts.append(self.tile)
        return "_".join(parts)

    @property
    def shape(self) -> TileShape:
        return tile_shape(self.tile, self.dtype, self.argmax, self.semiring)

    @property
    def signature(self) -> tuple[str, ...]:
        if self.tile == "splitk":
            return SPLITK_SIGNATURE
        return BMM_SIGNATURE if self.batched else GEMM_SIGNATURE


def tile_shape(tile: str, dtype: str, argmax: bool = False, semiring: str | None = None) -> TileShape:
    if tile == "":
        if semiring == "maxmul" and not argmax and dtype in _LARGE_MAXMUL:
            return _LARGE_MAXMUL[dtype]
        return (_LARGE_ARGMAX if argmax else _LARGE)[dtype]
    if tile == "splitk":
        return _SPLITK_ARGMAX_64 if argmax and dtype in ("f64", "i64") else _SPLITK
    return {"s": _SMALL, "t": _TALL}[tile]


def gemm_code(spec: GemmSpec, shape: TileShape | None = None, name: str | None = None) -> str:
    """The fragment of ``spec``; ``shape`` and ``name`` override its tile and symbol (tile sweeps)."""
    t = DTYPES[spec.dtype]
    shape = shape or spec.shape
    ta = "true" if spec.layout[0] == "t" else "false"
    tb = "true" if spec.layout[1] == "t" else "false"
    arg = "true" if spec.argmax else "false"
    params = (
        f"const {t}* __restrict__ A, const {t}* __restrict__ B, {t}* __restrict__ C, int* __restrict__ I, "
        "int M, int N, int K, long long lda, long long ldb, long long ldc"
    )
    split = spec.tile == "splitk"
    if spec.batched or split:
        params += ", int batch, long long sA, long long sB, long long sC"
        tail = "batch, sA, sB, sC"
    else:
        tail = "1, 0, 0, 0"
    if split:
        params += ", int splits, int kslice"
        tail += ", splits, kslice"
    targs = f"{SEMIRING_ID[spec.semiring]}, {t}, {arg}, {ta}, {tb}, {shape.template_args()}"
    return (
        f'extern "C" __global__ void __launch_bounds__({shape.threads}, {shape.min_blocks}) '
        f"{name or spec.name}({params}) {{\n"
        f"    lk::gemm<{targs}{', true' if split else ''}>(\n"
        f"        A, B, C, I, lk::Dims{{M, N, K, lda, ldb, ldc}}, {tail});\n"
        "}\n"
    )


def reduce_name(semiring: str, dtype: str, argmax: bool) -> str:
    return f"reduce_{semiring}_{dtype}{'_argmax' if argmax else ''}"


def reduce_code(semiring: str, dtype: str, argmax: bool) -> str:
    t = DTYPES[dtype]
    return (
        f'extern "C" __global__ void __launch_bounds__({REDUCE_THREADS}) {reduce_name(semiring, dtype, argmax)}(\n'
        f"    const {t}* __restrict__ W, const int* __restrict__ IW, {t}* __restrict__ C, int* __restrict__ I,\n"
        "    long long mn, int batch, int splits, int kslice) {\n"
        f"    lk::reduce_slices<{SEMIRING_ID[semiring]}, {t}, {'true' if argmax else 'false'}>(\n"
        "        W, IW, C, I, mn, batch, splits, kslice);\n"
        "}\n"
    )


def rows_name(semiring: str, dtype: str, argmax: bool, tile: str = "r") -> str:
    return f"{semiring}_{dtype}{'_argmax' if argmax else ''}_{tile}"


def rows_code(
    semiring: str, dtype: str, argmax: bool, kmax: int = ROWS_MAX, name: str | None = None, tile: str = "r"
) -> str:
    """A row kernel; ``tile`` ("r" or "r4") names it and sets KMAX unless ``kmax`` and ``name`` are given."""
    t = DTYPES[dtype]
    if name is None:
        name, kmax = rows_name(semiring, dtype, argmax, tile), ROWS_KMAX[tile]
    return (
        f'extern "C" __global__ void __launch_bounds__({ROWS_THREADS}) {name}(\n'
        f"    const {t}* __restrict__ A, const {t}* __restrict__ B, {t}* __restrict__ C, int* __restrict__ I,\n"
        "    int M, int N, int K, long long ars, long long acs, long long brs, long long bcs, long long ldc,\n"
        "    int batch, long long sA, long long sB, long long sC) {\n"
        f"    lk::rows<{SEMIRING_ID[semiring]}, {t}, {'true' if argmax else 'false'}, {kmax}>(\n"
        "        A, B, C, I, M, N, K, ars, acs, brs, bcs, ldc, batch, sA, sB, sC);\n"
        "}\n"
    )


def backward_name(which: str, dtype: str) -> str:
    return f"backward_{which}_{dtype}"


def backward_code(which: str, dtype: str) -> str:
    t = DTYPES[dtype]
    name = backward_name(which, dtype)
    return (
        f'extern "C" __global__ void __launch_bounds__({BACKWARD_THREADS}) {name}(\n'
        f"    const {t}* __restrict__ gC, const int* __restrict__ I, {t}* __restrict__ g,\n"
        "    int batch, int M, int N, int K, long long sG, int groups) {\n"
        f"    lk::backward_any<{t}, {'true' if which == 'a' else 'false'}>(gC, I, g, batch, M, N, K, sG, groups);\n"
        "}\n"
    )


def all_specs() -> list[GemmSpec]:
    """Every forward instantiation, core ones (nn layout, large tile) first."""
    combos = itertools.product(TILES, LAYOUTS, (False, True), (False, True), SEMIRINGS, DTYPES)
    # A split-K kernel always takes batch arguments: one serves matmul and bmm (no bmm_ twin).
    return [GemmSpec(s, d, a, lay, tile, bat) for tile, lay, bat, a, s, d in combos if not (bat and tile == "splitk")]


def core_specs() -> list[GemmSpec]:
    """The 48 forward kernels every dtype and semiring needs (row-major, large tile)."""
    return [s for s in all_specs() if s.layout == "nn" and s.tile == ""]


def core_names() -> list[str]:
    """The 52 kernels worth warming ahead of time: the 48 core forward kernels and the 4 backward ones.

    Transposed layouts and the small / skinny tiles are compiled on first use.
    """
    return [s.name for s in core_specs()] + [backward_name(w, d) for d in GRAD_DTYPES for w in ("a", "b")]


def all_fragments() -> dict[str, tuple[str, tuple[str, ...]]]:
    """name -> (code, launch signature), for the family to register."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for spec in all_specs():
        out[spec.name] = (gemm_code(spec), spec.signature)
    for semiring, dtype, argmax in itertools.product(SEMIRINGS, DTYPES, (False, True)):
        for tile in ROWS_KMAX:
            out[rows_name(semiring, dtype, argmax, tile)] = (rows_code(semiring, dtype, argmax, tile=tile),
                                                             ROWS_SIGNATURE)  # fmt: skip
        out[reduce_name(semiring, dtype, argmax)] = (reduce_code(semiring, dtype, argmax), REDUCE_SIGNATURE)
    for dtype in GRAD_DTYPES:
        for which in ("a", "b"):
            out[backward_name(which, dtype)] = (backward_code(which, dtype), BACKWARD_SIGNATURE)
    return out
