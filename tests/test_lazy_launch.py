"""lazykern/jit/_lazy_launch.py: the launch of a ``@lazy_kernel`` finds its instance by type codes."""

from __future__ import annotations

import numpy as np

from lazykern._numba import args as numba_args
from lazykern.jit import _lazy_launch


class _Typed:
    """Stands for a Numba device array: ``_numba_type_`` is what make_fast_key reads, then keeps."""

    def __init__(self, numba_type):
        self._numba_type_ = numba_type


class _Found:
    """An instance as the hot path sees one, not loaded in any context (so it goes to cuda.core)."""

    cufunctions: dict = {}
    cooperative, debug = False, None

    def function(self):
        return "function"


def _found(table, values):
    """What the hot path of ``len(values)`` arguments finds in ``table`` (codes -> instance):
    the instance it launches, or "general path"."""
    got = []
    dispatch = type("D", (), {"fast": table, "call": lambda self, launcher, args: got.append("general path")})()
    slow = lambda launcher, inst, fn, args: got.append(inst)  # noqa: E731
    _lazy_launch.hot_run(len(values))(dispatch, None, slow, None, None)("launcher", values, 0x77)
    (found,) = got
    return found


def test_the_hot_path_reads_the_fast_keys_of_the_general_path():
    from numba.cuda import types

    fast_key = numba_args.make_fast_key()
    arr = _Typed(types.float32[::1])
    values = (arr, np.float32(2.0), 3, 1.5, True)
    keys = tuple(map(fast_key, values))  # the general path: also keeps arr's type and code on arr
    kept = arr.__dict__  # the names make_fast_key keeps the type and its code under
    assert kept[_lazy_launch.KEPT_CODE] == id(kept[_lazy_launch.KEPT_TYPE])
    inst = _Found()
    assert _found({keys: inst}, values) is inst
    assert _found({keys: inst}, values[:4] + (np.float64(1.0),)) == "general path"  # another scalar type


def test_an_array_the_general_path_has_not_typed_matches_nothing():
    from numba.cuda import types

    fast_key = numba_args.make_fast_key()
    typed, fresh = _Typed(types.float32[::1]), _Typed(types.float32[::1])
    inst = _Found()
    table = {(fast_key(typed),): inst}
    assert _found(table, (typed,)) is inst and _found(table, (fresh,)) == "general path"


def test_an_argument_without_a_scalar_class_or_a_dict_goes_to_the_general_path():
    assert _found({}, (np.zeros(3),)) == "general path"  # a host array: copied on the general path
    assert _lazy_launch.hot_run(2) is _lazy_launch.hot_run(2)  # generated once per arity


def test_another_number_of_arguments_goes_to_the_general_path():
    inst = _Found()
    table = {(id(None),): inst}
    assert _found(table, (1, 2)) == "general path"  # a reader of 2 arguments never unpacks 3
    run = _lazy_launch.hot_run(2)
    got = []
    dispatch = type("D", (), {"fast": {}, "call": lambda self, launcher, args: got.append(args)})()
    run(dispatch, None, None, None, None)("launcher", (1, 2, 3), 0)
    assert got == [(1, 2, 3)]  # the general path then says how many arguments the kernel takes


def _numba_array(ptr: int, n: int = 16):
    """A real Numba DeviceNDArray over a made-up device address (no driver is asked)."""
    from cuda.bindings import driver
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    from numba.cuda.cudadrv.driver import MemoryPointer

    return DeviceNDArray((n,), (4,), np.dtype(np.float32), gpu_data=MemoryPointer(None, driver.CUdeviceptr(ptr), 4 * n))


def test_a_repeated_launch_runs_only_the_dispatch_the_filler_and_the_driver_call(monkeypatch):
    """Counted, not timed: after the first launch of three Numba arrays, a launch is the launcher,
    the kernel's hot path (one generated function: the codes read inline, one lookup), one
    generated filler that reads each array's kept parameters inline, and cuLaunchKernel; the
    block holds what Numba's ABI wants."""
    import struct
    import sys

    from numba.cuda import types as nt

    from lazykern import lazy_kernel
    from lazykern.jit._lazy_instance import Instance
    from lazykern.launch import _device, _launch

    ctx = 0x77
    blocks: list[bytes] = []
    monkeypatch.setattr(_launch, "current_context", lambda: ctx)
    monkeypatch.setattr(_launch, "core_stream", lambda stream: type("S", (), {"handle": 0})())
    monkeypatch.setattr(_device, "several", lambda: False)
    monkeypatch.setattr(_launch, "launch_buffer", lambda fn, *rest: blocks.append(_launch_block(rest[-1])) or (0,))

    @lazy_kernel
    def add3(x, y, out):
        out[0] = x[0] + y[0]

    args = (_numba_array(0x1000), _numba_array(0x2000), _numba_array(0x3000, 8))
    inst = Instance(add3, (nt.float32[::1],) * 3)
    inst._set_plan({"plan": numba_args.plan_for(inst.types)})
    inst.cufunctions[ctx] = "cufunction"
    dispatch = add3._dispatch
    dispatch.fast[tuple(map(dispatch.key, args))] = inst
    add3[1, 32](*args)  # reads and keeps each array's parameters
    seen: list[str] = []

    def hook(frame, event, arg):
        if event == "call" and frame.f_globals.get("__name__", "").startswith("lazykern"):
            seen.append(frame.f_code.co_qualname)
        elif event == "call" and frame.f_code.co_filename.startswith("<lazykern"):
            seen.append(frame.f_code.co_filename + frame.f_code.co_name)

    sys.setprofile(hook)
    try:
        add3[1, 32](*args)
    finally:
        sys.setprofile(None)
    assert seen == [
        "Launchable.__getitem__", "Launcher.__call__", "<lazykern hot path>run", "<lazykern parameter block>fill",
    ]  # fmt: skip
    assert len(blocks) == 2 and blocks[0] == blocks[1]
    want = [(0, 0, n, 4, ptr, n, 4) for ptr, n in ((0x1000, 16), (0x2000, 16), (0x3000, 8))]
    assert struct.unpack("@" + "q" * 21, blocks[1]) == sum(want, ())


def _launch_block(extra: int) -> bytes:
    """The bytes of a parameter block, read through cuLaunchKernel's ``extra`` argument."""
    import ctypes

    pointer, _, size = (ctypes.c_void_p * 5).from_address(extra)[1:4]
    return ctypes.string_at(pointer, ctypes.c_size_t.from_address(size).value)


class _DriverSpy:
    """Stands for ``cuda.bindings.driver``: every function called through it is recorded by name;
    the two a launch may make answer as the driver would (a current context, success)."""

    CTX = 0x77

    def __init__(self):
        from cuda.bindings import driver

        self.real = driver
        self.calls: list[str] = []

    def __getattr__(self, name):
        real = getattr(self.real, name)
        if not callable(real) or isinstance(real, type):
            self.calls.append(f"read {name}")  # a handle type or enum: no driver call, but a use of the module
            return real

        def call(*args):
            self.calls.append(name)
            return (0, self.CTX) if name == "cuCtxGetCurrent" else (0,)

        return call


def test_a_repeated_lazy_kernel_launch_makes_the_driver_calls_a_kernel_launch_makes(monkeypatch):
    """Counted through a spy of the driver module (and of cuda.core's launch, the other route to
    the driver): after its first launches a @lazy_kernel launch asks the driver for exactly what a
    ``Kernel`` launch of the same arrays asks, the current context and one cuLaunchKernel, reads
    no driver handle type (no CUstream or CUfunction made per launch), and neither runs Numba's,
    NumPy's or ctypes' Python code nor calls their builtins."""
    import sys

    from numba.cuda import types as nt

    from lazykern import Kernel, lazy_kernel
    from lazykern.jit import _lazy_instance
    from lazykern.launch import _device, _launch
    from lazykern.launch import kernel as kernel_module

    spy = _DriverSpy()
    ctx = spy.CTX
    for module in (_launch, _device, _lazy_instance):
        monkeypatch.setattr(module, "_cu", spy)
    monkeypatch.setattr(_launch, "launch_buffer", spy.cuLaunchKernel)
    for module in (_launch, kernel_module, _lazy_instance):  # the real reader, through the spy
        monkeypatch.setattr(module, "current_context", lambda: _device.current_context(spy.cuCtxGetCurrent))
    monkeypatch.setattr(_launch, "launch", lambda *args: spy.calls.append("cuda.core.launch"))
    monkeypatch.setattr(_device, "several", lambda: False)
    monkeypatch.setattr(_device, "stream_handle", lambda stream: 0)

    def function(inst):  # what loading gives an instance, without a GPU: its plan and CUfunction
        if inst.pack is None:
            inst._set_plan({"plan": numba_args.plan_for(inst.types)})
        inst.cufunctions[ctx] = "cufunction"
        return "function"

    monkeypatch.setattr(_lazy_instance.Instance, "function", function)

    @lazy_kernel
    def add3(x, y, out):
        out[0] = x[0] + y[0]

    k = Kernel("add3", "add3", b"", arch="sm_90", signature=["ptr", "ptr", "ptr", "int32"])
    k._cufunctions[ctx] = "cufunction"
    x, y, out = _numba_array(0x1000), _numba_array(0x2000), _numba_array(0x3000)
    n = np.int32(16)
    routes = {"Kernel": lambda: k[1, 32, 0](x, y, out, n), "lazy_kernel": lambda: add3[1, 32, 0](x, y, out)}
    assert add3._instances == {}
    seen: dict[str, tuple[list[str], list[str]]] = {}
    foreign = ("numpy", "ctypes", "_ctypes", "numba", "cuda")
    for name, launch in routes.items():
        launch()  # the lazy kernel's first launch: the general path types, finds and remembers the instance
        launch()
        del spy.calls[:]
        made: list[str] = []

        def hook(frame, event, arg, made=made):
            if event == "c_call":  # a builtin: kept where its owner is NumPy, ctypes or cuda.bindings
                owner = type(getattr(arg, "__self__", None) or arg).__module__ or ""
                if owner.split(".")[0] in foreign:
                    made.append(f"{owner}.{arg.__qualname__}")
            elif event == "call" and frame.f_globals.get("__name__", "").split(".")[0] in foreign:
                made.append(frame.f_code.co_qualname)

        sys.setprofile(hook)
        try:
            launch()
        finally:
            sys.setprofile(None)
        seen[name] = (list(spy.calls), made)
    assert list(add3._instances) == [(nt.float32[::1],) * 3]
    assert seen["lazy_kernel"] == seen["Kernel"] == (["cuCtxGetCurrent", "cuLaunchKernel"], []), seen
