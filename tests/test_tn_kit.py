"""lazykern.tn._kit: the kernels an energy's contraction launches besides its bit-addressed steps, built ahead."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern.tn import _kit, _permute


def test_names_are_the_executors_kernels_of_the_dtype():
    copies, products = _kit.names("minplus", np.float64)
    assert copies == [_permute.kernel_name(8), _permute.kernel_name(8, tiled=True)]
    assert products == ["minplus_f64_r4", "minplus_f64_r", "bmm_minplus_f64_t", "bmm_minplus_f64_s"]
    from lazykern.tropical._family import family

    known = set(family.names())
    assert set(products) <= known
    assert set(copies) <= set(_permute.family().names())


@pytest.mark.parametrize("dtype", [np.float32, np.int64, object])
def test_numpy_and_dtypes_without_kernels_start_nothing(dtype):
    assert _kit.start(np, dtype, "maxplus") == []


@pytest.mark.gpu
def test_an_energy_on_the_gpu_builds_the_kit_and_leaves_no_thread():
    import threading

    cupy = pytest.importorskip("cupy")
    from lazykern.launch import _device
    from lazykern.tn import networks
    from lazykern.tropical._family import family

    for name in _kit.names("minplus", np.float64)[1]:  # started on a fresh name set: they run in threads
        family._kernels.pop((name, _device.arch(0)), None)
    threads = _kit.start(cupy, np.float64, "minplus")
    assert threads and all(t.name == "lazykern-prefetch" for t in threads)
    _kit.join(threads)
    assert set(_kit.names("minplus", np.float64)[1]) <= set(family.compiled())
    sg = networks.square_lattice(20, seed=3)
    before = {t for t in threading.enumerate() if t.name == "lazykern-prefetch"}
    e = networks.ground_state_energy(sg, module=cupy)
    assert e == networks.ground_state_energy(sg)
    copies, products = _kit.names("maxplus", np.float32)
    assert set(products) <= set(family.compiled())
    assert set(copies) <= set(_permute.family().compiled())
    assert {t for t in threading.enumerate() if t.name == "lazykern-prefetch"} <= before
