"""Device resolution (lazykern/launch/_device.py) on the CPU, with fake arrays, streams and driver."""

from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

from lazykern import tropical
from lazykern.graph._graphed import GraphedCallable
from lazykern.launch import _batch_split, _device
from lazykern.launch._launch import launch_device
from lazykern.launch.kernel import Kernel
from lazykern.tropical import api


def _fake_class(module: str, name: str, **attrs):
    cls = type(name, (), attrs)
    cls.__module__ = module
    return cls


TorchTensor = _fake_class("torch", "Tensor")
CupyArray = _fake_class("cupy._core.core", "ndarray")
TorchStream = _fake_class("torch.cuda.streams", "Stream")
CupyStream = _fake_class("cupy.cuda.stream", "Stream")


def torch_tensor(index: int | None):
    t = TorchTensor()
    t.is_cuda = index is not None
    t.device = types.SimpleNamespace(index=index)
    return t


def cupy_array(dev: int):
    a = CupyArray()
    a.device = types.SimpleNamespace(id=dev)
    return a


class CaiArray:
    def __init__(self, ptr: int) -> None:
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (4,), "typestr": "<f4", "version": 3}


class NumbaLikeArray(CaiArray):
    def __init__(self, ptr: int) -> None:
        super().__init__(ptr)
        self.device_ctypes_pointer = ctypes.c_void_p(ptr)


class NumbaLikeStream:
    def __init__(self, handle: int) -> None:
        self.handle = ctypes.c_void_p(handle)


POINTERS = {0x1000: 0, 0x2000: 1}
STREAMS = {0xA0: 0, 0xB0: 1}


@pytest.fixture
def fake_driver(monkeypatch):
    """Pointers 0x1000/0x2000 live on devices 0/1, streams 0xA0/0xB0 belong to devices 0/1."""
    calls = {"pointer": 0, "stream": 0}

    def pointer_device(ptr):
        calls["pointer"] += 1
        return POINTERS[ptr] if ptr else None

    def stream_handle_device(handle):
        calls["stream"] += 1
        return None if handle in (0, 1, 2) else STREAMS[handle]

    monkeypatch.setattr(_device, "pointer_device", pointer_device)
    monkeypatch.setattr(_device, "stream_handle_device", stream_handle_device)
    _device._resolvers.clear()
    return calls


# -- arrays ---------------------------------------------------------------------------
def test_each_array_kind_names_its_device(fake_driver):
    assert _device.of_array(torch_tensor(1)) == 1
    assert _device.of_array(torch_tensor(None)) is None  # a CPU tensor
    assert _device.of_array(cupy_array(1)) == 1
    assert _device.of_array(CaiArray(0x2000)) == 1
    assert _device.of_array(CaiArray(0)) is None  # an empty array has no memory
    for host in (np.zeros(3), np.float32(1), 3, 2.5, (1, 2), None):
        assert _device.of_array(host) is None
    assert fake_driver["pointer"] == 2  # torch and CuPy say where they are; only CAI objects ask


def test_a_numba_array_is_asked_once(fake_driver):
    a = NumbaLikeArray(0x2000)
    assert [_device.of_array(a) for _ in range(5)] == [1] * 5
    assert fake_driver["pointer"] == 1
    assert _device.of_array(NumbaLikeArray(0x1000)) == 0  # a new array (a slice, say) asks again


def test_a_foreign_cai_object_is_asked_every_time(fake_driver):
    a = CaiArray(0x1000)
    _device.of_array(a)
    a.__cuda_array_interface__ = {**a.__cuda_array_interface__, "data": (0x2000, False)}
    assert _device.of_array(a) == 1  # nothing cached on an object lazykern does not know
    assert fake_driver["pointer"] == 2


def test_device_scalar_like_objects_name_their_device(fake_driver):
    own = _fake_class("lazykern.graph._device_scalar", "DeviceScalar")()
    own.device = 1
    assert _device.of_array(own) == 1


def test_of_args_raises_naming_both_arguments(fake_driver):
    assert _device.of_args([np.int32(3), cupy_array(1), 0x1234, torch_tensor(1)]) == 1
    assert _device.of_args([1, 2.0, np.zeros(2)]) is None
    with pytest.raises(ValueError, match="argument 1 is on device 0 but argument 3 is on device 1"):
        _device.of_args([5, CaiArray(0x1000), 7, cupy_array(1)])


def test_common_ignores_none_and_names_the_pair():
    assert _device.common([("A", None), ("B", 1), ("out", 1)]) == 1
    assert _device.common([]) is None
    with pytest.raises(ValueError, match="A is on device 0 but out is on device 1"):
        _device.common([("A", 0), ("B", None), ("out", 1)])


# -- streams --------------------------------------------------------------------------
def test_stream_handle_forms():
    ts = TorchStream()
    ts.cuda_stream = 0xB0
    cs = CupyStream()
    cs.ptr = 0xA0
    protocol = types.SimpleNamespace(__cuda_stream__=lambda: (0, 0xC0))
    assert _device.stream_handle(None) == 0
    assert _device.stream_handle(np.int64(7)) == 7
    assert _device.stream_handle(ts) == 0xB0
    assert _device.stream_handle(cs) == 0xA0
    assert _device.stream_handle(NumbaLikeStream(0xB0)) == 0xB0
    assert _device.stream_handle(NumbaLikeStream(0)) == 0  # ctypes None
    assert _device.stream_handle(types.SimpleNamespace(handle=0x50)) == 0x50
    assert _device.stream_handle(types.SimpleNamespace(__cuda_stream__=protocol.__cuda_stream__)) == 0xC0
    with pytest.raises(TypeError, match="stream must be"):
        _device.stream_handle("stream 1")


def test_each_stream_kind_names_its_device(fake_driver):
    ts = TorchStream()
    ts.device = types.SimpleNamespace(index=1)
    cs = CupyStream()
    cs.device_id = 1
    assert _device.of_stream(ts) == 1
    assert _device.of_stream(cs) == 1
    assert _device.of_stream(None) is None
    assert _device.of_stream(0) is None  # the default streams follow the current device
    assert _device.of_stream(0xA0) == 0
    ns = NumbaLikeStream(0xB0)
    assert [_device.of_stream(ns) for _ in range(3)] == [1, 1, 1]
    assert fake_driver["stream"] == 3  # 0, 0xA0, then the Numba stream once


def test_default_stream_handles_need_no_driver():
    assert [_device.stream_handle_device(h) for h in (0, 1, 2)] == [None, None, None]


def test_launchers_keep_a_stream_objects_device_but_not_a_raw_handles():
    assert _device.names_device(NumbaLikeStream(0xA0))
    assert not _device.names_device(0xA0)  # a later stream on another device may reuse the number
    assert not _device.names_device(None)


# -- making a device current ----------------------------------------------------------------
class FakeContext:
    def __init__(self, handle: int, stack: list[int]) -> None:
        self.handle, self.stack = handle, stack

    def push(self) -> None:
        self.stack.append(self.handle)

    def pop(self) -> None:
        assert self.stack.pop() == self.handle


@pytest.fixture
def fake_contexts(monkeypatch):
    """Devices 0 and 1 with primary contexts 0x10 and 0x11, and a thread's context stack."""
    stack: list[int] = []
    ctxs = {0: FakeContext(0x10, stack), 1: FakeContext(0x11, stack)}
    monkeypatch.setattr(_device, "current_context", lambda: stack[-1] if stack else 0)
    monkeypatch.setattr(_device, "context_device", lambda h: {0x10: 0, 0x11: 1}.get(h))
    monkeypatch.setattr(_device, "primary_context", lambda dev: ctxs[dev])
    monkeypatch.setattr(_device, "simulating", lambda: False)
    return stack


def test_on_switches_only_when_needed_and_restores(fake_contexts):
    stack = fake_contexts
    with _device.on(1):
        assert stack == [0x11]  # nothing was current: pushed
    assert stack == []
    stack.append(0x10)
    with _device.on(0):
        assert stack == [0x10]  # already current: untouched
    with _device.on(1):
        assert stack == [0x10, 0x11]
    assert stack == [0x10]
    with _device.on(None):
        assert stack == [0x10]


def test_on_restores_after_an_exception(fake_contexts):
    fake_contexts.append(0x10)
    with pytest.raises(RuntimeError), _device.on(1):
        raise RuntimeError("boom")
    assert fake_contexts == [0x10]


def test_resolve_or_current(fake_contexts):
    assert _device.resolve_or_current(1) == 1
    assert _device.resolve_or_current(None) == 0  # no context yet: device 0
    fake_contexts.append(0x11)
    assert _device.resolve_or_current(None) == 1


class NumbaLikeGpu:
    """Numba 0.30's get_primary_context: cuCtxSetCurrent (replace the top), then pop if it changed."""

    def __init__(self, handle: int, stack: list[int]) -> None:
        self.handle, self.stack, self.primary_context = handle, stack, None

    def get_primary_context(self):
        if self.primary_context is None:
            prev = self.stack[-1] if self.stack else 0
            if self.stack:
                self.stack[-1] = self.handle
            else:
                self.stack.append(self.handle)
            if self.stack[-1] != prev:
                self.stack.pop()
            self.primary_context = types.SimpleNamespace(handle=self.handle)
        return self.primary_context


@pytest.mark.parametrize("before", [[], [0x10], [0x10, 0x11], [0x11]])
def test_retaining_a_primary_context_keeps_the_callers_stack(monkeypatch, before):
    stack = list(before)
    drv = types.SimpleNamespace(
        CUcontext=int, cuCtxPushCurrent=lambda h: stack.append(int(h)), cuCtxPopCurrent=lambda: stack.pop()
    )
    monkeypatch.setattr(_device, "_driver", lambda: drv)
    monkeypatch.setattr(_device, "current_context", lambda: stack[-1] if stack else 0)
    gpu = NumbaLikeGpu(0x11, stack)
    assert _device._retain_primary(gpu).handle == 0x11
    assert stack == before
    assert _device._retain_primary(gpu).handle == 0x11  # retained: returned as is
    assert stack == before


# -- entry points, before anything launches ---------------------------------------------------
def test_launch_device_checks_the_stream(fake_driver):
    assert launch_device([cupy_array(1), 4], None, "k") == 1
    assert launch_device([4, np.float32(2)], 0, "k") == 0  # no arrays: the stream's device
    with pytest.raises(ValueError, match="arrays are on device 1 but the stream belongs to device 0"):
        launch_device([cupy_array(1)], 0, "k")


def test_kernel_picks_only_pointer_arguments():
    k = Kernel("k", "k", b"", arch="sm_90", signature=["ptr", "int32", "ptr", "float32"])
    assert k.arrays(("a", 1, "b", 2.0)) == ("a", "b")
    assert k.arrays(("a",)) == ("a",)  # a wrong count is pack()'s to report
    assert Kernel("k", "k", b"", arch="sm_90").arrays(("a", 1)) == ("a", 1)


def test_call_device_checks_arrays_and_stream(fake_driver, fake_contexts):
    ts = TorchStream()
    ts.device = types.SimpleNamespace(index=0)
    assert api._call_device([("A", 1), ("B", None)], None) == 1
    assert api._call_device([], ts) == 0  # host operands: the stream's device
    assert api._call_device([], None) == 0  # nothing current: device 0
    with pytest.raises(ValueError, match="stream belongs to device 0 but the arrays are on device 1"):
        api._call_device([("A", 1)], ts)
    with pytest.raises(ValueError, match="A is on device 0 but B is on device 1"):
        api._call_device([("A", 0), ("B", 1)], None)


def test_graphed_checks_arguments_against_the_graphs_device(fake_driver):
    g = GraphedCallable(lambda *a: None, stream=None, make_graph=None)
    g._check_devices((cupy_array(1), 3), {"out": cupy_array(1)}, types.SimpleNamespace(device=1))
    with pytest.raises(ValueError, match="the stream is on device 1 but argument out is on device 0"):
        g._check_devices((cupy_array(1),), {"out": cupy_array(0)}, types.SimpleNamespace(device=1))


def test_bmm_devices_checks_out_and_stream_first():
    A, B = np.zeros((3, 4, 5), np.float32), np.zeros((3, 5, 2), np.float32)
    with pytest.raises(ValueError, match="leave stream= out"):
        tropical.bmm(A, B, devices=[0], stream=7)
    with pytest.raises(TypeError, match="argmax"):
        tropical.bmm(A, B, devices=[0], argmax="yes")
    shape = (3, 4, 2)
    C, K = _batch_split._check_out(None, True, shape, np.dtype(np.float32))
    assert C.shape == K.shape == shape and K.dtype == np.int32
    with pytest.raises(TypeError, match="pair"):
        _batch_split._check_out(np.empty(shape, np.float32), True, shape, np.dtype(np.float32))
    with pytest.raises(TypeError, match="one NumPy array"):
        _batch_split._check_out((C, K), False, shape, np.dtype(np.float32))
    with pytest.raises(ValueError, match="out must have shape"):
        _batch_split._check_out(np.empty((3, 4, 3), np.float32), False, shape, np.dtype(np.float32))
    with pytest.raises(ValueError, match=r"out\[1\] must have shape .* int32"):
        _batch_split._check_out((C, np.empty(shape, np.int64)), True, shape, np.dtype(np.float32))
    with pytest.raises(TypeError, match="NumPy array"):
        _batch_split._check_out(types.SimpleNamespace(shape=shape), False, shape, np.dtype(np.float32))
    frozen = np.empty(shape, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _batch_split._check_out(frozen, False, shape, np.dtype(np.float32))


def test_pointer_device_asks_libcuda_for_the_ordinal(monkeypatch):
    """cuda.bindings answers 0 for every device (cuda-python #2928): libcuda is asked directly."""
    seen = []

    def fake_attribute(out, attribute, ptr):
        seen.append((attribute, ptr))
        if ptr != 0x2000:
            return 1  # CUDA_ERROR_INVALID_VALUE
        out._obj.value = 1
        return 0

    monkeypatch.setattr(_device, "_pointer_attribute", lambda: fake_attribute)
    assert _device.pointer_device(0x2000) == 1
    assert _device.pointer_device(0) is None  # no call for a null pointer
    with pytest.raises(ValueError, match="not device memory this process can use"):
        _device.pointer_device(0x3000)
    assert seen == [(9, 0x2000), (9, 0x3000)]  # CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL


class FakeEventDriver:
    """The driver calls :func:`_device.leave_ordered` makes, each logged with the context current then."""

    def __init__(self, stack: list[int]) -> None:
        self.stack, self.calls, self.made = stack, [], 0
        self.CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)

    def _ctx(self) -> int:
        return self.stack[-1] if self.stack else 0

    def cuEventCreate(self, flags):
        self.made += 1
        event = ("event", self._ctx(), self.made)
        self.calls.append(("create", self._ctx()))
        return 0, event

    def cuEventRecord(self, event, stream):
        assert event[1] == self._ctx(), "an event is recorded in the context it was made in"
        self.calls.append(("record", self._ctx(), stream))
        return (0,)

    def cuStreamWaitEvent(self, stream, event, flags):
        self.calls.append(("wait", self._ctx(), stream))
        return (0,)

    def cuEventSynchronize(self, event):
        self.calls.append(("host sync", self._ctx()))
        return (0,)


@pytest.fixture
def fake_events(fake_contexts, monkeypatch):
    drv = FakeEventDriver(fake_contexts)
    monkeypatch.setattr(_device, "_cu", drv)
    monkeypatch.setattr(_device, "_order_events", {})
    return fake_contexts, drv


def test_work_on_another_devices_legacy_stream_orders_the_callers_stream(fake_events):
    """Issue 45: a product on device 1's legacy stream, called with device 0 current, then read by
    Numba's copy_to_host in device 0's context, was read before it was written. The caller's legacy
    stream now waits for an event recorded after the work, without a host sync."""
    stack, drv = fake_events
    stack.append(0x10)
    for _ in range(2):  # the event is made once per context and thread, recorded each time
        token = _device.enter(1)
        assert stack == [0x10, 0x11]
        _device.leave_ordered(token, 0)
        assert stack == [0x10]
    assert drv.calls == [("create", 0x11), ("record", 0x11, 0), ("wait", 0x10, 0),
                         ("record", 0x11, 0), ("wait", 0x10, 0)]  # fmt: skip


def test_a_named_stream_or_no_switch_adds_nothing(fake_events):
    stack, drv = fake_events
    stack.append(0x10)
    _device.leave_ordered(_device.enter(0), 0)  # already current: no token
    token = _device.enter(1)
    _device.leave_ordered(token, 0xBEEF)  # a stream the caller named: the caller orders its work
    assert stack == [0x10] and drv.calls == []


def test_no_context_at_the_call_waits_on_the_host_only_for_another_device(fake_events):
    stack, drv = fake_events
    _device.leave_ordered(_device.enter(1), 0)
    assert stack == [] and drv.calls[-1] == ("host sync", 0)
    drv.calls.clear()
    _device.leave_ordered(_device.enter(0), 0)  # Numba's next copy makes device 0 current: the same stream
    assert stack == [] and [c[0] for c in drv.calls] == ["create", "record"]


def test_leave_ordered_restores_the_callers_context_when_the_driver_fails(fake_events):
    stack, drv = fake_events
    stack.append(0x10)
    drv.cuEventRecord = lambda event, stream: (700,)
    with pytest.raises(Exception, match="cuEventRecord failed while ordering"):
        _device.leave_ordered(_device.enter(1), 0)
    assert stack == [0x10]


def test_a_block_on_another_device_orders_the_caller_after_its_legacy_stream_work(fake_events):
    """The class of issue 45's wrong reads: any ``with on(device, order=handle)`` block that switched
    devices and put work on that device's legacy stream (a product's first call, a stream-ordered
    allocation) leaves with the caller's stream waiting for it; a named stream, no switch, or a block
    that names no order (no work of the caller's to order) adds nothing."""
    stack, drv = fake_events
    stack.append(0x10)
    with _device.on(1, order=0):
        assert stack == [0x10, 0x11]
    assert stack == [0x10] and drv.calls == [("create", 0x11), ("record", 0x11, 0), ("wait", 0x10, 0)]
    drv.calls.clear()
    with _device.on(1, order=0xBEEF), _device.on(1, order=0):  # named stream; the second is already current
        pass
    with _device.on(1):
        pass
    assert stack == [0x10] and drv.calls == []


def test_the_tropical_api_orders_its_first_calls_as_its_hot_path():
    """matmul/bmm/backward plan a first call inside a device switch; the switch names the call's stream,
    so the caller is ordered after the work as the hot path's calls are (lazykern/tropical/_hot.py)."""
    import inspect

    from lazykern.launch import arrays
    from lazykern.tropical import api

    for fn in (api._product, api._backward, arrays._allocate):
        src = inspect.getsource(fn)
        assert "_device.on(" in src
        assert all("order=" in line for line in src.splitlines() if "_device.on(" in line), fn.__name__


def test_arch_asks_the_driver_and_leaves_numba_cuda_unimported(monkeypatch):
    """A fresh process's first compile names its arch before numba.cuda is imported (half a second):
    the driver answers; numba decides where it is imported already or its simulator may be on, and where
    the driver gives no answer."""
    import os
    import subprocess
    import sys

    code = (
        "import sys; from lazykern.launch import _device as d; d._driver_capability = lambda i: (9, 0); "
        "print(d.arch(0), 'numba.cuda' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["sm_90", "False"]
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")  # the simulator may be on: numba decides
    assert _device._numba_decides()
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM")
    monkeypatch.delitem(sys.modules, "numba.cuda", raising=False)
    assert not _device._numba_decides()
    monkeypatch.setitem(sys.modules, "numba.cuda", types.ModuleType("numba.cuda"))  # imported: its answer is free
    assert _device._numba_decides()
