"""Exact spin-glass answers for every kind of coupling (lazykern/tn/_exact.py), against enumeration in Python
ints and Fractions that shares no code with the contraction: integers (past 2^53 too), decimals, halves,
generic floats, +-J; one spin, isolated spins, no coupling; overflow refused."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

from lazykern.errors import LazykernWarning
from lazykern.tn import _exact
from lazykern.tn import networks as nw
from lazykern.tn.einsum import contract_network
from tests._spin_oracles import exact_enumeration as _enumerate
from tests._spin_oracles import meant as _rational


def _instance(rng, kind):
    n = int(rng.integers(1, 7))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    m = int(rng.integers(0, len(pairs) + 1))
    edges = [pairs[i] for i in rng.permutation(len(pairs))[:m]]  # isolated spins and no edge at all included
    size = m + n

    def draw():
        if kind == "int":
            return [int(v) for v in rng.integers(-3, 4, size)]
        if kind in ("bigint", "hugeint"):  # past 2^53: float64 would round them; past 2^63: int64 cannot hold them
            scale = 2**53 if kind == "bigint" else 2**70
            return [int(v) * scale + int(w) for v, w in zip(rng.integers(-2, 3, size), rng.integers(-3, 4, size))]
        if kind == "decimal":
            return [float(f"{v / 10:.1f}") for v in rng.integers(-3, 4, size)]
        if kind == "decimal3":
            return [float(v) / 1000 for v in rng.integers(-2000, 2001, size)]
        if kind == "half":
            return [float(v) / 2 for v in rng.integers(-4, 5, size)]
        if kind == "pm1":
            return [float(v) for v in rng.choice([-1.0, 1.0], size)]
        if kind == "float":  # generic floats: exact at their binary value, or rounded with a warning
            return [float(v) for v in rng.standard_normal(size)]
        raise AssertionError(kind)

    values = draw()
    J, h = values[:m], values[m:]
    if kind == "pm1" and rng.random() < 0.5:
        h = [0.0] * n
    return n, edges, J, h


KINDS = ["int", "bigint", "hugeint", "decimal", "decimal3", "half", "pm1", "float"]


@pytest.mark.parametrize("kind", KINDS)
def test_random_small_instances_against_exact_enumeration(kind):
    """Every solver on 25 (decimals: 60) random instances of 1-6 spins (numpy: the CPU's only backend)
    against enumeration in Fractions: the energy is the exact one (an int for integer couplings, else the
    float nearest it), the count exact, the configuration a ground state; a count that is not exact warns."""
    rng = np.random.default_rng(KINDS.index(kind))
    for trial in range(60 if kind.startswith("decimal") else 25):  # decimals: 20 of 400 were wrong before
        n, edges, J, h = _instance(rng, kind)
        E0, count = _enumerate(n, edges, J, h)
        sg = nw.SpinGlass(n, np.array(edges, dtype=np.int64).reshape(-1, 2), J if J else np.zeros(0), h=h)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            E = nw.ground_state_energy(sg)
            Eg, spins = nw.ground_state(sg)
            Ed, c = nw.degeneracy(sg)
        inexact = [w for w in caught if issubclass(w.category, LazykernWarning)]
        where = (kind, trial, n, edges, J, h)
        if kind in ("int", "bigint", "hugeint") and J:
            assert type(E) is int and E == E0, where
        assert not inexact or kind == "float", where
        if kind == "float" and (J or h):  # generic floats: the count says it separates near ties
            assert any("binary value" in str(w.message) or "counted in or out" in str(w.message) for w in inexact)
        if any("counted in or out" in str(w.message) for w in inexact):  # rounded: within the stated tolerance
            assert abs(Fraction(E) - E0) < 1e-9 and abs(Fraction(Ed) - E0) < 1e-9, where
            continue
        assert E == Ed == Eg == float(E0) if not isinstance(E, int) else E == Ed == Eg == E0, where
        assert c == count and type(c) is int, where
        assert _enumerate_state(spins, edges, J, h) == E0, where


@pytest.mark.parametrize("kind", KINDS)
def test_random_small_networks_contract_to_the_exact_energy(kind):
    """``SpinGlass.network()`` on the random instances: by default its contraction is -E_0 exactly,
    without a word, wherever a dtype holds the numbers (integers, halves); decimals warn that float64
    rounds them and are exact as Fractions (dtype=object); generic floats are held as given."""
    rng = np.random.default_rng(100 + KINDS.index(kind))
    for trial in range(25):
        n, edges, J, h = _instance(rng, kind)
        E0, _ = _enumerate(n, edges, J, h)
        sg = nw.SpinGlass(n, np.array(edges, dtype=np.int64).reshape(-1, 2), J if J else np.zeros(0), h=h)
        where = (kind, trial, n, edges, J, h)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            labels, tensors = sg.network()
        rounded = [w for w in caught if issubclass(w.category, LazykernWarning)]
        best = contract_network(labels, (), tensors, optimize="greedy").item()
        held = [t.ravel()[0].item() if isinstance(t.ravel()[0], np.generic) else t.ravel()[0] for t in tensors]
        assert [Fraction(v) for v in held] == [_rational(x) for x in (*J, *h)] or rounded or kind == "float", where
        if kind == "float":  # each float as given, the sums rounding as float64's
            assert not rounded and held == [*J, *h] and abs(Fraction(best) + E0) < 1e-9, where
        elif rounded:  # decimals: no binary float holds them, objects do
            assert kind.startswith("decimal"), where
            labels, tensors = sg.network(dtype=object)
            assert contract_network(labels, (), tensors, optimize="greedy").item() == -E0, where
        else:
            assert Fraction(best) == -E0, where


def _enumerate_state(spins, edges, J, h):
    s = [int(v) for v in spins]
    Jr, hr = [_rational(x) for x in J], [_rational(x) for x in h]
    return -sum(j * s[a] * s[b] for j, (a, b) in zip(Jr, edges)) - sum(f * si for f, si in zip(hr, s))


def test_decimal_ties_are_kept():
    """J = -0.1, h = (-0.1, -0.2): two ground states at -0.2 (float64 arithmetic split them: 1)."""
    sg = nw.SpinGlass(2, [(0, 1)], [-0.1], h=[-0.1, -0.2])
    assert nw.degeneracy(sg) == (-0.2, 2)
    assert nw.ground_state_energy(sg) == -0.2 and nw.ground_state(sg)[0] == -0.2


def test_integers_past_2_53_are_exact():
    sg = nw.SpinGlass(3, [(0, 1), (1, 2)], [2**53 + 1, 1])
    assert sg.J.dtype == np.int64 and sg.h.dtype == np.int64
    for dtype in (None, np.int64):
        E = nw.ground_state_energy(sg, dtype=dtype)
        assert type(E) is int and E == -(2**53 + 2)
    assert nw.degeneracy(sg) == (-(2**53 + 2), 2)
    E, spins = nw.ground_state(sg)
    assert E == -(2**53 + 2) == sg.energy(spins)
    with pytest.raises(ValueError, match="cannot hold"):
        nw.ground_state_energy(sg, dtype=np.float64)  # integers are never rounded
    odd = nw.SpinGlass(2, [(0, 1)], [2**53 + 1], h=[1, 1])  # -(2^53 + 3): no float64 holds it
    assert nw.ground_state_energy(odd) == -(2**53 + 3)
    rows = nw.SpinGlass.from_edges([(0, 1, 2**53 + 1), (1, 2, 1)])  # a weighted edge list of ints
    assert nw.ground_state_energy(rows) == -(2**53 + 2)
    assert nw.ground_state_energy(nw.SpinGlass.from_edges([(0, 1, 2**70 + 1), (1, 2, 1)])) == -(2**70 + 2)
    huge = nw.SpinGlass(3, [(0, 1), (1, 2)], [2**70 + 1, -3], h=[1, 0, 2**65])  # past int64: Python ints
    assert huge.J.dtype == object
    E0, count = _enumerate(3, [(0, 1), (1, 2)], [2**70 + 1, -3], [1, 0, 2**65])
    assert nw.ground_state_energy(huge) == E0 and nw.degeneracy(huge) == (E0, count)
    assert nw.ground_state(huge)[0] == E0 == huge.energy(nw.ground_state(huge)[1])


def test_overflow_is_refused_before_solving():
    sg = nw.SpinGlass(2, [(0, 1)], [1e308], h=[1e308, 1e308])
    for solve in (nw.ground_state_energy, nw.ground_state, nw.degeneracy):
        with pytest.raises(ValueError, match="past float64's range"):
            solve(sg)


@pytest.mark.parametrize(
    "sg, E0, count",
    [
        (nw.SpinGlass(1, [], []), 0.0, 2),
        (nw.SpinGlass(1, [], [], h=[0.5]), -0.5, 1),
        (nw.SpinGlass(1, np.zeros((0, 2), dtype=int), np.zeros(0, dtype=int), h=[-3]), -3, 1),
        (nw.SpinGlass(3, [], []), 0.0, 8),
        (nw.SpinGlass(4, [(0, 1)], [2], h=[0, 0, 1, 0]), -3, 4),  # spin 3 isolated, no field
    ],
)
def test_one_spin_isolated_spins_and_no_edges(sg, E0, count):
    assert nw.ground_state_energy(sg) == E0
    assert nw.degeneracy(sg) == (E0, count)
    E, spins = nw.ground_state(sg)
    assert E == E0 == sg.energy(spins) and spins.shape == (sg.n,)


def test_generic_floats_rounded_state_their_tolerance():
    """Numerators past 62 bits: each number rounded to 2^e units, the tolerance the count warns with."""
    numbers = _exact.classify(np.array([1e-30, 1.0, np.pi]), np.zeros(2))
    assert not numbers.exact
    fit = _exact.fit(numbers, None, host=True)
    assert not fit.exact and fit.dtype == np.float64 and fit.tolerance == 5 * fit.unit
    assert all(float(v) == int(v) for a in fit.values for v in a)  # whole numbers of units
    assert abs(float(fit.values[0][2] * fit.unit) - np.pi) <= fit.unit / 2
    exact = _exact.fit(_exact.classify(np.array([0.1, 1 / 3]), np.zeros(0)), None, host=True)
    assert exact.exact and exact.dtype == np.int64  # 1/3 at its binary value, 0.1 as 1/10


def test_the_device_holds_floats_only():
    """Where the solvers take float values only (a GPU module), integers past 2^53 are refused with a way out
    (module='numpy': int64, then Python ints),
    decimals and halves stay exact in float32."""
    with pytest.raises(ValueError, match="module='numpy'"):
        _exact.fit(_exact.classify(np.array([2**60]), np.zeros(1, dtype=int)), None, host=False, floats_only=True)
    fit = _exact.fit(_exact.classify(np.array([0.1, 0.25]), np.zeros(1)), None, host=False, floats_only=True)
    assert fit.exact and fit.dtype == np.float32 and fit.unit == Fraction(1, 20)


@pytest.mark.gpu
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_decimals_on_the_gpu_are_exact(lib):
    """A 12 x 12 lattice with couplings of one decimal (+-0.1, +-0.2, ...; float32 numerators on the device,
    not routed to the host: optimize given) against the same instance in integers on the host."""
    pytest.importorskip(lib)
    rng = np.random.default_rng(12)
    base = nw.square_lattice(12)
    tenths = rng.integers(-3, 4, len(base.edges))
    decimal = nw.SpinGlass(base.n, base.edges, tenths / 10)
    whole = nw.SpinGlass(base.n, base.edges, tenths)  # the same instance times 10, in ints
    E10, count = nw.degeneracy(whole, module="numpy")
    E, c = nw.degeneracy(decimal, module=lib, optimize=nw.plan(decimal, module=lib))
    assert c == count and E == float(Fraction(E10, 10))
    assert nw.ground_state_energy(decimal, module=lib, optimize=nw.plan(decimal, module=lib)) == E


def test_integers_past_int64_on_a_lattice_past_62_spins():
    """Python-int values through the counting passes modulo primes (8 x 8: counts may pass 2^63, so the
    Chinese remainder theorem runs): J * 2^70 has J's ground states, its energy times 2^70."""
    pm = nw.square_lattice(8, seed=5)
    big = nw.SpinGlass(pm.n, pm.edges, [int(j) * 2**70 for j in pm.J])
    E0, count = nw.degeneracy(pm)
    assert nw.degeneracy(big) == (int(E0) * 2**70, count)
    E, spins = nw.ground_state(big)
    assert E == int(E0) * 2**70 == big.energy(spins)
