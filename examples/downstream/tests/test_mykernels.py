"""Run on any machine: `pytest` uses the GPU where there is one, Numba's simulator elsewhere."""

from __future__ import annotations

import mykernels
import numpy as np
import pytest
from numba import cuda

from lazykern import tropical
from lazykern.testing import assert_compiled, assert_matches_reference, assert_no_compile, every_backend


def _saxpy(a, x, y):
    out = cuda.device_array_like(x)
    mykernels.saxpy[(x.size + 127) // 128, 128](a, x, y, out)
    return out


def test_saxpy_matches_numpy(lazykern_cache, gpu_or_sim):
    x, y = np.arange(300, dtype=np.float32), np.ones(300, np.float32)
    with assert_compiled(mykernels.saxpy, 1):  # one signature: one compile (or one simulator instantiation)
        assert_matches_reference(_saxpy, lambda a, x, y: a * x + y, np.float32(2), x, y)
    with assert_no_compile():  # the same signature again: nothing compiles anywhere
        assert_matches_reference(_saxpy, lambda a, x, y: a * x + y, np.float32(3), x, y)


def _clamp(a, lo, hi):
    mykernels.clamp(a, lo, hi)
    return a


@every_backend
def test_clamp_runs_its_fragment_or_its_twin(lazykern_cache, lazykern_backend):
    a = np.linspace(-2, 2, 1000, dtype=np.float32)
    assert_matches_reference(_clamp, lambda a, lo, hi: np.clip(a, lo, hi), a, -1.0, 1.0)
    assert mykernels.family.runs_twins() == (lazykern_backend == "simulator")


def test_shortest_paths_by_min_plus_squaring(lazykern_cache):
    inf = np.inf
    dist = np.array([[0, 1, inf, inf], [inf, 0, 2, inf], [inf, inf, 0, 3], [7, inf, inf, 0]])
    d = mykernels.shortest_paths(dist)
    assert d[0, 3] == 6 and d[3, 2] == 10 and np.all(np.diag(d) == 0)


def test_tropical_on_device_arrays_matches_its_reference(lazykern_cache, gpu_or_sim):
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((33, 17)), rng.standard_normal((17, 9))
    C, K = assert_matches_reference(tropical.matmul, tropical.reference.matmul, A, B, "maxplus", argmax=True)
    assert K.dtype == np.int32 and C.shape == (33, 9)


@pytest.mark.gpu
def test_saxpy_on_a_real_gpu_compiles_into_the_test_store(lazykern_cache):
    x = cuda.to_device(np.ones(64, np.float64))  # float64: a signature no other test has loaded
    out = cuda.device_array(64, np.float64)
    mykernels.saxpy[1, 64](1.0, x, x, out)
    assert lazykern_cache.stats()["compiles"] == 1 and len(list(lazykern_cache.entries())) == 1
    with assert_no_compile():
        mykernels.saxpy[1, 64](2.0, x, x, out)
    assert np.all(out.copy_to_host() == 3)
