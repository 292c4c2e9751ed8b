"""lazykern.tn.solving.ahead: which kernels a property's GPU passes build ahead, and when none."""

from __future__ import annotations

import types

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import _kit, _tables, solver
from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn.solving import ahead, context


@pytest.fixture
def started(monkeypatch):
    """The calls of the kit's starters, each answering no threads (this process having started none)."""
    monkeypatch.setattr(ahead, "_started", set())
    calls = []
    monkeypatch.setattr(_kit, "start", lambda module, dtype, semiring: calls.append(("kit", np.dtype(dtype))) or [])
    monkeypatch.setattr(_kit, "start_top2", lambda module, dtype, f: calls.append(("top2", np.dtype(dtype), f)) or [])
    return calls


def _ctx(name, devices=None, device=0):
    """A context on a stand-in module named ``name`` whose current GPU is ``device``."""
    cuda = types.SimpleNamespace(current_device=lambda: device, runtime=types.SimpleNamespace(getDevice=lambda: device))
    return context.Context(types.SimpleNamespace(__name__=name, cuda=cuda), "greedy", None, None, devices)


def _tab(problem, prop):
    return _tables.build(problem, {}, solver._exact_below(prop), grid=getattr(prop, "k", 1) > 1)


CUBIC = P.IndependentSet(nx.random_regular_graph(3, 60, seed=1))


@pytest.mark.parametrize("module", ["cupy", "torch"])
def test_one_best_size_and_the_top_two_pass_build_their_kernels_ahead(started, module):
    ahead.start(_tab(CUBIC, Q.SizeMax()), Q.SizeMax(), _ctx(module))
    assert started == [("kit", np.dtype(np.float32))]
    started.clear()
    ahead.start(_tab(CUBIC, Q.CountingMax(2)), Q.CountingMax(2), _ctx(module))
    assert started == [("kit", np.dtype(np.float32)), ("top2", np.dtype(np.float32), 4)]


def test_the_partition_function_builds_the_float64_kit_and_its_scaled_sums(started, monkeypatch):
    monkeypatch.setattr(_kit, "start_scaledsum", lambda module: started.append(("scaledsum",)) or [])
    ahead.start(_tab(CUBIC, Q.PartitionFunction(1.0)), Q.PartitionFunction(1.0), _ctx("cupy"))
    assert started == [("kit", np.dtype(np.float64)), ("scaledsum",)]


def test_the_rest_beside_small_components_is_what_is_built_for(started):
    """A large network beside small components: built ahead for the rest, which the device contracts."""
    g = nx.disjoint_union(nx.random_regular_graph(3, 60, seed=1), nx.empty_graph(50))
    ahead.start(_tab(P.IndependentSet(g), Q.CountingMax(2)), Q.CountingMax(2), _ctx("cupy"))
    assert started == [("kit", np.dtype(np.float32)), ("top2", np.dtype(np.float32), 4)]


def test_a_process_builds_ahead_once_a_module_and_property(started):
    """A repeated call starts nothing (its kernels are loaded): no tables read for their dtypes."""
    tab = _tab(CUBIC, Q.SizeMax())
    ahead.start(tab, Q.SizeMax(), _ctx("cupy"))
    assert ahead.start(tab, Q.SizeMax(), _ctx("cupy")) == [] and len(started) == 1
    ahead.start(tab, Q.SizeMax(), _ctx("torch"))
    assert len(started) == 2
    ahead.start(tab, Q.SizeMax(), _ctx("cupy", device=1))  # another GPU: its own builds
    assert len(started) == 3


def test_weights_that_leave_the_top_two_pass_build_no_top_two_kernels(started):
    """Weights 2 and 3: sizes 0, 2, 3 in one table, a hole: the k-best passes answer, not the top-two one."""
    g = nx.random_regular_graph(3, 60, seed=1)
    p = P.IndependentSet(g, weights=[2 if v % 2 else 3 for v in g.nodes])
    tab = _tab(p, Q.CountingMax(2))
    ahead.start(tab, Q.CountingMax(2), _ctx("cupy"))
    assert started == []


@pytest.mark.parametrize(
    "module,devices,problem,prop",
    [
        ("numpy", None, CUBIC, Q.SizeMax()),  # the host
        ("fakecupy", None, CUBIC, Q.SizeMax()),  # a module that is no GPU's
        ("cupy", [0, 1], CUBIC, Q.SizeMax()),  # across devices: each worker builds its own
        ("cupy", None, P.IndependentSet(nx.cycle_graph(20)), Q.SizeMax()),  # small: its steps may stay on the host
        ("cupy", None, P.IndependentSet(nx.empty_graph(100)), Q.CountingMax(2)),  # every component counted apart
        ("cupy", None, P.IndependentSet(nx.disjoint_union_all([nx.cycle_graph(5)] * 20)), Q.SizeMax()),
        ("cupy", None, CUBIC, Q.SizeMax(k=3)),  # the k-best kernels
        ("cupy", None, CUBIC, Q.CountingAll()),
    ],
)
def test_nothing_is_built_ahead_where_the_passes_would_not_launch_the_kit(started, module, devices, problem, prop):
    assert ahead.start(_tab(problem, prop), prop, _ctx(module, devices)) == [] and started == []


def test_the_threads_end_before_solve_returns(monkeypatch):
    """A solve joins what it started ahead, whatever its answer (here: an error from the passes)."""
    joined = []
    monkeypatch.setattr(ahead, "start", lambda tab, prop, ctx: ["thread"])
    monkeypatch.setattr(_kit, "join", lambda threads: joined.append(list(threads)))
    assert solver.solve(CUBIC, Q.SizeMax()) == [solver.solve(CUBIC, Q.SizeMax())[0]]
    monkeypatch.setattr(solver, "_answer", lambda *a: (_ for _ in ()).throw(RuntimeError("pass failed")))
    with pytest.raises(RuntimeError, match="pass failed"):
        solver.solve(CUBIC, Q.SizeMax())
    assert joined == [["thread"]] * 3


@pytest.mark.gpu
def test_a_gpu_counting_two_has_its_top_two_kernels_loaded_before_it_returns(monkeypatch):
    """On a GPU the top-two pass's kernels, the merge among them, are built (or loaded) by the time the
    solve returns, and its answer is the host's."""
    pytest.importorskip("cupy")
    monkeypatch.setattr(ahead, "_started", set())
    from lazykern.tn.algebras import _top2_kernels

    assert solver.solve(CUBIC, Q.CountingMax(2), module="cupy") == solver.solve(CUBIC, Q.CountingMax(2))
    loaded = _top2_kernels.family().compiled()
    assert {"top2_f32_f4", "top2_f32_f4_ts", "top2_f32_f4_tn", "top2_merge_f32_f4"} <= set(loaded)


@pytest.mark.gpu
def test_a_gpu_partition_function_runs_its_scaled_sum_kernels(monkeypatch):
    """On a GPU the partition function's steps take the scaled-sum kernels (built ahead), and its log Z is
    the host's to float64's precision."""
    pytest.importorskip("cupy")
    monkeypatch.setattr(ahead, "_started", set())
    from lazykern.tn.algebras import _scaledsum_kernels

    prop = Q.PartitionFunction(0.7)
    assert solver.solve(CUBIC, prop, module="cupy") == pytest.approx(solver.solve(CUBIC, prop), rel=1e-13)
    assert {"ss_side_rows", "ss_finish"} <= set(_scaledsum_kernels.family().compiled())
