"""The launch layer (lazykern/launch/_launch.py): every kernel kind launches through it, and nothing
else in the package launches, reads a device pointer or spells an arch on its own.

Runs on the CPU: the driver is replaced by fakes at the launch layer's two launch calls.
"""

from __future__ import annotations

import ast
import ctypes
import struct
import types
from pathlib import Path

import numpy as np
import pytest
from cuda.bindings import driver
from numba.cuda import types as nt

from lazykern import Kernel, LaunchError, lazy_kernel, tropical
from lazykern._numba import args as _numba_args
from lazykern.graph._graphed import GraphedCallable
from lazykern.jit._lazy_instance import Instance
from lazykern.launch import _device, _launch
from lazykern.launch import kernel as kernel_module
from lazykern.tropical import api

PACKAGE = Path(_launch.__file__).parents[1]  # lazykern/: every module of the package
CTX = 0x77  # the fake current context


class DeviceArray:
    """A float32 device array as Numba exposes one (pointer, type, layout)."""

    def __init__(self, ptr: int, n: int = 8) -> None:
        self.device_ctypes_pointer = ctypes.c_void_p(ptr)
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (n,), "typestr": "<f4", "version": 3}
        self.size, self.shape, self.strides, self.dtype = n, (n,), (4,), np.dtype(np.float32)
        self._numba_type_ = nt.float32[::1]


class CaiMatrix:
    """A C-contiguous float32 matrix known only through __cuda_array_interface__."""

    def __init__(self, ptr: int, shape: tuple[int, int]) -> None:
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": "<f4", "version": 3}


class FakeStream:
    handle = 0


@pytest.fixture
def launches(monkeypatch):
    """Every launch the layer makes, as (how, function, arguments); no driver needed."""
    seen: list[tuple[str, object, tuple]] = []
    monkeypatch.setattr(_launch, "core_stream", lambda stream: FakeStream())
    monkeypatch.setattr(_launch, "current_context", lambda: CTX)
    monkeypatch.setattr(_launch, "launch", lambda stream, config, fn, *args: seen.append(("core", fn, args)))
    # A buffer launch is recorded with what its parameter block holds at that moment, last.
    monkeypatch.setattr(
        _launch, "launch_buffer", lambda fn, *rest: seen.append(("buffer", fn, (*rest, _block(rest[-1])))) or (0,)
    )
    monkeypatch.setattr(_device, "several", lambda: False)
    monkeypatch.setattr(_device, "pointer_device", lambda ptr: 0 if ptr else None)
    monkeypatch.setattr(_device, "current_context", lambda: 0)
    monkeypatch.setattr(_device, "enter", lambda device: None)
    monkeypatch.setattr(_device, "simulating", lambda: False)
    _device._resolvers.clear()
    yield seen
    _device._resolvers.clear()


def _kernel(signature=("ptr", "int32")) -> Kernel:
    k = Kernel("k", "k", b"", arch="sm_90", signature=list(signature))
    k._by_context[CTX] = "loaded k"
    return k


def test_kernel_launches_through_the_layer(launches):
    k = _kernel()
    k[(2,), (32,)](DeviceArray(0x1000), 7)
    assert launches == [("core", "loaded k", (0x1000, np.int32(7)))]
    assert k[(2,), (32,)] is k[(2,), (32,)]  # one cached launcher per configuration
    assert type(k[(2,), (32,)]) is _launch.Launcher


def test_kernel_packs_raw_addresses_and_refuses_host_arrays(launches):
    k = _kernel()
    k[1, 32](0x2000, np.int32(1))  # a raw int address, as the tropical API passes
    assert launches[0][2] == (0x2000, np.int32(1))
    with pytest.raises(LaunchError, match="NumPy"):
        k[1, 32](np.zeros(4, np.float32), 1)
    with pytest.raises(LaunchError, match="not a device array"):
        k[1, 32]("nope", 1)


def test_lazy_kernel_hot_path_launches_through_the_layer(launches):
    @lazy_kernel
    def scale(a, x):
        x[0] = a

    args = (np.float32(2.0), DeviceArray(0x3000))
    inst = Instance(scale, (nt.float32, nt.float32[::1]))
    inst._set_plan({"plan": _numba_args.plan_for(inst.types)})
    inst.cufunctions[CTX] = "cufunction"
    dispatch = scale._dispatch
    dispatch.fast[tuple(map(dispatch.key, args))] = inst
    launcher = scale[4, 64]
    assert type(launcher) is _launch.Launcher and launcher is scale[4, 64]
    launcher(*args)
    assert [(how, fn) for how, fn, _ in launches] == [("buffer", "cufunction")]
    dims = launches[0][2][:6]
    assert dims == (4, 1, 1, 64, 1, 1)


def test_graphed_callable_replays_launches_of_the_layer(launches):
    k = _kernel()

    class Graph:  # runs the function at "capture", counts replays
        device = 0
        replays = 0

        def update(self, fn):
            return fn()

        def replay(self):
            Graph.replays += 1

    graphed = GraphedCallable(lambda x, n: k[1, 32](x, n), None, lambda stream: Graph())
    graphed(DeviceArray(0x1000), 3)
    graphed(DeviceArray(0x1000), 3)  # same layout and buffer: replay only
    graphed(DeviceArray(0x2000), 3)  # another buffer: captured again
    assert [args[0] for _, _, args in launches] == [0x1000, 0x2000]
    assert Graph.replays == 3


def test_tropical_api_launches_through_the_layer(launches, monkeypatch):
    made: dict[str, Kernel] = {}

    def fake_kernel(name: str, device: int) -> Kernel:
        frag = tropical.family.source.fragment(name)
        k = made[name] = Kernel(name, frag.symbol, b"", arch="sm_90", signature=frag.signature)
        k._by_context[CTX] = f"loaded {name}"
        k._cufunctions[CTX] = f"cufunction {name}"
        return k

    monkeypatch.setattr(api, "loaded_kernel", fake_kernel)
    monkeypatch.setattr(api, "sm_count", lambda device: 132)
    monkeypatch.setattr(kernel_module, "current_context", lambda: CTX)  # the call's kernels load here
    monkeypatch.setattr(_device, "primary_context", lambda device: None)  # outputs would be Numba arrays
    A, B, C = CaiMatrix(0x1000, (64, 16)), CaiMatrix(0x2000, (16, 64)), CaiMatrix(0x3000, (64, 64))
    for _ in range(2):  # the general path, then the repeated-call path: both launch the prepared block
        assert tropical.matmul(A, B, out=C) is C
    assert [(how, fn) for how, fn, _ in launches] == [("buffer", f"cufunction {next(iter(made))}")] * 2
    assert all(struct.unpack_from("@qqq", rest[-1]) == (0x1000, 0x2000, 0x3000) for _, _, rest in launches)


def _block(extra: int) -> bytes:
    """The bytes of a parameter block, read through cuLaunchKernel's ``extra`` argument."""
    pointer, _, size = (ctypes.c_void_p * 5).from_address(extra)[1:4]
    return ctypes.string_at(pointer, ctypes.c_size_t.from_address(size).value)


def test_loaded_kernel_launches_its_reused_parameter_block(launches):
    k = _kernel(("ptr", "ptr", "float32", "int32", "uint8", "float64"))
    k._cufunctions[CTX] = "cufn"
    launcher = k[(3, 2), 64]
    launcher(DeviceArray(0x1000), 0x2000, 1.5, 7, np.uint8(200), 2.25)
    launcher(DeviceArray(0x1100), 0x2100, np.float32(0.5), 2.0, True, np.float64(-1))  # converted as pack() does
    assert [(how, fn, rest[:7]) for how, fn, rest in launches] == [("buffer", "cufn", (3, 2, 1, 64, 1, 1, 0))] * 2
    assert launches[0][2][-2] == launches[1][2][-2]  # one block, reused
    assert struct.unpack("@qqfiBd", launches[0][2][-1]) == (0x1000, 0x2000, 1.5, 7, 200, 2.25)
    assert struct.unpack("@qqfiBd", launches[1][2][-1]) == (0x1100, 0x2100, 0.5, 2, 1, -1.0)
    with pytest.raises(LaunchError, match="argument 3 must be a int32 scalar"):
        launcher(DeviceArray(0x1000), 0x2000, 1.5, 2**40, 1, 1.0)
    with pytest.raises(LaunchError, match="takes 6 arguments"):
        launcher(DeviceArray(0x1000))
    with pytest.raises(LaunchError, match="NumPy"):
        launcher(np.zeros(4, np.float32), 0x2000, 1.5, 7, 1, 1.0)
    assert len(launches) == 2


def _numba_array(ptr: int):
    """A real Numba DeviceNDArray over a made-up device address (no driver is asked)."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    from numba.cuda.cudadrv.driver import MemoryPointer

    buffer = MemoryPointer(None, pointer=driver.CUdeviceptr(ptr), size=64)
    return DeviceNDArray((16,), (4,), np.dtype(np.float32), gpu_data=buffer)


def test_a_numba_arrays_address_is_read_once(launches, monkeypatch):
    """Numba builds a ctypes object per ``device_ctypes_pointer`` read (0.35 us, three per launch): the
    address is read once per array and kept on it; every array keeps its own, and a look-alike that is
    no Numba array is read on every launch."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    reads = []
    real = DeviceNDArray.device_ctypes_pointer
    monkeypatch.setattr(DeviceNDArray, "device_ctypes_pointer", property(lambda a: reads.append(1) or real.fget(a)))
    x, y = _numba_array(0x1000), _numba_array(0x2000)
    look_alike = DeviceArray(0x3000)
    k = _kernel(("ptr", "ptr", "ptr", "int32"))
    k._cufunctions[CTX] = "cufn"
    for _ in range(3):
        k[1, 32](x, y, look_alike, np.int32(4))
    look_alike.device_ctypes_pointer = ctypes.c_void_p(0x3100)  # a look-alike may move: read anew
    k[1, 32](y, x, look_alike, np.int32(4))
    assert len(reads) == 2
    blocks = [struct.unpack("@qqqi", rest[-1]) for _, _, rest in launches]
    assert blocks == [(0x1000, 0x2000, 0x3000, 4)] * 3 + [(0x2000, 0x1000, 0x3100, 4)]


def test_a_kernel_makes_its_launch_functions_on_first_need():
    """Looking a kernel up (what a warm start does) generates no code and no parameter block;
    the first launcher makes them, a pack makes its packer."""
    k = _kernel(("ptr", "float32"))
    assert k.params is None and k._plan is None and k._arrays is None
    k[1, 32]
    assert k.params is not None and k._plan is None
    assert k.pack([0x1000, 2.0]) == (0x1000, np.float32(2.0)) and k._plan is not None
    with pytest.raises(ValueError, match="signature entry 1"):
        _kernel(("ptr", "no_such_dtype"))


def test_a_prepared_launch_writes_its_scalars_once_as_the_kernels_types(launches, monkeypatch):
    monkeypatch.setattr(kernel_module, "current_context", lambda: CTX)
    k = _kernel(("ptr", "ptr", "int32", "float32", "int64"))
    k._cufunctions[CTX] = "cufn"
    prepared = _launch.Prepared(k, (2,), 64, [3, 2.5, 2**40], pointers=2)
    assert [type(v) for v in prepared.tail] == [np.int32, np.float32, np.int64]
    _launch.launch_packed(0, prepared, 0x1000, 0x2000)
    assert struct.unpack("@qqifq", launches[0][2][-1]) == (0x1000, 0x2000, 3, 2.5, 2**40)
    with pytest.raises(ValueError, match="takes 3 scalars"):
        _launch.Prepared(k, (2,), 64, [3, 2.5], pointers=2)
    with pytest.raises(OverflowError):
        _launch.Prepared(k, (2,), 64, [2**40, 2.5, 1], pointers=2)


def test_a_parameter_the_block_cannot_hold_launches_through_cuda_core(launches):
    k = _kernel(("ptr", "complex64"))
    k._cufunctions[CTX] = "cufn"
    assert k.params is None
    k[1, 32](DeviceArray(0x1000), np.complex64(1 + 2j))
    assert launches == [("core", "loaded k", (0x1000, np.complex64(1 + 2j)))]


# -- nothing outside the layer does its jobs -------------------------------------------------
def _modules() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text())) for p in sorted(PACKAGE.rglob("*.py"))]


def _where(pred) -> set[str]:
    return {str(p.relative_to(PACKAGE)) for p, tree in _modules() for node in ast.walk(tree) if pred(node)}


def test_only_the_launch_layer_launches():
    def launches(node: ast.AST) -> bool:
        if isinstance(node, ast.ImportFrom) and node.module == "cuda.core":
            return any(a.name == "launch" for a in node.names)
        return isinstance(node, ast.Attribute) and node.attr == "cuLaunchKernel"

    assert _where(launches) == {"launch/_launch.py"}


def test_only_one_class_is_a_launcher():
    def launcher_class(node: ast.AST) -> bool:
        return isinstance(node, ast.ClassDef) and node.name.lstrip("_") == "Launcher"

    assert _where(launcher_class) == {"launch/_launch.py"}


def test_only_device_py_reads_pointers():
    def reads_pointer(node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "value":
            inner = node.value
            return isinstance(inner, ast.Attribute) and inner.attr == "device_ctypes_pointer"
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "data":
            return True  # cai["data"]
        return False

    assert _where(reads_pointer) == {"launch/_device.py"}


def test_only_compiler_spells_an_arch_from_a_compute_capability():
    def spells_arch(node: ast.AST) -> bool:
        if not isinstance(node, ast.JoinedStr) or not node.values:
            return False
        head = node.values[0]
        fields = [v for v in node.values if isinstance(v, ast.FormattedValue)]
        return isinstance(head, ast.Constant) and str(head.value).startswith("sm_") and len(fields) >= 2

    assert _where(spells_arch) == {"compile/compiler.py"}


def test_stream_handles_come_from_device_py():
    def defines_stream_handle(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.FunctionDef) and "stream_handle" in node.name and node.name != "stream_handle_device"
        )

    assert _where(defines_stream_handle) == {"launch/_device.py"}


def test_every_stream_kind_becomes_one_handle():
    """Numba (ctypes handle), cuda.core (CUstream handle), torch, CuPy, raw ints: one resolver."""
    forms = [
        types.SimpleNamespace(handle=ctypes.c_void_p(0x60)),  # Numba Stream
        types.SimpleNamespace(handle=driver.CUstream(0x60)),  # cuda.core Stream
        types.SimpleNamespace(cuda_stream=0x60),  # torch.cuda.Stream
        types.SimpleNamespace(ptr=0x60),  # cupy Stream
        types.SimpleNamespace(__cuda_stream__=lambda: (0, 0x60)),  # the stream protocol
        0x60,
        np.uint64(0x60),
    ]
    assert [_device.stream_handle(s) for s in forms] == [0x60] * len(forms)
