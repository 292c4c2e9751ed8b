"""Variable names are taken as given (session 75's hostile round): a dict lookup matches ``True`` and
``1.0`` to a vertex named 1, but an ``(n, edges)`` graph's vertices and a formula's variables are
integers, so those are refused as an edge's endpoint already was; and whole-float weights answer as
ints in ``Problem.size`` as in ``solve``."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn import solve


@pytest.mark.parametrize(
    "make",
    [
        lambda: P.IndependentSet((3, [(0, 1)]), fixedvertices={True: 1}),
        lambda: P.IndependentSet((4, [(0, 1)]), openvertices=[3.0]),
        lambda: P.IndependentSet((4, [(0, 1)]), openvertices=[np.float64(2.0)]),
        lambda: P.DominatingSet((3, [(0, 1)]), openvertices=[np.bool_(True)]),
        lambda: P.Satisfiability([[1, 2]], fixedvertices={True: 0}),
        lambda: P.Satisfiability([[1, 2]], openvertices=[2.0]),
        lambda: P.IndependentSet((2, [(0, 1)]), weights={0: 1, True: 5}),
        lambda: P.MaxCut((2, [(0, 1)]), weights={(0, 1.0): 5}),
        lambda: P.Matching((3, [(0, 1), (1, 2)]), fixedvertices={(1.0, 2): 1}),
        lambda: P.Matching((3, [(0, 1), (1, 2)]), openvertices=[(2, True)]),
        lambda: P.Coloring((3, [(0, 1)]), 3, fixedvertices={2.0: 1}),
    ],
)
def test_a_bool_or_float_naming_an_integer_variable_is_refused(make):
    with pytest.raises(ValueError, match="names"):
        make()


def test_names_of_their_own_kind_are_taken():
    assert P.IndependentSet((4, [(0, 1)]), openvertices=[np.int64(3)]).openvertices == (3,)
    assert P.MaxCut((2, [(0, 1)]), weights={(1, 0): 5}).weights == [5]  # an edge in either order
    assert P.Matching((3, [(0, 1), (1, 2)]), fixedvertices={(2, 1): 1}).fixedvertices == {1: 1}
    assert P.Satisfiability([[1, -2]], fixedvertices={np.int32(2): 0}).fixedvertices == {1: 0}
    g = nx.Graph([("a", "b"), ("b", 1.5)])  # a graph whose node is the float 1.5
    p = P.IndependentSet(g, openvertices=[1.5], weights={"a": 1, "b": 2, 1.5: 3})
    assert p.openvertices == (2,) and solve(p, Q.SizeMax()).tolist() == [[2], [4]]


def test_whole_float_weights_answer_as_ints_in_size_and_solve():
    p = P.IndependentSet((3, [(0, 1), (1, 2)]), weights=[1.0, 2.0, 3.0])
    size, config = solve(p, Q.SingleConfigMax())
    assert (size, config.tolist()) == (4, [1, 0, 1]) and type(size) is int
    assert p.size(config) == 4 and type(p.size(config)) is int
    assert solve(p, Q.SizeMax(2)) == [4, 3] and all(type(s) is int for s in solve(p, Q.SizeMax(2)))
    half = P.IndependentSet((3, [(0, 1), (1, 2)]), weights=[1.5, 2.0, 3.0])
    assert solve(half, Q.SizeMax()) == [4.5] and type(half.size([1, 0, 1])) is float
