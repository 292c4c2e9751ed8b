"""Problems too large to build are refused when they are made, with the figure and the way out: a variable
number past 2^26 (a DIMACS literal of 10^30 was a Python OverflowError, 10^9 ran for minutes building
tables), a local table past 2^24 entries (Coloring with 10^6 colours asked NumPy for 7 TiB)."""

from __future__ import annotations

import networkx as nx
import pytest

from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn import solve
from lazykern.tn.problems import _inputs, _tables


@pytest.mark.parametrize(
    "make, what",
    [
        (lambda: P.Satisfiability([[10**30]]), "largest variable a clause names is an int of 31 digits"),
        (lambda: P.Satisfiability([[-(2**63)]]), "largest variable a clause names"),
        (lambda: P.Satisfiability([[10**9, 1]]), "largest variable a clause names is 1000000000"),
        (lambda: P.Satisfiability([[1]], num_variables=2**40), "num_variables"),
        (lambda: P.IndependentSet((10**30, [])), r"\(n, edges\): n is an int of 31 digits"),
        (lambda: P.MaxCut((_inputs.VARIABLES_MAX + 1, [(0, 1)])), r"\(n, edges\): n is 67108865"),
    ],
)
def test_too_many_variables_is_refused_when_the_problem_is_made(make, what):
    with pytest.raises(ValueError, match=what) as err:
        make()
    assert "2^26" in str(err.value) and len(str(err.value)) < 400


@pytest.mark.parametrize(
    "make",
    [
        lambda: P.Coloring(nx.petersen_graph(), 10**30),
        lambda: P.Coloring(nx.petersen_graph(), 10**6),
        lambda: P.Satisfiability([list(range(1, 31))]),
        lambda: P.SpinGlass((30, [tuple(range(30))]), J=[1]),
        lambda: P.DominatingSet(nx.star_graph(30)),
    ],
    ids=["colours 10^30", "colours 10^6", "clause of 30", "hyperedge of 30", "star of 30"],
)
def test_a_table_past_its_limit_is_refused_with_its_size(make):
    with pytest.raises(ValueError, match=r"would hold .* entries, past the 16777216 \(2\^24\)"):
        make()


def test_the_limits_leave_large_problems_that_fit():
    assert _tables.TABLE_ENTRIES_MAX == 1 << 24
    assert solve(P.Coloring((2, [(0, 1)]), 512), Q.CountingMax()) == [(1, 512 * 511)]  # 2^18 entries
    assert solve(P.Satisfiability([list(range(1, 17))]), Q.CountingMax()) == [(1, 2**16 - 1)]  # 16 literals
    assert solve(P.IndependentSet((1000, [])), Q.SizeMax()) == [1000]
