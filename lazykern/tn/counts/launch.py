"""Launching the counting kernels (:mod:`.kernels`): the product of any shape (:func:`count_bmm`), the
strided steps' row kernel and the bit-addressed step, each operand read through its element strides on
its own device; a NumPy backend that is not the host path (the GPU route on the host, in tests) runs the
product's reference through the same strides.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...launch import _device
from .._backend import Backend
from . import wide
from .kernels import MAX_BLOCKS, ROWS_KMAX, THREADS, family, kernel_name

OPAQUE = (wide.U128, wide.SHORT)  # 128-bit counts and their int16 values: the kernels' own items


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
        return wide.count_bmm(Av, Ac, Bv, Bc, semiring, modulus)
    if be.dtype(Av) != be.dtype(Bv) or be.dtype(Ac) != be.dtype(Bc):
        raise TypeError(f"counting operands differ in dtype: {be.dtype(Av)}/{be.dtype(Bv)} values")
    (Av, Ac), (Bv, Bc) = _alike(be, Av, Ac), _alike(be, Bv, Bc)
    batch = max(int(Av.shape[0]), int(Bv.shape[0]))
    M, K, N = int(Av.shape[1]), int(Av.shape[2]), int(Bv.shape[2])
    out = (be.empty(Av, (batch, M, N)) if values is None else values, be.empty(Ac, (batch, M, N)))  # all written
    if batch * M * N == 0:
        return out
    sa, sb = (s if int(x.shape[0]) > 1 else (0, *s[1:]) for x, s in ((Av, be.strides(Av)), (Bv, be.strides(Bv))))
    launch_product(be, (Av, Ac), (Bv, Bc), out, (batch, M, N, K), (sa, sb, (M * N, N)), semiring, modulus)
    return out


def _alike(be: Backend, values: Any, counts: Any) -> tuple[Any, Any]:
    """Values and counts with the same element strides (the kernel reads both through one set)."""
    if be.strides(values) == be.strides(counts):
        return values, counts
    return be.contiguous(values), be.contiguous(counts)


def launch_product(
    be: Backend, A: Any, B: Any, C: Any, dims: Any, strides: Any, semiring: str, modulus: int = 0
) -> None:
    """C(b, i, j) = (+)_k A(b, i, k) (x) B(b, k, j) for (values, counts) triples, through element
    strides ((sa, ars, acs), (sb, brs, bcs), (sc, ldc)); a NumPy ``be`` that is not the host path
    (tests of the GPU route on the host) computes the same through the same strides."""
    batch, M, N, K = dims
    (sa, ars, acs), (sb, brs, bcs), (sc, ldc) = strides
    if be.xp is np:
        views = [
            strided(x, shape, st)
            for x, shape, st in (
                (A[0], (batch, M, K), (sa, ars, acs)),
                (A[1], (batch, M, K), (sa, ars, acs)),
                (B[0], (batch, K, N), (sb, brs, bcs)),
                (B[1], (batch, K, N), (sb, brs, bcs)),
            )
        ]
        v, c = wide.count_bmm(*(np.ascontiguousarray(x) for x in views), semiring, modulus)
        strided(C[0], (batch, M, N), (sc, ldc, 1), True)[...] = v
        strided(C[1], (batch, M, N), (sc, ldc, 1), True)[...] = c
        return
    from ...tropical import _arrays

    names = ("Av", "Ac", "Bv", "Bc", "Cv", "Cc")
    ops = [_arrays.as_operand(x, name, OPAQUE) for x, name in zip((*A, *B, *C), names)]
    name = kernel_name(semiring, be.dtype(A[0]), be.dtype(A[1]))
    device = _device.resolve_or_current(_device.common([(n, o.device) for n, o in zip(names, ops)]))
    total = batch * M * N
    blocks = min(-(-total // THREADS), MAX_BLOCKS)
    with _device.on(device):  # the operands' device, which need not be the current one
        kernel = family.get(name, arch=_device.arch(device))
        kernel[(blocks,), (THREADS,), ops[4].stream or 0](
            *(o.ptr for o in ops), total, M, N, K, sa, ars, acs, sb, brs, bcs, sc, ldc, np.uint64(modulus)
        )


def launch_rows(
    be: Backend, A: Any, B: Any, C: Any, dims: Any, strides: Any, semiring: str, moduli: tuple[int, ...]
) -> None:
    """The row kernel: C(b, i, :) from A's row (b, i) read once through its strides and B (b, K, N)
    contiguous; values and every count array (one per modulus, or the one int64/float count) in one launch."""
    from ...tropical import _arrays

    batch, M, N, K = dims
    (sa, ars, acs), (sb, _, _), (sc, ldc) = strides
    names = ["Av", "Bv", "Cv"] + [f"{x}c{q}" for x in "ABC" for q in range(len(A) - 1)]
    arrays = [A[0], B[0], C[0], *A[1:], *B[1:], *C[1:]]
    ops = [_arrays.as_operand(x, name, OPAQUE) for x, name in zip(arrays, names)]
    residues = len(A) - 1
    counts = [[o.ptr for o in ops[3 + q * residues : 3 + (q + 1) * residues]] for q in range(3)]
    padded = [c + [c[0]] * (4 - residues) for c in counts]  # the kernel reads only the first R
    mods = [*moduli, *[0] * (4 - len(moduli))]
    tile = min((t for t, kmax in ROWS_KMAX.items() if max(K, N) <= kmax), key=ROWS_KMAX.__getitem__)
    name = kernel_name(semiring, be.dtype(A[0]), be.dtype(A[1]), rows=tile, residues=residues)
    device = _device.resolve_or_current(_device.common([(n, o.device) for n, o in zip(names, ops)]))
    rows = batch * M
    blocks = max(min(-(-rows // THREADS), MAX_BLOCKS), 1)
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


def launch_bits(
    be: Backend, X: tuple[Any, ...], Y: tuple[Any, ...], C: tuple[Any, ...], lay: dict[str, Any], semiring: str,
    moduli: tuple[int, ...],
) -> None:  # fmt: skip
    """A bit-addressed step (:func:`lazykern.tn._strided.bits_layout`): the tiled kernel, a row's holes its
    summed-out and batch bits."""
    holes = (lay["con"] + lay["batch_in"], lay["batch_out"] + lay["right_pos"])
    _launch(be, X, Y, C, lay, semiring, moduli, "bits", holes)


def launch_arena(
    be: Backend, X: tuple[Any, ...], Y: tuple[Any, ...], C: tuple[Any, ...], lay: dict[str, Any], semiring: str,
    moduli: tuple[int, ...],
) -> None:  # fmt: skip
    """An arena's step (:func:`lazykern.tn._arena.layout`, ``C`` views of the arena, maybe X's own): the
    direct kernel, every row read where it lies, a row's holes every bit below the top that is no row bit."""
    _launch(be, X, Y, C, lay, semiring, moduli, "arena", (lay["holes_in"], lay["holes_out"]))


def _launch(
    be: Backend, X: tuple[Any, ...], Y: tuple[Any, ...], C: tuple[Any, ...], lay: dict[str, Any], semiring: str,
    moduli: tuple[int, ...], kind: str, holes: tuple[list[int], list[int]],
) -> None:  # fmt: skip
    from ...tropical import _arrays

    residues = len(X) - 1
    names = ["Xv", "Yv", "Cv"] + [f"{x}c{q}" for x in "XYC" for q in range(residues)]
    arrays = [X[0], Y[0], C[0], *X[1:], *Y[1:], *C[1:]]
    ops = [_arrays.as_operand(x, name, OPAQUE) for x, name in zip(arrays, names)]
    counts = [[o.ptr for o in ops[3 + q * residues : 3 + (q + 1) * residues]] for q in range(3)]
    padded = [c + [c[0]] * (4 - residues) for c in counts]  # the kernel reads only the first R
    mods = [*moduli, *[0] * (4 - len(moduli))]

    def packed(positions: list[int]) -> Any:  # np.uint64
        return np.uint64(sum(int(p) << (8 * t) for t, p in enumerate(positions)))

    def mask(positions: list[int]) -> Any:  # np.uint64
        return np.uint64(sum(1 << int(p) for p in positions))

    tile = f"{kind}{len(lay['con'])}{len(lay['right_pos'])}"
    name = kernel_name(semiring, be.dtype(X[0]), be.dtype(X[1]), rows=tile, residues=residues)
    device = _device.resolve_or_current(_device.common([(n, o.device) for n, o in zip(names, ops)]))
    blocks = max(min(-(-lay["rows"] // THREADS), MAX_BLOCKS), 1)
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
            mask(holes[0]),
            mask(holes[1]),
            packed(lay["con"]),
            packed(lay["batch_in"]),
            packed(lay["batch_out"]),
            packed(lay["right_pos"]),
            *(np.uint64(m) for m in mods),
        )


def strided(x: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...], writeable: bool = False) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(x, shape, tuple(s * x.itemsize for s in strides), writeable=writeable)
