"""Names and source text of every tropical kernel, generated on request, never compiled here.

A name parses into a :class:`Spec` (``Spec.parse``) and a spec names itself
(``spec.name``); the fragment is generated from the spec (``spec.code``) the first
time the family is asked for it. Naming scheme (stable: the CLI warms by these names
and the cache is keyed by them)::

    [bmm_]{semiring}_{dtype}[_argmax][_{layout}][_{tile}]
    backward_ab_{f32|f64}

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
``bmm_minplus_i32_argmax_tn_s``, ``maxplus_f32_r``, ``maxplus_f32_splitk``, ``backward_ab_f32``.
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


# (tile, dtype, argmax) -> shape, the fastest measured on an H100 (benchmarks/NOTES.md).
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
_LARGE_MAXMUL = {"i32": TileShape(128, 128, 16, 8, 8, 1)}  # integer max-times on its fast ring (IMAD + IMNMX)
_SMALL = TileShape(32, 32, 8, 2, 2)
_TALL = TileShape(128, 16, 4, 4, 2)
# f32 / i32 without argmax: 256 rows, K tiles of 8, 4 x 4 outputs a thread (tile_sweep.py's tall16 / tall8 on an
# H200, session 76: 6.2-6.8 T MAC/s against 3.8-4.0 at N = 16; an 8 x 32768 x 8 x 256 product 1.4-1.7x)
_TALL_WIDE = TileShape(256, 16, 8, 4, 4)
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
BACKWARD_SIGNATURE = ("ptr",) * 4 + ("int32",) * 4 + ("int64",) * 2 + ("int32",) * 3
BACKWARD_THREADS = 256
BACKWARD_SMEM_BYTES = 32768  # lk::BwdChunk: shared memory for one block's gradient sums
BACKWARD_STRIP = 8  # lk::BwdChunk::W: grad_B columns per block


KINDS = ("gemm", "reduce", "backward")
ROW_TILES = tuple(ROWS_KMAX)


@dataclasses.dataclass(frozen=True)
class Spec:
    """Everything that decides one kernel; ``spec.name`` and ``Spec.parse(name)`` are inverses.

    ``kind`` "gemm" is a forward product (``tile`` "r" / "r4": the row kernels), "reduce"
    folds split-K slices, "backward" is ``backward_ab_{dtype}`` (no semiring): grad_A and grad_B
    of a product in one launch (``grad`` "ab").

    >>> Spec.parse("bmm_minplus_i32_argmax_tn_s")
    Spec(semiring='minplus', dtype='i32', argmax=True, layout='tn', tile='s', batched=True, kind='gemm', grad='')
    >>> Spec("maxplus", "f32", tile="splitk").name
    'maxplus_f32_splitk'
    """

    semiring: str
    dtype: str
    argmax: bool = False
    layout: str = "nn"
    tile: str = ""
    batched: bool = False
    kind: str = "gemm"
    grad: str = ""

    def __post_init__(self) -> None:
        problem = _invalid(self)
        if problem:
            raise ValueError(f"not a tropical kernel: {self!r} ({problem})")

    @classmethod
    def parse(cls, name: str) -> Spec:
        """The spec named ``name``; ValueError if no tropical kernel has that name."""
        words = name.split("_") if isinstance(name, str) else []
        try:
            if words[:1] == ["backward"] and len(words) == 3:
                spec = cls("", words[2], kind="backward", grad=words[1])
            else:
                kind = "reduce" if words[:1] == ["reduce"] else "gemm"
                batched = words[:1] == ["bmm"]
                rest = words[1:] if kind == "reduce" or batched else words
                semiring, dtype, rest = rest[0], rest[1], rest[2:]
                argmax = rest[:1] == ["argmax"]
                rest = rest[1:] if argmax else rest
                layout = rest.pop(0) if rest[:1] and rest[0] in LAYOUTS else "nn"
                tile = rest.pop(0) if rest else ""
                spec = cls(semiring, dtype, argmax, layout, tile, batched, kind)
        except (IndexError, ValueError):
            raise ValueError(f"{name!r} is not a tropical kernel name (see lazykern.tropical.fragments)") from None
        if spec.name != name:  # e.g. an explicit "_nn", or words left over
            raise ValueError(f"{name!r} is not a tropical kernel name; the kernel it resembles is {spec.name!r}")
        return spec

    @property
    def name(self) -> str:
        return kernel_name(self)

    @property
    def rows(self) -> bool:
        return self.tile in ROW_TILES

    @property
    def shape(self) -> TileShape:
        return tile_shape(self.tile, self.dtype, self.argmax, self.semiring)

    @property
    def signature(self) -> tuple[str, ...]:
        if self.kind == "backward":
            return BACKWARD_SIGNATURE
        if self.kind == "reduce":
            return REDUCE_SIGNATURE
        if self.rows:
            return ROWS_SIGNATURE
        if self.tile == "splitk":
            return SPLITK_SIGNATURE
        return BMM_SIGNATURE if self.batched else GEMM_SIGNATURE

    @property
    def code(self) -> str:
        """The fragment: one ``extern "C"`` kernel named ``self.name``."""
        if self.kind == "backward":
            return backward_code(self.dtype)
        if self.kind == "reduce":
            return reduce_code(self.semiring, self.dtype, self.argmax)
        if self.rows:
            return rows_code(self.semiring, self.dtype, self.argmax, tile=self.tile)
        return gemm_code(self)


def kernel_name(spec: Spec) -> str:
    """The one place a kernel name is built::

    [bmm_|reduce_]{semiring}_{dtype}[_argmax][_{layout}][_{tile}]  or  backward_ab_{dtype}
    """
    if spec.kind == "backward":
        return f"backward_{spec.grad}_{spec.dtype}"
    parts = ["reduce"] if spec.kind == "reduce" else ["bmm"] if spec.batched else []
    parts += [spec.semiring, spec.dtype]
    if spec.argmax:
        parts.append("argmax")
    if spec.layout != "nn":
        parts.append(spec.layout)
    if spec.tile:
        parts.append(spec.tile)
    return "_".join(parts)


def _invalid(spec: Spec) -> str:
    """Why ``spec`` names no kernel ("" when it does)."""
    if spec.kind not in KINDS:
        return f"kind must be one of {KINDS}"
    if spec.kind == "backward":
        if spec.grad != "ab" or spec.dtype not in GRAD_DTYPES:
            return f"backward needs grad 'ab' (both gradients, one launch) and a dtype in {GRAD_DTYPES}"
        if spec.semiring or spec.argmax or spec.layout != "nn" or spec.tile or spec.batched:
            return "backward kernels take no semiring, argmax, layout, tile or batch"
        return ""
    if spec.grad:
        return "only backward kernels take grad"
    if spec.semiring not in SEMIRINGS or spec.dtype not in DTYPES:
        return f"semiring must be one of {SEMIRINGS} and dtype one of {tuple(DTYPES)}"
    if spec.layout not in LAYOUTS or spec.tile not in TILES + ROW_TILES:
        return f"layout must be one of {LAYOUTS} and tile one of {TILES + ROW_TILES}"
    if spec.kind == "reduce" and (spec.layout != "nn" or spec.tile or spec.batched):
        return "reduce kernels take no layout, tile or batch"
    if spec.rows and (spec.layout != "nn" or spec.batched):
        return "row kernels take strides at run time: no layout, no bmm_ twin"
    if spec.tile == "splitk" and spec.batched:
        return "a split-K kernel serves matmul and bmm: no bmm_ twin"
    return ""


def tile_shape(tile: str, dtype: str, argmax: bool = False, semiring: str | None = None) -> TileShape:
    if tile == "":
        if semiring == "maxmul" and not argmax and dtype in _LARGE_MAXMUL:
            return _LARGE_MAXMUL[dtype]
        return (_LARGE_ARGMAX if argmax else _LARGE)[dtype]
    if tile == "splitk":
        return _SPLITK_ARGMAX_64 if argmax and dtype in ("f64", "i64") else _SPLITK
    if tile == "t" and not argmax and dtype in ("f32", "i32"):
        return _TALL_WIDE
    return {"s": _SMALL, "t": _TALL}[tile]


def gemm_code(spec: Spec, shape: TileShape | None = None, name: str | None = None) -> str:
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


def reduce_code(semiring: str, dtype: str, argmax: bool) -> str:
    t = DTYPES[dtype]
    name = Spec(semiring, dtype, argmax, kind="reduce").name
    return (
        f'extern "C" __global__ void __launch_bounds__({REDUCE_THREADS}) {name}(\n'
        f"    const {t}* __restrict__ W, const int* __restrict__ IW, {t}* __restrict__ C, int* __restrict__ I,\n"
        "    long long mn, int batch, int splits, int kslice) {\n"
        f"    lk::reduce_slices<{SEMIRING_ID[semiring]}, {t}, {'true' if argmax else 'false'}>(\n"
        "        W, IW, C, I, mn, batch, splits, kslice);\n"
        "}\n"
    )


def rows_code(
    semiring: str, dtype: str, argmax: bool, kmax: int = ROWS_MAX, name: str | None = None, tile: str = "r"
) -> str:
    """A row kernel; ``tile`` ("r" or "r4") names it and sets KMAX unless ``kmax`` and ``name`` are given."""
    t = DTYPES[dtype]
    if name is None:
        name, kmax = Spec(semiring, dtype, argmax, tile=tile).name, ROWS_KMAX[tile]
    return (
        f'extern "C" __global__ void __launch_bounds__({ROWS_THREADS}) {name}(\n'
        f"    const {t}* __restrict__ A, const {t}* __restrict__ B, {t}* __restrict__ C, int* __restrict__ I,\n"
        "    int M, int N, int K, long long ars, long long acs, long long brs, long long bcs, long long ldc,\n"
        "    int batch, long long sA, long long sB, long long sC) {\n"
        f"    lk::rows<{SEMIRING_ID[semiring]}, {t}, {'true' if argmax else 'false'}, {kmax}>(\n"
        "        A, B, C, I, M, N, K, ars, acs, brs, bcs, ldc, batch, sA, sB, sC);\n"
        "}\n"
    )


def backward_code(dtype: str) -> str:
    """The backward kernel: grad_A and grad_B in one launch (lk::backward_pair)."""
    t = DTYPES[dtype]
    name = Spec("", dtype, kind="backward", grad="ab").name
    return (
        f'extern "C" __global__ void __launch_bounds__({BACKWARD_THREADS}) {name}(\n'
        f"    const {t}* __restrict__ gC, const int* __restrict__ I, {t}* __restrict__ gA, {t}* __restrict__ gB,\n"
        "    int batch, int M, int N, int K, long long sA, long long sB, int groups_a, int groups_b, int blocks_a) {\n"
        f"    lk::backward_pair<{t}>(gC, I, gA, gB, batch, M, N, K, sA, sB, groups_a, groups_b, blocks_a);\n"
        "}\n"
    )


def all_specs() -> list[Spec]:
    """Every forward tiled instantiation, core ones (nn layout, large tile) first."""
    combos = itertools.product(TILES, LAYOUTS, (False, True), (False, True), SEMIRINGS, DTYPES)
    # A split-K kernel always takes batch arguments: one serves matmul and bmm (no bmm_ twin).
    return [Spec(s, d, a, lay, tile, bat) for tile, lay, bat, a, s, d in combos if not (bat and tile == "splitk")]


def every_spec() -> list[Spec]:
    """All 746 kernels: the tiled forward ones, then rows and reduce per semiring, dtype and argmax, then backward."""
    out = all_specs()
    for semiring, dtype, argmax in itertools.product(SEMIRINGS, DTYPES, (False, True)):
        out += [Spec(semiring, dtype, argmax, tile=tile) for tile in ROW_TILES]
        out.append(Spec(semiring, dtype, argmax, kind="reduce"))
    out += [Spec("", dtype, kind="backward", grad="ab") for dtype in GRAD_DTYPES]
    return out


def core_specs() -> list[Spec]:
    """The 48 forward kernels every dtype and semiring needs (row-major, large tile)."""
    return [s for s in all_specs() if s.layout == "nn" and s.tile == ""]


def core_names() -> list[str]:
    """The 50 kernels worth warming ahead of time: the 48 core forward kernels and the 2 backward ones.

    Transposed layouts and the small / skinny tiles are compiled on first use.
    """
    backward = [Spec("", d, kind="backward", grad="ab").name for d in GRAD_DTYPES]
    return [s.name for s in core_specs()] + backward


def names() -> list[str]:
    """Every kernel name, in :func:`every_spec` order (what ``family.names()`` lists)."""
    return [s.name for s in every_spec()]


def fragment(name: str) -> tuple[str, tuple[str, ...]] | None:
    """(code, launch signature) of kernel ``name``, generated now; None if there is no such kernel."""
    try:
        spec = Spec.parse(name)
    except ValueError:
        return None
    return spec.code, spec.signature
