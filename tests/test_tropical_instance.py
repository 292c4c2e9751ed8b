"""A user's own spin-glass instance: checked inputs, the value dtype that stays exact, the module by
name, against oracles that share no code with the contraction (brute force, matching)."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern.errors import LazykernWarning
from lazykern.tn import _instance
from lazykern.tn import networks as nw

from ._spin_oracles import brute_force, matching_energy, transfer_matrix

EDGES = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]
J = [1.0, -1.0, 1.0, 1.0, -1.0]


def _lattice_edges(L):
    sq = nw.square_lattice(L)
    return sq.edges, sq.J


@pytest.mark.parametrize(
    "n, edges, couplings, kw, match",
    [
        (0, EDGES, J, {}, "at least 1"),
        (-3, EDGES, J, {}, "at least 1"),
        (4.0, EDGES, J, {}, "must be an integer"),
        (True, EDGES, J, {}, "must be an integer"),
        (4, [(0, 1, 1.0), (1, 2, -1.0)], [1.0, -1.0], {}, r"shape \(2, 3\).*from_edges"),
        (4, [0, 1, 2], [1.0], {}, r"shape \(m, 2\)"),
        (4, [(0, 1.5), (1, 2)], [1.0, 1.0], {}, "edge 0 is .*must be integers"),
        (4, [(0, 1), (1, 7)], [1.0, 1.0], {}, r"edge 1 is \[1, 7\]: spins are numbered 0..3"),
        (4, [(0, 1), (-1, 2)], [1.0, 1.0], {}, "edge 1 is"),
        (4, [(0, 1), (2, 2)], [1.0, 1.0], {}, "self loop"),
        (4, [(0, 1), (1, 2), (1, 0)], [1.0, 1.0, 2.0], {}, r"spins \[0, 1\] are coupled by edges \[0, 2\]"),
        (4, [("a", "b")], [1.0], {}, "spin indices"),
        (4, EDGES, J[:4], {}, r"J must have shape \(5,\)"),
        (4, EDGES, [1.0, np.nan, 1.0, 1.0, 1.0], {}, r"J\[1\] is nan"),
        (4, EDGES, [1.0, np.inf, 1.0, 1.0, 1.0], {}, r"J\[1\] is inf"),
        (4, EDGES, ["1"] * 5, {}, "real numbers"),
        (4, EDGES, J, {"h": [0.0, 0.0, np.nan, 0.0]}, r"h\[2\] is nan"),
        (4, EDGES, J, {"h": [0.0, 0.0]}, r"h must have shape \(4,\)"),
        (4, EDGES, J, {"positions": np.zeros((3, 2))}, r"positions must have shape \(n, 2\)"),
        (4, EDGES, J, {"order": [0, 1, 2]}, "every spin 0..3 exactly once"),
    ],
)
def test_one_clear_error_per_bad_input(n, edges, couplings, kw, match):
    with pytest.raises(ValueError, match=match):
        nw.SpinGlass(n, edges, couplings, **kw)


def test_fields_default_to_zero_and_nan_is_refused_at_solve_time_too():
    sg = nw.SpinGlass(4, np.array(EDGES, dtype=np.float64), J)  # integral floats, as read from a CSV
    assert sg.edges.dtype == np.int64 and np.array_equal(sg.h, np.zeros(4)) and sg.positions is None
    E0, count, _ = brute_force(sg)
    assert nw.ground_state_energy(sg) == E0 and nw.degeneracy(sg) == (E0, count)
    sg.J[0] = np.nan  # changed after the check: each solver checks again
    for solve in (nw.ground_state_energy, nw.ground_state, nw.degeneracy):
        with pytest.raises(ValueError, match=r"J\[0\] is nan"):
            solve(sg)
    sg.J[0], sg.h[3] = 1.0, np.inf
    with pytest.raises(ValueError, match=r"h\[3\] is inf"):
        nw.ground_state_energy(sg, module="numpy", dtype=np.float64)
    empty = nw.SpinGlass(3, [], [], h=[1.0, -2.0, 0.5])  # fields only
    assert nw.ground_state_energy(empty) == -3.5 and nw.degeneracy(empty) == (-3.5, 1)


def test_from_edges_reads_a_weighted_edge_list():
    rows = np.array([(0, 1, 1.0), (1, 2, -2.0), (2, 0, 0.5)])
    sg = nw.SpinGlass.from_edges(rows)
    assert sg.n == 3 and sg.edges.tolist() == [[0, 1], [1, 2], [2, 0]] and sg.J.tolist() == [1.0, -2.0, 0.5]
    assert nw.SpinGlass.from_edges(rows[:, :2], rows[:, 2], n=5).n == 5
    assert nw.SpinGlass.from_edges(rows, h=[0.0] * 4).n == 4
    assert nw.SpinGlass.from_edges(5, rows[:, :2], rows[:, 2]).n == 5  # as the constructor reads
    assert nw.SpinGlass.from_edges(4, rows).J.tolist() == [1.0, -2.0, 0.5]
    with pytest.raises(ValueError, match=r"weighted edge list \(m, 3\)"):
        nw.SpinGlass.from_edges(rows[:, :2])
    with pytest.raises(ValueError, match="spins are numbered 0..1"):
        nw.SpinGlass.from_edges(rows, n=2)


@pytest.mark.parametrize("seed", range(3))
def test_a_relabelled_instance_from_an_edge_list_against_brute_force(seed):
    """A user's numbering (shuffled spins and edge order, no positions) gives the energy, a
    configuration and the count of brute force over 2^16 states."""
    rng = np.random.default_rng(seed)
    base = nw.square_lattice(4, seed=seed, J="gaussian" if seed == 2 else "pm1", field=0.3 if seed == 1 else 0.0)
    perm = rng.permutation(16)
    rows = rng.permutation(len(base.edges))
    sg = nw.SpinGlass(16, perm[base.edges][rows], base.J[rows], h=base.h[np.argsort(perm)])
    E0, count, ground = brute_force(sg)
    assert nw.ground_state_energy(sg) == pytest.approx(E0, abs=1e-9)
    E, spins = nw.ground_state(sg)
    assert E == pytest.approx(E0, abs=1e-9) and any(np.array_equal(spins, g) for g in ground.astype(np.int8))
    assert nw.degeneracy(sg) == (pytest.approx(E0, abs=1e-9), count)


def test_dtype_follows_the_couplings():
    z = np.zeros(0)
    pm = nw.square_lattice(6, seed=1)
    assert _instance.value_dtype(pm.J, pm.h, None) == np.float32
    assert _instance.value_dtype(np.array([0.5, -1.25]), z, None) == np.float32  # multiples of 2^-2
    assert _instance.value_dtype(np.array([2.0**23, 2.0**23]), z, None) == np.float64  # sum 2^24
    assert _instance.value_dtype(np.array([0.1]), z, None) == np.float32  # the decimal 1/10: scaled to 1
    assert _instance.value_dtype(np.array([0.1, 1 / 3]), z, None) == np.int64  # 1/3's binary value: 2^55 units
    assert _instance.value_dtype(np.array([2.0**53 + 2]), np.array([1.0]), None) == np.int64
    assert _instance.value_dtype(np.array([0.1, 1 / 3]), z, np.float64) == np.float64  # rounded
    assert _instance.value_dtype(np.array([1.0, 2.0]), z, np.int32) == np.int32
    assert _instance.value_dtype(np.array([2.0**31]), z, np.int64) == np.int64
    with pytest.raises(ValueError, match="int32 cannot hold"):
        _instance.value_dtype(np.array([2.0**31]), z, np.int32)


def test_an_integer_dtype_that_would_truncate_is_an_error_and_float32_that_rounds_warns():
    sg = nw.square_lattice(5, J="gaussian", seed=7)
    E0, _ = transfer_matrix(sg, 5)
    with pytest.raises(ValueError, match="dtype int32 cannot hold these couplings"):
        nw.ground_state_energy(sg, dtype=np.int32)
    with pytest.warns(LazykernWarning, match="float32 rounds"):
        E = nw.ground_state_energy(sg, dtype=np.float32)
    assert E == pytest.approx(E0, rel=1e-5)
    assert nw.ground_state_energy(sg) == pytest.approx(E0, abs=1e-9)  # default: float64
    pm = nw.square_lattice(5, seed=7)
    assert nw.ground_state_energy(pm, dtype=np.int32) == transfer_matrix(pm, 5)[0]


def test_module_by_name():
    sg = nw.square_lattice(3, seed=2)
    E0, count = transfer_matrix(sg, 3)
    assert nw.ground_state_energy(sg, module="numpy") == E0
    assert nw.degeneracy(sg, module="numpy") == (E0, count)
    assert nw.ground_state(sg, module="numpy")[0] == E0
    with pytest.raises(ValueError, match="numpy, cupy or torch"):
        nw.ground_state_energy(sg, module="jax")
    with pytest.raises(ValueError, match="numpy, cupy or torch"):
        nw.ground_state_energy(sg, module=object())


@pytest.mark.parametrize("L,J", [(12, "pm1"), (16, "gaussian")])
def test_planar_energies_against_matching(L, J):
    sg = nw.square_lattice(L, J=J, seed=L)
    assert nw.ground_state_energy(sg) == pytest.approx(matching_energy(sg, L), abs=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_user_instances_on_the_gpu(lib):
    """Defaults on the GPU, the module by name: a +-J 16 x 16 read from a shuffled edge list (float32
    chosen) and a Gaussian one (float64 chosen) against matching; the +-J count against the
    big-integer transfer method."""
    pytest.importorskip(lib)
    rng = np.random.default_rng(16)
    for J in ("pm1", "gaussian"):
        base = nw.square_lattice(16, J=J, seed=3)
        perm = rng.permutation(base.n)
        rows = rng.permutation(len(base.edges))
        sg = nw.SpinGlass.from_edges(perm[base.edges][rows], base.J[rows])
        want = matching_energy(base, 16)
        assert nw.ground_state_energy(sg, module=lib) == pytest.approx(want, abs=1e-9)
        E, spins = nw.ground_state(sg, module=lib)
        assert E == pytest.approx(want, abs=1e-9) and sg.energy(spins) == pytest.approx(want, abs=1e-9)
        if J == "pm1":
            assert nw.degeneracy(sg, module=lib) == transfer_matrix(base, 16)
