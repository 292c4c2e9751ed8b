"""A GPU-free stage for the tropical API's launch path: fake Numba-like device arrays, fake
driver memory calls and a recording launch, so that caching, allocation bookkeeping and the
Python cost of a call can be checked and profiled on a CPU.

``stage(monkeypatch)`` installs the fakes and returns a :class:`Stage` that records
launches, allocations and frees.
"""

from __future__ import annotations

import itertools
import types
from typing import Any

import numpy as np

from lazykern.launch import _device, memory
from lazykern.launch.kernel import Kernel
from lazykern.tropical import _arrays, _hot, api
from lazykern.tropical.fragments import fragment


class FakeMemory:
    __slots__ = ("device_pointer",)

    def __init__(self, ptr: int) -> None:
        self.device_pointer = ptr


class FakeDeviceArray:
    """Quacks like a Numba device array where the tropical API looks (CAI, gpu_data, strides in bytes)."""

    _next = itertools.count(1)

    def __init__(self, shape: tuple[int, ...], dtype: Any = np.float32, strides: tuple[int, ...] | None = None,
                 device: int = 0) -> None:  # fmt: skip
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        if strides is None:
            strides = tuple(np.empty(shape, self.dtype).strides) if shape else ()
        self.strides = tuple(strides)
        self.gpu_data = FakeMemory(0x1000_0000 * next(self._next))
        self.device = device

    @property
    def device_ctypes_pointer(self) -> Any:
        return types.SimpleNamespace(value=self.gpu_data.device_pointer)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "strides": self.strides,
            "typestr": self.dtype.str,
            "data": (self.gpu_data.device_pointer, False),
            "version": 3,
        }

    @property
    def T(self) -> FakeDeviceArray:
        t = FakeDeviceArray(self.shape[::-1], self.dtype, self.strides[::-1], self.device)
        t.gpu_data = self.gpu_data
        return t


class Stage:
    def __init__(self) -> None:
        self.launches: list[tuple[Any, ...]] = []
        self.allocs: dict[int, int] = {}
        self.frees: list[int] = []
        self.graph_allocs: list[int] = []
        self.capturing: set[int] = set()  # streams someone else captures (memory._capturing)
        self.context = 1
        self._addr = itertools.count(0x7000_0000, 0x10_0000)

    def launch(self, stream: Any, prepared: Any, *pointers: Any) -> None:
        """Records (stream, the prepared launch (its .grid), the function, every argument)."""
        self.launches.append((stream, prepared, prepared.cufn, (*pointers, *prepared.tail)))

    def alloc(self, nbytes: int, pool: Any, stream: int) -> int:
        ptr = next(self._addr)
        self.allocs[ptr] = nbytes
        return ptr

    def alloc_in_graph(self, nbytes: int, stream: int) -> int:
        ptr = self.alloc(nbytes, None, stream)
        self.graph_allocs.append(ptr)
        return ptr

    def free(self, ptr: int, stream: int) -> int:
        assert ptr in self.allocs, f"free of {ptr:#x}, never allocated"
        del self.allocs[ptr]
        self.frees.append(ptr)
        return 0


class _FakeContext:
    """Stands for Numba's primary context (PoolPointer only keeps it)."""

    handle = 1


def _fake_kernel(name: str, device: int) -> Kernel:
    return Kernel(name, name, b"", arch="sm_90", signature=fragment(name)[1])


def stage(monkeypatch: Any, *, devices: int = 1, reuse: bool = False) -> Stage:
    """Install the fakes (undone by ``monkeypatch``) and return the recorder. Every allocation
    and free reaches the fake driver unless ``reuse``: then memory's free lists and its first
    plain blocks are on, as in a real process (plain blocks are recorded as allocations too)."""
    st = Stage()
    monkeypatch.setattr(_device, "several", lambda: devices > 1)
    monkeypatch.setattr(_device, "stream_handle_device", lambda handle: None)
    monkeypatch.setattr(_device, "current_context", lambda *a: st.context)
    monkeypatch.setattr(_device, "enter", lambda device: None)
    monkeypatch.setattr(_device, "primary_context", lambda device: _FakeContext())
    monkeypatch.setattr(_device, "of_array", lambda x: getattr(x, "device", None))
    monkeypatch.setattr(api, "sm_count", lambda device: 132)
    monkeypatch.setattr(api, "loaded_kernel", _fake_kernel)
    monkeypatch.setattr(Kernel, "function", lambda self: ("fn", self.name))
    monkeypatch.setattr(Kernel, "cufunction", lambda self: ("fn", self.name))
    monkeypatch.setattr(_hot, "launch_packed", st.launch)
    monkeypatch.setattr(_hot, "custream", lambda handle: ("stream", handle))
    monkeypatch.setattr(_hot, "_entries", {})
    monkeypatch.setattr(memory, "_pool_create", lambda device: ("pool", device))
    monkeypatch.setattr(memory, "_pools", {})
    monkeypatch.setattr(memory, "_alloc_from_pool", st.alloc)
    monkeypatch.setattr(memory, "_alloc_in_graph", st.alloc_in_graph)
    monkeypatch.setattr(memory, "_free_async", st.free)
    monkeypatch.setattr(memory, "_alloc_plain", lambda nbytes: st.alloc(nbytes, None, 0))
    monkeypatch.setattr(memory, "_capturing", lambda stream: stream in st.capturing)
    monkeypatch.setattr(memory, "_free_lists", {})
    monkeypatch.setattr(memory, "_held", {"plain": 0, "cached": 0})
    monkeypatch.setattr(memory, "_plain", set())
    monkeypatch.setattr(memory, "_foreign_nodes", set())
    if not reuse:
        monkeypatch.setattr(memory, "PLAIN_BUDGET", 0)
        monkeypatch.setattr(memory, "CACHE_BYTES", 0)
    monkeypatch.setattr(memory, "memset_zero", lambda ptr, nbytes, stream: None)
    monkeypatch.setattr(_arrays, "_fast_types", {FakeDeviceArray: _arrays.fast_kinds()["numba"]})
    return st
