"""A ground state whose small steps ran on the host: the device's argmax of the shorter network, completed
by :func:`lazykern.tn._host_argmax.complete_argmax` with the spins the host's pieces summed away.

The GPU path (``ground_state`` with cupy or torch) is taken here on the host: the same plan, the same split
(:func:`lazykern.tn.networks._host_first` with a stand-in device module whose arrays are NumPy's), the
argmax of the shorter network, then the completion, checked against exact ground-state energies."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern.tn import networks as nw
from lazykern.tn._host_argmax import complete_argmax
from lazykern.tn.einsum import network_argmax

from ._spin_oracles import brute_force, transfer_matrix


class _HostDevice:
    """A stand-in for cupy whose arrays are NumPy's: the device branch of the split runs on the host."""

    __name__ = "cupy"

    @staticmethod
    def asarray(x):
        return np.asarray(x)


def _split_ground_state(sg):
    """(E_0 from the shorter network, spins, how many spins the host's pieces summed away)."""
    fit = sg.fitted(np, None)
    how = nw.plan(sg, memory_limit=2**26)
    assert how.nslices == 1
    host = nw._network(sg, fit, np)
    labels, tensors, short = nw._host_first(sg, fit, _HostDevice(), how, host)
    assert len(short.path) < len(how.path)  # the host took steps
    best, assignment = network_argmax(labels, (), tensors, optimize=short)
    missing = sg.n - len(assignment)
    full = complete_argmax(*host, assignment)
    spins = np.array([1 - 2 * full[i] for i in range(sg.n)], dtype=np.int8)
    return fit.answer(-float(best)), spins, missing


@pytest.mark.parametrize("L,J,field,seed", [(14, "pm1", 0.0, 1), (14, "pm1", 0.5, 2), (16, "gaussian", 0.0, 3)])
def test_square_lattices_against_the_transfer_matrix(L, J, field, seed):
    sg = nw.square_lattice(L, J=J, field=field, seed=seed)
    E0 = transfer_matrix(sg, L)[0]
    E, spins, missing = _split_ground_state(sg)
    assert missing > 0  # spins were summed on the host and set by the completion
    assert E == pytest.approx(E0, abs=1e-9)
    assert sg.energy(spins) == pytest.approx(E0, abs=1e-9)


def test_decimal_couplings_exact():
    """Decimal couplings contract as integer numerators: the completion's ties are decided exactly."""
    sg = nw.square_lattice(14, seed=4)
    sg = nw.SpinGlass(sg.n, sg.edges, np.round(sg.J * 0.1, 1), np.full(sg.n, -0.1), name="decimal")
    E, spins, missing = _split_ground_state(sg)
    assert missing > 0
    assert E == nw.ground_state_energy(sg)
    assert sg.energy(spins) == pytest.approx(E, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_random_networks_against_brute_force(seed):
    """Any labels missing from an assignment: the completion is a best configuration given the rest."""
    rng = np.random.default_rng(seed)
    sg = nw.random_regular(12, 3, seed=seed, J="gaussian", field=0.3)
    E0, _, ground = brute_force(sg)
    labels, tensors = nw._network(sg, sg.fitted(np, None), np)
    best = ground[0].astype(int)
    known = {i: int((1 - best[i]) // 2) for i in range(sg.n) if rng.random() < 0.5}
    full = complete_argmax(labels, tensors, known)
    assert all(full[i] == v for i, v in known.items())  # what was assigned stays
    spins = np.array([1 - 2 * full[i] for i in range(sg.n)])
    assert sg.energy(spins) == pytest.approx(E0, abs=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_ground_state_on_a_gpu_completes_the_host_steps_spins(lib, monkeypatch):
    module = pytest.importorskip(lib)
    calls = []

    def spy(*args):
        calls.append(1)
        return complete_argmax(*args)

    monkeypatch.setattr(nw, "complete_argmax", spy)
    sg = nw.square_lattice(24, seed=5, field=0.5)
    E0 = nw.ground_state_energy(sg, module=module)  # no argmax: the energy's own path
    E, spins = nw.ground_state(sg, module=module)
    assert calls  # the host's steps summed spins away, and the completion set them
    assert E == pytest.approx(E0, abs=1e-9) and sg.energy(spins) == pytest.approx(E0, abs=1e-9)
    E, spins = nw.ground_state(sg, module=module, checkpoint=True)
    assert sg.energy(spins) == pytest.approx(E0, abs=1e-9)
