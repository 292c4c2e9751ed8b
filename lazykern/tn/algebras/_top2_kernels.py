"""The top-two counting product on the GPU: a lazily compiled family (``tn_top2``), one fragment per
instantiation (value dtype, count dtype, tile), of ``top2.cu``'s templates.

:func:`launch` takes a step's operands (value, count of it, count of one below) and returns the step's
(T, c0, c1). Large steps take the tiled kernel (:data:`TILES`: the k-best kernels' names and rule, tiles of
their own), given the best values ``T`` of their outputs (the tropical GEMM's max-plus product,
computed by the caller); the others one thread per output that finds T itself in one pass over the
terms, their sums cut into chunks where few outputs would leave the device idle (merged after).
"""

from __future__ import annotations

import math
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from ...families.family import KernelFamily
from ...families.per_device import Loaded
from . import _kbest_kernels

if TYPE_CHECKING:
    from ...store.cache import KernelCache

THREADS = _kbest_kernels.THREADS
VALUES: dict[str, tuple[str, np.dtype[Any]]] = {
    "f32": ("float", np.dtype("float32")),
    "f64": ("double", np.dtype("float64")),
}
COUNTS: dict[str, tuple[str, np.dtype[Any]]] = {
    "f4": ("float", np.dtype("float32")),
    "f8": ("double", np.dtype("float64")),
}
SIGNATURE = ["ptr"] * 9 + ["int64", "int32", "int32", "int32"] + ["int64"] * 6 + ["int32", "int32"]
# lk_top2_merge: x (values, c0, c1) and its chunks, y and its chunks, the results, the outputs
MERGE_SIGNATURE = ["ptr"] * 3 + ["int32"] + ["ptr"] * 3 + ["int32"] + ["ptr"] * 3 + ["int64"]
# The tiles, named and chosen as the k-best kernels' are (their rule, :func:`tile`): (TX, TY, TM, TN, BK), a block
# of TX x TY threads of TM x TN outputs each, K tiles of BK (float32 values and counts; half for wider entries).
# 4 x 2 outputs a thread, three blocks an SM: on the H200 (session 80, benchmarks/results/s80-h200, steps of
# the shapes CountingMax(2) n = 200 takes) 1.2x-1.8x the k-best kernels' 2 x 2 single-stage tiles; 4 x 4
# needed registers past two blocks an SM and was slower, 2 x 2 (two stages) 5-15% slower than 4 x 2.
TILES: dict[str, tuple[int, int, int, int, int]] = {"s": (16, 16, 4, 2, 16), "n": (16, 16, 4, 1, 16)}
BLOCKS_PER_SM = {"s": 3, "n": 4}  # for 12-byte entries (float32 values and counts): the registers ptxas may use
WIDE_BLOCKS_PER_SM = 2  # float64 values or counts: more registers an output, none spilled at two blocks
CHUNK_MIN = 64  # terms a chunk of a chunked sum takes at least
ROW_THREADS = 1 << 16  # a one-thread-per-output step is chunked up to this many threads
_MAX_BLOCKS = 132 * 32
_MAX_TILE_BLOCKS = 1 << 20


def kernel_name(value: np.dtype, counts: np.dtype, tile: str = "") -> str:
    """``top2_{f32|f64}_{f4|f8}[_t{tile}]``."""
    v = next(n for n, (_, d) in VALUES.items() if d == value)
    c = next(n for n, (_, d) in COUNTS.items() if d == counts)
    return f"top2_{v}_{c}" + (f"_t{tile}" if tile else "")


def source(name: str, value: str, count: str, tile: str) -> str:
    """The ``extern "C"`` kernel ``name``: one call of ``lk_top2_tiled`` (tile shape ``tile``) or ``lk_top2_rows``."""
    bounds = str(THREADS)
    if tile:
        call = f"lk_top2_tiled<{value}, {count}, {', '.join(map(str, TILES[tile]))}>"
        blocks = BLOCKS_PER_SM[tile] if value == count == "float" else WIDE_BLOCKS_PER_SM
        bounds += f", {blocks}"
        args = "av, ac0, ac1, bv, bc0, bc1, T, C0, C1, first, M, N, K, sa, ars, acs, sb, brs, bcs"
    else:
        call = f"lk_top2_rows<{value}, {count}>"
        args = "av, ac0, ac1, bv, bc0, bc1, T, C0, C1, first, M, N, K, sa, ars, acs, sb, brs, bcs, chunks, chunk"
    return (
        f'extern "C" __global__ void __launch_bounds__({bounds}) {name}(const {value} *av, const {count} *ac0, '
        f"const {count} *ac1, const {value} *bv, const {count} *bc0, const {count} *bc1, {value} *T, "
        f"{count} *C0, {count} *C1, long long first, int M, int N, int K, long long sa, long long ars, "
        "long long acs, long long sb, long long brs, long long bcs, int chunks, int chunk) {\n"
        f"    {call}({args});\n}}\n"
    )


def merge_name(value: np.dtype, counts: np.dtype) -> str:
    """``top2_merge_{f32|f64}_{f4|f8}``."""
    return kernel_name(value, counts).replace("top2_", "top2_merge_", 1)


def merge_source(name: str, value: str, count: str) -> str:
    """The ``extern "C"`` kernel ``name``: one call of ``lk_top2_merge``."""
    return (
        f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(const {value} *xv, const {count} *x0, '
        f"const {count} *x1, int xs, const {value} *yv, const {count} *y0, const {count} *y1, int ys, "
        f"{value} *T, {count} *C0, {count} *C1, long long outputs) {{\n"
        f"    lk_top2_merge<{value}, {count}>(xv, x0, x1, xs, yv, y0, y1, ys, T, C0, C1, outputs);\n}}\n"
    )


def make_family(cache: KernelCache | None = None) -> KernelFamily:
    preamble = resources.files(__package__).joinpath("top2.cu").read_text(encoding="utf-8")
    fam = KernelFamily("tn_top2", preamble, options=("-std=c++17",), cache=cache)
    for vt, vd in VALUES.values():
        for ct, cd in COUNTS.values():
            for tile in ("", *TILES):
                name = kernel_name(vd, cd, tile)
                fam.add(name, source(name, vt, ct, tile), signature=SIGNATURE)
            name = merge_name(vd, cd)
            fam.add(name, merge_source(name, vt, ct), signature=MERGE_SIGNATURE)
    return fam


_loaded = Loaded(make_family)
family = _loaded.family  # the process's ``tn_top2`` family, made on first use


def chunking(outputs: int, K: int) -> int:
    """How many chunks a one-thread-per-output step's sums are cut into: enough for ROW_THREADS threads,
    each chunk CHUNK_MIN terms or more; 1 where the outputs alone fill the device."""
    if outputs >= ROW_THREADS:
        return 1
    return max(1, min(K // CHUNK_MIN, -(-ROW_THREADS // outputs)))


def launch(be: Any, A: tuple[Any, ...], B: tuple[Any, ...], T: Any = None) -> tuple[Any, Any, Any]:
    """The top-two product (T, c0, c1) of the step A (b|1, M, K) x B (b|1, K, N), parts (values, count,
    count one below): a tiled step (:func:`tile`) takes its best values ``T`` (batch, M, N, C-contiguous:
    the tropical GEMM's), any other finds them itself (``T`` None)."""
    out, call = arguments(be, A, B, T)
    if call is not None:
        _launch(out, call)
    return merged(be, out)


def merged(be: Any, out: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
    """A launch's (T, c0, c1): its chunks' results (a leading axis, where it ran chunks) merged as slices
    are: the largest value, the counts of equal powers added. Exact: each chunk's counts are at most the
    whole ones, which the caller checks against the floats' exact line. On a device by the merge kernel
    (:func:`merge_arguments`), on the host by NumPy."""
    if out[1].ndim != 4:
        return out
    if be.xp is np:
        T, c0, c1 = out
        top = T.max(axis=0)
        at, below = T == top, T == top - 1
        first = np.where(at, c0, 0).sum(axis=0)
        second = np.where(at, c1, 0).sum(axis=0) + np.where(below, c0, 0).sum(axis=0)
        return top, np.ascontiguousarray(first, c0.dtype), np.ascontiguousarray(second, c0.dtype)
    result, call = merge_arguments(be, out)
    _launch(result, call)
    return result


def add(be: Any, X: tuple[Any, Any, Any], Y: tuple[Any, Any, Any]) -> tuple[Any, Any, Any] | None:
    """Two slices' results merged on a device by the merge kernel; None where it does not take them (the
    host, parts of other shapes or dtypes: the caller's array operations do)."""
    if be.xp is np or be.on_host:
        return None
    shape = tuple(int(n) for n in X[0].shape)
    parts = (*X, *Y)
    if any(tuple(int(n) for n in x.shape) != shape for x in parts):
        return None
    if be.dtype(Y[0]) != be.dtype(X[0]) or any(be.dtype(x) != be.dtype(X[1]) for x in (X[2], Y[1], Y[2])):
        return None
    result, call = merge_arguments(be, X, Y)
    _launch(result, call)
    return result


def merge_arguments(
    be: Any, X: tuple[Any, Any, Any], Y: tuple[Any, Any, Any] | None = None
) -> tuple[tuple[Any, Any, Any], tuple[str, int, tuple[Any, ...]]]:
    """The merged result's arrays and the merge kernel's launch (kernel name, blocks, arguments): of the
    chunks along X's leading axis (Y None), or of two slices' results X and Y of one shape."""
    xs = tuple(be.contiguous(x) for x in X)
    ys = None if Y is None else tuple(be.contiguous(y) for y in Y)
    shape = tuple(int(n) for n in xs[0].shape[1:]) if ys is None else tuple(int(n) for n in xs[0].shape)
    outputs = math.prod(shape)
    T, c0, c1 = be.empty_parts(xs, shape)
    chunks = (int(xs[0].shape[0]), 0) if ys is None else (1, 1)
    y = (0, 0, 0) if ys is None else tuple(be.pointer(p) for p in ys)
    args = (*(be.pointer(p) for p in xs), chunks[0], *y, chunks[1], *(be.pointer(p) for p in (T, c0, c1)), outputs)
    blocks = max(1, min(-(-outputs // THREADS), _MAX_BLOCKS))
    return (T, c0, c1), (merge_name(be.dtype(xs[0]), be.dtype(xs[1])), blocks, args)


def _launch(out: tuple[Any, Any, Any], call: tuple[str, int, tuple[Any, ...]]) -> None:
    _kbest_kernels.launch_into(_loaded, out[1], call)


def tile(A: tuple[Any, ...], B: tuple[Any, ...]) -> str:
    """The tile of the step's kernel (the k-best kernels' rule), "" for one thread per output."""
    batch = max(int(A[0].shape[0]), int(B[0].shape[0]))
    return _kbest_kernels.chosen(True, batch, int(A[0].shape[1]), int(B[0].shape[2]), int(A[0].shape[2]))


def arguments(
    be: Any, A: tuple[Any, ...], B: tuple[Any, ...], T: Any = None
) -> tuple[tuple[Any, Any, Any], tuple[str, int, tuple[Any, ...]] | None]:
    """The result's arrays (T, c0, c1), allocated through ``be`` ((chunks, batch, M, N) where one thread per
    output cuts its sums, else (batch, M, N); a tiled step's T is the one given), and the launch that fills
    them, (kernel name, blocks, arguments); None where there is nothing to compute."""
    (A, (sa, ars, acs)), (B, (sb, brs, bcs)) = _kbest_kernels.alike(be, A), _kbest_kernels.alike(be, B)
    batch = max(int(A[0].shape[0]), int(B[0].shape[0]))
    M, K, N = int(A[0].shape[1]), int(A[0].shape[2]), int(B[0].shape[2])
    sa, sb = (sa if int(A[0].shape[0]) > 1 else 0), (sb if int(B[0].shape[0]) > 1 else 0)
    value, count = be.dtype(A[0]), be.dtype(A[1])
    given = () if T is None else ((T, value, "best values"),)
    for x, want, what in ((B[0], value, "values"), *given, (A[2], count, "counts"), (B[1], count, "counts"),
                          (B[2], count, "counts")):  # fmt: skip
        if be.dtype(x) != want:
            raise TypeError(f"top-two product: {what} are {be.dtype(x)}, the step's are {want}")
    outputs = batch * M * N
    step = tile(A, B)
    if bool(step) != (T is not None):
        raise ValueError(f"top-two product: a {'tiled' if step else 'one-thread-per-output'} step takes "
                         f"{'its best values' if step else 'no best values'}")  # fmt: skip
    if outputs == 0 or K == 0:  # no terms: nothing reached, every count 0
        none = (batch, M, N)
        return (be.full(A[0], none, -math.inf), be.full(A[1], none, 0), be.full(A[1], none, 0)), None
    chunks = 1 if step else chunking(outputs, K)
    chunk = -(-K // chunks)
    chunks = -(-K // chunk)  # none empty
    shape = (chunks, batch, M, N) if chunks > 1 else (batch, M, N)
    if step:
        c0, c1 = be.empty_parts((A[1], A[2]), shape)
        tx, ty, tm, tn, _ = TILES[step]
        first, blocks = batch, min(batch * -(-M // (ty * tm)) * -(-N // (tx * tn)), _MAX_TILE_BLOCKS)
    else:
        T, c0, c1 = be.empty_parts((A[0], A[1], A[2]), shape)
        first, blocks = outputs, min(-(-outputs * chunks // THREADS), _MAX_BLOCKS)
    ptrs = [be.pointer(x) for x in (A[0], A[1], A[2], B[0], B[1], B[2], T, c0, c1)]
    args = (*ptrs, first, M, N, K, sa, ars, acs, sb, brs, bcs, chunks, chunk)
    return (T, c0, c1), (kernel_name(value, count, step), blocks, args)
