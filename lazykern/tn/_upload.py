"""Many small host arrays on a device in one copy per dtype, and back (:func:`download`).

A network's hundreds of small tables (or a host prefix's results, :mod:`._prefix`) otherwise cost a
copy each. Each dtype's arrays are packed into one host buffer, copied once, and handed back as views
of the device buffer, each starting on a 256-byte boundary as an allocation of its own would. The
views are only read: a contraction writes over its own intermediates, never its operands.

>>> import numpy as np
>>> [v.tolist() for v in upload([np.ones(2), np.arange(3, dtype=np.int32)], np.asarray)]
[[1.0, 1.0], [0, 1, 2]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

ALIGN = 256  # bytes: where each array starts in its dtype's buffer


def upload(arrays: Sequence[np.ndarray], put: Callable[[np.ndarray], Any]) -> list[Any]:
    """``arrays`` on the device ``put`` copies a host array to, each dtype's in one ``put``."""
    out: list[Any] = [None] * len(arrays)
    for dtype in dict.fromkeys(a.dtype for a in arrays):
        at = [i for i, a in enumerate(arrays) if a.dtype == dtype]
        align = max(ALIGN // dtype.itemsize, 1)
        starts = [0]
        for i in at:
            starts.append(starts[-1] + -(-max(arrays[i].size, 1) // align) * align)
        host = np.zeros(starts[-1], dtype)
        for i, start in zip(at, starts):
            host[start : start + arrays[i].size] = arrays[i].ravel()
        flat = put(host)
        for i, start in zip(at, starts):
            out[i] = flat[start : start + arrays[i].size].reshape(arrays[i].shape)
    return out


def download(arrays: Sequence[Any], get: Callable[[Any], np.ndarray]) -> list[np.ndarray]:
    """``arrays`` (CuPy arrays, or any that ``get`` copies to the host) on the host: those that are
    C-contiguous views of one contiguous device buffer (an :func:`upload`'s) in one copy of that buffer,
    where they cover most of it, the others one copy each (a 32 x 32 count's 3008 leaves: 0.05 s of copies
    on an H200 machine; a few slices of a large array are not worth all of it)."""
    out: list[Any] = [None] * len(arrays)
    groups: dict[int, list[int]] = {}
    for i, a in enumerate(arrays):
        base = getattr(a, "base", None)
        data = getattr(a, "data", None)
        if (
            base is not None
            and hasattr(data, "ptr")
            and a.flags.c_contiguous
            and base.flags.c_contiguous
            and base.dtype == a.dtype
        ):
            groups.setdefault(id(base), []).append(i)
        else:
            out[i] = get(a)
    for at in groups.values():
        base = arrays[at[0]].base
        needed = sum(int(arrays[i].size) for i in at) + len(at) * max(ALIGN // base.itemsize, 1)
        if len(at) == 1 or int(base.size) > 2 * needed:  # a few views of a large array: not all of it
            for i in at:
                out[i] = get(arrays[i])
            continue
        host = get(base).reshape(-1)
        for i in at:
            a = arrays[i]
            start = (a.data.ptr - base.data.ptr) // a.itemsize
            out[i] = host[start : start + a.size].reshape(a.shape)
    return out
