"""The Python host cost of the launch routes on a CPU: the driver's launch is a no-op.

Every route of ``startup_table.py``'s launch rows runs on the GPU-free stage of the tests
(``tests/_tropical_fakes.py`` for the tropical API, Numba ``DeviceNDArray`` objects over
made-up addresses for ``Kernel`` and ``@lazy_kernel``), with ``cuLaunchKernel`` replaced by a
function that returns success. What is left is lazykern's own Python per call, the part this
machine can measure: the best (min) of repeated timeit runs, interleaved, in microseconds per
call, and each route's ratio to the ``Kernel`` floor of the same run (on a shared machine whose
speed changes by 2x from second to second the best is what compares; medians are printed too).
Allocating calls drop their result at once, as the GPU benchmark does (the free list serves the
next call).

    PYTHONPATH=. python3 -m tests._hot_path_timing [--repeat 60] [--number 1000]

It lives beside the fakes it uses (benchmarks/ use public names only); it times, so no test runs it.
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from typing import Any

import numpy as np

CTX = 0x77  # the fake current context


def _numba_array(ptr: int, n: int = 4096) -> Any:
    from cuda.bindings import driver
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    from numba.cuda.cudadrv.driver import MemoryPointer

    return DeviceNDArray((n,), (4,), np.dtype(np.float32), gpu_data=MemoryPointer(None, driver.CUdeviceptr(ptr), 4 * n))


def routes(mp: Any) -> dict[str, Any]:
    """Zero-argument callables, one per route, on the fake stage installed through ``mp``."""
    from numba.cuda import types as nt

    from lazykern import Kernel, lazy_kernel
    from lazykern._numba import args as numba_args
    from lazykern.jit._lazy_instance import Instance
    from lazykern.launch import _device, _launch
    from lazykern.launch import kernel as kernel_module
    from lazykern.tropical import _hot, api
    from tests._tropical_fakes import FakeDeviceArray, stage

    stage(mp, reuse=True)
    mp.setattr(_hot, "launch_packed", _launch.launch_packed)
    ok = (0,)
    mp.setattr(_launch, "launch_buffer", lambda *args: ok)
    mp.setattr(_launch, "current_context", lambda: CTX)
    mp.setattr(kernel_module, "current_context", lambda: CTX)
    mp.setattr(_device, "several", lambda: False)
    mp.setattr(_device, "stream_handle", lambda stream: 0)

    x, y, out = _numba_array(0x1000_0000), _numba_array(0x2000_0000), _numba_array(0x3000_0000)
    n32 = np.int32(4096)
    k = Kernel("add3", "add3", b"", arch="sm_90", signature=["ptr", "ptr", "ptr", "int32"])
    k._cufunctions[CTX] = "cufn"

    def add3(x: Any, y: Any, out: Any) -> None:
        out[0] = x[0] + y[0]

    lazy = lazy_kernel(add3)
    args = (x, y, out)
    inst = Instance(lazy, (nt.float32[::1],) * 3)
    inst._set_plan({"plan": numba_args.plan_for(inst.types)})
    inst.cufunctions[CTX] = "cufn"
    dispatch = lazy._dispatch
    dispatch.fast[tuple(map(dispatch.key, args))] = inst

    A, B, C = FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64))
    return {
        "Kernel (floor)": lambda: k[32, 128, 0](x, y, out, n32),
        "@lazy_kernel": lambda: lazy[32, 128, 0](x, y, out),
        "matmul out=": lambda: api.matmul(A, B, out=C),
        "matmul allocating": lambda: api.matmul(A, B),
        "matmul argmax allocating": lambda: api.matmul(A, B, argmax=True),
    }


def measure(repeat: int, number: int) -> dict[str, list[float]]:
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        todo = routes(mp)
        for fn in todo.values():  # first calls plan, load and fill the free lists
            fn()
            fn()
        times: dict[str, list[float]] = {name: [] for name in todo}
        for _ in range(repeat):  # interleaved: the machine's load falls on every route alike
            for name, fn in todo.items():
                times[name].append(timeit.timeit(fn, number=number) / number * 1e6)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=60)
    ap.add_argument("--number", type=int, default=1000)
    a = ap.parse_args()
    times = measure(a.repeat, a.number)
    best = {name: min(t) for name, t in times.items()}
    floor = best["Kernel (floor)"]
    for name, us in best.items():
        median = statistics.median(times[name])
        print(f"{name:<26} best {us:6.2f} us  {us / floor:5.2f}x floor   median {median:6.2f} us")


if __name__ == "__main__":
    main()
