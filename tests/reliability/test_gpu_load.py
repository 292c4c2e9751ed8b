"""10,000 launches of cached family kernels from 4 threads on 4 streams: correct, and nothing leaks."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from lazykern import KernelCache

from ._families import SYNTHETIC_SIZE, synthetic_family

THREADS = 4
LAUNCHES = 10_000
N = 4096


@pytest.mark.gpu
def test_threads_and_streams_launch_cached_kernels(tmp_path):
    from numba import cuda

    directory = tmp_path / "c"
    synthetic_family(KernelCache(directory)).warm()  # compile and store
    fam = synthetic_family(KernelCache(directory))  # a fresh process view: everything from the store
    kernels = [fam[name] for name in fam.names()]
    assert fam.compile_calls == 0
    ctx = cuda.current_context()
    arrays = [cuda.to_device(np.zeros(N, dtype=np.int32)) for _ in range(THREADS)]
    streams = [cuda.stream() for _ in range(THREADS)]
    for k in kernels:  # load every module once before measuring
        k[(N + 255) // 256, 256, streams[0]](arrays[0], np.int32(N))
    cuda.synchronize()
    for a in arrays:
        a.copy_to_device(np.zeros(N, dtype=np.int32))
    modules_before = len(ctx.modules)
    free_before = ctx.get_memory_info().free

    per_thread = LAUNCHES // THREADS
    errors: list[BaseException] = []
    expected = np.zeros(THREADS, dtype=np.int64)

    def work(t: int) -> None:
        try:
            cuda.current_context()  # this thread's context
            for i in range(per_thread):
                j = (i + t) % SYNTHETIC_SIZE
                kernels[j][(N + 255) // 256, 256, streams[t]](arrays[t], np.int32(N))
            streams[t].synchronize()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    for t in range(THREADS):
        expected[t] = sum((i + t) % SYNTHETIC_SIZE + 1 for i in range(per_thread))
    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    cuda.synchronize()
    assert not errors, errors[:3]
    for t, a in enumerate(arrays):
        np.testing.assert_array_equal(a.copy_to_host(), np.full(N, expected[t], dtype=np.int32))
    assert len(ctx.modules) == modules_before, "launching loaded new modules"
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # GPU-wide free memory: meaningful only alone on the GPU
        assert ctx.get_memory_info().free >= free_before - (4 << 20), "device memory leaked during launches"
    assert all(k.loaded_devices == (ctx.device.id,) for k in kernels)


@pytest.mark.gpu
def test_capture_replay_cycles_leak_nothing(tmp_path):
    """1,000 capture / replay / discard cycles: same results, no device memory or module growth."""
    import gc

    from numba import cuda

    from lazykern import graph

    fam = synthetic_family(KernelCache(tmp_path / "c"))
    kernel = fam[fam.names()[0]]  # adds 1 to every element
    stream = cuda.stream()
    a = cuda.to_device(np.zeros(N, dtype=np.int32))
    kernel[(N + 255) // 256, 256, stream](a, np.int32(N))  # load before measuring
    stream.synchronize()
    ctx = cuda.current_context()
    modules_before, free_before = len(ctx.modules), ctx.get_memory_info().free
    for _ in range(1000):
        with graph.capture(stream) as g:
            kernel[(N + 255) // 256, 256, stream](a, np.int32(N))
        g.replay()
        g.close()
    stream.synchronize()
    gc.collect()
    assert int(a.copy_to_host()[0]) == 1 + 1000
    assert len(ctx.modules) == modules_before
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # GPU-wide free memory: meaningful only alone on the GPU
        assert free_before - ctx.get_memory_info().free <= 4 << 20, "device memory grew over 1,000 capture cycles"
