"""Numbers as the caller wrote them (issue 44, session 61's hostile round): Python ints that NumPy would
round, ints beside floats, Fractions, decimals past 62 bits of numerators, floats at their binary value;
the energy method and the solvers agree exactly; bad dtypes, memory limits and edge lists get one clear
error; a slicing that costs far more than the unsliced plan is said before it runs."""

from __future__ import annotations

import itertools
import warnings
from fractions import Fraction

import numpy as np
import pytest

from lazykern.errors import LazykernWarning
from lazykern.tn import _exact
from lazykern.tn import networks as nw
from lazykern.tn.einsum import check_slicing, contraction_plan
from tests._spin_oracles import exact_enumeration as _enumerate

TRIANGLE = [(0, 1), (1, 2), (0, 2)]


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", LazykernWarning)  # exact inputs: nothing to say
        return fn(*args, **kw)


def test_python_ints_numpy_would_round_to_float_stay_exact():
    J = [2**63 + 1000, 2**63 + 1000, -(2**63)]  # np.array(J) is float64: 2^63 + 1000 would round
    sg = nw.SpinGlass(3, TRIANGLE, J)
    E0, count = _enumerate(3, TRIANGLE, J)
    assert _quiet(nw.degeneracy, sg) == (E0, count) == (-9223372036854777808, 2)
    assert type(_quiet(nw.ground_state_energy, sg)) is int
    E, spins = _quiet(nw.ground_state, sg)
    assert E == sg.energy(spins) == E0
    weighted = nw.SpinGlass.from_edges([(0, 1, 2**63 + 1), (1, 2, 1)])  # rows of Python numbers
    assert _quiet(nw.ground_state_energy, weighted) == -(2**63 + 2)


@pytest.mark.parametrize(
    "J, h",
    [
        ([2**70 + 2**17, 2**70 + 2**17, -(2**70), 0.5], None),  # big ints beside a float
        ([2**53 + 1, 0.5, 1, 3], [0.25, 0, 0, 1]),
        ([Fraction(-1), Fraction(-1, 3), Fraction(2, 3), 1], [Fraction(-1), Fraction(-1, 3), Fraction(2, 3), 0]),
    ],
)
def test_mixed_python_numbers_are_read_exactly(J, h):
    edges = TRIANGLE + [(2, 3)]
    sg = nw.SpinGlass(4, edges, J, h)
    E0, count = _enumerate(4, edges, J, h)
    E, c = _quiet(nw.degeneracy, sg)
    assert (E, c) == (E0.numerator / E0.denominator, count)
    assert _quiet(nw.ground_state_energy, sg) == E
    Eg, spins = _quiet(nw.ground_state, sg)
    assert Eg == sg.energy(spins) == E


def test_a_bool_among_numbers_is_refused():
    with pytest.raises(ValueError, match=r"J\[1\] is True, a bool"):
        nw.SpinGlass(3, [(0, 1), (1, 2)], [1, True])  # NumPy reads [1, True] as the ints [1, 1]
    with pytest.raises(ValueError, match="masked array"):
        nw.SpinGlass(2, [(0, 1)], np.ma.masked_array([1.0], mask=[True]))


def test_floats_at_their_binary_value_warn_that_the_count_separates_near_ties():
    sg = nw.SpinGlass(3, TRIANGLE, [-1.0, -1 / 3, 2 / 3], h=[-1.0, -1 / 3, 2 / 3])
    with pytest.warns(LazykernWarning, match="exact binary value.*the count tells them apart"):
        nw.degeneracy(sg)
    short = nw.SpinGlass(2, [(0, 1)], [-0.1], [-0.1, -0.2])  # short decimals: exact, nothing to say
    assert _quiet(nw.degeneracy, short) == (-0.2, 2)


def test_decimals_whose_numerators_pass_62_bits_stay_exact_past_100_spins():
    n = 101
    edges = [(i, i + 1) for i in range(99)] + [(0, 100)]
    J = [123456789.0] * 99 + [1e-9]  # units of 1e-9: the numerators sum past 2^63
    E, count = _quiet(nw.degeneracy, nw.SpinGlass(n, edges, J))
    assert count == 2 and E == -float(Fraction("123456789") * 99 + Fraction("1e-9"))
    numbers = _exact.classify(np.array(J), np.zeros(n))
    with pytest.raises(ValueError, match="exact .integer or decimal. couplings"):  # a GPU holds no Python ints
        _exact.fit(numbers, None, host=False, floats_only=True)


def test_the_energy_method_is_exact_and_agrees_with_the_solvers():
    sg = nw.SpinGlass(3, [(0, 1), (1, 2)], [0.1, 0.2])
    E, spins = nw.ground_state(sg)
    assert E == sg.energy(spins) == -0.3  # float64 sums would say -0.30000000000000004
    assert sg.energy(np.array([spins, -spins])).tolist() == [-0.3, -0.3]
    fields = nw.SpinGlass(3, [], [], h=[1, 2, -1])
    assert nw.ground_state_energy(fields) == -4 and fields.energy([1, 1, 1]) == -2
    assert type(fields.energy([1, 1, 1])) is int
    huge = nw.SpinGlass(3, [(0, 1), (1, 2)], [2**70, 3])
    assert huge.energy([[1, 1, 1], [1, -1, 1]]).tolist() == [-(2**70) - 3, 2**70 + 3]


def test_one_huge_coupling_is_no_overflow():
    assert _quiet(nw.ground_state_energy, nw.SpinGlass(2, [(0, 1)], [1e308])) == -1e308
    with pytest.raises(ValueError, match="past float64's range"):
        nw.ground_state_energy(nw.SpinGlass(2, [(0, 1)], [1e308], [1e308, 0]))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint64, np.int8, np.int16, np.float16])
def test_dtypes_the_solvers_do_not_hold_are_refused_alike(dtype):
    sg = nw.SpinGlass(3, [(0, 1), (1, 2)], [1, -1])
    for solver in (nw.ground_state_energy, nw.ground_state, nw.degeneracy):
        with pytest.raises(TypeError, match="dtype must be float32, float64, int32 or int64"):
            solver(sg, dtype=dtype)


@pytest.mark.parametrize("limit, error", [("1GB", TypeError), (True, TypeError), (2.5, TypeError), (0, ValueError)])
def test_a_memory_limit_that_is_not_a_count_is_refused(limit, error):
    sg = nw.SpinGlass(3, [(0, 1), (1, 2)], [1, -1])
    for solver in (nw.ground_state_energy, nw.ground_state, nw.degeneracy, nw.plan):
        with pytest.raises(error, match="memory_limit"):
            solver(sg, memory_limit=limit)


def test_edge_lists_with_bad_indices_name_the_edge():
    for bad in ([(0, float("nan"), 1.0)], np.array([(0, np.nan, 1.0)])):
        with pytest.raises(ValueError, match="edge 0 is"):
            nw.SpinGlass.from_edges(bad)
    with pytest.raises(ValueError, match="no edges.*pass n="):
        nw.SpinGlass.from_edges(np.zeros((0, 3)))


def test_a_slicing_far_costlier_than_the_unsliced_plan_is_said_before_it_runs():
    K = list(itertools.combinations(range(12), 2))  # K_12, memory_limit=1: every spin sliced (12-24 s)
    labels = [tuple(e) for e in K]
    sizes = dict.fromkeys(range(12), 2)
    with pytest.warns(LazykernWarning, match="fitting intermediates to memory_limit=1"):  # the multiply-adds
        plan = contraction_plan(labels, (), sizes, optimize="greedy", memory_limit=1)
    with pytest.warns(LazykernWarning, match=r"4096 slices .* predicted .* s on the host against"):
        check_slicing(labels, (), sizes, plan)
    unsliced = contraction_plan(labels, (), sizes, optimize="greedy")
    with warnings.catch_warnings():
        warnings.simplefilter("error", LazykernWarning)
        check_slicing(labels, (), sizes, unsliced)


def test_edges_changed_after_the_instance_was_made_are_named_at_solve_time():
    sg = nw.SpinGlass(3, [(0, 1), (1, 2)], [1, -1])
    sg.edges[1, 1] = 7
    for solver in (nw.ground_state_energy, nw.ground_state, nw.degeneracy):
        with pytest.raises(ValueError, match=r"edge 1 is \[1, 7\]"):
            solver(sg)


class _ArrayLike:
    """An array that is not a list (a torch tensor on the CPU, say): read through ``__array__``."""

    def __init__(self, values):
        self.values = np.asarray(values)

    def __array__(self, dtype=None, copy=None):
        return self.values if dtype is None else self.values.astype(dtype)

    def __len__(self):
        return len(self.values)

    def __getitem__(self, i):
        return self.values[i]


def test_array_likes_are_read_as_arrays_not_element_by_element():
    sg = nw.SpinGlass(3, [(0, 1), (1, 2)], _ArrayLike([1.0, -0.5]), h=_ArrayLike([0, 1, 0]))
    assert sg.J.dtype == np.float64 and sg.h.dtype == np.int64
    assert _quiet(nw.degeneracy, sg) == (-2.5, 1)
