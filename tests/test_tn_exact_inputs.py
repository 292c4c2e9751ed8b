"""Numbers as the caller wrote them (issue 44, session 61's hostile round): Python ints that NumPy would
round, ints beside floats, Fractions, decimals past 62 bits of numerators, floats at their binary value,
np.longdouble; the energy method and the solvers agree exactly; the network's own tensors hold the exact
couplings; bad dtypes, memory limits, edge lists, NaN, bools and spins get one clear error when given; a
slicing that costs far more than the unsliced plan is said before it runs."""

from __future__ import annotations

import itertools
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from lazykern import tropical
from lazykern.errors import LazykernWarning
from lazykern.tn import _exact
from lazykern.tn import networks as nw
from lazykern.tn.einsum import check_slicing, contract_network, contraction_plan
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
    with pytest.raises(TypeError, match=r"J\[1\] is True, a bool"):  # a ValueError too (NumberTypeError)
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


def _contracted(sg, **kw):
    """The max-plus contraction of ``sg.network(**kw)`` (max_s -E(s)), its tensors' dtype."""
    labels, tensors = sg.network(**kw)
    return contract_network(labels, (), tensors, optimize="greedy").item(), tensors[0].dtype


def test_the_network_holds_the_couplings_exactly():
    sg = nw.SpinGlass(2, [(0, 1)], [2**53 + 1])  # session 62's hostile round: int64 entries of 2^53
    labels, tensors = _quiet(sg.network)
    assert tensors[0].dtype == np.int64 and tensors[0].tolist() == [
        [2**53 + 1, -(2**53) - 1],
        [-(2**53) - 1, 2**53 + 1],
    ]
    assert tropical.einsum("ab,a,b->", *tensors) == 9007199254740993 == -nw.ground_state_energy(sg)
    for J, h, dtype in [
        ([2**53 + 1, 2**53, -(2**53)], [0, 0, 1], np.int64),
        ([2**70 + 1, 2**70, -(2**70)], None, object),  # Python ints past int64, were floats
        ([0.5, -1.25, 3.0], [0.125, 0, -0.5], np.float32),  # multiples of 2^-3
        ([2.0**30 + 0.5, 1.0, -1.0], None, np.float64),  # 2^31 units of 2^-1: past float32
    ]:
        sg = nw.SpinGlass(3, TRIANGLE, J, h)
        E0, _ = _enumerate(3, TRIANGLE, J, h)
        value, got = _quiet(_contracted, sg)
        assert got == dtype and Fraction(value) == -E0, (J, h, value)


def test_a_network_dtype_that_would_round_warns_or_is_refused_as_the_solvers_dtype():
    tenth = nw.SpinGlass(3, TRIANGLE, [0.1, 0.2, -0.3])
    E0, _ = _enumerate(3, TRIANGLE, [0.1, 0.2, -0.3])
    for dtype in (None, np.float32, np.float64):  # no binary float holds 1/10
        with pytest.warns(LazykernWarning, match="round these couplings.*dtype=object"):
            labels, tensors = tenth.network(dtype=dtype)
        assert tensors[0].dtype == (np.float32 if dtype is np.float32 else np.float64)
    with pytest.warns(LazykernWarning):
        assert tenth.network()[1][0][0, 0] == 0.1  # float64's 0.1, not float32's 0.10000000149011612
    assert _quiet(_contracted, tenth, dtype=object) == (-E0, np.dtype(object))  # exact Fractions
    huge = nw.SpinGlass(2, [(0, 1)], [2**70])
    for solve in (huge.network, nw.ground_state_energy):  # integers are never rounded, by either
        for dtype in (np.int64, np.int32, np.float64):
            with pytest.raises(ValueError, match=f"dtype {np.dtype(dtype)} cannot hold"):
                solve(dtype=dtype) if solve == huge.network else solve(huge, dtype=dtype)
    with pytest.raises(ValueError, match="dtype int64 cannot hold.*not all integers"):
        nw.SpinGlass(2, [(0, 1)], [0.5]).network(dtype=np.int64)
    with pytest.raises(TypeError, match="dtype must be float32"):
        huge.network(dtype=np.float16)
    with pytest.raises(ValueError, match="passes its range .* would be inf"):  # not a warning and inf entries
        nw.SpinGlass(2, [(0, 1)], [1.5e300]).network(dtype=np.float32)
    with pytest.warns(LazykernWarning, match="round these couplings"):  # 1/3's binary value beside 0.1
        nw.SpinGlass(3, TRIANGLE, [0.1, 1 / 3, 1.0]).network()
    lattice = nw.square_lattice(4, J="gaussian", seed=3)  # floats at their binary value: each as given
    labels, tensors = _quiet(lattice.network)
    assert tensors[0].dtype == np.float64 and [t[0, 0] for t in tensors[: len(lattice.J)]] == lattice.J.tolist()
    assert _quiet(nw.square_lattice(4).network)[1][0].dtype == np.float32  # +-J: unchanged


WIDE = np.finfo(np.longdouble).nmant > 52  # np.longdouble is float64 on some platforms (Windows, Apple silicon)


@pytest.mark.skipif(not WIDE, reason="np.longdouble is float64 here: nothing to round")
def test_long_doubles_are_read_at_their_exact_value():
    J = np.array([2**53 + 1, 2**53, -(2**53)], dtype=np.longdouble)  # session 62: float64 made it (-2^53, 6)
    for given in (J, list(J)):
        sg = nw.SpinGlass(3, TRIANGLE, given)
        assert _quiet(nw.degeneracy, sg) == _enumerate(3, TRIANGLE, [2**53 + 1, 2**53, -(2**53)])
        assert _quiet(nw.degeneracy, sg) == (-9007199254740993, 4)
        assert type(_quiet(nw.ground_state_energy, sg)) is int
    third = np.array([1, -2, 3], dtype=np.longdouble) / 3  # not short decimals: their exact binary values
    meant = [Fraction(*v.as_integer_ratio()) for v in third]
    h = np.array([0.25, 0, -1], dtype=np.longdouble)
    E0, count = _enumerate(3, TRIANGLE, meant, [0.25, 0, -1])
    sg = nw.SpinGlass(3, TRIANGLE, third, h)
    assert list(sg.J) == meant and _quiet(nw.degeneracy, sg) == (E0.numerator / E0.denominator, count)
    assert _quiet(_contracted, sg, dtype=object) == (-E0, np.dtype(object))
    with pytest.raises(ValueError, match=r"J\[1\] is nan"):
        nw.SpinGlass(3, TRIANGLE, np.array([1, np.nan, 1], dtype=np.longdouble))
    with pytest.raises(ValueError, match=r"h\[0\] is inf"):
        nw.SpinGlass(3, TRIANGLE, [1, 1, 1], [np.longdouble("inf"), 0, 0])


def test_complex_numbers_are_refused():
    for given in (np.array([1, 1, 1], dtype=np.clongdouble), [np.clongdouble(1), 1, 1], [1j, 1, 1]):
        with pytest.raises(ValueError, match="real numbers"):
            nw.SpinGlass(3, TRIANGLE, given)


@pytest.mark.parametrize(
    "J, h, error, match",
    [
        ([1, 1, 1], [Decimal("NaN"), 0, 0], ValueError, r"h\[0\] is NaN"),
        ([1, 1, 1], [0, 0, Decimal("-Infinity")], ValueError, r"h\[2\] is -Infinity"),
        ([1, Decimal("Infinity"), 1], None, ValueError, r"J\[1\] is Infinity"),
        ([1, Fraction(1, 3), Decimal("sNaN")], None, ValueError, r"J\[2\] is sNaN"),
        ([True, True, True], None, TypeError, r"J\[0\] is True, a bool"),
        (np.array([True, False, True]), None, TypeError, "J is an array of bools"),
        ([1, 1, 1], [0, np.True_, 0], TypeError, r"h\[1\] is .*True.*a bool"),
    ],
)
def test_nan_infinities_and_bools_are_refused_when_the_instance_is_made(J, h, error, match):
    with pytest.raises(ValueError, match=match) as raised:  # a bool: a TypeError and a ValueError alike
        nw.SpinGlass(3, TRIANGLE, J, h)
    assert isinstance(raised.value, error)


def test_decimals_made_nan_after_the_instance_are_refused_at_solve_time():
    sg = nw.SpinGlass(3, TRIANGLE, [1, Decimal("0.5"), 1])
    sg.J[1] = Decimal("NaN")
    for solve in (nw.ground_state_energy, nw.degeneracy, lambda s: s.network()):
        with pytest.raises(ValueError, match=r"J\[1\] is NaN"):
            solve(sg)


def test_energy_refuses_anything_but_plus_minus_one():
    sg = nw.SpinGlass(2, [(0, 1)], [1])
    for spins, match in [
        ([1, 0], r"spins\[1\] is 0"),  # session 62: energy 0
        ([[1, 1], [2, -1]], r"spins\[1, 0\] is 2"),
        ([1, float("nan")], r"spins\[1\] is nan"),
        ([True, True], "dtype bool"),
        ([1, -1, 1], r"shape \(\.\.\., 2\)"),
        (1, r"shape \(\.\.\., 2\)"),
    ]:
        with pytest.raises(ValueError, match=match):
            sg.energy(spins)
        with pytest.raises(ValueError):
            sg.frustrated(spins)
    E0, _ = _enumerate(2, [(0, 1)], [1])
    assert sg.energy([1, 1]) == sg.energy(np.array([-1.0, -1.0])) == E0 == -1
    assert sg.energy([[1, -1], [-1, 1]]).tolist() == [1, 1]
    assert sg.frustrated([1, -1]).tolist() == [True]


def test_frustrated_masks_each_configuration_of_a_batch_as_one_by_one():
    sg = nw.SpinGlass(3, [(0, 1), (1, 2), (0, 2)], [1, Fraction(1, 3), -0.5], h=[0.25, 0, 0])
    spins = np.array(list(itertools.product([1, -1], repeat=3)))  # 8 configurations, 3 bonds
    one_by_one = np.array([sg.frustrated(s) for s in spins])
    assert one_by_one[[0, 2]].tolist() == [[False, False, True], [True, True, True]]
    assert sg.frustrated(spins).shape == (8, 3)
    assert sg.frustrated(spins).tolist() == one_by_one.tolist()
    assert sg.frustrated(spins.reshape(2, 4, 3)).tolist() == one_by_one.reshape(2, 4, 3).tolist()
    # as energy(): over the leading axes, the bonds' energies the unsatisfied ones raise
    bonds = -(sg.J.astype(float) * spins[:, sg.edges[:, 0]] * spins[:, sg.edges[:, 1]])
    assert np.array_equal(bonds > 0, sg.frustrated(spins))
    assert nw.SpinGlass(2, np.zeros((0, 2), dtype=int), []).frustrated([[1, 1], [1, -1]]).shape == (2, 0)


def test_integers_past_float64s_range_are_python_ints_and_exact():
    """Hostile round 5: 2^1100 couplings were refused as an overflow to inf; integers never round, so on the
    host they are Python ints of any size (floats past that range are still refused: their energy would be
    inf)."""
    J = [2**1100, -(2**1100) + 1]
    sg = nw.SpinGlass(3, [(0, 1), (1, 2)], J)
    energies = [-J[0] * s[0] * s[1] - J[1] * s[1] * s[2] for s in itertools.product([1, -1], repeat=3)]
    E0 = min(energies)
    assert nw.ground_state_energy(sg) == E0 and nw.degeneracy(sg) == (E0, energies.count(E0))
    E, spins = nw.ground_state(sg)
    assert E == E0 == sg.energy(spins) and type(E) is int
    with pytest.raises(ValueError, match="module='numpy'"):  # a device holds floats only
        _exact.fit(_exact.classify(np.array(J, dtype=object), np.zeros(3, dtype=object)), None, host=False,
                   floats_only=True)  # fmt: skip
    for floats in ([1e308, 1e308], [Fraction(10**400, 3), 1]):
        with pytest.raises(ValueError, match="past float64's range"):
            nw.degeneracy(nw.SpinGlass(3, [(0, 1), (1, 2)], floats))


def test_every_solver_warns_where_the_couplings_were_rounded():
    """Hostile round 5: past 100 spins (host Python ints no longer) binary floats beside 2^70 are rounded;
    degeneracy warned, ground_state_energy and ground_state said nothing while ground_state returned a state
    200,000 above the optimum (within the rounding's stated tolerance)."""
    sg = nw.SpinGlass(101, [(0, 1)], [2**70], h=[1 / 3, -100000] + [0] * 99)
    for solve in (nw.ground_state_energy, nw.ground_state, nw.degeneracy):
        with pytest.warns(LazykernWarning, match=rf"{solve.__name__}: these couplings are not exact.*States within"):
            solve(sg)
    small = nw.SpinGlass(100, [(0, 1)], [2**70], h=[1 / 3, -100000] + [0] * 98)  # Python ints: exact, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", LazykernWarning)
        warnings.filterwarnings("ignore", "some of these numbers are floats", LazykernWarning)
        E, spins = nw.ground_state(small)
    assert spins[:2].tolist() == [-1, -1] and E == small.energy(spins)
