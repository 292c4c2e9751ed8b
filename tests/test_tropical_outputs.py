"""Where the tropical API's CuPy and torch outputs come from, on the CPU (fake cupy and torch
modules on the fake driver stage of tests/_tropical_fakes.py).

The rule (lazykern.launch.memory.on_library_stream): the library's own caching allocator only when the
call runs on that library's current stream, outside a lazykern capture; otherwise lazykern's
stream-ordered pool, so the buffer is never handed out again while the call's kernel writes it.
Either way the outputs of one call share one buffer.
"""

from __future__ import annotations

import itertools
import sys
import types
from typing import Any

import numpy as np
import pytest

from lazykern import graph
from lazykern.launch import memory
from lazykern.tropical import _arrays, api
from tests._tropical_fakes import stage

CURRENT = 0x51  # the fake libraries' current stream on device 0
OTHER = 0x77  # a stream of the caller's that is not current
_INPUTS = itertools.count(0x9000_0000, 0x10_0000)  # addresses of input arrays


class _Library:
    """What the fake cupy and torch record: buffers from their own allocator."""

    def __init__(self) -> None:
        self.allocs: list[int] = []
        self._addr = itertools.count(0x3000_0000, 0x10_0000)

    def new(self, nbytes: int) -> int:
        ptr = next(self._addr)
        self.allocs.append(nbytes)
        return ptr


# -- a fake cupy ------------------------------------------------------------------------------
class _MemPtr:
    def __init__(self, ptr: int, owner: Any = None) -> None:
        self.ptr, self.owner, self.device_id = ptr, owner, 0

    def __add__(self, offset: int) -> _MemPtr:
        return _MemPtr(self.ptr + offset, self)


class _CupyArray:
    def __init__(self, shape: tuple[int, ...], dtype: Any = np.float32, memptr: _MemPtr | None = None) -> None:
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.strides = tuple(np.empty(self.shape, self.dtype).strides)
        self.data = memptr if memptr is not None else _MemPtr(next(_INPUTS))
        self.device = 0  # the stage's of_array reads this

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "strides": self.strides, "typestr": self.dtype.str, "data": (self.data.ptr, False),
                "version": 3}  # fmt: skip


_CupyArray.__module__ = "cupy"  # as_operand reads CuPy arrays by their module


def _fake_cupy(lib: _Library) -> types.ModuleType:
    cupy = types.ModuleType("cupy")
    cupy.ndarray = _CupyArray
    cupy.cuda = types.SimpleNamespace(
        get_current_stream=lambda device=None: types.SimpleNamespace(ptr=CURRENT),
        alloc=lambda nbytes: _MemPtr(lib.new(nbytes)),
        UnownedMemory=lambda ptr, size, owner, device: _MemPtr(ptr, owner),
        MemoryPointer=lambda mem, offset: _MemPtr(mem.ptr + offset, mem),
    )
    return cupy


# -- a fake torch -----------------------------------------------------------------------------
class Tensor:
    is_cuda = True

    def __init__(self, shape: tuple[int, ...], dtype: str, ptr: int, keep: Any = None) -> None:
        self.shape, self.dtype, self._ptr, self.keep = tuple(shape), dtype, ptr, keep
        self.device = types.SimpleNamespace(index=0)

    def stride(self) -> tuple[int, ...]:
        return tuple(s // 4 for s in np.empty(self.shape, np.float32).strides)

    def data_ptr(self) -> int:
        return self._ptr

    def get_device(self) -> int:
        return 0


Tensor.__module__ = "torch"


def _fake_torch(lib: _Library) -> types.ModuleType:
    torch = types.ModuleType("torch")
    for name in ("float32", "float64", "int32", "int64"):
        setattr(torch, name, f"torch.{name}")
    torch.Tensor = Tensor
    torch.device = lambda kind, index: (kind, index)
    sizes = {"torch.float32": 4, "torch.int32": 4}
    torch.empty = lambda shape, dtype, device: Tensor(shape, dtype, lib.new(int(np.prod(shape)) * sizes[dtype]))
    torch.as_tensor = lambda obj, device: Tensor(
        obj.__cuda_array_interface__["shape"], obj.__cuda_array_interface__["typestr"],
        obj.__cuda_array_interface__["data"][0], obj,
    )  # fmt: skip
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: CURRENT)
    torch.cuda = types.SimpleNamespace(current_stream=lambda device: types.SimpleNamespace(cuda_stream=CURRENT))
    return torch


def _torch_array(shape: tuple[int, ...], dtype: str = "torch.float32") -> Tensor:
    return Tensor(shape, dtype, next(_INPUTS))


def _clear_caches() -> None:
    for fn in (_arrays._torch_dtypes, _arrays._torch_raw_stream, _arrays._cupy_get_stream):
        fn.cache_clear()


@pytest.fixture(params=["cupy", "torch"])
def lib(request, monkeypatch):
    """(kind, the stage, the library's recorder, make(shape, int32=False) -> array of that kind)."""
    st = stage(monkeypatch)
    rec = _Library()
    fake = _fake_cupy(rec) if request.param == "cupy" else _fake_torch(rec)
    monkeypatch.setitem(sys.modules, request.param, fake)
    _clear_caches()
    request.addfinalizer(_clear_caches)  # no fake dtype or stream getter outlives the test
    waits = []
    monkeypatch.setattr(_arrays, "stream_wait", lambda w, p, device: w != p and waits.append((w, p)))
    if request.param == "cupy":
        monkeypatch.setitem(_arrays._fast_types, _CupyArray, _arrays.fast_kinds()["cupy"])

        def make(shape, int32=False):
            return _CupyArray(shape, np.int32 if int32 else np.float32)
    else:
        monkeypatch.setitem(_arrays._fast_types, Tensor, _arrays.fast_kinds()["torch"])

        def make(shape, int32=False):
            return _torch_array(shape, "torch.int32" if int32 else "torch.float32")

    return types.SimpleNamespace(kind=request.param, st=st, rec=rec, make=make, waits=waits)


def _ptr(x: Any) -> int:
    return x.data.ptr if hasattr(x, "data") else x.data_ptr()


@pytest.mark.parametrize("stream", [None, CURRENT])
def test_on_the_current_stream_outputs_come_from_the_library_allocator(lib, stream):
    A, B = lib.make((64, 64)), lib.make((64, 60))
    for _ in range(2):  # the general path, then the cached call
        C, Ix = api.matmul(A, B, argmax=True, stream=stream)
        launch = lib.st.launches[-1]
        assert launch[0] == ("stream", CURRENT) and launch[3][2:4] == (_ptr(C), _ptr(Ix))
    assert lib.st.allocs == {} and lib.waits == []
    if lib.kind == "cupy":  # one CuPy buffer for the pair, argmax at the next 256-byte boundary
        assert lib.rec.allocs == [2 * 64 * 60 * 4] * 2 and _ptr(Ix) - _ptr(C) == 64 * 60 * 4
    else:  # torch.empty per output (two cheap calls beat slicing one byte tensor)
        assert lib.rec.allocs == [64 * 60 * 4] * 4


def test_on_another_stream_outputs_come_from_the_pool_ordered_on_that_stream(lib):
    A, B = lib.make((64, 64)), lib.make((64, 60))
    kept = []
    for n in (1, 2):
        C, Ix = api.matmul(A, B, argmax=True, stream=OTHER)
        kept.append((C, Ix))
        assert lib.rec.allocs == [] and len(lib.st.allocs) == n  # one pool buffer per call, for the pair
        assert _ptr(C) in lib.st.allocs and _ptr(Ix) == _ptr(C) + 64 * 60 * 4
        assert lib.st.launches[-1][0] == ("stream", OTHER)
    assert lib.waits[-1] == (OTHER, CURRENT)  # and the call waits for the operands' producer
    del C, Ix, kept[0]
    assert len(lib.st.frees) == 1  # the pair's buffer goes back once, when both are dropped


def test_backward_gradients_follow_the_same_rule(lib):
    g, ix = lib.make((64, 64)), lib.make((64, 64), int32=True)
    gA, gB = api.matmul_backward(g, ix, (64, 32), (32, 64))
    assert lib.st.allocs == {} and lib.rec.allocs and len(lib.st.launches) == 1
    gA, gB = api.matmul_backward(g, ix, (64, 32), (32, 64), stream=OTHER)
    assert len(lib.st.allocs) == 1 and _ptr(gB) - _ptr(gA) == 64 * 32 * 4


def test_inside_a_capture_of_the_current_stream_outputs_are_graph_allocations(lib):
    A, B = lib.make((64, 64)), lib.make((64, 64))
    api.matmul(A, B)  # cached outside the capture
    pool = graph.CapturePool()
    memory.begin_capture(CURRENT, pool)
    try:
        C, Ix = api.matmul(A, B, argmax=True)
        C2 = api.matmul(A, B)
    finally:
        memory.end_capture(CURRENT)
    assert len(lib.st.graph_allocs) == 2 and pool.allocations == 2  # the pair is one node
    assert {_ptr(C), _ptr(C2)} == set(lib.st.graph_allocs) and _ptr(Ix) == _ptr(C) + 64 * 64 * 4
    assert lib.rec.allocs == [64 * 64 * 4]  # only the call before the capture used the library's


def test_the_rule():
    assert memory.on_library_stream(5, True) and not memory.on_library_stream(5, False)
    memory.begin_capture(5, graph.CapturePool())
    try:
        assert not memory.on_library_stream(5, True)
    finally:
        memory.end_capture(5)


@pytest.mark.parametrize("stream", [None, OTHER])
def test_backward_zeroes_only_the_gradients_bytes(lib, monkeypatch, stream):
    """The gradients are zeroed before the kernel adds into them: one memset over the pair where
    they share one buffer, one per gradient where the library allocated each (torch.empty)."""
    sets: list[tuple[int, int]] = []
    monkeypatch.setattr(memory, "memset_zero", lambda ptr, nbytes, s: sets.append((ptr, nbytes)))
    zeroed = 0
    for a_shape, b_shape in [((64, 32), (32, 64)), ((16, 2048), (2048, 16)), ((3, 5), (5, 7))]:
        g, ix = lib.make((a_shape[0], b_shape[1])), lib.make((a_shape[0], b_shape[1]), int32=True)
        sets.clear()
        gA, gB = api.matmul_backward(g, ix, a_shape, b_shape, stream=stream)
        a0, b0 = _ptr(gA), _ptr(gB)
        a1, b1 = a0 + int(np.prod(a_shape)) * 4, b0 + int(np.prod(b_shape)) * 4
        one_buffer = b0 == a0 + memory.layout(((a_shape, np.float32), (b_shape, np.float32)))[0][1]
        for p, n in sets:
            inside = (a0 <= p and p + n <= a1) or (b0 <= p and p + n <= b1)
            assert inside or (one_buffer and p == a0 and p + n <= b1), (hex(p), n, hex(a0), hex(b0))
        assert sum(n for _, n in sets) <= (b1 - a0 if one_buffer else (a1 - a0) + (b1 - b0))
        zeroed += len(sets)
    assert zeroed  # some plan adds into its gradients


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (0,), (1, 1), (64, 60), (2, 3, 4), ()])
def test_numba_output_template_matches_numba_own_arrays(shape):
    """An output made from memory.numba_template copies as many bytes as Numba's own array of that
    shape would (an empty one none: it has no buffer to copy from)."""
    from numba.cuda.cudadrv import driver

    t = memory.numba_template(shape, np.dtype(np.float32))
    assert t["shape"] == shape and t["size"] == int(np.prod(shape))
    assert t["alloc_size"] == driver.memory_size_from_info(shape, t["strides"], 4)
    assert t["alloc_size"] <= memory.layout(((shape, np.float32),))[1]
