"""Tiny spin glasses by vertex elimination on the host (lazykern.tn._eliminate) through the defaults."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lazykern.tn import _eliminate
from lazykern.tn import networks as nw
from lazykern.tn.spinglass import energy

from ._spin_oracles import brute_force, transfer_matrix


@pytest.mark.parametrize("seed", range(8))
def test_sweep_max_is_the_max_plus_contraction(seed):
    """Random networks of binary labels (tensors of 1 to 3 labels, integer values), random orders:
    the elimination's value is the best sum over every assignment."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 8))
    labels = [tuple(int(x) for x in rng.choice(n, size=int(rng.integers(1, 4)), replace=False)) for _ in range(9)]
    labels += [(i,) for i in range(n)]  # every label carried
    tensors = [rng.integers(-3, 4, (2,) * len(t)).astype(np.float64) for t in labels]
    best = max(
        sum(t[tuple(a[x] for x in labs)] for labs, t in zip(labels, tensors))
        for a in itertools.product(range(2), repeat=n)
    )
    assert _eliminate.sweep_max(labels, tensors, list(rng.permutation(n))) == best


@pytest.mark.parametrize("shuffled", [False, True])
def test_a_tiny_lattice_through_the_defaults_is_eliminated_on_the_host(shuffled, caplog):
    """An 8 x 8 +-J lattice (as built, or from a shuffled edge list): eliminated, never contracted
    step by step, and the transfer matrix's energy."""
    sg = nw.square_lattice(8, seed=8)
    if shuffled:
        perm = np.random.default_rng(1).permutation(sg.n)
        sg = nw.SpinGlass(sg.n, perm[sg.edges], sg.J)
    want = transfer_matrix(nw.square_lattice(8, seed=8), 8)[0]
    calls = []
    real = energy.contract_network  # where ground_state_energy looks it up
    energy.contract_network = lambda *a, **k: calls.append(a) or real(*a, **k)
    try:
        with caplog.at_level("INFO", logger="lazykern"):
            assert nw.ground_state_energy(sg, module="numpy") == want
    finally:
        energy.contract_network = real
    assert not calls and "vertex elimination" in caplog.text
    assert nw._tiny(sg, sg.fitted(np, None), "auto", (), None, None)


def test_what_is_not_eliminated():
    """Large sweeps, values held as Python ints (Gaussian couplings on the host: exact numerators past 62
    bits), a caller's strategy, slices, devices or a memory limit under the boundary go the general way."""

    def fit(g):
        return g.fitted(np, None)

    small = nw.square_lattice(6, seed=2)
    f32 = fit(small)
    assert nw._tiny(small, f32, "auto", (), None, None)
    big = nw.square_lattice(16, seed=2)
    assert not nw._tiny(big, fit(big), "auto", (), None, None)
    gauss = nw.square_lattice(6, J="gaussian", seed=2)  # whole numbers of 2^-56 in int64: exact, eliminated
    assert nw._tiny(gauss, fit(gauss), "auto", (), None, None)
    wide = nw.SpinGlass(3, [[0, 1], [1, 2], [0, 2]], [1.0, 3 * 2.0**-80, 0.5])  # numerators past 62 bits
    assert fit(wide).dtype == object and not nw._tiny(wide, fit(wide), "auto", (), None, None)
    for optimize, slices, devices, limit in (("greedy", (), None, None), ("auto", (3,), None, None),
                                             ("auto", (), [0], None), ("auto", (), None, 4)):  # fmt: skip
        assert not nw._tiny(small, f32, optimize, slices, devices, limit)
    gaussian = nw.square_lattice(4, J="gaussian", seed=3)
    assert nw.ground_state_energy(gaussian) == brute_force(gaussian)[0]  # as before: the contraction's sums
