"""Tiny max-plus networks on the host: the boundary sweep as a few broadcast NumPy operations a spin.

An 8 x 8 lattice's network is 176 tensors; contracted pair by pair through the general executor it is
175 steps of Python at ~0.15 ms each (25 ms), for a few thousand additions. Along a vertex order the
same contraction is vertex elimination: the boundary array gets an axis for the next spin, every
tensor that the spin completes is added to it by broadcasting, and each spin whose last tensor is in
is maximized out. The tensors and their dtype are the network's own (:meth:`SpinGlass.network`), so
the value is the contraction's; only the order of the additions differs, which is exact wherever the
values are (the dtype the solvers choose keeps every partial sum exact or says it does not).

>>> import numpy as np
>>> labels = [(0, 1), (1, 2), (0,), (1,), (2,)]
>>> J = np.array([[1.0, -1.0], [-1.0, 1.0]])
>>> float(sweep_max(labels, [J, -J, np.zeros(2), np.zeros(2), np.zeros(2)], [0, 1, 2]))
2.0
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

Label = Hashable


def sweep_max(labels: Sequence[Sequence[Label]], tensors: Sequence[np.ndarray], order: Sequence[Label]) -> Any:
    """The max-plus contraction to a scalar of NumPy ``tensors`` (one label tuple each, no label twice in
    one tensor, every label in ``order``), eliminating the labels in ``order``."""
    position = {lab: i for i, lab in enumerate(order)}
    last: dict[Label, int] = {}
    buckets: list[list[int]] = [[] for _ in order]
    for t, labs in enumerate(labels):
        done = max(position[x] for x in labs)  # the tensor is complete once its last label is in
        buckets[done].append(t)
        for x in labs:
            last[x] = max(last.get(x, -1), done)
    closing: list[list[Label]] = [[] for _ in order]
    for x, i in last.items():
        closing[i].append(x)
    dtype = np.result_type(*(t.dtype for t in tensors)) if tensors else np.float64
    board = np.zeros((), dtype=dtype)
    axes: list[Label] = []
    for i, v in enumerate(order):
        if v not in last:
            continue  # a label no tensor carries
        board = board[..., None]
        axes.append(v)
        for t in buckets[i]:
            board = board + aligned(tensors[t], labels[t], axes)
        for x in closing[i]:
            a = axes.index(x)
            board = board.max(axis=a)
            axes.pop(a)
    return board[()]


def aligned(tensor: np.ndarray, labs: Sequence[Label], axes: list[Label]) -> np.ndarray:
    """``tensor`` as a view that broadcasts against the board (axes ``axes``)."""
    order, shape = alignment(tensor.shape, labs, axes)
    return np.transpose(tensor, order).reshape(shape)


def alignment(shape: Sequence[int], labs: Sequence[Label], axes: list[Label]) -> tuple[list[int], list[int]]:
    """(axis order, shape) that make an array of ``shape`` over ``labs`` broadcast against the board
    (:func:`aligned`); one pair serves every part of an operand."""
    where = [axes.index(x) for x in labs]
    order = sorted(range(len(labs)), key=where.__getitem__)
    board = [1] * len(axes)
    for k in order:
        board[where[k]] = int(shape[k])
    return order, board
