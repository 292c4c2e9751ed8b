"""The tropical planner: a product's shape -> kernel, tile, K split and grid.

Pure functions, no device and no state: the device's SM count is an input
(``sms``), so a plan for any GPU can be made and tested on a CPU. The thresholds
were tuned on an H100 (132 SMs) and scale with ``sms``.

>>> make_plan("maxplus", "f32", False, "nn", 1, 4096, 4096, 4096, False, sms=132)
Plan(kind='gemm', name='maxplus_f32', grid=(1024, 1), threads=256, splits=1, kslice=0, reduce='', reduce_blocks=0)
"""

from __future__ import annotations

from typing import NamedTuple

from .fragments import (
    BACKWARD_SMEM_BYTES,
    BACKWARD_STRIP,
    BACKWARD_THREADS,
    REDUCE_THREADS,
    ROWS_KMAX,
    ROWS_THREADS,
    Spec,
    tile_shape,
)

INT32_MAX = 2**31 - 1
MAX_GRID_Y = 65535
MAX_BACKWARD_BLOCKS = 65536
SPLIT_MIN_K = 64  # a K slice is at least this long
SPLIT_TILE = 64  # split-K output tiles are 64 x 64 (fragments' splitk tile)
# Where the large tile would pad much or the small one is slow, the split-K kernel's 64 x 64 tile of one
# slice (no workspace, no reduce) writes C itself; False plans as before it (A/B benchmarks).
MEDIUM = True


class Plan(NamedTuple):
    """How one product launches: kind "gemm", "rows" or "splitk" (then a reduce launch too)."""

    kind: str
    name: str
    grid: tuple[int, int]
    threads: int
    splits: int = 1
    kslice: int = 0
    reduce: str = ""
    reduce_blocks: int = 0


def matrix_layout(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[str, int] | None:
    """How the kernels read the last two axes (strides in elements): ("n", ld) row-major,
    ("t", ld) a transposed view (X.T of a row-major X), None for anything else."""
    rows, cols = shape[-2], shape[-1]
    s0, s1 = strides[-2], strides[-1]
    if cols <= 1 or s1 == 1:
        ld = s0 if rows > 1 else max(cols, 1)
        if rows <= 1 or ld >= max(cols, 1):
            return "n", ld
    if rows <= 1 or s0 == 1:
        ld = s1 if cols > 1 else max(rows, 1)
        if cols <= 1 or ld >= max(rows, 1):
            return "t", ld
    return None


def operand_layout(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[str, int, int] | None:
    """(layout, ld, batch stride) of a 2-D or 3-D product operand, None when the kernels cannot
    read it in place: the one rule :func:`lazykern.tropical.bmm` applies and einsum arranges for.

    >>> operand_layout((4, 2, 3), (6, 3, 1)), operand_layout((2, 2, 2), (1, 2, 4))
    (('n', 3, 6), None)
    """
    if 0 in shape:
        return "n", max(shape[-1], 1), 0  # nothing to read: NumPy and CuPy give such arrays zero strides
    lay = matrix_layout(shape, strides)
    if lay is None:
        return None
    sb = 0
    if len(shape) == 3 and shape[0] > 1:
        sb = strides[0]
        if sb < 0:
            return None
    return lay[0], lay[1], sb


def split_target_blocks(sms: int) -> int:
    """Blocks a split product aims at: 4 per SM (2 of the 64x64 split tiles fit per SM)."""
    return 4 * sms


def make_plan(
    semiring: str,
    dtype: str,
    argmax: bool,
    layout: str,
    batch: int,
    M: int,
    N: int,
    K: int,
    batched: bool,
    *,
    sms: int,
    tile: str | None = None,
) -> Plan:
    """The plan of one product on a GPU with ``sms`` SMs; ``tile`` forces a tile variant (tests, sweeps).

    Raises ValueError for a forced row tile the shape does not fit, or an output too large for a grid.
    """
    tile = choose_tile(dtype, argmax, batch, M, N, K, sms=sms) if tile is None else tile
    if tile in ("splitk", "m") and K == 0:
        tile = "s"  # nothing to split: the plain kernel writes the zero (argmax -1)
    if tile in ROWS_KMAX:
        kmax = ROWS_KMAX[tile]
        if K > kmax or N > kmax:
            raise ValueError(f"the row kernels '{tile}' need K, N <= {kmax}, got K={K}, N={N}")
        blocks = min(-(-batch * M // ROWS_THREADS), 64 * sms)  # grid-stride beyond: enough to fill the GPU
        return Plan("rows", kernel_specs(semiring, dtype, argmax, layout, batched, tile)[0].name, (blocks, 1),
                    ROWS_THREADS)  # fmt: skip
    spec, *reduce = kernel_specs(semiring, dtype, argmax, layout, batched, tile)
    shape = spec.shape
    blocks = _blocks(M, N, shape.bm, shape.bn)
    if blocks > INT32_MAX:
        raise ValueError(f"output {M}x{N} needs {blocks} blocks, more than a CUDA grid holds")
    if tile not in ("splitk", "m"):
        return Plan("gemm", spec.name, (blocks, min(batch, MAX_GRID_Y)), shape.threads)
    if tile == "m":
        splits, kslice = 1, -(-K // shape.bk) * shape.bk
    else:
        splits, kslice = split_k(dtype, argmax, batch, M, N, K, sms=sms)
    if splits == 1:  # one slice: the kernel writes C itself (a batched 64 x 64 tile), no workspace or reduce
        return Plan("splitk", spec.name, (blocks, min(batch, MAX_GRID_Y)), shape.threads, 1, kslice)
    reduce_blocks = max(1, min(-(-batch * M * N // REDUCE_THREADS), 32 * sms))
    grid = (blocks, min(batch * splits, MAX_GRID_Y))
    return Plan("splitk", spec.name, grid, shape.threads, splits, kslice, reduce[0].name, reduce_blocks)


def kernel_specs(semiring: str, dtype: str, argmax: bool, layout: str, batched: bool, tile: str) -> list[Spec]:
    """The kernels a product with tile variant ``tile`` launches, in order (split-K: the product, then its reduce).

    >>> [s.name for s in kernel_specs("minplus", "f32", True, "nn", False, "splitk")]
    ['minplus_f32_argmax_splitk', 'reduce_minplus_f32_argmax']
    """
    if tile in ROWS_KMAX:
        return [Spec(semiring, dtype, argmax, tile=tile)]
    if tile == "m":  # the split-K kernel over the whole K: it writes C itself
        return [Spec(semiring, dtype, argmax, layout, "splitk")]
    spec = Spec(semiring, dtype, argmax, layout, tile, batched and tile != "splitk")
    return [spec, Spec(semiring, dtype, argmax, kind="reduce")] if tile == "splitk" else [spec]


def split_k(dtype: str, argmax: bool, batch: int, M: int, N: int, K: int, *, sms: int) -> tuple[int, int]:
    """(splits, kslice) for a split-K product: about 4 blocks per SM, slices of at least
    64 k (a multiple of the tile's BK, which keeps vector loads aligned), none empty.
    (1, K rounded up) when K is too short to split."""
    bk = tile_shape("splitk", dtype, argmax).bk
    blocks = batch * _blocks(M, N, SPLIT_TILE, SPLIT_TILE)
    want = min(-(-split_target_blocks(sms) // max(blocks, 1)), max(K // SPLIT_MIN_K, 1))
    kslice = -(-K // max(want, 1))
    kslice = max(-(-kslice // bk) * bk, bk)
    return -(-K // kslice), kslice


def choose_tile(dtype: str, argmax: bool, batch: int, M: int, N: int, K: int | None = None, *, sms: int) -> str:
    """Tile variant for a shape class on a GPU with ``sms`` SMs (needs K for "r4", "r" and "splitk"):

    * "r4" / "r": K, N <= 4 / 8, one thread per output row;
    * "splitk": the 64x64 tiles of the output give fewer than 2 blocks per SM and K
      splits into at least 2 slices of 64 (64 x 4096 x 64, 256^3, 4096 x 1024 x 16);
    * "t": N <= 16, tall;
    * "m": medium, the split-K kernel's 64x64 tile over the whole K (no workspace, no reduce), for
      f32 / i32 without argmax where its blocks fill the GPU and the large tile would pad a half more
      (batched 64 x 64, 256 x 64 outputs) or be mostly padding;
    * "s": small (the large tile would be mostly padding or leave most SMs idle);
    * "": large.
    """
    if K is not None and K <= ROWS_KMAX["r4"] and N <= ROWS_KMAX["r4"]:
        return "r4"
    if K is not None and K <= ROWS_KMAX["r"] and N <= ROWS_KMAX["r"]:
        return "r"
    if (
        K is not None
        and K >= 2 * SPLIT_MIN_K
        and batch * _blocks(M, N, SPLIT_TILE, SPLIT_TILE) < 2 * sms
        and split_k(dtype, argmax, batch, M, N, K, sms=sms)[0] >= 2
    ):
        return "splitk"
    if N <= 16 and M > 32:
        return "t"
    big = tile_shape("", dtype, argmax)
    # the 64 x 64 tile (where the large one is wider) while its blocks fill the GPU (2 per SM)
    medium = MEDIUM and not argmax and big.bm > SPLIT_TILE and _blocks(M, N, SPLIT_TILE, SPLIT_TILE) * batch >= 2 * sms
    if M * N * 4 <= big.bm * big.bn or _blocks(M, N, big.bm, big.bn) * batch < sms // 2:
        # the large tile would be mostly padding, or leave most SMs idle: the 64 x 64 one where it is
        # neither (batched 64 x 64 products: 2.1x "s", session 76), else the small one
        fits = M * N >= SPLIT_TILE * SPLIT_TILE // 2 and min(M, N) >= SPLIT_TILE // 2
        return "m" if medium and fits else "s"
    padded = _blocks(M, N, big.bm, big.bn) * big.bm * big.bn  # the large tile's outputs, padding included
    if medium and padded >= 1.5 * _blocks(M, N, SPLIT_TILE, SPLIT_TILE) * SPLIT_TILE**2:
        return "m"  # the large tile pads half again as much: 256 x 64 outputs (1.9x, session 76)
    return ""


def _blocks(M: int, N: int, bm: int, bn: int) -> int:
    """Tiles of ``bm`` x ``bn`` covering an M x N output."""
    return -(-M // bm) * -(-N // bn)


def backward_plan(
    which: str, itemsize: int, batch: int, M: int, N: int, K: int, shared: bool, *, sms: int, atomic: bool = False
) -> tuple[int, int, bool]:
    """(groups, blocks, zero the output first) for ``backward_{which}`` (see lk::backward_any).

    Gradients are summed in shared memory, a block per row (grad_A) or per strip of
    columns (grad_B) and chunk of K, and stored once; short rows (< 32) take the
    per-element atomic kernel (groups 0). The summed dimension (N for grad_A, M for
    grad_B) is split into groups (atomic write-out) when rows or strips alone give
    too few blocks for ``sms`` SMs. ``shared``: the output is a broadcast operand's
    gradient, summed over the batch (atomic write-out). ``atomic``: the per-element
    kernel regardless (benchmarks/backward.py compares the two).
    """
    total = batch * M * N
    if total == 0 or K == 0:
        return 0, 0, True
    kc_a = BACKWARD_SMEM_BYTES // itemsize
    kc_b = kc_a // BACKWARD_STRIP
    if atomic or (N if which == "a" else M) < 32:
        return 0, min(-(-total // BACKWARD_THREADS), MAX_BACKWARD_BLOCKS), True
    if which == "a":
        base, summed = batch * M * -(-K // kc_a), N
    else:
        base, summed = batch * -(-N // BACKWARD_STRIP) * -(-K // kc_b), M
    groups = max(1, min(-(-summed // 256), -(-split_target_blocks(sms) // base)))
    return groups, min(base * groups, MAX_BACKWARD_BLOCKS), shared or groups > 1
