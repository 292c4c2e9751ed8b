"""Array interop: what an operand is, where it lives, which stream produced it, and
how to make outputs of the same kind.

Device arrays are used in place (zero-copy) through their own attributes or the
CUDA Array Interface: Numba device arrays, CuPy arrays, PyTorch CUDA tensors and
anything else exposing ``__cuda_array_interface__``. NumPy arrays (and PyTorch
CPU tensors) are host operands: the API copies them to the GPU and back, or
computes with the NumPy reference where there is no GPU.

The producer's stream is honoured: a tensor is launched on torch's current
stream, a CuPy array on CuPy's current stream, a CAI object on its ``stream``
field (CAI v3); Numba arrays without one use the default stream.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from typing import Any

import numpy as np

from .._numba import internals
from ..errors import DriverError
from ..launch import _device
from .reference import check_dtype

HOST_KINDS = ("numpy", "torch_cpu")


@dataclasses.dataclass(frozen=True)
class Operand:
    """One array as the kernels see it: pointer, shape, strides in elements."""

    obj: Any
    kind: str  # numpy | torch_cpu | torch | cupy | numba | cai
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype
    device: int | None  # None: host memory
    stream: int | None  # producer's stream handle; None: none stated

    @property
    def on_host(self) -> bool:
        return self.kind in HOST_KINDS

    def host_array(self) -> np.ndarray:
        host: np.ndarray = self.obj.detach().numpy() if self.kind == "torch_cpu" else self.obj
        return host


@functools.cache
def _torch_dtypes() -> dict[Any, np.dtype]:
    import torch

    return {
        torch.float32: np.dtype("float32"),
        torch.float64: np.dtype("float64"),
        torch.int32: np.dtype("int32"),
        torch.int64: np.dtype("int64"),
    }


def as_operand(x: Any, name: str, also: tuple[np.dtype, ...] = ()) -> Operand:
    """Describe ``x``; raises TypeError naming ``name`` for anything that is not an array. ``also``: dtypes
    accepted beside the products' own (a kernel that only moves their items, as 128-bit counts)."""
    if isinstance(x, np.ndarray):
        dtype = x.dtype if x.dtype in also else check_dtype(x.dtype, name)
        strides = tuple(s // x.itemsize for s in x.strides)
        return Operand(x, "numpy", 0, x.shape, strides, dtype, None, None)
    if type(x).__module__.startswith("torch") and hasattr(x, "is_cuda"):
        return _torch_operand(x, name)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(
            f"{name} must be a NumPy array, a PyTorch tensor, a CuPy array, a Numba device array "
            f"or another object with __cuda_array_interface__; got {type(x).__name__}"
        )
    dtype = np.dtype(cai["typestr"])
    dtype = dtype if dtype in also else check_dtype(dtype, name)
    shape = tuple(int(s) for s in cai["shape"])
    if cai.get("strides") is None:
        strides = _contiguous_strides(shape)
    else:
        strides = tuple(int(s) // dtype.itemsize for s in cai["strides"])
    ptr = _device.cai_pointer(cai)
    device = _device.of_array(x)
    if type(x).__module__.startswith("cupy"):
        import cupy

        stream = int(cupy.cuda.get_current_stream(device).ptr)  # CuPy's current stream is per device
        return Operand(x, "cupy", ptr, shape, strides, dtype, device, stream)
    kind = "numba" if hasattr(x, "device_ctypes_pointer") else "cai"
    stream = cai.get("stream")
    return Operand(x, kind, ptr, shape, strides, dtype, device, None if stream is None else int(stream))


def _torch_operand(x: Any, name: str) -> Operand:
    dtype = _torch_dtypes().get(x.dtype)
    if dtype is None:
        raise TypeError(f"{name} has dtype {x.dtype}; tropical products support float32, float64, int32 and int64")
    shape, strides = tuple(x.shape), tuple(x.stride())
    if not x.is_cuda:
        return Operand(x, "torch_cpu", 0, shape, strides, dtype, None, None)
    import torch

    dev = x.device.index if x.device.index is not None else torch.cuda.current_device()
    stream = int(torch.cuda.current_stream(dev).cuda_stream)
    return Operand(x, "torch", int(x.data_ptr()), shape, strides, dtype, dev, stream)


class FastKind:
    """How the repeated-call path reads one array type: ``desc(x)`` (everything a launch plan
    depends on: shape, strides, dtype, device), ``ptr(x)`` (its address) and ``producer(device)``
    (the library's current stream there, read per call; None for Numba, which has none)."""

    __slots__ = ("name", "desc", "ptr", "producer", "current")

    def __init__(self, name: str, desc: Any, ptr: Any, producer: Any = None, current: Any = None) -> None:
        self.name, self.desc, self.ptr, self.producer = name, desc, ptr, producer
        self.current = current  # device -> the library's current stream object (kept by outputs)


def _numba_desc(x: Any) -> tuple[Any, ...]:
    return (x.shape, x.strides, x.dtype, _device.of_array(x) if _device.several() else None)


def _numba_ptr(x: Any) -> int:
    return int(x.gpu_data.device_pointer)


def _cupy_producer(device: int) -> int:
    ptr: int = _cupy_get_stream()(device).ptr
    return ptr


def _cupy_current(device: int) -> Any:
    return _cupy_get_stream()(device)


@functools.cache
def _cupy_get_stream() -> Any:
    import cupy

    return cupy.cuda.get_current_stream


def _torch_producer(device: int) -> int:
    return int(_torch_raw_stream()(device))


@functools.cache
def _torch_raw_stream() -> Any:
    """device -> torch's current stream handle there (0.2 us where torch has the raw getter, 2 us otherwise)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw if raw is not None else (lambda device: torch.cuda.current_stream(device).cuda_stream)


# Descriptions read attributes that cost least: a CuPy array's MemoryPointer device_id (x.device
# makes a Device object), a tensor's get_device() (x.device makes a torch.device).
_FAST_KINDS = {
    "numba": FastKind("numba", _numba_desc, _numba_ptr),
    "cupy": FastKind(
        "cupy",
        lambda x: (x.shape, x.strides, x.dtype, x.data.device_id),
        lambda x: x.data.ptr,
        _cupy_producer,
        _cupy_current,
    ),
    "torch": FastKind(
        "torch", lambda x: (x.shape, x.stride(), x.dtype, x.get_device()), lambda x: x.data_ptr(), _torch_producer
    ),
}
_fast_types: dict[type, FastKind | None] = {}


def fast_kinds() -> dict[str, FastKind]:
    return _FAST_KINDS


def fast_kind(cls: type) -> FastKind | None:
    """The FastKind of an array type (None: the general path every call, e.g. foreign CAI objects)."""
    try:
        return _fast_types[cls]
    except KeyError:
        kind = _fast_types[cls] = _classify(cls)
        return kind


def _classify(cls: type) -> FastKind | None:
    module = cls.__module__ or ""
    if module == internals.DEVICE_ARRAY_MODULE and cls.__name__ in ("DeviceNDArray", "MappedNDArray"):
        return _FAST_KINDS["numba"]
    if module.startswith("cupy") and cls.__name__ == "ndarray":
        return _FAST_KINDS["cupy"]
    if module.startswith("torch") and any(c.__module__ == "torch" and c.__name__ == "Tensor" for c in cls.__mro__):
        return _FAST_KINDS["torch"]
    return None


def device_and_stream(x: Any, name: str) -> tuple[int | None, int | None]:
    """(device, the array library's current stream there) of a device array, as :func:`as_operand` gives
    them, read from the attributes that cost least where the array's type has a :class:`FastKind` with a
    stream (CuPy, torch: a k-best or permute step asks this per launch); else through ``as_operand``."""
    kind = fast_kind(type(x))
    if kind is not None and kind.producer is not None:
        device = kind.desc(x)[3]
        if device is not None and device >= 0:
            return device, int(kind.producer(device))
    op = as_operand(x, name)
    return op.device, op.stream


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def is_c_contiguous(op: Operand) -> bool:
    return all(
        n <= 1 or s == want for n, s, want in zip(op.shape, op.strides, _contiguous_strides(op.shape), strict=True)
    )


def contiguous_copy(op: Operand, name: str) -> Any:
    """A C-contiguous copy made by the array's own library (``copy=True``)."""
    if op.kind in ("torch", "torch_cpu"):
        return op.obj.contiguous()
    if op.kind == "cupy":
        import cupy

        with cupy.cuda.Device(op.device):
            return cupy.ascontiguousarray(op.obj)
    if op.kind == "numpy":
        return np.ascontiguousarray(op.obj)
    if op.kind == "numba":
        from numba import cuda

        with _device.on(op.device):
            return cuda.to_device(np.ascontiguousarray(op.obj.copy_to_host()))
    raise ValueError(f"{name}: cannot copy an array of type {type(op.obj).__name__}; pass a contiguous one")


_local = threading.local()


def stream_wait(waiter: int, producer: int | None, device: int) -> None:
    """Make ``waiter`` wait for the work queued so far on ``producer`` (no host sync).

    One event per device and thread: an event is recorded and waited on in one step, and
    another thread recording the same event in between would order after the wrong work.
    """
    if producer is None or producer == waiter:
        return
    from cuda.bindings import driver

    err, status = driver.cuStreamIsCapturing(waiter)
    if int(err) == 0 and status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
        # A graph cannot wait on work outside it (and touching the legacy stream breaks the
        # capture): what the operands' producers queued before the capture is the caller's to
        # finish first, as with any CUDA graph.
        return
    events = _local.__dict__.setdefault("events", {})
    with _device.on(device):  # an event belongs to the context it was created in
        event = events.get(device)
        if event is None:
            err, event = driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
            if int(err) != 0:
                raise DriverError(f"cuEventCreate on device {device} failed: {err}")
            events[device] = event
        for err in (driver.cuEventRecord(event, producer)[0], driver.cuStreamWaitEvent(waiter, event, 0)[0]):
            if int(err) != 0:
                raise DriverError(f"ordering stream {waiter:#x} after stream {producer:#x} failed: {err}")
