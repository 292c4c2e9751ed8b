"""lazykern/jit/_lazy_launch.py: the launch of a ``@lazy_kernel`` finds its instance by type codes."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern._numba import args as numba_args
from lazykern.jit import _lazy_launch


class _Typed:
    """Stands for a Numba device array: ``_numba_type_`` is what make_fast_key reads, then keeps."""

    def __init__(self, numba_type):
        self._numba_type_ = numba_type


def test_type_codes_are_the_fast_keys_of_the_general_path():
    from numba.cuda import types

    fast_key = numba_args.make_fast_key()
    arr = _Typed(types.float32[::1])
    values = (arr, np.float32(2.0), 3, 1.5, True)
    keys = tuple(map(fast_key, values))  # the general path: also keeps arr's type on arr
    assert _lazy_launch.KEPT_TYPE in arr.__dict__  # the name make_fast_key keeps it under
    assert _lazy_launch.type_codes(len(values))(*values) == keys


def test_an_array_the_general_path_has_not_typed_matches_nothing():
    from numba.cuda import types

    fast_key = numba_args.make_fast_key()
    typed, fresh = _Typed(types.float32[::1]), _Typed(types.float32[::1])
    table = {(fast_key(typed),): "instance"}
    codes = _lazy_launch.type_codes(1)
    assert table.get(codes(typed)) == "instance" and table.get(codes(fresh)) is None


def test_an_argument_without_a_scalar_class_or_a_dict_goes_to_the_general_path():
    with pytest.raises(AttributeError):
        _lazy_launch.type_codes(1)(np.zeros(3))  # a host array: copied on the general path
    assert _lazy_launch.type_codes(2) is _lazy_launch.type_codes(2)  # generated once per arity


def _numba_array(ptr: int, n: int = 16):
    """A real Numba DeviceNDArray over a made-up device address (no driver is asked)."""
    from cuda.bindings import driver
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    from numba.cuda.cudadrv.driver import MemoryPointer

    return DeviceNDArray((n,), (4,), np.dtype(np.float32), gpu_data=MemoryPointer(None, driver.CUdeviceptr(ptr), 4 * n))


def test_a_repeated_launch_runs_only_the_dispatch_the_filler_and_the_driver_call(monkeypatch):
    """Counted, not timed: after the first launch of three Numba arrays, a launch is the launcher,
    the dispatcher's lookup (one generated codes reader), one generated filler that reads each
    array's kept parameters inline, and cuLaunchKernel; the block holds what Numba's ABI wants."""
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
        "Launchable.__getitem__", "Launcher.__call__", "Dispatcher.run",
        "<lazykern type codes>codes", "<lazykern parameter block>fill",
    ]  # fmt: skip
    assert len(blocks) == 2 and blocks[0] == blocks[1]
    want = [(0, 0, n, 4, ptr, n, 4) for ptr, n in ((0x1000, 16), (0x2000, 16), (0x3000, 8))]
    assert struct.unpack("@" + "q" * 21, blocks[1]) == sum(want, ())


def _launch_block(extra: int) -> bytes:
    """The bytes of a parameter block, read through cuLaunchKernel's ``extra`` argument."""
    import ctypes

    pointer, _, size = (ctypes.c_void_p * 5).from_address(extra)[1:4]
    return ctypes.string_at(pointer, ctypes.c_size_t.from_address(size).value)
