"""Contraction planning under a time budget: it returns on time, leaves nothing running, and plans are stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from lazykern.store.cache import KernelCache, set_default_cache
from lazykern.tn import networks
from lazykern.tn.einsum import contract_network, contraction_plan

pytest.importorskip("cotengra")
ROOT = Path(__file__).resolve().parent.parent

PLANNER = textwrap.dedent(
    """
    import json, os, sys, threading, time
    if sys.argv[3] == "gpu":  # planning with a CUDA context open, as a GPU user's script does
        from numba import cuda
        cuda.to_device([1.0]); cuda.synchronize()
    from lazykern.tn import networks
    from lazykern.tn.einsum import contraction_plan

    sg = networks.square_lattice(int(sys.argv[1]), seed=3)
    labels, _ = sg.network()
    start = time.monotonic()
    plan = contraction_plan(labels, (), dict.fromkeys(range(sg.n), 2), optimize="cotengra",
                            max_time=float(sys.argv[2]), memory_limit=2**6, store=False)
    seconds = time.monotonic() - start
    from tests._processes import children as children_of
    children = sorted(children_of())
    print(json.dumps({"seconds": seconds, "children": children, "threads": threading.active_count(),
                      "slices": plan.nslices, "largest": plan.largest}), flush=True)
    """
)


@pytest.mark.parametrize("where", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_planning_returns_within_max_time_and_the_process_exits(where):
    """Issue 26 item 1: parallel search with max_time=2 returns within T + 3 s; once the result is out,
    no worker process or thread is left and the interpreter exits within 5 s."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-c", PLANNER, "12", "2", where],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        printed = time.monotonic()
        assert line, proc.stderr.read()
        report = json.loads(line)
        assert report["seconds"] <= 2 + 3, report
        assert report["children"] == [] and report["threads"] == 1, report
        assert report["largest"] <= 2**6
        rc = proc.wait(timeout=30)
        assert rc == 0, proc.stderr.read()
        assert time.monotonic() - printed < 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_max_time_is_validated():
    with pytest.raises(ValueError, match="max_time"):
        contraction_plan(["ab", "bc", "ca"], "", dict(a=2, b=2, c=2), optimize="cotengra", max_time=0, store=False)


def test_cotengra_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cotengra", None)
    with pytest.raises(ImportError, match=r"pip install 'lazykern\[tn\]'"):
        contraction_plan(["ab", "bc", "ca"], "", dict(a=2, b=2, c=2), optimize="cotengra", store=False)


@pytest.fixture()
def store(tmp_path):
    cache = KernelCache(tmp_path / "store")
    set_default_cache(cache)
    yield cache
    set_default_cache(None)
    cache.close()


def _plan(sg, **kw):
    labels, _ = sg.network()
    return contraction_plan(labels, (), dict.fromkeys(range(sg.n), 2), optimize="cotengra", memory_limit=16, **kw)


def test_plans_are_stored_and_a_second_plan_skips_the_search(store, monkeypatch):
    sg = networks.square_lattice(5, seed=2)
    first = _plan(sg, max_time=1)
    rows = [r for r in store.entries() if r.get("family") == "tropical_plan"]
    assert len(rows) == 1 and "tensors" in rows[0]["kernel"]
    from lazykern.tn import _planner

    def no_search(*a, **k):
        raise AssertionError("the stored plan should have been used")

    monkeypatch.setattr(_planner, "search", no_search)
    again = _plan(networks.square_lattice(5, seed=9), max_time=1)  # other couplings, same structure
    assert again == first
    other_target = sg.network()[0]
    with pytest.raises(AssertionError, match="stored plan"):  # another slicing target is another plan
        contraction_plan(other_target, (), dict.fromkeys(range(sg.n), 2), optimize="cotengra", memory_limit=8)


def test_a_damaged_plan_is_dropped_and_planned_again(store, caplog):
    sg = networks.square_lattice(5, seed=2)  # its cheap orders need more than 16 entries: searched, stored
    first = _plan(sg, max_time=0.5)
    (row,) = [r for r in store.entries() if r.get("family") == "tropical_plan"]
    entry = store.lookup(row["key"])
    bad = json.loads(entry.code)
    bad["path"] = bad["path"][:-1]  # a sound entry (digest and all) holding a plan that does not finish
    store.store(row["key"], json.dumps(bad).encode(), entry.meta)
    again = _plan(sg, max_time=0.5)
    assert "damaged" in caplog.text and again.largest <= 16
    labels, tensors = sg.network()
    want = contract_network(labels, (), tensors, optimize=first)
    assert contract_network(labels, (), tensors, optimize=again) == want and np.isfinite(again.flops)


def test_bundles_leave_plans_out(store):
    from lazykern.scale import bundle

    _plan(networks.square_lattice(5, seed=1), max_time=0.5)
    assert any(r.get("family") == "tropical_plan" for r in store.entries())
    assert not any(r.get("family") == "tropical_plan" for r in bundle._select(store, None, None))


def test_cache_ls_lists_plans(store):
    _plan(networks.square_lattice(5, seed=1), max_time=0.5)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-m", "lazykern", "--cache-dir", store.directory, "cache", "ls", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["family"] for r in rows] == ["tropical_plan"] and rows[0]["kernel"].startswith("plan: ")


def test_a_32x32_search_keeps_its_budget_and_never_loses_the_sweep(store):
    """max_time covers everything planning does (the sweep it seeds the search with, the greedy
    fallback, costing the candidates); the sweep itself is one of the candidates, so the search can
    only improve on it (PRL 126 090506's largest lattice)."""
    sg = networks.square_lattice(32, seed=1)
    start = time.monotonic()
    plan = networks.plan(sg, optimize="cotengra", memory_limit=2**32, max_time=2)
    # T + 1 s on an idle machine. The bound catches a search that ignores its budget (the sweep, greedy
    # fallback or costing run on past it: tens of seconds), not a loaded machine's seconds (6.0 s in a CI
    # run beside other jobs on 2 cores): speed is the benchmarks' to judge, not a unit test's.
    assert time.monotonic() - start < 2 + 8
    sweep = networks.plan(sg, memory_limit=2**32)
    assert plan.largest <= 2**32 and plan.flops <= sweep.flops


def test_dependencies_the_default_install_needs():
    """tropical.einsum plans with opt_einsum on a default install; optimize="cotengra" needs the tn extra."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("opt_einsum") for d in project["dependencies"])
    tn = project["optional-dependencies"]["tn"]
    assert any(d.startswith("cotengra") for d in tn) and any(d.startswith("kahypar") for d in tn)


QUICK = textwrap.dedent(
    """
    import json, os, sys, time
    import numpy as np
    from lazykern.tn import _planner, networks as nw

    def no_search(*a, **k):
        raise AssertionError("a planner process was started")

    _planner.search = no_search
    seconds = {}
    cases = {
        "8x8 auto": (nw.square_lattice(8, seed=8), {}),
        "8x8 cotengra": (nw.square_lattice(8, seed=8), {"optimize": "cotengra"}),
        "regular cotengra": (nw.random_regular(20, 3, seed=2), {"optimize": "cotengra"}),  # no geometry: greedy
        "5x5 stored": (nw.square_lattice(5, seed=7), {"optimize": "cotengra", "memory_limit": 16}),
    }
    for name, (sg, kw) in cases.items():
        start = time.perf_counter()
        energy = nw.ground_state_energy(sg, dtype=np.float32, **kw)
        seconds[name] = (energy, time.perf_counter() - start)
    from tests._processes import children as children_of
    children = sorted(children_of())
    loaded = [m for m in ("cotengra", "kahypar") if m in sys.modules]
    print(json.dumps({"seconds": seconds, "children": children, "loaded": loaded}))
    """
)


def test_small_or_stored_plans_start_no_planner_and_import_no_cotengra(store):
    """A fresh process (the latency a short script sees) solving small lattices and a small random
    graph with optimize="cotengra", and a lattice whose plan is stored: the cheap order (the sweep,
    opt_einsum's greedy) or the stored plan is taken, no worker process starts and cotengra (with
    kahypar) is never imported; the energies are the oracle's."""
    from ._spin_oracles import brute_force, transfer_matrix

    networks.plan(networks.square_lattice(5, seed=1), optimize="cotengra", memory_limit=16, max_time=0.5)  # stored
    assert any(r.get("family") == "tropical_plan" for r in store.entries())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env["LAZYKERN_CACHE_DIR"] = str(store.directory)
    out = subprocess.run([sys.executable, "-c", QUICK], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["children"] == [] and report["loaded"] == [], report
    energy = {name: e for name, (e, _) in report["seconds"].items()}
    assert energy["8x8 auto"] == energy["8x8 cotengra"] == transfer_matrix(networks.square_lattice(8, seed=8), 8)[0]
    assert energy["5x5 stored"] == transfer_matrix(networks.square_lattice(5, seed=7), 5)[0]
    assert energy["regular cotengra"] == brute_force(networks.random_regular(20, 3, seed=2))[0]


@pytest.mark.parametrize("given", [None, 3.0])
def test_a_costly_network_gets_a_second_search_where_the_first_leaves_it_costly(store, monkeypatch, given):
    """With max_time unset, where the best order of the default search still costs LONG_SEARCH_FLOPS or more
    (5 s left 3-regular n = 200 at 2^38 or 2^34 by process), a second search of (LONG_SEARCH_TIMES - 1)
    times the default refines the best with other seeds; a cheap network, one whose first search found a
    cheap order, or a caller's max_time gets one search."""
    import networkx as nx

    from lazykern.tn import _planner
    from lazykern.tn.contraction import plan as P
    from lazykern.tn.contraction import search as S

    searches = []
    cheap_order: list = []

    def search(*a, max_time, seed=0, initial=None, **k):
        searches.append((round(max_time), seed, initial is not None))
        return list(cheap_order)

    monkeypatch.setattr(_planner, "search", search)
    g = nx.random_regular_graph(3, 200, seed=200)
    edges = [tuple(e) for e in g.edges]
    sizes = dict.fromkeys(g.nodes, 2)
    greedy = S.search_path(edges, (), sizes, "greedy")[0]
    assert S.costs(edges, (), sizes, greedy, {})[1] >= S.LONG_SEARCH_FLOPS  # the costly kind
    contraction_plan(edges, (), sizes, optimize="cotengra", memory_limit=2**40, max_time=given, store=False)
    base = round(_planner.DEFAULT_MAX_TIME if given is None else given)
    if given is None:  # nothing better than greedy: refined in a second search, other seeds
        rest = round(_planner.DEFAULT_MAX_TIME * (S.LONG_SEARCH_TIMES - 1))
        assert searches == [(base, 0, False), (rest, S._SECOND_SEED, True)]
    else:
        assert searches == [(base, 0, False)]
    searches.clear()
    small = [tuple(e) for e in nx.random_regular_graph(3, 30, seed=3).edges]
    contraction_plan(small, (), dict.fromkeys(range(30), 2), optimize="cotengra", memory_limit=2**3, max_time=given)
    assert searches == [(base, 0, False)]
    if given is None:  # a first search that found a cheap order stops there
        searches.clear()
        path = [(0, 1)] * (len(edges) - 1)  # what the workers found, priced cheap below (greedy: costly)
        cheap_order.append((path, []))
        for module in (S, P):  # the search's candidates, and the plan's own figures
            monkeypatch.setattr(module, "costs", lambda *a: (2, 4) if a[3] == path else (2, 2**40))
        contraction_plan(edges, (), sizes, optimize="cotengra", memory_limit=2**40, store=False)
        assert searches == [(base, 0, False)]


def _fresh_sweep(sg):
    """networks._sweep for ``sg`` as a new process calls it: nothing kept in this process."""
    from lazykern.tn import _cost

    networks._sweeps.clear()
    labels = sg.labels()
    return networks._sweep(sg, labels, dict.fromkeys(range(sg.n), 2), _cost.rates_for(False, 4), 4)


def test_a_large_sweep_is_kept_in_the_store_and_replayed_without_a_search(store, monkeypatch):
    """From SWEEP_STORED_FROM tensors the sweep's choice is stored: the next process (its own cache empty)
    replays it (no order found, no grouping priced) and gets the very plan and steps; another instance of
    the same structure with positions is another key."""
    from lazykern.tn import orders
    from lazykern.tn.spinglass import sweeps

    sg = networks.square_lattice(20, seed=1)  # 1160 tensors
    assert len(sg.labels()) >= networks.SWEEP_STORED_FROM
    plan, steps = _fresh_sweep(sg)
    rows = [r for r in store.entries() if r.get("family") == "tropical_plan"]
    assert len(rows) == 1

    def no_search(*a, **k):
        raise AssertionError("the stored sweep should have been replayed")

    monkeypatch.setattr(orders, "sweep_path", no_search)
    monkeypatch.setattr(sweeps, "vertex_order", no_search)
    again, again_steps = _fresh_sweep(networks.square_lattice(20, seed=7))  # other couplings, same graph
    assert again == plan and again_steps == steps
    moved = networks.SpinGlass(sg.n, sg.edges, sg.J, sg.h, sg.positions * 2.0)  # positions feed the order
    with pytest.raises(AssertionError, match="replayed"):
        _fresh_sweep(moved)
    small = networks.square_lattice(8, seed=1)  # under the line: searched, never stored
    monkeypatch.undo()
    _fresh_sweep(small)
    assert len([r for r in store.entries() if r.get("family") == "tropical_plan"]) == 1


def test_a_damaged_stored_sweep_is_dropped_and_searched_again(store, caplog):
    sg = networks.square_lattice(20, seed=1)
    plan, _ = _fresh_sweep(sg)
    (row,) = [r for r in store.entries() if r.get("family") == "tropical_plan"]
    entry = store.lookup(row["key"])
    bad = json.loads(entry.code)
    bad["path"] = bad["path"][:-1]  # a sound entry (digest and all) holding a path that does not finish
    store.store(row["key"], json.dumps(bad).encode(), entry.meta)
    again, _ = _fresh_sweep(sg)
    assert "damaged" in caplog.text and again == plan
