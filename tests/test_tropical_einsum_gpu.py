"""tropical.einsum, counting and spin-glass ground states on a GPU (run with `pytest -m gpu`)."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern import tropical
from lazykern.tn import counting
from lazykern.tn import networks as nw
from lazykern.tn.einsum import argmax_einsum, einsum
from lazykern.tn.spinglass import configuration, counts, energy
from lazykern.tropical import reference

from ._spin_oracles import transfer_matrix

pytestmark = pytest.mark.gpu

CASES = [
    ("ij,jk->ik", [(33, 17), (17, 9)]),
    ("bik,bkj->bji", [(4, 5, 6), (4, 6, 3)]),
    ("ijk,kjl,li->j", [(3, 4, 5), (5, 4, 2), (2, 3)]),
    ("ii,i,->i", [(4, 4), (4,), ()]),
    ("a,b->ab", [(3,), (1,)]),
    ("abc,cd,de->", [(2, 2, 2), (2, 3), (3, 2)]),
    ("bik,jkb->bij", [(2, 3, 4), (3, 4, 2)]),  # B as (b, k, j): a view no kernel reads, copied
    ("ijk,kji->", [(2, 3, 4), (4, 3, 2)]),
]


def _module(name):
    return pytest.importorskip(name)


def _to(name, x):
    if name == "cupy":
        return _module("cupy").asarray(x)
    if name == "torch":
        return _module("torch").as_tensor(x, device="cuda")
    from numba import cuda

    return cuda.to_device(x)


def _host(x):
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()
    if hasattr(x, "get"):
        return x.get()
    return x.cpu().numpy()


@pytest.mark.parametrize("lib", ["cupy", "torch", "numba"])
@pytest.mark.parametrize("semiring", reference.SEMIRINGS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_einsum_on_device_matches_the_cpu_path(lib, semiring, dtype):
    if lib == "numba" and not (_has("cupy") or _has("torch")):
        pytest.skip("einsum on Numba arrays needs CuPy or torch for its layout changes")
    rng = np.random.default_rng(0)
    lo = 0 if semiring == "maxmul" else -20
    for subscripts, shapes in CASES:
        ops = [rng.integers(lo, 20, s).astype(dtype) for s in shapes]
        want = einsum(subscripts, *ops, semiring=semiring)
        got = einsum(subscripts, *(_to(lib, x) for x in ops), semiring=semiring)
        assert type(got).__module__.split(".")[0] == type(_to(lib, ops[0])).__module__.split(".")[0]
        np.testing.assert_array_equal(_host(got), want, err_msg=subscripts)


def _has(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


@pytest.mark.parametrize("lib", ["cupy", "torch"])
@pytest.mark.parametrize("value", ["float32", "float64"])
@pytest.mark.parametrize("count", ["int64", "float64"])
@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_counting_kernels_match_numpy(lib, value, count, semiring):
    rng = np.random.default_rng(1)
    A = rng.integers(-3, 3, (5, 40, 70)).astype(value)
    Ac = rng.integers(1, 4, A.shape).astype(count)
    B = rng.integers(-3, 3, (70, 33)).astype(value)
    Bc = rng.integers(1, 4, B.shape).astype(count)
    want = counting.einsum("bik,kj->bij", (A, Ac), (B, Bc), semiring=semiring)
    got = counting.einsum("bik,kj->bij", (_to(lib, A), _to(lib, Ac)), (_to(lib, B), _to(lib, Bc)), semiring=semiring)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_host(g), w)


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_ground_state_and_degeneracy_l16(lib, monkeypatch):
    # The device path itself is under test: no routing of these small networks to the host.
    for solver in (energy, configuration, counts):  # where each solver looks the route up
        monkeypatch.setattr(solver, "route", lambda sg, module, dtype, optimize, *rest: (module, optimize))
    module = _module(lib)
    sg = nw.square_lattice(16, seed=16)
    E0, count = transfer_matrix(sg, 16)
    E, spins = nw.ground_state(sg, module=module, dtype=np.float32)
    assert E == E0 == sg.energy(spins)
    E, spins = nw.ground_state(sg, module=module, dtype=np.float32, checkpoint=True, optimize="greedy")
    assert E == E0 == sg.energy(spins)
    assert nw.degeneracy(sg, module=module) == (E0, count)
    assert nw.ground_state_energy(nw.chimera(4), module=module, dtype=np.float32) == nw.ground_state_energy(
        nw.chimera(4)
    )


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_lattices_up_to_18_against_the_transfer_matrix(lib, monkeypatch):
    """The geometry sweep on the GPU (3 spins a step, row-kernel products), float32, against the
    transfer matrix: energy, degeneracy, and a configuration with that energy."""
    # The device path itself is under test: no routing of these small networks to the host.
    for solver in (energy, configuration, counts):  # where each solver looks the route up
        monkeypatch.setattr(solver, "route", lambda sg, module, dtype, optimize, *rest: (module, optimize))
    module = _module(lib)
    for L in (12, 18):
        sg = nw.square_lattice(L, seed=L, field=0.0)
        E0, count = transfer_matrix(sg, L)
        assert nw.ground_state_energy(sg, module=module, dtype=np.float32) == E0
        assert nw.degeneracy(sg, module=module, dtype=np.float32) == (E0, count)
        E, spins = nw.ground_state(sg, module=module, dtype=np.float32)
        assert E == E0 == sg.energy(spins)


def test_default_slicing_target_comes_from_free_memory():
    cupy = _module("cupy")
    from lazykern.tn._backend import backend_of

    be, _ = backend_of(cupy.zeros(1, cupy.float32))
    free = be.free_bytes()
    limit = be.memory_limit(4)
    assert limit & (limit - 1) == 0 and 4 * 4 * limit <= free < 4 * 4 * limit * 2 + (1 << 20)


def test_autograd_gives_a_ground_state():
    torch = _module("torch")
    sg = nw.square_lattice(10, seed=3, field=0.2)
    E0, _ = transfer_matrix(sg, 10)
    E, spins = nw.ground_state(sg, module=torch, method="autograd")
    assert E == pytest.approx(E0) and sg.energy(spins) == pytest.approx(E0)


def test_argmax_einsum_on_device():
    cupy = _module("cupy")
    rng = np.random.default_rng(2)
    ops = [rng.integers(-9, 9, s).astype(np.float32) for s in ((3, 4, 5), (5, 4, 2), (2, 3))]
    v, a = argmax_einsum("ijk,kjl,li->", *(cupy.asarray(x) for x in ops))
    assert v == einsum("ijk,kjl,li->", *ops)
    assert v == ops[0][a["i"], a["j"], a["k"]] + ops[1][a["k"], a["j"], a["l"]] + ops[2][a["l"], a["i"]]


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_sliced_networks_on_device(lib):
    """Slices fix labels by views with any strides: each step still hands the kernels readable operands."""
    module = _module(lib)
    for sg in (nw.chimera(2, 2, 4, seed=1), nw.square_lattice(6, seed=6)):
        labels, _ = sg.network()
        plan = tropical.contraction_plan(labels, (), dict.fromkeys(range(sg.n), 2), optimize="greedy", slices=(0, 5, 9))
        want = nw.ground_state_energy(sg)
        assert nw.ground_state_energy(sg, module=module, dtype=np.float32, optimize=plan) == want
        E, spins = nw.ground_state(sg, module=module, dtype=np.float32, optimize=plan)
        assert E == want == sg.energy(spins)
        assert nw.degeneracy(sg, module=module, optimize=plan) == nw.degeneracy(sg)
