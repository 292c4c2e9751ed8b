"""A contraction step with no layout copy: the row kernel reads and writes through strides.

The steps of a boundary sweep multiply a large tensor X (the boundary, 2^L entries) by a small one
Y (the next spins' tensors, K, N <= 8). Arranging X as (batch, left, contracted) for a plain batched
product needs a copy of X on most steps, because the labels it shares with Y sit anywhere in its axis
order: on an H100 that copy cost about three times the product itself. The row kernel
(``lk::rows``) reads A(b, i, k) = A[b sA + i ars + k acs] and writes C(b, i, j) = C[b sC + i ldc + j]
for any strides, so when each label group of X (batch, left, contracted) is one run of axes with a
single merged stride, X is read where it lies and the result is written in X's own axis order (the
contracted labels dropped, Y's new labels innermost): the next step finds its boundary in the same
shape, and no step copies it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Sequence
from typing import Any

import numpy as np

Label = Hashable
KMAX = 8  # the row kernels' bound on K and N (fragments.ROWS_KMAX["r"])
_INT32_MAX = 2**31 - 1
THREADS = 256


def merged(
    labels: Sequence[Label], order: Sequence[Label], stride: dict[Label, int], size: dict[Label, int]
) -> int | None:
    """The single stride of ``labels`` read as one axis, 0 when they hold one entry; None when their
    axes (of size > 1) are not one run of the memory ``order`` whose strides nest."""
    ordered = [x for x in order if size[x] > 1]
    run = [i for i, x in enumerate(ordered) if x in labels]
    if not run:
        return 0
    if run != list(range(run[0], run[0] + len(run))):
        return None
    axes = [ordered[i] for i in run]
    for outer, inner in zip(axes, axes[1:]):
        if stride[outer] != stride[inner] * size[inner]:
            return None
    return stride[axes[-1]]


def fits_rows(x_labels: Sequence[Label], y_labels: Sequence[Label], y_shape: Sequence[int], keep: set[Label]) -> bool:
    """Whether a step's sizes fit the row kernel (K, N <= KMAX, Y's labels distinct), whatever X's
    strides: where they do not, no copy of X can make :func:`layout` take the step."""
    size = dict(zip(y_labels, y_shape))
    K = math.prod(size[x] for x in y_labels if x in x_labels and x not in keep)
    N = math.prod(size[x] for x in y_labels if x not in x_labels)
    return K <= KMAX and N <= KMAX and len(set(y_labels)) == len(y_labels)


def layout(
    x_labels: Sequence[Label],
    x_shape: Sequence[int],
    x_strides: Sequence[int],
    y_labels: Sequence[Label],
    y_shape: Sequence[int],
    keep: set[Label],
) -> dict[str, Any] | None:
    """Everything one strided row-kernel launch of X (x) Y (summed over the shared labels ``keep``
    lacks) needs, or None when the step does not fit it: the label groups, the output's labels in
    memory order and its shape, the kernel's sizes and element strides."""
    size = dict(zip(x_labels, x_shape)) | dict(zip(y_labels, y_shape))
    stride = dict(zip(x_labels, x_strides))
    batch = [x for x in x_labels if x in y_labels and x in keep]
    con = [x for x in x_labels if x in y_labels and x not in keep]
    left = [x for x in x_labels if x not in y_labels]
    right = [x for x in y_labels if x not in x_labels]
    K, N = math.prod(size[x] for x in con), math.prod(size[x] for x in right)
    if K > KMAX or N > KMAX or len(set(y_labels)) != len(y_labels):
        return None
    order = [x for x, _ in sorted(zip(x_labels, x_strides), key=lambda p: -p[1])]
    sA, ars, acs = (merged(g, order, stride, size) for g in (batch, left, con))
    if sA is None or ars is None or acs is None:
        return None
    out = [x for x in order if x not in con] + right
    out_shape = [size[x] for x in out]
    out_stride = dict(zip(out, (math.prod(out_shape[i + 1 :]) for i in range(len(out)))))
    sC, ldc = merged(batch, out, out_stride, size), merged(left, out, out_stride, size)
    if sC is None or ldc is None or merged(right, out, out_stride, size) not in (0, 1):
        return None
    return {
        "batch": batch,
        "con": con,
        "right": right,
        "out": out,
        "out_shape": out_shape,
        "dims": (math.prod(size[x] for x in batch), math.prod(size[x] for x in left), N, K),
        "a": (sA, ars, acs),
        "c": (sC, ldc),
    }


BITS_MAX = 4  # spins a bit-addressed step sums out or brings in (K, N <= 16: a sweep of 3 spins a step)
BATCH_BITS_MAX = 8  # batch spins of a bit-addressed step (their bit positions are packed into 64 bits)
ADDRESS_BITS = 62  # bits of a bit-addressed array's entries (int64 offsets)


def bits_layout(
    x_labels: Sequence[Label],
    x_shape: Sequence[int],
    contiguous: bool,
    y_labels: Sequence[Label],
    y_shape: Sequence[int],
    keep: set[Label],
) -> dict[str, Any] | None:
    """A bit-addressed step of X (x) Y over binary labels, or None when the step does not fit it: every
    axis of X and Y of size 2, X C-contiguous (``contiguous``), at most BITS_MAX spins summed out (in
    both, not kept) and as many new ones (Y's alone, all kept). X's entries are bit strings (axis a of
    n is bit n - 1 - a), read where they lie: no step copies the boundary, whatever its axis order.
    With as many new spins as summed-out ones (``inplace``) the new spins take the summed-out spins'
    bits, so the result can be written over X (labels renamed); otherwise it is X's other labels in
    their order, then the new spins. Positions: ``con``, ``batch_in`` in X; ``batch_out``, ``right_pos``
    in the result (``out``, its labels); ``rows``: assignments of the other bits."""
    if not contiguous or any(n != 2 for n in (*x_shape, *y_shape)) or len(set(y_labels)) != len(y_labels):
        return None
    n = len(x_labels)
    con = [x for x in x_labels if x in y_labels and x not in keep]
    batch = [x for x in x_labels if x in y_labels and x in keep]
    right = [x for x in y_labels if x not in x_labels]
    if len(con) > BITS_MAX or len(right) > BITS_MAX or len(batch) > BATCH_BITS_MAX:
        return None
    if any(x not in keep for x in right) or len(set(x_labels)) != n:
        return None
    inplace = len(con) == len(right)
    if inplace:
        renamed = dict(zip(con, right))
        out = [renamed.get(x, x) for x in x_labels]
    else:
        out = [x for x in x_labels if x not in con] + right
    if max(n, len(out)) > ADDRESS_BITS:
        return None
    at_in = {x: n - 1 - a for a, x in enumerate(x_labels)}
    at_out = {x: len(out) - 1 - a for a, x in enumerate(out)}
    return {
        "con_labels": con,
        "batch_labels": batch,
        "right": right,
        "out": out,
        "inplace": inplace,
        "con": [at_in[x] for x in con],
        "batch_in": [at_in[x] for x in batch],
        "batch_out": [at_out[x] for x in batch],
        "right_pos": [at_out[x] for x in right],
        "rows": 1 << (n - len(con) - len(batch)),
    }


def bits_tile(
    big: Collection[Label], small: Collection[Label], kept: Collection[Label], sizes: dict[Label, int]
) -> tuple[int, int] | None:
    """How a step of a large operand with labels ``big`` and a small one with ``small``, keeping
    ``kept``, runs by :func:`bits_layout`, from its labels alone (the planner's view; the executor
    also needs the operand C-contiguous): (spins summed out, spins brought in), which name its kernel
    (in place over the large operand, when that is the step's own, where the two are equal); None
    where it is not bit-addressed. Sliced labels are not passed: the executor fixes them, so they are
    no axis."""
    labels = list(big)
    if any(sizes[x] != 2 for x in labels) or any(sizes[x] != 2 for x in small):
        return None
    con = [x for x in labels if x in small and x not in kept]
    batch = [x for x in labels if x in small and x in kept]
    right = [x for x in small if x not in big]
    if any(x not in kept for x in right):
        return None  # summed out of the small operand first: the executor's own step
    if len(con) > BITS_MAX or len(right) > BITS_MAX or len(batch) > BATCH_BITS_MAX:
        return None
    if max(len(labels), len(labels) - len(con) + len(right)) > ADDRESS_BITS:
        return None
    return len(con), len(right)


def rows_reference(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    dims: Sequence[int],
    a_str: Sequence[int],
    b_str: Sequence[int],
    c_str: Sequence[int],
    semiring: str,
) -> None:
    """What the row kernel computes, on NumPy arrays through the same element strides (tests, and
    the GPU route's host stand-in): C(b, i, j) = (+)_k A(b, i, k) (x) B(b, k, j)."""
    batch, M, N, K = dims
    item = a.itemsize
    A = np.lib.stride_tricks.as_strided(a, (batch, M, K), tuple(s * item for s in a_str))
    B = np.lib.stride_tricks.as_strided(b, (batch, K, N), tuple(s * item for s in b_str))
    C = np.lib.stride_tricks.as_strided(c, (batch, M, N), tuple(s * item for s in c_str), writeable=True)
    from . import _reference_einsum

    C[...] = _reference_einsum.bmm(np.ascontiguousarray(A), np.ascontiguousarray(B), semiring, False)


def launch(be: Any, x: Any, y: Any, lay: dict[str, Any], semiring: str) -> Any:
    """Run one planned step: X read in place, Y (small) made contiguous as (batch, con, right), the
    result a new contiguous array of ``lay["out_shape"]`` (labels ``lay["out"]``)."""
    batch, M, N, K = lay["dims"]
    sA, ars, acs = lay["a"]
    sC, ldc = lay["c"]
    out = be.empty(x, tuple(lay["out_shape"]))
    b_str = (K * N if batch > 1 else 0, N, 1)
    c_str = (sC, ldc, 1)
    if be.xp is np:  # the GPU route run on the host (tests): the kernel's reference
        rows_reference(x, y, out, lay["dims"], (sA, ars, acs), b_str, c_str, semiring)
        return out
    from ..launch import _device
    from ..tropical import _arrays, api
    from ..tropical.fragments import ROWS_KMAX, Spec

    ops = [_arrays.as_operand(v, name) for v, name in ((x, "A"), (y, "B"), (out, "C"))]
    device = _device.resolve_or_current(_device.common([(n, o.device) for n, o in zip("ABC", ops)]))
    tile = "r4" if K <= ROWS_KMAX["r4"] and N <= ROWS_KMAX["r4"] else "r"
    name = Spec(semiring, api.DTYPE_CODE[np.dtype(ops[0].dtype)], False, tile=tile).name
    itemsize = np.dtype(ops[0].dtype).itemsize
    per = max(1, _INT32_MAX // max(M, 1))  # the kernel counts batch (and batch * M rows) in int32
    with _device.on(device):
        kernel = api.loaded_kernel(name, device)
        for first in range(0, batch, per):
            n = min(per, batch - first)
            blocks = max(min(-(-n * M // THREADS), 64 * api.sm_count(device)), 1)
            a, b, c = (op.ptr + first * s * itemsize for op, s in zip(ops, (sA, b_str[0], sC)))
            kernel[(blocks,), (THREADS,), ops[2].stream or 0](
                a, b, c, 0, M, N, K, ars, acs, N, 1, ldc, n, sA, b_str[0], sC
            )
    return out
