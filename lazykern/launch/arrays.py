"""Device arrays from lazykern's stream-ordered pool: allocate anywhere, inside a capture too.

``numba.cuda.device_array`` (and CuPy's or torch's default allocators) call ``cuMemAlloc``
or a caching pool, which a CUDA-graph capture refuses or cannot replay. :func:`empty` and
:func:`zeros` allocate on the stream that will use the array (:mod:`lazykern.memory`), so the
host-side code around ``@lazy_kernel`` launches can make its scratch and output arrays inside
``lazykern.graph.capture``: there each becomes an allocation node of the graph (booked in the
capture's :class:`~lazykern.graph.CapturePool`), and every replay reuses the same memory.
Outside a capture they are ordinary stream-ordered allocations, freed on their stream when
the array is dropped. Under Numba's simulator they are simulator arrays.

    with lazykern.graph.capture(stream) as g:
        tmp = lazykern.arrays.empty(n, np.float32, stream=stream)
        step1[blocks, threads, stream](x, tmp)
        step2[blocks, threads, stream](tmp, y)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _device, memory

_KINDS = ("numba", "cupy", "torch")


def empty(shape: int | tuple[int, ...], dtype: Any = np.float32, *, stream: Any = None, like: str = "numba") -> Any:
    """An uninitialized C-contiguous device array of ``shape`` and ``dtype``, allocated on
    ``stream`` (a Numba / CuPy / torch / cuda.core stream or a raw handle; None: the default
    stream) on that stream's device (else the current one). ``like`` picks the array type:
    "numba" (DeviceNDArray), "cupy" or "torch"."""
    shape, dtype = _checked(shape, dtype, like)
    if _device.simulating():
        return _simulated("device_array", like, shape, dtype)
    arr, _ = _allocate(shape, dtype, stream, like)
    return arr


def zeros(shape: int | tuple[int, ...], dtype: Any = np.float32, *, stream: Any = None, like: str = "numba") -> Any:
    """:func:`empty`, then set to zero on ``stream`` (a memset node inside a capture)."""
    shape, dtype = _checked(shape, dtype, like)
    if _device.simulating():
        return _simulated("to_device", like, np.zeros(shape, dtype))
    arr, ptr = _allocate(shape, dtype, stream, like)
    memory.memset_zero(ptr, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, _device.stream_handle(stream))
    return arr


def _simulated(name: str, like: str, *args: Any) -> Any:
    """A simulator array: no driver, no pool; Numba's own allocator, unguarded (lazykern's
    capture hooks refuse ``numba.cuda`` allocations inside a capture, as the driver would)."""
    if like != "numba":
        raise ValueError(f"Numba's simulator makes Numba arrays only, not like={like!r}")
    from numba import cuda

    fn = getattr(cuda, name)
    return getattr(fn, "__wrapped__", fn)(*args)


def _allocate(shape: tuple[int, ...], dtype: np.dtype, stream: Any, like: str) -> tuple[Any, int]:
    handle = _device.stream_handle(stream)
    device = _device.resolve_or_current(_device.of_stream(stream))
    with _device.on(device, order=handle):  # a stream-ordered allocation: the caller waits for it
        parts = ((shape, dtype),)
        nbytes = memory.layout(parts)[1]
        if like == "numba":
            template = memory.numba_template(shape, dtype)
            (arr,), ptr = memory.numba_arrays(
                [(template, 0, nbytes)], nbytes, device, handle, _device.primary_context(device), stream
            )
            return arr, ptr
        make = memory.cupy_arrays if like == "cupy" else memory.torch_tensors
        (arr,), (ptr,) = make(parts, (0,), nbytes, device, handle, stream)
        return arr, ptr


def _checked(shape: Any, dtype: Any, like: str) -> tuple[tuple[int, ...], np.dtype]:
    if like not in _KINDS:
        raise ValueError(f"like must be one of {', '.join(_KINDS)}, got {like!r}")
    return _shape(shape), _dtype(dtype)


def _shape(shape: Any) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        out = tuple(int(n) for n in dims)
    except TypeError:
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(n < 0 for n in out) or any(not isinstance(n, (int, np.integer)) for n in dims):
        raise ValueError(f"shape must be non-negative ints, got {shape!r}")
    return out


def _dtype(dtype: Any) -> np.dtype[Any]:
    try:
        dt: np.dtype[Any] = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype {dtype!r} is not a NumPy dtype (e.g. np.float32)") from None
    if dt.hasobject or dt.itemsize == 0:
        raise TypeError(f"dtype {dt} cannot live on a GPU: use a numeric dtype such as np.float32")
    return dt
