from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda

from benchmarks.backends import numba_maxplus_backend
from lazykern import LaunchError
from lazykern.scale.multigpu import (
    bmm_multi,
    default_chunk,
    device_count,
    load_on_devices,
    split_batch,
)


def bmm_reference(A, B, semiring="maxplus"):
    with np.errstate(invalid="ignore"):
        terms = A[:, :, :, None] * B[:, None] if semiring == "maxmul" else A[:, :, :, None] + B[:, None]
    minimize = semiring == "minplus"
    terms = np.where(np.isnan(terms), np.inf if minimize else -np.inf, terms)
    return terms.min(axis=2) if minimize else terms.max(axis=2)


def test_split_batch_is_contiguous_and_proportional():
    assert split_batch(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert split_batch(64, 2) == [(0, 32), (32, 64)]
    assert split_batch(1, 2) == [(0, 1), (1, 1)]
    assert split_batch(9, 3) == [(0, 3), (3, 6), (6, 9)]
    assert split_batch(12, 2, weights=[3, 1]) == [(0, 9), (9, 12)]
    assert split_batch(5, 2, weights=[0, 1]) == [(0, 0), (0, 5)]
    with pytest.raises(ValueError, match="weights"):
        split_batch(5, 2, weights=[1])
    with pytest.raises(ValueError, match="parts"):
        split_batch(5, 0)


def test_default_chunk_bounds_count_and_bytes():
    assert default_chunk(32, 12 << 20) == 4  # 8 chunks per device
    assert default_chunk(3, 1) == 1
    assert default_chunk(1000, 100 << 20) == 2  # 256 MiB of staging per chunk at most
    assert default_chunk(0, 1) == 1


def test_operand_checks_come_before_any_device():
    A = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match=r"A \(b, m, k\) and B \(b, k, n\)"):
        bmm_multi(A, np.zeros((2, 3, 4), np.float32))
    with pytest.raises(TypeError, match="share a dtype"):
        bmm_multi(A, np.zeros((2, 4, 5), np.float64))

    class DeviceLike:
        __cuda_array_interface__ = {"data": (0, False), "shape": (2, 4, 5), "typestr": "<f4", "version": 3}

    with pytest.raises(TypeError, match="host \\(NumPy\\) operands"):
        bmm_multi(A, DeviceLike())


def test_device_list_is_checked():
    A, B = np.zeros((2, 3, 4), np.float32), np.zeros((2, 4, 5), np.float32)
    with pytest.raises(LaunchError, match="do not exist"):
        bmm_multi(A, B, devices=[64], backend=lambda *a, **k: None)
    with pytest.raises(ValueError, match="distinct"):
        bmm_multi(A, B, devices=[0, 0], backend=lambda *a, **k: None)
    if device_count() == 0:
        with pytest.raises(LaunchError, match="found none"):
            bmm_multi(A, B, backend=lambda *a, **k: None)


SIMULATED = textwrap.dedent(
    """
    import numpy as np
    from lazykern.scale.multigpu import bmm_multi

    def with_out(a, b, *, semiring, stream, out):
        A, B = a.copy_to_host(stream=stream), b.copy_to_host(stream=stream)
        out.copy_to_device(np.max(A[:, :, :, None] + B[:, None], axis=2), stream=stream)
        return out

    def allocating(a, b, *, semiring, stream):
        from numba import cuda
        A, B = a.copy_to_host(stream=stream), b.copy_to_host(stream=stream)
        return cuda.to_device(np.max(A[:, :, :, None] + B[:, None], axis=2), stream=stream)

    rng = np.random.default_rng(0)
    A = rng.standard_normal((11, 3, 4)).astype(np.float32)
    B = rng.standard_normal((11, 4, 5)).astype(np.float32)
    want = np.max(A[:, :, :, None] + B[:, None], axis=2)
    for backend in (with_out, allocating):
        for chunk, slots in ((None, 2), (3, 2), (4, 3), (20, 1)):
            got = bmm_multi(A, B, devices=[0], chunk=chunk, slots=slots, backend=backend)
            assert got.dtype == np.float32 and np.array_equal(got, want), (backend.__name__, chunk, slots)
    print("ok")
    """
)


def test_pipeline_under_the_cuda_simulator():
    """Chunking, slot rotation and gather, run on Numba's CPU simulator (one fake device)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    done = subprocess.run([sys.executable, "-c", SIMULATED], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# -- GPU -------------------------------------------------------------------------
def _need_gpus(count: int) -> None:
    found = device_count()
    if found < count:
        pytest.skip(f"needs {count} GPUs, found {found}")


@pytest.mark.gpu
def test_kernel_loads_on_device_1_without_recompiling(family):
    _need_gpus(2)
    n = 1000
    data = np.arange(n, dtype=np.float32)
    kernels = {}
    for dev in (0, 1):
        with cuda.gpus[dev]:
            kernel = family["scale_f32"]
            a = cuda.to_device(data)
            kernel[(4,), (256,)](a, n)
            cuda.synchronize()
            np.testing.assert_array_equal(a.copy_to_host(), data * 3)
            kernels[dev] = (kernel, cuda.get_current_device().compute_capability)
        if dev == 0:
            calls_after_device_0 = family.compile_calls
    (k0, cc0), (k1, cc1) = kernels[0], kernels[1]
    assert calls_after_device_0 == 1
    if cc0 == cc1:  # same arch: one cubin, one disk entry, one module per device
        assert k1 is k0
        assert family.compile_calls == 1
        assert set(k0.loaded_devices) == {0, 1}
        assert family.cache.stats()["entries"] == 1
    else:  # mixed-arch machine: one entry per arch
        assert k1.arch != k0.arch and family.compile_calls == 2
        assert family.cache.stats()["entries"] == 2


@pytest.mark.gpu
def test_load_on_devices_loads_every_kernel_everywhere(family):
    count = device_count()
    loaded = load_on_devices(family, ["scale_f32", "scale_i32"])
    assert sorted(loaded) == list(range(count))
    for dev, kernels in loaded.items():
        assert all(dev in kernel.loaded_devices for kernel in kernels)
    assert family.compile_calls <= 2 * len({k.arch for ks in loaded.values() for k in ks})


@pytest.mark.gpu
@pytest.mark.parametrize("chunk", [None, 3])
def test_bmm_multi_pipeline_with_a_numba_backend(chunk):
    _need_gpus(1)
    rng = np.random.default_rng(1)
    A = rng.standard_normal((13, 40, 24)).astype(np.float32)
    B = rng.standard_normal((13, 24, 33)).astype(np.float32)
    got = bmm_multi(A, B, chunk=chunk, backend=numba_maxplus_backend())
    np.testing.assert_array_equal(got, bmm_reference(A, B))


@pytest.mark.gpu
@pytest.mark.parametrize("semiring", ["maxplus", "minplus", "maxmul"])
def test_bmm_multi_on_two_gpus_matches_reference(semiring):
    _need_gpus(2)
    rng = np.random.default_rng(2)
    A = rng.standard_normal((9, 70, 65)).astype(np.float32)
    B = rng.standard_normal((9, 65, 47)).astype(np.float32)
    A[0, 0, :3] = np.nan
    B[1, :, 2] = -np.inf
    got = bmm_multi(A, B, semiring=semiring, devices=[0, 1], chunk=2)
    np.testing.assert_array_equal(got, bmm_reference(A, B, semiring))
