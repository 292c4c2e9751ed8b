"""Hostile round 5 of ``lazykern.tn.solve``'s inputs: what is not a problem, search times that are not
times, device lists that are not ordinals, ints past Python's 4,300-digit conversion limit in every
message that names one, flags that are not flags: each one error of the right type naming the fault,
never an AttributeError, an OverflowError from a worker's timer or Python's own int-to-text refusal."""

from __future__ import annotations

import math
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

from lazykern.errors import shown
from lazykern.tn import networks, solve
from lazykern.tn import problems as P
from lazykern.tn import properties as Q

HUGE = 10**5000  # str() of it raises: Python refuses to write an int past 4,300 digits


@pytest.mark.parametrize(
    "thing, named",
    [
        (nx.path_graph(3), "got Graph"),
        (None, "got NoneType"),
        ((3, [(0, 1)]), "got tuple"),
        (P.IndependentSet, "got the class IndependentSet"),
    ],
)
def test_what_is_not_a_problem_is_a_type_error_saying_what_to_pass(thing, named):
    with pytest.raises(TypeError, match=f"problem must be a problem of lazykern.tn.problems.*{named}"):
        solve(thing, Q.SizeMax())


def test_a_spin_glass_instance_points_to_from_instance():
    sg = networks.SpinGlass(3, [(0, 1), (1, 2)], [1, 1])
    with pytest.raises(TypeError, match=r"SpinGlass.from_instance\(sg\)"):
        solve(sg, Q.SizeMin())
    assert solve(P.SpinGlass.from_instance(sg), Q.SizeMin()) == [-2]
    with pytest.raises(TypeError, match="sg is a lazykern.tn.networks.SpinGlass, got NoneType"):
        P.SpinGlass.from_instance(None)


@pytest.mark.parametrize("max_time", [math.inf, math.nan, -1, 0, 10**400])
def test_max_time_must_be_finite_and_positive_before_any_search(max_time):
    """memory_limit=4 forces a search of an 18-vertex graph's order: inf reached a worker's timer as an
    OverflowError, nan searched for no time and stored the plan. Both are refused when solve is called."""
    p = P.IndependentSet(nx.random_regular_graph(3, 18, seed=1))
    with pytest.raises(ValueError, match="max_time must be a finite positive number of seconds"):
        solve(p, Q.SizeMax(), memory_limit=4, max_time=max_time)


@pytest.mark.parametrize("max_time", ["1", True, "abc", [1]])
def test_max_time_that_is_not_a_number_is_a_type_error(max_time):
    with pytest.raises(TypeError, match="max_time is a number of seconds"):
        solve(P.IndependentSet((3, [(0, 1)])), Q.SizeMax(), max_time=max_time)


def test_max_time_is_checked_where_plans_are_made_too():
    from lazykern.tn import contraction_plan

    with pytest.raises(ValueError, match="max_time"):
        contraction_plan(["ab", "bc"], "", dict(a=2, b=2, c=2), optimize="cotengra", max_time=math.inf)
    assert solve(P.IndependentSet((3, [(0, 1)])), Q.SizeMax(), max_time=np.float32(2.5)) == [2]


@pytest.mark.parametrize("devices", [[1.5], [True], [np.bool_(False)], ["0"]])
def test_devices_that_are_not_ordinals_are_refused_not_truncated(devices):
    """int() made 1.5 device 1 and True device 0; refused now, on every route (a problem of isolated
    vertices contracts nothing and never reached the check)."""
    for p in (P.IndependentSet((3, [])), P.IndependentSet(nx.cycle_graph(5))):
        with pytest.raises(TypeError, match="devices are GPU ordinals"):
            solve(p, Q.SizeMax(), devices=devices)
    assert solve(P.IndependentSet(nx.cycle_graph(5)), Q.SizeMax(), devices=[np.int64(0)]) == [2]


@pytest.mark.parametrize(
    "make",
    [
        lambda: P.Satisfiability([[HUGE]]),
        lambda: P.IndependentSet((HUGE, [])),
        lambda: P.IndependentSet((-HUGE, [])),
        lambda: P.IndependentSet((3, [(0, HUGE)])),
        lambda: P.IndependentSet((2, []), weights=[HUGE, 0.5]),
        lambda: P.IndependentSet((2, []), weights=[Fraction(1, HUGE), 1]),
        lambda: P.IndependentSet((2, []), fixedvertices={0: HUGE}),
        lambda: P.IndependentSet((2, []), openvertices=[HUGE]),
        lambda: Q.SizeMax(-HUGE),
        lambda: Q.ConfigsAll(limit=-HUGE),
        lambda: Q.PartitionFunction(HUGE),
        lambda: P.Coloring((2, [(0, 1)]), HUGE),
        lambda: P.Satisfiability([[1]], num_variables=HUGE),
        lambda: solve(P.IndependentSet((2, [])), Q.SizeMax(), memory_limit=-HUGE),
    ],
)
def test_ints_past_4300_digits_are_named_by_their_length(make):
    with pytest.raises(ValueError) as error:
        make()
    message = str(error.value)
    assert "int of about 5001 digits" in message and "4300" not in message


def test_shown_writes_what_python_can_and_measures_what_it_cannot():
    assert shown(10) == "10" and shown("a") == "'a'" and shown((1,)) == "(1,)" and shown([1, 2]) == "[1, 2]"
    assert shown(-(10**40)) == "a negative int of 41 digits" and shown(10**29) == str(10**29)
    assert shown((0, HUGE)) == "(0, an int of about 5001 digits)"
    assert shown(Fraction(1, 3)) == "Fraction(1, 3)"
    assert shown(Fraction(1, HUGE)) == "a Fraction of 1 over an int of about 5001 digits"


@pytest.mark.parametrize("flag", ["no", 1, None])
def test_flags_are_true_or_false(flag):
    with pytest.raises(ValueError, match="laurent is True or False"):
        Q.GraphPolynomial(laurent=flag)
    with pytest.raises(ValueError, match="tree_storage is True or False"):
        Q.ConfigsMax(tree_storage=flag)


def test_corners_name_the_argument_at_fault():
    with pytest.raises(ValueError, match="openvertices must be a sequence"):
        P.IndependentSet((3, []), openvertices=np.array(0))
    with pytest.raises(TypeError, match="time span"):
        P.IndependentSet((3, []), weights=[np.timedelta64(1, "s"), 1, 1])
    with pytest.raises(ValueError, match="num_variables must be at least 0"):
        P.Satisfiability([], num_variables=-1)
    tree = solve(P.IndependentSet((3, [(0, 1)])), Q.ConfigsAll(tree_storage=True))
    for limit in ("x", None, 0):
        with pytest.raises(ValueError, match="limit"):
            tree.configurations(limit=limit)
    assert tree.configurations(limit=np.int64(6)).shape == (6, 3)


def test_a_hyperedge_s_coupling_is_keyed_by_its_vertices_in_any_order():
    """As a pair's is in either order: the lookup is by the set of vertices; their kinds still count."""
    p = P.SpinGlass((3, [(0, 1, 2), (0, 1)]), J={(2, 1, 0): 1, (1, 0): -1})
    assert p.J == [1, -1] and solve(p, Q.SizeMin()) == [-2]
    with pytest.raises(ValueError, match=r"weights names \(2, 1, True\)"):
        P.SpinGlass((3, [(0, 1, 2)]), J={(2, 1, True): 1})
    g = nx.grid_2d_graph(2, 2)  # tuple-named vertices keep their order: (0, 1) is not (1, 0)
    assert solve(P.IndependentSet(g, weights={(0, 1): 5, (1, 0): 1, (0, 0): 1, (1, 1): 1}), Q.SizeMax()) == [6]
