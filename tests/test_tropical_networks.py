"""Spin-glass ground states from tropical contractions against brute force and a transfer matrix."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern.errors import LazykernWarning
from lazykern.tn import networks as nw

from ._spin_oracles import brute_force, transfer_matrix

BUILDERS = {
    "square3": lambda seed, J, field: nw.square_lattice(3, seed=seed, J=J, field=field),
    "square4": lambda seed, J, field: nw.square_lattice(4, seed=seed, J=J, field=field),
    "cubic2": lambda seed, J, field: nw.cubic_lattice(2, seed=seed, J=J, field=field),
    "regular12": lambda seed, J, field: nw.random_regular(12, 3, seed=seed, J=J, field=field),
    "regular16": lambda seed, J, field: nw.random_regular(16, 3, seed=seed, J=J, field=field),
    "chimera1x1": lambda seed, J, field: nw.chimera(1, 1, 4, seed=seed, J=J, field=field),
    "chimera1x2": lambda seed, J, field: nw.chimera(1, 2, 4, seed=seed, J=J, field=field),
    "chimera2x2t2": lambda seed, J, field: nw.chimera(2, 2, 2, seed=seed, J=J, field=field),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("J,field", [("pm1", 0.0), ("gaussian", 0.0), ("pm1", 0.5)])
def test_every_builder_against_brute_force(name, J, field):
    for seed in range(4):
        sg = BUILDERS[name](seed, J, field)
        E0, count, ground = brute_force(sg)
        E, spins = nw.ground_state(sg)
        assert E == pytest.approx(E0, abs=1e-9), (name, seed)
        assert sg.energy(spins) == pytest.approx(E0, abs=1e-9)
        assert any(np.array_equal(spins, g) for g in ground.astype(np.int8))
        assert nw.ground_state_energy(sg) == pytest.approx(E0, abs=1e-9)
        assert nw.degeneracy(sg) == (pytest.approx(E0, abs=1e-9), count), (name, seed)


@pytest.mark.parametrize("L", [5, 7, 10])
def test_square_lattice_against_the_transfer_matrix(L):
    for seed, J in ((L, "pm1"), (L + 100, "gaussian"), (L + 200, "pm1")):
        sg = nw.square_lattice(L, seed=seed, J=J, field=0.3 if seed > 200 else 0.0)
        E0, count = transfer_matrix(sg, L)
        assert nw.degeneracy(sg) == (pytest.approx(E0, abs=1e-9), count)
        E, spins = nw.ground_state(sg, checkpoint={5: True, 7: 64, 10: False}[L])
        assert E == pytest.approx(E0, abs=1e-9) and sg.energy(spins) == pytest.approx(E0, abs=1e-9)


def test_slicing_and_float32_keep_the_answers():
    sg = nw.square_lattice(6, seed=9)
    E0, count = transfer_matrix(sg, 6)
    assert nw.ground_state_energy(sg, dtype=np.float32, slices=[14, 15]) == E0
    assert nw.degeneracy(sg, slices=[2, 20], count_dtype=np.float64) == (E0, float(count))
    E, spins = nw.ground_state(sg, slices=[7], checkpoint=True)
    assert E == E0 == sg.energy(spins)


def test_builders_have_the_expected_graphs():
    sq = nw.square_lattice(5)
    assert sq.n == 25 and len(sq.edges) == 2 * 5 * 4 and set(np.unique(sq.J)) <= {-1.0, 1.0}
    cube = nw.cubic_lattice(3)
    assert cube.n == 27 and len(cube.edges) == 3 * 9 * 2
    chip = nw.chimera()
    assert chip.n == 512 and len(chip.edges) == 64 * 16 + 2 * 7 * 8 * 4
    rr = nw.random_regular(20, 3, seed=4)
    assert np.array_equal(np.bincount(rr.edges.ravel(), minlength=20), np.full(20, 3))
    assert len({tuple(e) for e in rr.edges}) == 30 and np.all(rr.edges[:, 0] < rr.edges[:, 1])
    assert np.array_equal(nw.square_lattice(4, seed=3).J, nw.square_lattice(4, seed=3).J)
    assert not np.array_equal(nw.square_lattice(4, seed=3).J, nw.square_lattice(4, seed=4).J)
    assert np.all(nw.square_lattice(3, J="ferro").J == 1)
    with pytest.raises(ValueError, match="no simple 3-regular"):
        nw.random_regular(7, 3)
    with pytest.raises(ValueError, match="couplings must be"):
        nw.square_lattice(3, J="bimodal")


def test_energy_convention_and_frustration():
    sg = nw.square_lattice(2, J="ferro")
    up = np.ones(4)
    assert sg.energy(up) == -4.0 and nw.ground_state_energy(sg) == -4.0
    assert nw.degeneracy(sg) == (-4.0, 2)  # all up, all down
    assert not sg.frustrated(up).any()
    flipped = up.copy()
    flipped[0] = -1
    assert sg.energy(flipped) == 0.0 and sg.frustrated(flipped).sum() == 2
    assert np.array_equal(sg.energy(np.stack([up, flipped])), [-4.0, 0.0])


class _Device:
    """A stand-in for cupy: a solver routed to the host never touches it (it has no arrays)."""

    __name__ = "cupy"


def test_a_tiny_network_contracts_on_the_host_and_a_large_one_on_the_device(caplog):
    f32 = np.dtype(np.float32)
    small, large = nw.square_lattice(8), nw.square_lattice(32)
    with caplog.at_level("INFO", logger="lazykern"):
        module, how = nw._route(small, _Device(), f32, "auto", (), None, None, 4)
    assert module is np and how.path and "on the host" in caplog.text
    assert nw._route(large, _Device(), f32, "auto", (), None, None, 4)[0].__name__ == "cupy"
    # What the caller fixed is kept: a strategy, slices or devices stay on the device.
    for args in (("greedy", (), None), ("auto", (3,), None), ("auto", (), [0])):
        assert isinstance(nw._route(small, _Device(), f32, *args, None, 4)[0], _Device)


def test_routed_to_the_host_the_solvers_return_the_oracles_answer_as_before():
    sg = nw.square_lattice(4, J="gaussian", seed=3)
    E, count, _ = brute_force(sg)
    # Gaussian couplings on a device are rounded to 2^-46 units (floats only there): within 1e-12.
    assert nw.ground_state_energy(sg, module=_Device()) == pytest.approx(E, abs=1e-12)
    e, spins = nw.ground_state(sg, module=_Device())
    assert e == pytest.approx(E, abs=1e-12) and sg.energy(spins) == pytest.approx(E) and spins.dtype == np.int8
    with pytest.warns(LazykernWarning, match="counted in or out"):
        e, c = nw.degeneracy(sg, module=_Device())
    assert e == pytest.approx(E, abs=1e-12) and c == count and type(c) is int


@pytest.mark.gpu
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_an_8x8_lattice_through_the_defaults_on_a_gpu_module_runs_on_the_host(lib, caplog):
    module = pytest.importorskip(lib)
    sg = nw.square_lattice(8, seed=8)
    with caplog.at_level("INFO", logger="lazykern"):
        E = nw.ground_state_energy(sg, module=module)
    assert "on the host" in caplog.text
    assert type(E) is float and E == transfer_matrix(sg, 8)[0]
