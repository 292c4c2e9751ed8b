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


def test_the_kit_starts_before_the_route_only_where_the_route_keeps_the_gpu():
    """_stays_on_device (the kit built beside the route's sweep search) never claims a network that
    _route sends to the host: lattices and chimeras across the crossover, with a GPU-like module."""
    import types

    from lazykern.tn import networks as nw

    gpu = types.SimpleNamespace(__name__="cupy")
    graphs = [nw.square_lattice(L, seed=L) for L in (8, 16, 18, 20, 24, 32)]
    graphs += [nw.chimera(m, m, 4, seed=1) for m in (3, 4, 5)]
    early = []
    for sg in graphs:
        kept = nw._route(sg, gpu, np.dtype(np.float32), "auto", (), None, None, 4)[0] is gpu
        if nw._stays_on_device(sg, gpu, "auto", (), None):
            assert kept, sg.n
            early.append(sg.n)
    assert 1024 in early and 64 not in early  # the 32 x 32 starts early, the 8 x 8 does not
    sg = graphs[0]
    assert not nw._stays_on_device(sg, np, "auto", (), None)  # numpy builds nothing
    assert nw._stays_on_device(sg, gpu, "greedy", (), None)  # the caller's own order: the route keeps the GPU
    assert nw._stays_on_device(sg, gpu, "auto", (), [0])


def test_the_arena_kernels_built_early_are_the_sweeps_bit_addressed_tiles():
    """A 32 x 32 lattice's sweep takes the arena (its largest step is past ARENA_FASTER): its three tiles
    build beside the planning; a 20 x 20's does not, so nothing builds early; the host builds nothing."""
    from lazykern.tn import networks as nw

    f32 = np.dtype(np.float32)
    assert nw._arena_tiles(nw.square_lattice(32, seed=1), f32) == [(2, 3), (3, 3), (4, 3)]
    assert nw._arena_tiles(nw.square_lattice(20, seed=1), f32) == []
    assert _kit.start_arena(np, f32, "maxplus", [(3, 3)]) == []
