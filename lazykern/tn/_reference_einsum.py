"""NumPy kernels of tropical einsum's CPU path, and an independent brute-force einsum oracle.

``bmm`` / ``count_bmm`` are vectorized over the batch and the output and walk K in
chunks (a Python step per chunk, not per element), with the semantics of
:mod:`lazykern.tropical.reference`: NaN products never win, ties go to the smallest
k, integer products saturate. ``einsum_brute`` broadcasts every operand over the
whole index space and reduces once: slow, simple, and sharing no code with the
pairwise path the tests check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

import numpy as np

from ..tropical.reference import check_semiring, product, zero

CHUNK_ELEMENTS = 1 << 22  # products materialized per K chunk: bounds the temporaries to ~32 MB of f64


def _k_chunk(batch: int, M: int, N: int, K: int) -> int:
    return max(1, min(K, CHUNK_ELEMENTS // max(batch * M * N, 1)))


def _better(semiring: str, p: np.ndarray, acc: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return p < acc if semiring == "minplus" else p > acc


def _chunk_best(semiring: str, p: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(best value, first index of it) along ``axis``; NaN never wins."""
    z = zero(semiring, p.dtype)
    if p.dtype.kind == "f":
        p = np.where(np.isnan(p), z, p)
    idx = np.argmin(p, axis=axis) if semiring == "minplus" else np.argmax(p, axis=axis)
    return np.take_along_axis(p, np.expand_dims(idx, axis), axis).squeeze(axis), idx


@overload
def bmm(A: np.ndarray, B: np.ndarray, semiring: str = ..., argmax: Literal[False] = ...) -> np.ndarray: ...
@overload
def bmm(
    A: np.ndarray, B: np.ndarray, semiring: str = ..., argmax: bool = ...
) -> np.ndarray | tuple[np.ndarray, np.ndarray]: ...
def bmm(
    A: np.ndarray, B: np.ndarray, semiring: str = "maxplus", argmax: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """(b, M, K) x (b, K, N) -> (b, M, N) (a batch of 1 broadcasts); argmax int32 as the kernels give it."""
    semiring = check_semiring(semiring)
    batch = max(A.shape[0], B.shape[0])
    M, K, N = A.shape[1], A.shape[2], B.shape[2]
    step = _k_chunk(batch, M, N, K)
    if not argmax and 0 < K <= step:
        # One chunk and no choice to keep: its best is the answer (a tiny network's steps are all
        # like this, and the accumulator's extra passes were a third of their time).
        p = product(semiring, A[:, :, :, None], B[:, None, :, :])
        if p.dtype.kind == "f":
            p = np.where(np.isnan(p), zero(semiring, p.dtype), p)  # NaN never wins
        best: np.ndarray = p.min(axis=2) if semiring == "minplus" else p.max(axis=2)
        return best.astype(A.dtype, copy=False)
    acc = np.full((batch, M, N), zero(semiring, A.dtype), dtype=A.dtype)
    idx = np.full((batch, M, N), 0 if K > 0 else -1, dtype=np.int32)
    for k0 in range(0, K, step):
        k1 = min(K, k0 + step)
        p = product(semiring, A[:, :, k0:k1, None], B[:, None, k0:k1, :])
        best, where = _chunk_best(semiring, p, axis=2)
        better = _better(semiring, best, acc)
        acc = np.where(better, best, acc)
        if argmax:
            idx = np.where(better, where.astype(np.int32) + k0, idx)
    return (acc, idx) if argmax else acc


def count_bmm(
    Av: np.ndarray, Ac: np.ndarray, Bv: np.ndarray, Bc: np.ndarray, semiring: str = "maxplus", modulus: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Counting product: value (+)_k Av + Bv, count = sum of Ac * Bc over the k that reach it.

    A count adds on a tie and resets on a strict improvement; NaN never counts. int64 counts are
    counted modulo 2^64 (they wrap, as the GPU kernel's); with ``modulus`` p, int32 counts are
    residues modulo p, each product formed in int64.
    """
    if semiring not in ("maxplus", "minplus"):
        raise ValueError(f"counting supports semiring 'maxplus' or 'minplus', got {semiring!r}")
    batch = max(Av.shape[0], Bv.shape[0])
    M, K, N = Av.shape[1], Av.shape[2], Bv.shape[2]
    acc = np.full((batch, M, N), zero(semiring, Av.dtype), dtype=Av.dtype)
    wide = np.dtype(np.int64) if modulus else Ac.dtype
    cnt = np.zeros((batch, M, N), dtype=wide)
    step = _k_chunk(batch, M, N, K)
    for k0 in range(0, K, step):
        k1 = min(K, k0 + step)
        with np.errstate(invalid="ignore"):
            p = Av[:, :, k0:k1, None] + Bv[:, None, k0:k1, :]
        c = Ac[:, :, k0:k1, None].astype(wide) * Bc[:, None, k0:k1, :]
        best, _ = _chunk_best(semiring, p, axis=2)
        hits = np.where(p == best[:, :, None, :], c % modulus if modulus else c, 0).sum(axis=2, dtype=wide)
        better = _better(semiring, best, acc)
        tie = best == acc
        cnt = np.where(better, hits, np.where(tie, cnt + hits, cnt))
        if modulus:
            cnt %= modulus
        acc = np.where(better, best, acc)
    return acc, cnt.astype(Ac.dtype)


def einsum_brute(
    inputs: Sequence[str], output: str, operands: Sequence[np.ndarray], semiring: str = "maxplus"
) -> np.ndarray:
    """The tropical einsum by definition: the product of every operand over the full index
    grid, then the semiring sum over the indices not in ``output`` (tests only: memory is
    the product of all index sizes)."""
    semiring = check_semiring(semiring)
    labels = sorted({c for term in inputs for c in term} | set(output))
    sizes: dict[str, int] = {}
    for term, op in zip(inputs, operands):
        for c, n in zip(term, op.shape):
            sizes[c] = n
    dtype = np.result_type(*operands)
    total = None
    for term, op in zip(inputs, operands):
        full = _on_grid(np.asarray(op, dtype), term, labels, sizes)
        total = full if total is None else product(semiring, total, full)
    if total is None:
        raise ValueError("einsum needs at least one operand")
    total = np.broadcast_to(total, tuple(sizes[c] for c in labels))
    moved = np.moveaxis(total, [labels.index(c) for c in output], range(len(output)))
    # Rank len(output) + 1; annotated because numpy's stubs miscount it (and call shape[-1] out of range).
    flat: np.ndarray = moved.reshape(tuple(sizes[c] for c in output) + (-1,))
    if flat.shape[-1] == 0:
        return np.full(flat.shape[:-1], zero(semiring, dtype), dtype)
    return _chunk_best(semiring, flat, axis=-1)[0]


def _on_grid(op: np.ndarray, term: str, labels: list[str], sizes: dict[str, int]) -> np.ndarray:
    """``op`` as a broadcastable array over ``labels`` (repeated letters: its diagonal)."""
    grids = np.ix_(*[np.arange(sizes[c]) for c in labels]) if labels else ()
    index = tuple(grids[labels.index(c)] for c in term)
    return op[index] if term else op
