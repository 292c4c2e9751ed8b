"""Where the host time of one kernel launch goes (GPU). Run: python -m benchmarks.launch_breakdown"""

from __future__ import annotations

import ctypes
import json
import statistics
import time

import numpy as np

from benchmarks.foundation import AXPY


def _time(fn, n=5000, repeats=7) -> float:
    from numba import cuda

    fn()
    cuda.synchronize()
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t) / n * 1e6)
        cuda.synchronize()
    return statistics.median(samples)


def main() -> dict:
    from cuda.bindings import driver
    from cuda.core import LaunchConfig, launch
    from numba import cuda

    from lazykern import Kernel
    from lazykern.compiler import compile_source, current_arch

    n = 1024
    x = cuda.to_device(np.ones(n, np.float32))
    y = cuda.to_device(np.ones(n, np.float32))
    o = cuda.device_array(n, np.float32)
    stream = cuda.stream()
    kern = Kernel(
        "axpy",
        "axpy",
        compile_source(AXPY, name="axpy", arch=current_arch()).code,
        arch=current_arch(),
        signature=["ptr", "ptr", "ptr", "int32"],
    )
    fn = kern.function()
    cs = kern[4, 256, stream].stream  # the launcher's cuda.core Stream
    cfg = LaunchConfig(grid=(4,), block=(256,))
    packed = kern.pack([x, y, o, n])
    handle = int(fn.handle) if hasattr(fn, "handle") else None
    slots = (ctypes.c_uint64 * 4)(*[int(v) for v in packed])
    ptrs = (ctypes.c_void_p * 4)(*[ctypes.addressof(slots) + 8 * i for i in range(4)])
    cfunc = driver.CUfunction(handle) if handle is not None else None
    shandle = driver.CUstream(int(stream.handle.value if hasattr(stream.handle, "value") else stream.handle))
    launcher = kern[4, 256, stream]
    res = {
        "cuda_core_launch_prepacked_us": _time(lambda: launch(cs, cfg, fn, *packed)),
        "pack_only_us": _time(lambda: kern.pack([x, y, o, n])),
        "function_lookup_us": _time(kern.function),
        "device_pointer_attr_us": _time(lambda: x.device_ctypes_pointer.value),
        "cai_dict_us": _time(lambda: x.__cuda_array_interface__["data"][0]),
        "gpu_data_int_us": _time(lambda: int(x.gpu_data.device_pointer)),
        "current_context_us": _time(cuda.current_context),
        "cuCtxGetCurrent_us": _time(lambda: int(driver.cuCtxGetCurrent()[1])),
        "full_launcher_call_us": _time(lambda: launcher(x, y, o, n)),
        "full_getitem_call_us": _time(lambda: kern[4, 256, stream](x, y, o, n)),
    }
    ints = [int(v) for v in packed[:3]] + [packed[3]]
    res["cuda_core_launch_python_int_ptrs_us"] = _time(lambda: launch(cs, cfg, fn, *ints))
    o2 = cuda.device_array(n, np.float32)
    launch(cs, cfg, fn, int(packed[0]), int(packed[1]), int(o2.device_ctypes_pointer.value), packed[3])
    stream.synchronize()
    res["python_int_ptrs_correct"] = bool(np.allclose(o2.copy_to_host(), 3.0))
    if cfunc is not None:
        addr = ctypes.addressof(ptrs)
        res["cuLaunchKernel_raw_us"] = _time(
            lambda: driver.cuLaunchKernel(cfunc, 4, 1, 1, 256, 1, 1, 0, shandle, addr, 0)
        )
    res.update(_lazy_kernel_parts(x, y, o, stream))
    np.testing.assert_allclose(o.copy_to_host(), 3.0)
    print(json.dumps(res, indent=2))
    return res


def _lazy_kernel_parts(x, y, o, stream) -> dict:
    """The @lazy_kernel hot path, piece by piece, and the same launch with a packed parameter buffer."""
    import struct

    from cuda.bindings import driver
    from cuda.core import launch
    from numba import cuda

    from lazykern import lazy_kernel

    @lazy_kernel
    def axpy3(a, b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 2.0 * a[i] + b[i]

    launcher = axpy3[4, 256, stream]
    launcher(x, y, o)
    stream.synchronize()
    dispatch = axpy3._dispatch  # the launch layer's target for lazy kernels: fast key -> instance
    key = tuple(map(dispatch.key, (x, y, o)))
    inst = dispatch.fast[key]
    fn = inst.function()
    packed = inst.pack(x, y, o)
    fmt = "".join("d" if isinstance(v, float) else "q" for v in packed)
    blob = ctypes.create_string_buffer(struct.pack(fmt, *packed))
    size = ctypes.c_size_t(len(blob.raw))
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(blob), 2, ctypes.addressof(size), 0)
    cfunc = driver.CUfunction(int(fn.handle))
    shandle = driver.CUstream(int(stream.handle.value if hasattr(stream.handle, "value") else stream.handle))
    return {
        "lazy_kernel_full_us": _time(lambda: launcher(x, y, o)),
        "lazy_kernel_dispatch_key_us": _time(lambda: dispatch.fast.get(tuple(map(dispatch.key, (x, y, o))))),
        "lazy_kernel_pack_us": _time(lambda: inst.pack(x, y, o)),
        "lazy_kernel_params": len(packed),
        "lazy_kernel_core_launch_prepacked_us": _time(lambda: launch(launcher.stream, launcher.config, fn, *packed)),
        "lazy_kernel_struct_pack_us": _time(lambda: struct.pack(fmt, *packed)),
        "lazy_kernel_cuLaunchKernel_extra_buffer_us": _time(
            lambda: driver.cuLaunchKernel(cfunc, 4, 1, 1, 256, 1, 1, 0, shandle, 0, ctypes.addressof(extra))
        ),
    }


if __name__ == "__main__":
    main()
