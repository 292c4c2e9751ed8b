"""lazykern.launch.arrays on a GPU: scratch arrays made inside a capture feed @lazy_kernel launches,
replays equal eager runs and do not grow memory; CuPy and torch kinds (run with `pytest -m gpu`)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from lazykern import graph, lazy_kernel
from lazykern.launch import arrays
from tests.test_tropical_speed_gpu import _free_bytes, _pool_used

pytestmark = pytest.mark.gpu


@lazy_kernel
def scaled_add(x, y, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def _pipeline(x, out, s):
    n = x.size
    tmp = arrays.zeros(n, np.float32, stream=s)  # a graph allocation + memset node inside a capture
    scaled_add[(n + 127) // 128, 128, s](x, tmp, np.float32(2.0), tmp)  # tmp = 2x
    scaled_add[(n + 127) // 128, 128, s](tmp, x, np.float32(3.0), out)  # out = 6x + x
    return tmp


def test_arrays_made_inside_a_capture_feed_lazy_kernels_and_replays_do_not_grow():
    n = 4096
    host = np.arange(n, dtype=np.float32)
    x, out = cuda.to_device(host), cuda.device_array(n, np.float32)
    s = cuda.stream()
    _pipeline(x, out, s)  # eager: compiles, ordinary pool allocations
    s.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), 7 * host)
    out.copy_to_device(np.zeros(n, np.float32))
    with graph.capture(s) as g:
        tmp = _pipeline(x, out, s)
    assert g.kernel_count == 2
    for _ in range(10):
        g.replay(s)
    s.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), 7 * host)
    np.testing.assert_array_equal(tmp.copy_to_host(), 2 * host)  # a graph output: written by each replay
    before, free_before = _pool_used(), _free_bytes()
    for _ in range(10_000):
        g.replay(s)
    s.synchronize()
    assert _pool_used() <= before + (1 << 20)
    assert _free_bytes() >= free_before - (4 << 20)


@pytest.mark.parametrize("like", ["numba", "cupy", "torch"])
def test_each_array_kind_outside_and_inside_a_capture(like):
    if like != "numba":
        pytest.importorskip(like)
    s = cuda.stream()
    z = arrays.zeros((3, 4), np.int32, stream=s, like=like)
    s.synchronize()
    host = {"numba": lambda a: a.copy_to_host(), "cupy": lambda a: a.get(), "torch": lambda a: a.cpu().numpy()}[like]
    np.testing.assert_array_equal(host(z), np.zeros((3, 4), np.int32))
    x = cuda.to_device(np.ones(8, np.float32))
    with graph.capture(s) as g:
        e = arrays.zeros(8, np.float32, stream=s, like=like)
        scaled_add[1, 8, s](x, x, np.float32(1.0), e)
    g.replay(s)
    s.synchronize()
    np.testing.assert_array_equal(host(e), np.full(8, 2, np.float32))
