"""benchmarks/gtn_profile.record_steps, which issue 47's step-rate target rests on, times every step a
solve runs (a hook that missed the executor reported 0 steps in session 69's GPU run, and no rate)."""

from __future__ import annotations

import networkx as nx
import pytest

from benchmarks.gtn_profile import record_steps
from lazykern.tn import _contract, solve
from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn.contraction import executor


@pytest.mark.parametrize("prop", [Q.SizeMax(), Q.CountingMax(k=2)], ids=["sizemax", "countingmax2"])
def test_every_pairwise_step_of_a_solve_is_timed(prop):
    g = nx.random_regular_graph(3, 20, seed=20)
    steps, seconds = record_steps(lambda: solve(P.IndependentSet(g), prop, module="numpy"))
    pairs = [s for s in steps if s["kind"] == "pair"]
    # 30 edge tables and 20 vertex tables, merged into one table per edge: 29 pairwise steps
    assert len(pairs) == 29 and seconds > 0
    assert all(s["flops"] >= 1 and s["seconds"] >= 0 and "route" in s for s in pairs)
    assert executor.contract is _contract.contract and executor.reduce is _contract.reduce  # hooks undone


def test_a_run_without_a_contraction_step_is_refused():
    with pytest.raises(RuntimeError, match="no contraction step was timed"):
        record_steps(lambda: None)
