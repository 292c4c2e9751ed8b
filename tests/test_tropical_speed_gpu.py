"""Tropical calls at launch speed on a GPU: allocation inside graph capture, replay equality,
no memory growth, CuPy and torch arrays, several streams (run with `pytest -m gpu`)."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from lazykern import graph, tropical
from lazykern.errors import CaptureError
from lazykern.launch import memory
from lazykern.tropical import _hot, reference

pytestmark = pytest.mark.gpu


def _dev(x):
    from numba import cuda

    return cuda.to_device(np.ascontiguousarray(x))


def _rand(rng, shape, dtype=np.float32):
    return rng.integers(-8, 9, size=shape).astype(dtype)


def _pool_used(device: int = 0) -> int:
    """Bytes in use in lazykern's pool of ``device`` plus the driver's graph memory."""
    from cuda.bindings import driver as drv

    used = drv.CUmemPool_attribute.CU_MEMPOOL_ATTR_USED_MEM_CURRENT
    err, value = drv.cuMemPoolGetAttribute(memory.pool(device), used)
    assert int(err) == 0
    graph_attr = drv.CUgraphMem_attribute.CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT
    err, graph_used = drv.cuDeviceGetGraphMemAttribute(device, graph_attr)
    assert int(err) == 0
    return int(value) + int(graph_used)


def _free_bytes() -> int:
    """The GPU's free memory; under pytest-xdist other workers share the GPU, so it cannot tell this
    process's growth: a constant then (the pool's own counter still checks the growth)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return 0
    from numba import cuda

    return cuda.current_context().get_memory_info().free


def test_outputs_are_numba_arrays_freed_stream_ordered():
    from numba import cuda

    rng = np.random.default_rng(0)
    A, B = _rand(rng, (64, 64)), _rand(rng, (64, 64))
    dA, dB = _dev(A), _dev(B)
    s = cuda.stream()
    C, Ix = tropical.matmul(dA, dB, argmax=True, stream=s)
    s.synchronize()
    want = reference.matmul(A, B, "maxplus", argmax=True)
    np.testing.assert_array_equal(C.copy_to_host(), want[0])
    np.testing.assert_array_equal(Ix.copy_to_host(), want[1])
    np.testing.assert_array_equal(C[1:].copy_to_host(), want[0][1:])  # views keep the buffer
    gc.collect()  # earlier tests' garbage is not this test's
    live = memory.stats()["live"]
    del C, Ix
    gc.collect()
    assert memory.stats()["live"] == live - 1  # C and argmax shared one buffer


def test_argmax_pair_buffer_outlives_either_half():
    """C and argmax share one buffer: dropping C must not free what argmax still uses, even
    while the pool hands memory to other calls on the stream."""
    from numba import cuda

    rng = np.random.default_rng(10)
    for n, dtype in ((64, np.float32), (37, np.float64), (128, np.float32)):
        A, B = _rand(rng, (n, n + 3), dtype), _rand(rng, (n + 3, n - 1), dtype)
        dA, dB = _dev(A), _dev(B)
        s = cuda.stream()
        C, Ix = tropical.matmul(dA, dB, argmax=True, stream=s)
        eager_c, eager_i = (x.copy_to_host(stream=s) for x in (C, Ix))
        want = reference.matmul(A, B, "maxplus", argmax=True)
        np.testing.assert_array_equal(eager_c, want[0])
        np.testing.assert_array_equal(eager_i, want[1])
        out = (cuda.device_array_like(C), cuda.device_array_like(Ix))
        tropical.matmul(dA, dB, argmax=True, out=out, stream=s)  # out= pairs give the same results
        np.testing.assert_array_equal(out[1].copy_to_host(stream=s), want[1])
        del C
        gc.collect()
        churn = [tropical.matmul(dB.T, dA.T, stream=s) for _ in range(20)]  # reuses freed pool memory
        s.synchronize()
        np.testing.assert_array_equal(Ix.copy_to_host(), want[1])
        del churn


@pytest.mark.parametrize("n", [16, 32, 64, 128])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_backward_in_one_launch_equals_the_reference(n, dtype):
    """Launch-bound shapes: both gradients from one backward_ab launch, stored (no zeroing)."""
    from numba import cuda

    rng = np.random.default_rng(11)
    A, B = _rand(rng, (n, n + 1), dtype), _rand(rng, (n + 1, n), dtype)
    s = cuda.stream()
    _, ix = tropical.matmul(_dev(A), _dev(B), argmax=True, stream=s)
    G = rng.standard_normal((n, n)).astype(dtype)
    want = reference.matmul_backward(G, ix.copy_to_host(stream=s), A.shape, B.shape)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    out = (_dev(np.full(A.shape, 7, dtype)), _dev(np.full(B.shape, 7, dtype)))  # overwritten, not added to
    for _ in range(2):  # the general path, then the cached call
        gA, gB = tropical.matmul_backward(_dev(G), ix, A.shape, B.shape, stream=s)
        tropical.matmul_backward(_dev(G), ix, A.shape, B.shape, out=out, stream=s)
        s.synchronize()
        for got in ((gA, gB), out):
            np.testing.assert_allclose(got[0].copy_to_host(), want[0], rtol=tol, atol=tol)
            np.testing.assert_allclose(got[1].copy_to_host(), want[1], rtol=tol, atol=tol)


def test_no_memory_growth_over_100000_calls():
    from numba import cuda

    rng = np.random.default_rng(1)
    dA, dB = _dev(_rand(rng, (16, 16))), _dev(_rand(rng, (16, 16)))
    s = cuda.stream()
    for _ in range(1000):
        tropical.matmul(dA, dB, argmax=True, stream=s)
    s.synchronize()
    before, free_before = _pool_used(), _free_bytes()
    for _ in range(100_000):
        tropical.matmul(dA, dB, argmax=True, stream=s)
    s.synchronize()
    assert _pool_used() <= before + (1 << 20)
    assert _free_bytes() >= free_before - (4 << 20)


@pytest.mark.parametrize(
    "case",
    ["matmul", "argmax", "bmm", "splitk", "backward"],
)
def test_allocation_inside_capture_and_replay_equals_eager(case):
    from numba import cuda

    rng = np.random.default_rng(2)
    s = cuda.stream()
    shapes = {"splitk": ((64, 4096), (4096, 64)), "bmm": ((4, 32, 48), (48, 40))}.get(case, ((64, 48), (48, 40)))
    A, B = _rand(rng, shapes[0]), _rand(rng, shapes[1])
    dA, dB = _dev(A), _dev(B)
    g_in = _dev(_rand(rng, (A.shape[-2], B.shape[-1])))

    def run():
        if case == "matmul":
            return (tropical.matmul(dA, dB, stream=s),)
        if case == "bmm":
            return (tropical.bmm(dA, dB, stream=s),)
        if case == "backward":
            _, ix = tropical.matmul(dA, dB, argmax=True, stream=s)
            return tropical.matmul_backward(g_in, ix, A.shape, B.shape, stream=s)
        return tropical.matmul(dA, dB, argmax=True, stream=s)

    _hot.clear()  # the first split-K call (kernels, plan) happens inside the capture
    pool = graph.CapturePool()
    with graph.capture(s, pool=pool) as g:
        outs = run()
    # one buffer per call's outputs (C and argmax together, grad_A and grad_B together), plus split-K's workspace
    assert pool.sealed and pool.allocations == {"splitk": 2, "backward": 2}.get(case, 1)
    g.replay()
    s.synchronize()
    eager = run()
    s.synchronize()
    for got, want in zip(outs, eager):
        np.testing.assert_allclose(got.copy_to_host(), want.copy_to_host())
    dA.copy_to_device(_rand(rng, A.shape))  # a replay recomputes from the new inputs, in place
    g.replay()
    eager = run()
    s.synchronize()
    for got, want in zip(outs, eager):
        np.testing.assert_allclose(got.copy_to_host(), want.copy_to_host())


def test_a_sealed_pool_refuses_a_capture_that_allocates():
    from numba import cuda

    rng = np.random.default_rng(3)
    dA, dB = _dev(_rand(rng, (64, 64))), _dev(_rand(rng, (64, 64)))
    s = cuda.stream()
    pool = graph.CapturePool()
    pool.seal()
    with pytest.raises(CaptureError, match="sealed"):
        with graph.capture(s, pool=pool):
            tropical.matmul(dA, dB, stream=s)
    C = tropical.matmul(dA, dB, stream=s)  # the stream is usable again
    s.synchronize()
    assert C.shape == (64, 64)


def test_10000_replays_of_an_allocating_pipeline_do_not_grow_memory():
    from numba import cuda

    rng = np.random.default_rng(4)
    dA, dB = _dev(_rand(rng, (64, 64))), _dev(_rand(rng, (64, 64)))
    s = cuda.stream()
    with graph.capture(s) as g:
        X = dA
        for _ in range(200):  # intermediates dropped inside the capture become free nodes
            X = tropical.matmul(X, dB, stream=s)
    for _ in range(10):
        g.replay()
    s.synchronize()
    before, free_before = _pool_used(), _free_bytes()
    for _ in range(10_000):
        g.replay()
    s.synchronize()
    assert _pool_used() <= before + (1 << 20)
    assert _free_bytes() >= free_before - (4 << 20)
    ref = dA.copy_to_host()
    for _ in range(200):
        ref = reference.matmul(ref, dB.copy_to_host(), "maxplus")
    np.testing.assert_array_equal(X.copy_to_host(), ref)


def test_several_streams_each_get_their_own_cached_call():
    from numba import cuda

    rng = np.random.default_rng(5)
    A, B = _rand(rng, (64, 128)), _rand(rng, (128, 64))
    dA, dB = _dev(A), _dev(B)
    streams = [cuda.stream() for _ in range(4)]
    outs = [tropical.matmul(dA, dB, argmax=True, stream=s) for s in streams for _ in range(3)]
    for s in streams:
        s.synchronize()
    want = reference.matmul(A, B, "maxplus", argmax=True)
    for C, Ix in outs:
        np.testing.assert_array_equal(C.copy_to_host(), want[0])
        np.testing.assert_array_equal(Ix.copy_to_host(), want[1])


def test_cupy_arrays_in_and_out():
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(6)
    A, B = _rand(rng, (64, 64)), _rand(rng, (64, 64))
    dA, dB = cupy.asarray(A), cupy.asarray(B)
    for _ in range(3):
        C, Ix = tropical.matmul(dA, dB, argmax=True)
    assert isinstance(C, cupy.ndarray) and isinstance(Ix, cupy.ndarray)
    want = reference.matmul(A, B, "maxplus", argmax=True)
    np.testing.assert_array_equal(cupy.asnumpy(C), want[0])
    np.testing.assert_array_equal(cupy.asnumpy(Ix), want[1])
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        C2 = tropical.matmul(dA, dB)
    s.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(C2), want[0])


@pytest.mark.parametrize("name", ["cupy", "torch"])
def test_cupy_and_torch_outputs_on_a_stream_that_is_not_current(name):
    """stream= a stream other than the library's current one: outputs from lazykern's pool, ordered
    on that stream (the library's allocator would reuse them on its current stream meanwhile).
    Both libraries are part of the GPU test environment: a missing one fails here."""
    import importlib

    lib = importlib.import_module(name)
    rng = np.random.default_rng(12)
    A, B = _rand(rng, (64, 96)), _rand(rng, (96, 64))
    want = reference.matmul(A, B, "maxplus", argmax=True)
    if name == "cupy":
        dA, dB, other = lib.asarray(A), lib.asarray(B), lib.cuda.Stream(non_blocking=True)
        host = lib.asnumpy
    else:
        dA, dB, other = lib.as_tensor(A, device="cuda"), lib.as_tensor(B, device="cuda"), lib.cuda.Stream()
        host = lambda t: t.cpu().numpy()  # noqa: E731
    gc.collect()
    live = memory.stats()["live"]
    results = [tropical.matmul(dA, dB, argmax=True, stream=other) for _ in range(50)]
    assert memory.stats()["live"] == live + 50  # one pool buffer per call, C and argmax together
    scratch = [dA + 1 for _ in range(50)]  # the library's own allocations on its current stream, meanwhile
    other.synchronize()
    for C, Ix in results:
        np.testing.assert_array_equal(host(C), want[0])
        np.testing.assert_array_equal(host(Ix), want[1])
    gA, gB = tropical.matmul_backward(results[0][0] * 0 + 1, results[0][1], A.shape, B.shape, stream=other)
    other.synchronize()
    assert float(host(gA).sum()) == float(host(gB).sum()) == 64 * 64
    del results, C, Ix, gA, gB, scratch  # C, Ix: the loop's last pair
    gc.collect()
    assert memory.stats()["live"] == live


def test_torch_tensors_in_and_out_and_inside_a_capture():
    torch = pytest.importorskip("torch")
    from numba import cuda

    rng = np.random.default_rng(7)
    A, B = _rand(rng, (64, 64)), _rand(rng, (64, 64))
    tA, tB = torch.as_tensor(A, device="cuda"), torch.as_tensor(B, device="cuda")
    for _ in range(3):
        C, Ix = tropical.matmul(tA, tB, argmax=True)
    want = reference.matmul(A, B, "maxplus", argmax=True)
    np.testing.assert_array_equal(C.cpu().numpy(), want[0])
    np.testing.assert_array_equal(Ix.cpu().numpy(), want[1])
    gA, gB = tropical.matmul_backward(torch.ones_like(C), Ix, A.shape, B.shape)
    assert float(gA.sum()) == 64 * 64 and float(gB.sum()) == 64 * 64
    s = cuda.stream()
    with graph.capture(s) as g:
        Cg = tropical.matmul(tA, tB, stream=s)
    g.replay()
    s.synchronize()
    np.testing.assert_array_equal(Cg.cpu().numpy(), want[0])


def test_a_kernel_first_loaded_inside_a_capture():
    """maxmul f64 split-K with argmax is used by no other test: its kernels compile (or come from
    the disk cache) and load while the stream is captured, without touching the stream."""
    from numba import cuda

    rng = np.random.default_rng(8)
    A, B = rng.random((64, 4096)), rng.random((4096, 64))
    dA, dB = _dev(A), _dev(B)
    _hot.clear()
    tropical.family._kernels.clear()  # the family keeps one Kernel per name and arch: a new one loads
    s = cuda.stream()
    with graph.capture(s) as g:
        C, Ix = tropical.matmul(dA, dB, "maxmul", argmax=True, stream=s)
    g.replay()
    s.synchronize()
    want = reference.matmul(A, B, "maxmul", argmax=True)
    np.testing.assert_allclose(C.copy_to_host(), want[0])
    np.testing.assert_array_equal(Ix.copy_to_host(), want[1])
