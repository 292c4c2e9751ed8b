"""What the bit-addressed counting kernel (``lk_count_bits``) does, in NumPy through its own addressing:
the GPU route's bit-addressed steps on the host (tests), every residue formed before any is written.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arena import addresses, flat
from . import wide


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
    read, write = addresses(lay, holes_in, holes_out)
    batch, K, N = len(lay["batch_in"]), len(lay["con"]), len(lay["right_pos"])
    reads, writes = int(read.max()) + 1, int(write.max()) + 1
    results = []
    for q in range(len(X) - 1):
        p = moduli[q] if moduli else 0
        yv, yc = (np.ascontiguousarray(y).reshape(1 << batch, 1 << K, 1 << N) for y in (Y[0], Y[1 + q]))
        xv, xc = flat(X[0], reads)[read], flat(X[1 + q], reads)[read]
        results.append(wide.count_bmm(xv, xc, yv, yc, semiring, p))
    for q, (v, c) in enumerate(results):  # every result formed before any is written (X may be ``out``)
        flat(out[1 + q], writes)[write] = c
        flat(out[0], writes)[write] = v
