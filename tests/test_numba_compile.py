"""Ahead-of-time compiling of @lazy_kernel kernels never asks the driver (issue 13, item 11)."""

from __future__ import annotations

import pytest
from numba import cuda, float32

from lazykern import lazy_kernel

ELF = b"\x7fELF"


def _no_driver():
    raise AssertionError("ahead-of-time compiling asked the CUDA driver for the current device")


@cuda.jit(device=True)
def _triple(v):
    return 3 * v


@cuda.jit(device=True)
def _triple_plus_one(v):
    return _triple(v) + 1  # a device function calling another


def _calls_device_functions(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = _triple_plus_one(x[i])


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_warm_of_a_kernel_calling_device_functions_needs_no_driver(cache, monkeypatch, arch):
    # Also true on a GPU machine: the driver's current device is never consulted.
    from numba.cuda import api, dispatcher

    monkeypatch.setattr(dispatcher, "get_current_device", _no_driver)
    monkeypatch.setattr(api, "get_current_device", _no_driver)
    k = lazy_kernel(_calls_device_functions, cache=cache)
    (report,) = k.warm([(float32[::1],)], arch=arch)
    assert report["compiled"] is True and report["arch"] == arch
    (entry,) = list(cache.entries())
    assert entry["arch"] == arch and cache.lookup(entry["key"]).code[:4] == ELF
    assert dispatcher.get_current_device is _no_driver  # the stand-in is gone again


@cuda.jit(device=True)
def _halve(v):
    return v / 2


def _calls_halve(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = _halve(x[i])


def _also_calls_halve(x):
    x[0] = _halve(x[0]) + 1


def test_device_functions_are_compiled_for_each_target_arch(cache, monkeypatch):
    from numba.cuda import dispatcher

    seen: list[tuple[str, tuple]] = []
    real = dispatcher.compile_cuda

    def recording(pyfunc, *args, **kwargs):
        seen.append((pyfunc.__name__, tuple(kwargs["cc"])))
        return real(pyfunc, *args, **kwargs)

    monkeypatch.setattr(dispatcher, "compile_cuda", recording)
    k = lazy_kernel(_calls_halve, cache=cache)
    for arch in ("sm_80", "sm_90"):
        k.warm([(float32[::1],)], arch=arch)
    lazy_kernel(_also_calls_halve, cache=cache).warm([(float32[::1],)], arch="sm_80")
    assert seen == [("_halve", (8, 0)), ("_halve", (9, 0))]  # once per arch, then reused
    assert dict(_halve.overloads) == {}  # Numba's own overloads are left as they were


@cuda.jit(device=True)
def _negate(v):
    return -v


def _calls_negate(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = _negate(x[i])


@pytest.mark.gpu
def test_gpu_warm_for_other_archs_leaves_numba_and_launches_working(cache):
    import numpy as np

    @cuda.jit
    def plain(x):  # Numba's own kernel, sharing the device function
        i = cuda.grid(1)
        if i < x.size:
            x[i] = _negate(x[i])

    k = lazy_kernel(_calls_negate, cache=cache)
    for arch in ("sm_80", "sm_90"):
        k.warm([(float32[::1],)], arch=arch)
    x = np.arange(64, dtype=np.float32)
    d = cuda.to_device(x)
    plain[1, 64](d)
    np.testing.assert_array_equal(d.copy_to_host(), -x)
    k[1, 64](d)  # the current device's arch: compiled or found, then launched
    cuda.synchronize()
    np.testing.assert_array_equal(d.copy_to_host(), x)
