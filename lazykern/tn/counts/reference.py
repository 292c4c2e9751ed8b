"""What the bit-addressed counting kernel (``lk_count_bits``) does, in NumPy through its own addressing:
the GPU route's bit-addressed steps on the host (tests), every residue formed before any is written.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _reference_einsum


def _bit_offsets(positions: list[int]) -> np.ndarray:
    """Where each assignment of some spins lies (C order over them: the first spin the highest bit)."""
    n = len(positions)
    return np.array([sum(1 << p for t, p in enumerate(positions) if (k >> (n - 1 - t)) & 1) for k in range(1 << n)])


def _spread_bits(r: np.ndarray, holes: list[int]) -> np.ndarray:
    """Each of ``r`` with a zero bit inserted at every position of ``holes``, lowest first."""
    for p in sorted(holes):
        r = ((r >> p) << (p + 1)) | (r & ((1 << p) - 1))
    return r


def _flat(a: np.ndarray, entries: int) -> np.ndarray:
    """``entries`` entries from ``a``'s first one, as one axis (its bits' address space: ``a`` may be a
    strided view of an arena, which a reshape would copy)."""
    return np.lib.stride_tricks.as_strided(a, shape=(entries,), strides=(a.itemsize,), writeable=True)


def bits_reference(
    X: tuple[Any, ...],
    Y: tuple[Any, ...],
    out: tuple[Any, ...],
    lay: dict[str, Any],
    semiring: str,
    moduli: Any,
    holes: tuple[list[int], list[int]] | None = None,
) -> None:
    """What the bit-addressed kernel does, on NumPy arrays through its addressing (tests). ``holes``: the
    bits a row's number skips in X and in the result (an arena's layout gives them); by default the
    summed-out and batch bits, and the batch and new ones."""
    holes_in, holes_out = holes or (lay["con"] + lay["batch_in"], lay["batch_out"] + lay["right_pos"])
    rows = np.arange(lay["rows"], dtype=np.int64)
    a0 = _spread_bits(rows, holes_in)[None, :, None] + _bit_offsets(lay["batch_in"])[:, None, None]
    c0 = _spread_bits(rows, holes_out)[None, :, None] + _bit_offsets(lay["batch_out"])[:, None, None]
    read = a0 + _bit_offsets(lay["con"])[None, None, :]  # (batch, rows, K)
    write = c0 + _bit_offsets(lay["right_pos"])[None, None, :]  # (batch, rows, N)
    batch, K, N = len(lay["batch_in"]), len(lay["con"]), len(lay["right_pos"])
    reads, writes = int(read.max()) + 1, int(write.max()) + 1
    results = []
    for q in range(len(X) - 1):
        p = moduli[q] if moduli else 0
        yv, yc = (np.ascontiguousarray(y).reshape(1 << batch, 1 << K, 1 << N) for y in (Y[0], Y[1 + q]))
        xv, xc = _flat(X[0], reads)[read], _flat(X[1 + q], reads)[read]
        results.append(_reference_einsum.count_bmm(xv, xc, yv, yc, semiring, p))
    for q, (v, c) in enumerate(results):  # every result formed before any is written (X may be ``out``)
        _flat(out[1 + q], writes)[write] = c
        _flat(out[0], writes)[write] = v
